"""Clients for workload clusters, built from the `<cluster>-kubeconfig` secret and cached until the
secret changes (one client per cluster, as the conventions ask)."""

from __future__ import annotations

import base64

from capd_py.api.gvk import SECRET
from capd_py.kube.client import Kube


class WorkloadClients:
    def __init__(self, management: Kube):
        self._mgmt = management
        self._cache: dict[tuple[str, str], tuple[str, Kube]] = {}

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
        return client

    def forget(self, namespace: str, cluster: str) -> None:
        hit = self._cache.pop((namespace, cluster), None)
        if hit:
            hit[1].close()
