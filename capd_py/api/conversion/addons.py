"""addons.cluster.x-k8s.io: ClusterResourceSet, ClusterResourceSetBinding (upstream api/addons/v1beta1)."""

from __future__ import annotations

from capd_py.api.conversion.fields import Obj, VersionResolver, items, status_down, status_up


def clusterresourceset_up(obj: Obj) -> None:
    status_up(obj, deprecated=("conditions",), lifted=("conditions",))


def clusterresourceset_down(obj: Obj, resolve: VersionResolver) -> None:
    status_down(obj, deprecated=("conditions",), lifted=("conditions",))


def clusterresourcesetbinding_up(obj: Obj) -> None:
    # Same shape in both versions; only `applied` became a pointer (upstream keeps false as false).
    for binding in items(obj, "spec.bindings"):
        for resource in items(binding, "resources"):
            resource.setdefault("applied", False)


def clusterresourcesetbinding_down(obj: Obj, resolve: VersionResolver) -> None:
    pass
