"""The topology controller's writes: what a pass computed, applied as upstream's topology controller applies it
(server-side apply, its field manager), and what a failed pass created, removed again."""

from __future__ import annotations

from typing import Any

from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, gvk_of
from capd_py.reconcile.topology import desired as D


async def remove_created(ctx: Ctx, created: list[dict[str, Any]]) -> None:
    """Delete what a failed pass created, newest first; best effort (a leftover is logged, the next failure's
    cleanup or the Cluster's deletion takes it)."""
    for obj in reversed(created):
        md = obj["metadata"]
        try:
            g = await gvk_of(ctx, obj)
            if g is not None:
                ctx.log.info("topology %s/%s: removing %s %s, created by a pass that failed", md["namespace"],
                             md["labels"].get(CLUSTER_NAME, ""), obj["kind"], md["name"])
                await delete_obj(ctx.kube, g, obj)
        except Exception as e:  # noqa: BLE001 - the pass's own error is the one to report
            ctx.log.warning("topology: could not remove %s %s/%s: %s", obj["kind"], md["namespace"], md["name"], e)


async def write(ctx: Ctx, w: D.Write) -> None:
    g = await gvk_of(ctx, w.obj)
    if g is None:
        raise D.TopologyError(f"{w.obj['kind']} ({w.obj['apiVersion']}) is not served")
    md = w.obj["metadata"]
    if w.create:
        ctx.log.info("topology %s/%s: creating %s %s", md["namespace"], md["labels"].get(CLUSTER_NAME, ""),
                     w.obj["kind"], md["name"])
    # created by server-side apply too, as upstream's topology controller creates: a POST made another manager
    # (an Update one) co-owner of every field, so a later apply could never drop a list-map entry or a field the
    # class no longer wants (a version-dependent kubeletExtraArgs entry stayed beside its successor, and the
    # KubeadmControlPlane's upgrade was refused: "kubeletExtraArgs names must be unique")
    await ctx.kube.apply(g, w.obj, manager=D.FIELD_MANAGER)
