"""I/O helpers shared by the core controllers (Cluster, Machine, MachineSet, MachineDeployment,
MachineHealthCheck): resolve contract references, patch metadata only when something is missing."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract, gvk
from capd_py.api.gvk import GVK
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.lifecycle import ensure_metadata
from capd_py.kube.client import Kube
from capd_py.reconcile import coreutil

__all__ = ["delete_obj", "ensure_metadata", "get_ref", "gvk_of_ref", "list_cluster", "owner_for"]


def gvk_of_ref(ref: dict[str, str] | None) -> GVK | None:
    if not ref:
        return None
    return gvk.by_group_kind(ref.get("apiGroup", ""), ref["kind"])


async def get_ref(kube: Kube, namespace: str, ref: dict[str, str] | None) -> dict[str, Any] | None:
    """The referenced object as unstructured, or None when the reference is unset, of an unknown
    kind, or the object does not exist."""
    g = gvk_of_ref(ref)
    if g is None or ref is None:
        return None
    return await kube.get(g, namespace, ref["name"])


def owner_for(owner: dict[str, Any], obj: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    """An owner reference to `owner`; downgraded to a plain owner when `obj` already has a different
    controller (only one controller reference is allowed)."""
    cur = contract.controller_owner(obj)
    if controller and cur and cur.get("uid") != owner["metadata"]["uid"]:
        controller = False
    if not controller and cur and cur.get("uid") == owner["metadata"]["uid"]:
        return dict(cur)
    return contract.owner_ref(owner, controller=controller)


async def list_cluster(kube: Kube, g: GVK, namespace: str, cluster: str) -> list[dict[str, Any]]:
    return await kube.list(g, namespace, labels={CLUSTER_NAME: cluster})


async def delete_obj(kube: Kube, g: GVK, obj: dict[str, Any]) -> None:
    if coreutil.is_deleting(obj):
        return
    md = obj["metadata"]
    await kube.delete(g, md.get("namespace"), md["name"], uid=md.get("uid"))
