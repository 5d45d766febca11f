"""API discovery for unstructured objects of any kind: apiVersion + kind -> GVK (plural, namespaced).

One `Discovery` per API server and task; a kind not found is looked up again once (it may come from a CRD
created meanwhile)."""

from __future__ import annotations

from capd_py.api.gvk import GVK, by_group_kind, group_of
from capd_py.kube.client import Kube, KubeError


class Discovery:
    def __init__(self, kube: Kube):
        self.kube = kube
        self._cache: dict[str, dict[str, tuple[str, bool]]] = {}

    async def _load(self, api_version: str) -> dict[str, tuple[str, bool]]:
        path = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        try:
            res = await self.kube.acall("GET", path)
        except KubeError as e:
            if e.not_found:
                return {}
            raise
        return {r["kind"]: (r["name"], bool(r.get("namespaced")))
                for r in res.get("resources") or [] if "/" not in r["name"]}

    async def resolve(self, api_version: str, kind: str) -> GVK | None:
        """The kind's GVK, or None when the server does not serve it."""
        g = by_group_kind(group_of(api_version), kind)
        if g and g.api_version == api_version:
            return g
        hit = (self._cache.get(api_version) or {}).get(kind)
        if hit is None:
            self._cache[api_version] = await self._load(api_version)
            hit = self._cache[api_version].get(kind)
        if hit is None:
            return None
        group, _, version = api_version.rpartition("/")
        return GVK(group, version, kind, hit[0], hit[1])
