"""I/O helpers shared by the core controllers (Cluster, Machine, MachineSet, MachineDeployment, MachinePool,
KCP, topology): resolve contract references through the providers' CRDs (ctx.contracts), patch metadata only
when something is missing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capd_py.api import contract, crdcontract, gvk
from capd_py.api.gvk import GVK
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.lifecycle import ensure_metadata
from capd_py.kube.client import Kube
from capd_py.kube.contracts import Resolved, Unresolved
from capd_py.reconcile import coreutil

__all__ = ["RefRead", "delete_obj", "ensure_metadata", "get_ref", "gvk_of", "list_cluster", "owner_for", "read_ref",
           "resolve"]


async def resolve(ctx: Ctx, ref: dict[str, str], watcher: str = "") -> Resolved:
    """The GVK and contract of a reference's kind (raises `Unresolved`). With `watcher` (a controller's queue
    key), that controller hears of every object of the kind from now on: the kind's watch starts on first
    sight, as upstream's external.ObjectTracker."""
    r = await ctx.contracts.resolve(ref.get("apiGroup", ""), ref["kind"])
    if watcher:
        ctx.watch_kind(watcher, r.gvk)
    return r


@dataclass
class RefRead:
    obj: dict[str, Any] | None
    gvk: GVK | None = None
    contract: str = crdcontract.CURRENT_CONTRACT
    missing: str = ""  # why obj is None: the CRD, or the object, does not exist ("" when no reference)


async def read_ref(ctx: Ctx, namespace: str, ref: dict[str, str] | None, watcher: str = "") -> RefRead:
    """The referenced object (unstructured, at the version its CRD's contract label names), its GVK and contract;
    when it cannot be read, `missing` says whether its CRD or the object is missing."""
    if not ref:
        return RefRead(None)
    try:
        r = await resolve(ctx, ref, watcher)
    except Unresolved as e:
        return RefRead(None, missing=f"{coreutil.ref_str(ref)}: {e.message}")
    obj = await ctx.kube.get(r.gvk, namespace, ref["name"])
    return RefRead(obj, r.gvk, r.contract, "" if obj is not None else f"{coreutil.ref_str(ref)} does not exist")


async def get_ref(ctx: Ctx, namespace: str, ref: dict[str, str] | None, watcher: str = "") -> dict[str, Any] | None:
    """The referenced object as unstructured, or None when the reference is unset, its kind is not served
    (no CRD, no contract label) or the object does not exist."""
    return (await read_ref(ctx, namespace, ref, watcher)).obj


async def gvk_of(ctx: Ctx, obj: dict[str, Any] | None) -> GVK | None:
    """The GVK of an object at its own apiVersion (its CRD gives the plural and scope); None if not served."""
    if not obj:
        return None
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    known = gvk.by_group_kind(group, obj["kind"])
    if known is not None and known.version == version:
        return known
    try:
        r = await ctx.contracts.resolve(group, obj["kind"])
    except Unresolved:
        return None
    return GVK(group, version or r.gvk.version, r.gvk.kind, r.gvk.plural, r.gvk.namespaced)


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
