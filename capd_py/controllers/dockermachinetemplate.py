"""DockerMachineTemplate controller (thin I/O around capd_py.reconcile.dockermachinetemplate): writes
`status.capacity` (the docker host's CPUs and memory) so the cluster autoscaler can scale a MachineDeployment or
MachineSet using the template from zero, as upstream CAPD's DockerMachineTemplate controller. Written once and
again only when the host's capacity changed (the status write compares first).

It runs on the reconcile skeleton as a kind without finalizer, Cluster or Paused condition: upstream's controller
checks no pause and its status has no conditions (the CRD's status schema is `capacity` only)."""

from __future__ import annotations

from capd_py.api.gvk import DOCKER_MACHINE_TEMPLATE
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.reconcile import dockermachinetemplate as rdmt


async def reconcile_capacity(ctx: Ctx, sub: Subject) -> Outcome:
    host = await ctx.infra.host_capacity()
    status = rdmt.desired_status(sub.obj, host)
    if status != (sub.obj.get("status") or {}):
        ctx.log.info("%s %s/%s: capacity %s", sub.obj.get("kind", "DockerMachineTemplate").lower(), sub.namespace,
                     sub.name, status["capacity"])
    return Outcome(status=status)


async def delete_nothing(ctx: Ctx, sub: Subject) -> Outcome:
    return Outcome()  # nothing to clean up


KIND = Kind(gvk=DOCKER_MACHINE_TEMPLATE, reconcile=reconcile_capacity, delete=delete_nothing, cluster_name=None,
            pausable=False)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=DOCKER_MACHINE_TEMPLATE, reconcile=reconcile)
