"""Clients for workload clusters, built from the `<cluster>-kubeconfig` secret and cached until the
secret changes (one client per cluster, as the conventions ask), and the remote connection probe of each
cluster (upstream's ClusterCache health check), cached for a short while so that a burst of reconciles
does not wait on an unreachable API server again and again."""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass

from capd_py.api.gvk import SECRET
from capd_py.kube.client import Kube

PROBE_TIMEOUT = 5.0
PROBE_MAX_AGE = 10.0   # upstream's ClusterCache probes every 10 s
FAILED_PROBE_MAX_AGE = 5.0  # a cluster coming up is seen reachable soon after


@dataclass(frozen=True)
class Probe:
    ok: bool
    # why not: the address tried and the error (stable text: no object ids), "" when ok
    message: str = ""
    at: float = 0.0


def unreachable(server: str, e: BaseException, timeout: float = PROBE_TIMEOUT) -> str:
    """`server` and what went wrong, with nothing that changes between two identical failures."""
    if isinstance(e, TimeoutError):
        what = f"no answer within {timeout:g}s"
    else:
        what = re.sub(r" at 0x[0-9a-fA-F]+", "", str(e))[:200] or "failed"
    return f"{server}: {e.__class__.__name__}: {what}"


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

    async def get(self, namespace: str, cluster: str) -> Kube | None:
        """None while the kubeconfig secret does not exist yet (waiting is not an error)."""
        sec = await self._mgmt.get(SECRET, namespace, f"{cluster}-kubeconfig")
        if not sec or "value" not in (sec.get("data") or {}):
            return None
        rv = sec["metadata"]["resourceVersion"]
        hit = self._cache.get((namespace, cluster))
        if hit and hit[0] == rv:
            return hit[1]
        if hit:
            hit[1].close()
        client = Kube.from_kubeconfig_text(base64.b64decode(sec["data"]["value"]))
        self._cache[(namespace, cluster)] = (rv, client)
        self._probes.pop((namespace, cluster), None)  # a new kubeconfig (another address) is probed anew
        return client

    async def probe(self, namespace: str, cluster: str, max_age: float = PROBE_MAX_AGE,
                    timeout: float = PROBE_TIMEOUT) -> Probe | None:
        """GET /version on the workload API server; None while there is no kubeconfig. A result younger than
        `max_age` seconds is reused."""
        try:
            wl = await self.get(namespace, cluster)
        except Exception as e:  # noqa: BLE001 - a broken kubeconfig is a failed probe
            return Probe(False, f"kubeconfig secret {namespace}/{cluster}-kubeconfig: {e.__class__.__name__}: {e}",
                         time.monotonic())
        if wl is None:
            return None
        key = (namespace, cluster)
        hit = self._probes.get(key)
        if hit is not None and time.monotonic() - hit.at < (max_age if hit.ok else min(max_age, FAILED_PROBE_MAX_AGE)):
            return hit
        try:
            await wl.acall("GET", "/version", timeout=timeout)
            res = Probe(True, "", time.monotonic())
        except Exception as e:  # noqa: BLE001 - an unreachable API server is a state to report
            res = Probe(False, unreachable(_server(wl), e, timeout), time.monotonic())
        self._probes[key] = res
        return res

    def forget(self, namespace: str, cluster: str) -> None:
        self._probes.pop((namespace, cluster), None)
        hit = self._cache.pop((namespace, cluster), None)
        if hit:
            hit[1].close()
