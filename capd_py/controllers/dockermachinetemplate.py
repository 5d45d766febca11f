"""DockerMachineTemplate controller (thin I/O around capd_py.reconcile.dockermachinetemplate): writes
`status.capacity` (the docker host's CPUs and memory) so the cluster autoscaler can scale a MachineDeployment or
MachineSet using the template from zero, as upstream CAPD's DockerMachineTemplate controller. Written once and
again only when the host's capacity changed (the status write compares first)."""

from __future__ import annotations

from capd_py.api.gvk import DOCKER_MACHINE_TEMPLATE
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.manager import Controller
from capd_py.controllers.queue import Result
from capd_py.reconcile import coreutil
from capd_py.reconcile import dockermachinetemplate as rdmt


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    template = await ctx.kube.get(DOCKER_MACHINE_TEMPLATE, namespace, name)
    if template is None or coreutil.is_deleting(template):
        return None
    host = await ctx.infra.host_capacity()
    status = rdmt.desired_status(template, host)
    if status != (template.get("status") or {}):
        ctx.log.info("dockermachinetemplate %s/%s: capacity %s", namespace, name, status["capacity"])
        await lifecycle.write_status(ctx.kube, DOCKER_MACHINE_TEMPLATE, template, status)
    return None


def controller() -> Controller:
    return Controller(gvk=DOCKER_MACHINE_TEMPLATE, reconcile=reconcile)
