"""DockerMachineTemplate controller (thin I/O around capd_py.reconcile.dockermachinetemplate): writes
`status.capacity` (the docker host's CPUs and memory) so the cluster autoscaler can scale a MachineDeployment or
MachineSet using the template from zero, as upstream CAPD's DockerMachineTemplate controller. Written once and
again only when the host's capacity changed (the status write compares first). The host is the one the template's
cluster is placed on (docs/multihost.md); the management daemon for a template of no or several clusters.

It runs on the reconcile skeleton as a kind without finalizer, Cluster or Paused condition: upstream's controller
checks no pause and its status has no conditions (the CRD's status schema is `capacity` only)."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract, infrakinds
from capd_py.api.gvk import CLUSTER, DOCKER_MACHINE_TEMPLATE
from capd_py.controllers import dockerhost
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.reconcile import dockermachinetemplate as rdmt
from capd_py.runtime.protocol import RuntimeError_

# a template whose cluster's host is not known yet (not placed, not configured, away) is looked at again after this
WAIT_FOR_HOST_SECONDS = 15.0


async def _infra_cluster(ctx: Ctx, template: dict[str, Any], namespace: str) -> dict[str, Any] | None:
    """The infrastructure cluster (DockerCluster / DevCluster) of the template's one Cluster, if it has one."""
    clusters = rdmt.template_clusters(template)
    if len(clusters) != 1:
        return None
    cluster = await ctx.kube.get(CLUSTER, namespace, next(iter(clusters)))
    r = contract.ref(cluster, "spec", "infrastructureRef")
    k = infrakinds.kinds_of(template)
    if r is None or r["kind"] != k.cluster.kind:
        return None
    return await ctx.kube.get(k.cluster, namespace, r["name"])


async def reconcile_capacity(ctx: Ctx, sub: Subject) -> Outcome:
    try:
        where = await dockerhost.where(ctx, await _infra_cluster(ctx, sub.obj, sub.namespace))
    except dockerhost.NotPlaced as e:  # the status keeps what it says until the host is known
        ctx.log.info("%s %s/%s: capacity not read: %s", sub.obj.get("kind", "DockerMachineTemplate").lower(),
                     sub.namespace, sub.name, e.message)
        return Outcome(requeue_after=WAIT_FOR_HOST_SECONDS)
    try:
        host = await where.infra.host_capacity()
    except RuntimeError_ as e:  # its docker host does not answer (away): the status keeps the last capacity
        ctx.log.info("%s %s/%s: capacity not read: docker host %s: %s", sub.obj.get("kind", "DockerMachineTemplate")
                     .lower(), sub.namespace, sub.name, where.host.name, e)
        return Outcome(requeue_after=WAIT_FOR_HOST_SECONDS)
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
