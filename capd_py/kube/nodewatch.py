"""A list+watch of one workload cluster's Nodes, as upstream's ClusterCache keeps for its Machine controller:
every change reaches a listener at once, so a Machine hears of its Node's registration, providerID and
Ready, and a control plane of its first Node, without polling the workload API server for them.

The watch starts with the cluster's kubeconfig, usually before the API server behind the load balancer
answers; until it does, the list is retried every second (a refused connection costs nothing), then with
a growing pause once the cluster has been seen, so a stopped cluster is not hammered.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from capd_py.api.gvk import NODE
from capd_py.kube.client import Kube

log = logging.getLogger("capd_py.nodewatch")

# (namespace, cluster, node, deleted)
Listener = Callable[[str, str, dict[str, Any], bool], None]

FIRST_RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 10.0
LIST_TIMEOUT = 10.0
WATCH_SECONDS = 240  # the API server ends each stream after this; the next one continues from its version


def _slim(node: dict[str, Any]) -> dict[str, Any]:
    node.setdefault("apiVersion", "v1")
    node.setdefault("kind", "Node")
    (node.get("metadata") or {}).pop("managedFields", None)
    return node


def _rv(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class NodeWatch:
    """The Nodes of one workload cluster, kept current by a background task until `stop`."""

    def __init__(self, namespace: str, cluster: str, client: Kube, listener: Listener,
                 wanted: Callable[[], Awaitable[bool]] | None = None):
        self.namespace, self.cluster, self.client = namespace, cluster, client
        self._listener = listener
        self._wanted = wanted  # asked after each failure: False (the cluster is gone) ends the watch
        self.nodes: dict[str, dict[str, Any]] = {}
        self.synced = False  # True while `nodes` mirrors the API server (a list succeeded, its watch runs)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"capd-py-nodes-{self.namespace}/{self.cluster}")

    def stop(self) -> None:
        self.synced = False
        if self._task is not None:
            self._task.cancel()
            self._task = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def _tell(self, node: dict[str, Any], deleted: bool) -> None:
        try:
            self._listener(self.namespace, self.cluster, node, deleted)
        except Exception:  # a listener's bug must not end the watch
            log.exception("node listener failed for %s/%s", self.namespace, self.cluster)

    async def _run(self) -> None:
        pause = FIRST_RETRY_SECONDS
        while True:
            try:
                rv = await self._list()
                pause = FIRST_RETRY_SECONDS
                while True:
                    began = time.monotonic()
                    rv, events = await self._watch(rv)
                    if not events and time.monotonic() - began < 1.0:
                        await asyncio.sleep(1.0)  # a stream ended at once (a proxy in between): no busy loop
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - not up yet, gone, or the version expired (410): list again
                if self.synced:
                    log.info("watch of %s/%s nodes ended: %s", self.namespace, self.cluster, e)
                else:
                    log.debug("nodes of %s/%s not listed yet: %s", self.namespace, self.cluster, e)
                self.synced = False
                if self._wanted is not None and not await self._wanted():
                    log.debug("nodes of %s/%s: no longer watched", self.namespace, self.cluster)
                    return
                await asyncio.sleep(pause)
                if self.nodes:  # seen up before: back off while it is down
                    pause = min(pause * 2, MAX_RETRY_SECONDS)

    async def _list(self) -> str:
        async with asyncio.timeout(LIST_TIMEOUT):
            items, rv = await self.client.list_with_version(NODE)
        fresh = {n["metadata"]["name"]: _slim(n) for n in items}
        old, self.nodes, self.synced = self.nodes, fresh, True
        for name, n in fresh.items():
            if _rv(old.get(name) or {}) != _rv(n):
                self._tell(n, False)
        for name, n in old.items():
            if name not in fresh:
                self._tell(n, True)
        return rv or ""

    async def _watch(self, rv: str) -> tuple[str, int]:
        events = 0
        async for kind, obj in self.client.watch(NODE, None, rv, WATCH_SECONDS):
            rv = _rv(obj) or rv
            if kind == "BOOKMARK":
                continue
            events += 1
            name = (obj.get("metadata") or {}).get("name") or ""
            if kind == "DELETED":
                self.nodes.pop(name, None)
                self._tell(_slim(obj), True)
            else:
                self.nodes[name] = _slim(obj)
                self._tell(self.nodes[name], False)
        return rv, events
