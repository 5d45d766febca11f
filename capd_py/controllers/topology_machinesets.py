"""The topology controllers of MachineDeployments and MachineSets (upstream's topology/machinedeployment and
topology/machineset): a MachineDeployment or MachineSet a topology owns (label topology.cluster.x-k8s.io/owned)
carries their finalizer, and when it is deleted the bootstrap config and infrastructure templates it referenced go
too unless a MachineDeployment or another MachineSet still uses them (reconcile/topology/cleanup.py). The
topology controller of Clusters (topology.py) rotates templates; these delete the ones a deletion left."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import MACHINE_DEPLOYMENT, MACHINE_SET
from capd_py.api.labels import (
    DEPLOYMENT_NAME,
    FINALIZER_MACHINE_DEPLOYMENT_TOPOLOGY,
    FINALIZER_MACHINE_SET_TOPOLOGY,
    TOPOLOGY_OWNED,
)
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, get_ref, gvk_of
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.reconcile.topology import cleanup

MD_NAME = "MachineDeploymentTopology"
MS_NAME = "MachineSetTopology"


def _owned(sub: Subject) -> bool:
    return TOPOLOGY_OWNED in (sub.obj["metadata"].get("labels") or {})


def _cluster_name(obj: dict[str, Any]) -> str:
    return str(contract.dig(obj, "spec", "clusterName") or "")


async def _nothing(ctx: Ctx, sub: Subject) -> Outcome:
    return Outcome()


async def _delete_unused(ctx: Ctx, obj: dict[str, Any], in_use: set[cleanup.Ref]) -> None:
    ns = obj["metadata"]["namespace"]
    for ref in cleanup.unused(obj, in_use):
        read = await get_ref(ctx, ns, ref)
        g = await gvk_of(ctx, read)
        if read is not None and g is not None:
            ctx.log.info("topology: deleting %s %s/%s of %s %s", ref.get("kind"), ns, ref.get("name"),
                         obj["kind"], obj["metadata"]["name"])
            await delete_obj(ctx.kube, g, read)


async def _deployment_and_sets(ctx: Ctx, ns: str,
                               md_name: str) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    md = await ctx.kube.get(MACHINE_DEPLOYMENT, ns, md_name) if md_name else None
    sets = await ctx.kube.list(MACHINE_SET, ns, labels={DEPLOYMENT_NAME: md_name[:63]}) if md_name else []
    return md, sets


async def _delete_md(ctx: Ctx, sub: Subject) -> Outcome:
    _, sets = await _deployment_and_sets(ctx, sub.namespace, sub.name)
    await _delete_unused(ctx, sub.obj, cleanup.templates_in_use(sub.obj, sets))
    return Outcome(done=True)


async def _delete_ms(ctx: Ctx, sub: Subject) -> Outcome:
    md_name = (sub.obj["metadata"].get("labels") or {}).get(DEPLOYMENT_NAME, "")
    md, sets = await _deployment_and_sets(ctx, sub.namespace, md_name)
    await _delete_unused(ctx, sub.obj, cleanup.templates_in_use(md, sets))
    return Outcome(done=True)


MD_KIND = Kind(MACHINE_DEPLOYMENT, reconcile=_nothing, delete=_delete_md,
               finalizer=FINALIZER_MACHINE_DEPLOYMENT_TOPOLOGY, cluster_name=_cluster_name, ready=_owned,
               reports_paused=False)
MS_KIND = Kind(MACHINE_SET, reconcile=_nothing, delete=_delete_ms, finalizer=FINALIZER_MACHINE_SET_TOPOLOGY,
               cluster_name=_cluster_name, ready=_owned, reports_paused=False)


def controllers() -> list[Controller]:
    return [Controller(gvk=MACHINE_DEPLOYMENT, reconcile=reconciler(MD_KIND), name=MD_NAME),
            Controller(gvk=MACHINE_SET, reconcile=reconciler(MS_KIND), name=MS_NAME)]
