"""Clients for workload clusters, built from the `<cluster>-kubeconfig` secret and cached until the
secret changes (one client per cluster, as the conventions ask); the remote connection probe of each
cluster (upstream's ClusterCache health check), cached for a short while so that a burst of reconciles
does not wait on an unreachable API server again and again; and, once a listener is set (the controllers'
Manager), a watch of each cluster's Nodes (`nodewatch.py`) from the moment its kubeconfig exists."""

from __future__ import annotations

import base64
import errno
import os
import re
import time
from dataclasses import dataclass
from typing import Any

import yaml
from kubernetes.config.config_exception import ConfigException

from capd_py.api.gvk import SECRET
from capd_py.kube.client import Kube, WorkloadError
from capd_py.kube.inmemory_api import InMemoryAPI, InMemoryClusters
from capd_py.kube.inmemory_api_server import InMemoryServer
from capd_py.kube.nodewatch import Listener, NodeWatch
from capd_py.kube.transport import Unreachable

# what making a client of a kubeconfig Secret that holds no usable kubeconfig raises (not base64, not YAML, not a
# kubeconfig); `WorkloadClients.get` turns them into Unreachable, so controllers catch WorkloadError only
KUBECONFIG_ERRORS: tuple[type[Exception], ...] = (ValueError, yaml.YAMLError, ConfigException)

PROBE_TIMEOUT = 5.0
PROBE_MAX_AGE = 10.0   # upstream's ClusterCache probes every 10 s
FAILED_PROBE_MAX_AGE = 5.0  # a cluster coming up is seen reachable soon after


@dataclass(frozen=True)
class Probe:
    ok: bool
    # why not: the address tried and the error (stable text: no object ids), "" when ok
    message: str = ""
    at: float = 0.0
    # the last success (time.time(), 0: never) and the failures since, as upstream's ClusterCache health state
    last_success: float = 0.0
    failures: int = 0


def unreachable(server: str, e: BaseException, timeout: float = PROBE_TIMEOUT) -> str:
    """`server` and what went wrong, with nothing that changes between two identical failures."""
    if isinstance(e, Unreachable):
        e = e.cause
    if isinstance(e, TimeoutError):
        what = f"no answer within {timeout:g}s"
    else:
        what = re.sub(r" at 0x[0-9a-fA-F]+", "", str(e))[:200] or "failed"
        # asyncio's "Connect call failed" hides why: refused, no route, unreachable network tell a user different things
        code = _errno(e)
        if code and os.strerror(code) not in what:
            what += f" ({errno.errorcode.get(code, code)}: {os.strerror(code)})"
    return f"{server}: {e.__class__.__name__}: {what}"


def _errno(e: BaseException) -> int | None:
    """The errno of an OSError anywhere in `e`'s chain (aiohttp keeps it in `os_error`), None if there is none."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, OSError) and cur.errno:
            return cur.errno
        nxt = getattr(cur, "os_error", None)
        cur = nxt if isinstance(nxt, BaseException) else (cur.__cause__ or cur.__context__)
    return None


def _server(wl: Kube) -> str:
    try:
        return wl.host
    except Exception:  # noqa: BLE001 - an in-memory fake has no configuration
        return "the workload API server"


class WorkloadClients:
    def __init__(self, management: Kube):
        self._mgmt = management
        self._cache: dict[tuple[str, str], tuple[str, Kube]] = {}
        self._probes: dict[tuple[str, str], Probe] = {}
        self._watches: dict[tuple[str, str], NodeWatch] = {}
        self._listener: Listener | None = None
        # the DevCluster inMemory backend's workload clusters: the controllers use them in memory; users reach
        # them over HTTPS (`in_memory_server`, made on first use)
        self.in_memory = InMemoryClusters()
        self._in_memory_server: InMemoryServer | None = None

    def watch_nodes(self, listener: Listener) -> None:
        """From now on every workload client comes with a watch of its cluster's Nodes feeding `listener`."""
        self._listener = listener

    def nodes(self, namespace: str, cluster: str) -> dict[str, dict[str, Any]] | None:
        """The cluster's Nodes by name as its watch last saw them; None unless the watch is in sync."""
        mem = self.in_memory.get(namespace, cluster)
        if mem is not None:  # always in sync: its Nodes are in memory
            return mem.nodes()
        w = self._watches.get((namespace, cluster))
        return w.nodes if w is not None and w.synced else None

    def _ensure_watch(self, key: tuple[str, str], client: Kube) -> None:
        w = self._watches.get(key)
        if self._listener is None or (w is not None and w.client is client and w.running):
            return
        if w is not None:
            w.stop()
        w = NodeWatch(key[0], key[1], client, self._listener, wanted=lambda: self._wanted(key, client))
        self._watches[key] = w
        w.start()

    async def _wanted(self, key: tuple[str, str], client: Kube) -> bool:
        """A failing watch goes on while its client is the cluster's current one and the kubeconfig exists."""
        hit = self._cache.get(key)
        if hit is None or hit[1] is not client:
            return False
        try:
            return await self._mgmt.get(SECRET, key[0], f"{key[1]}-kubeconfig") is not None
        except Exception:  # noqa: BLE001 - the management API hiccups: keep watching
            return True

    async def get(self, namespace: str, cluster: str) -> Kube | None:
        """None while the kubeconfig secret does not exist yet (waiting is not an error); a kubeconfig no client
        can be made of raises `Unreachable` (the cluster cannot be reached through it)."""
        sec = await self._mgmt.get(SECRET, namespace, f"{cluster}-kubeconfig")
        if not sec or "value" not in (sec.get("data") or {}):
            return None
        mem = self.in_memory.get(namespace, cluster)
        if mem is not None:
            self._tell_nodes(namespace, cluster, mem)
            return mem
        rv = sec["metadata"]["resourceVersion"]
        hit = self._cache.get((namespace, cluster))
        if hit and hit[0] == rv:
            self._ensure_watch((namespace, cluster), hit[1])
            return hit[1]
        if hit:
            hit[1].close()
        try:
            client = Kube.from_kubeconfig_text(base64.b64decode(sec["data"]["value"]))
        except KUBECONFIG_ERRORS as e:
            raise Unreachable(f"kubeconfig secret {namespace}/{cluster}-kubeconfig", e) from e
        self._cache[(namespace, cluster)] = (rv, client)
        self._probes.pop((namespace, cluster), None)  # a new kubeconfig (another address) is probed anew
        self._ensure_watch((namespace, cluster), client)
        return client

    def in_memory_cluster(self, namespace: str, cluster: str) -> InMemoryAPI:
        """The in-memory workload cluster of (namespace, cluster), made on first use (the DevCluster inMemory
        backend), its Node writes told to the listener from the start."""
        mem = self.in_memory.ensure(namespace, cluster)
        if (namespace, cluster) in self._cache:
            # reached through its kubeconfig before its store was made here (a cluster moved in, whose endpoint
            # another process served until then): the store is the cluster now, the HTTPS client and its Node
            # watch go
            self.forget(namespace, cluster)
        self._tell_nodes(namespace, cluster, mem)
        return mem

    def in_memory_server(self, host: str, ports: range) -> InMemoryServer:
        """The HTTPS listeners of the in-memory clusters (one per process; host and ports from the first caller)."""
        if self._in_memory_server is None:
            self._in_memory_server = InMemoryServer(self.in_memory, host, ports)
        return self._in_memory_server

    async def close(self) -> None:
        """Stop the Node watches and the in-memory clusters' listeners (the controllers stop)."""
        self.stop_watches()
        if self._in_memory_server is not None:
            await self._in_memory_server.close()

    def _tell_nodes(self, namespace: str, cluster: str, mem: InMemoryAPI) -> None:
        """An in-memory cluster's Node writes reach the listener (the Manager) as a Node watch's events would."""
        listener = self._listener
        if listener is None or mem.on_node is not None:
            return

        def tell(node: dict[str, Any], deleted: bool) -> None:
            listener(namespace, cluster, node, deleted)
        mem.on_node = tell

    async def probe(self, namespace: str, cluster: str, max_age: float = PROBE_MAX_AGE,
                    timeout: float = PROBE_TIMEOUT) -> Probe | None:
        """GET /version on the workload API server; None while there is no kubeconfig. A result younger than
        `max_age` seconds is reused."""
        try:
            wl = await self.get(namespace, cluster)
        except WorkloadError as e:  # a broken kubeconfig is a failed probe
            return Probe(False, str(e), time.monotonic())
        if wl is None:
            return None
        key = (namespace, cluster)
        hit = self._probes.get(key)
        if hit is not None and time.monotonic() - hit.at < (max_age if hit.ok else min(max_age, FAILED_PROBE_MAX_AGE)):
            return hit
        try:
            await wl.acall("GET", "/version", timeout=timeout)
            res = Probe(True, "", time.monotonic(), time.time(), 0)
        except WorkloadError as e:  # an unreachable API server is a state to report
            res = Probe(False, unreachable(_server(wl), e, timeout), time.monotonic(),
                        hit.last_success if hit else 0.0, (hit.failures if hit else 0) + 1)
            self._restart_watch(key, wl)
        self._probes[key] = res
        return res

    def _restart_watch(self, key: tuple[str, str], client: Kube) -> None:
        """An unreachable API server: the watch's connection may hang silently (a partitioned network drops,
        it does not refuse), and its Nodes would pass for current; a new watch is out of sync until it lists."""
        w = self._watches.pop(key, None)
        if w is not None:
            w.stop()
            self._ensure_watch(key, client)

    def stop_watches(self) -> None:
        for w in self._watches.values():
            w.stop()
        self._watches.clear()
        self._listener = None

    def forget(self, namespace: str, cluster: str) -> None:
        """Drop what is kept for the cluster (its client, probe and Node watch); an in-memory cluster's store is
        dropped by its DevCluster (`in_memory.remove`), not here."""
        self._probes.pop((namespace, cluster), None)
        w = self._watches.pop((namespace, cluster), None)
        if w is not None:
            w.stop()
        hit = self._cache.pop((namespace, cluster), None)
        if hit:
            hit[1].close()
