"""The one place every controller goes for finalizers, paused handling and status writes.

Upstream keeps these in shared helpers (`util/finalizers`, `util/paused`, the patch helper) so that every
kind means the same thing by them; so do we:
- paused: the owning Cluster's `spec.paused` or the `cluster.x-k8s.io/paused` annotation on the object
  itself (`coreutil.is_paused`); a paused object gets a `Paused=True` condition and nothing else.
- finalizers: added on the first reconcile and put back if a user strips them; removed only after
  cleanup, with the object's resourceVersion so a concurrent writer wins.
- status: a patch of what a reconcile changed (`write_status`), nothing when nothing did (a stable object gets no
  writes); conditions merge per type, so controllers sharing an object's conditions never undo each other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api.gvk import GVK
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import coreutil

R_PAUSED, R_NOT_PAUSED = "Paused", "NotPaused"


async def write_status(kube: Kube, gvk: GVK, obj: dict[str, Any], status: dict[str, Any],
                       owned_conditions: Iterable[str] | None = None) -> dict[str, Any]:
    """The one status writer: a patch of what differs between `obj`'s status and `status` (Kube.patch_status;
    nothing when they are equal); an object deleted meanwhile is not an error. Returns the newest copy we have."""
    status = _keeping_paused(obj, status)
    try:
        new = await kube.patch_status(gvk, obj, status, owned_conditions)
    except KubeError as e:
        if e.not_found:
            return obj
        raise
    return new or obj


def _keeping_paused(obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """`Paused` is the reconcile skeleton's alone: a status that does not mention it (a kind's own mid-reconcile
    write) keeps the object's, rather than removing it for the skeleton to put back (two writes for nothing)."""
    mine = cond.get(obj, cond.PAUSED)
    if mine is None or any(c.get("type") == cond.PAUSED for c in status.get("conditions") or []):
        return status
    return {**status, "conditions": [*(status.get("conditions") or []), mine]}


async def pause(kube: Kube, gvk: GVK, obj: dict[str, Any]) -> dict[str, Any]:
    """Report a paused object: its `Paused` condition True (the reconcile skeleton calls this and then touches
    nothing else; its not-paused side is the skeleton's too)."""
    st = dict(obj.get("status") or {})
    st["conditions"] = cond.set_condition(st.get("conditions"), cond.PAUSED, True, R_PAUSED,
                                          observed_generation=(obj.get("metadata") or {}).get("generation"))
    return await write_status(kube, gvk, obj, st, owned_conditions=[cond.PAUSED])


async def ensure_metadata(kube: Kube, gvk: GVK, obj: dict[str, Any], also: dict[str, Any] | None = None,
                          **kw: Any) -> dict[str, Any]:
    """Patch in whatever of `coreutil.metadata_patch(obj, **kw)` is missing (finalizer, owner reference,
    labels, annotations), and `also` (more of the main resource, e.g. spec defaults) in the same request: one
    write where there were two. Returns the fresh object, or `obj` when nothing was missing."""
    patch = coreutil.metadata_patch(obj, **kw)
    if also:
        patch = coreutil.merge_patches(patch or {}, also)
    if not patch:
        return obj
    md = obj["metadata"]
    return await kube.merge_patch(gvk, md.get("namespace"), md["name"], patch)


def has_finalizer(obj: dict[str, Any], finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


async def remove_finalizer(kube: Kube, gvk: GVK, obj: dict[str, Any], finalizer: str) -> None:
    """Drop our finalizer after cleanup; gone already (object or finalizer) is fine."""
    try:
        await ensure_metadata(kube, gvk, obj, remove_finalizer=finalizer)
    except KubeError as e:
        if not e.not_found:
            raise

