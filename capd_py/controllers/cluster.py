"""Cluster controller (thin I/O around capd_py.reconcile.cluster)."""

from __future__ import annotations

from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, gvk
from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_CLUSTER,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    MACHINE_SET,
)
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_CLUSTER
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, ensure_metadata, get_ref, list_cluster, owner_for
from capd_py.controllers.manager import Controller, Mapper, any_owner_mapper, cluster_label_mapper
from capd_py.controllers.queue import Result
from capd_py.kube.cache import Reader
from capd_py.reconcile import cluster as rc
from capd_py.reconcile import coreutil

PROBE_SECONDS = 30.0
PROBE_RETRY_SECONDS = 5.0


def _label_or_owner() -> Mapper:
    by_owner = any_owner_mapper("Cluster")

    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        return sorted(set(cluster_label_mapper(obj, cache)) | set(by_owner(obj, cache)))
    return m


async def _observe(ctx: Ctx, c: dict[str, Any]) -> rc.Observed:
    ns, name = c["metadata"]["namespace"], c["metadata"]["name"]
    kube = ctx.kube
    return rc.Observed(
        cluster=c,
        infra=await get_ref(kube, ns, rc.infra_ref(c)),
        control_plane=await get_ref(kube, ns, rc.cp_ref(c)),
        machines=await list_cluster(kube, MACHINE, ns, name),
        machine_deployments=await list_cluster(kube, MACHINE_DEPLOYMENT, ns, name),
        machine_sets=await list_cluster(kube, MACHINE_SET, ns, name),
        machine_pools=await list_cluster(kube, MACHINE_POOL, ns, name),
    )



async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    c = await kube.get(CLUSTER, namespace, name)
    if c is None:
        return None
    if await lifecycle.pause_if_needed(kube, CLUSTER, c, c):
        return None

    obs = await _observe(ctx, c)
    if coreutil.is_deleting(c):
        return await _reconcile_delete(ctx, obs)

    c = await ensure_metadata(kube, CLUSTER, c, finalizer=FINALIZER_CLUSTER)
    obs.cluster = c
    for attr in ("infra", "control_plane"):
        obj = getattr(obs, attr)
        g = gvk.of_object(obj) if obj is not None else None
        if obj is not None and g is not None:
            setattr(obs, attr, await ensure_metadata(kube, g, obj, owner=owner_for(c, obj, controller=False),
                                                     labels={CLUSTER_NAME: name}))

    # as upstream's ClusterCache: probe once the infrastructure is provisioned (the kubeconfig appears with
    # the first control plane), so an API server the controllers cannot reach shows while the control plane
    # waits to be initialised, not only later
    init = (c.get("status") or {}).get("initialization") or {}
    provisioned = obs.infra is not None and contract.infra_provisioned(obs.infra)
    if provisioned or init.get("infrastructureProvisioned") or init.get("controlPlaneInitialized"):
        probe = await ctx.workload.probe(namespace, name)
        if probe is not None:
            obs.remote_probe, obs.remote_probe_error = probe.ok, probe.message

    sp = rc.spec_patch(obs)
    if sp:
        c = await kube.merge_patch(CLUSTER, namespace, name, sp)
        obs.cluster = c
    status = rc.compute_status(obs)
    await kube.update_status(CLUSTER, c, status)
    if obs.infra is None or obs.control_plane is None and rc.cp_ref(c) is not None:
        return Result(requeue_after=ctx.settings.poll_seconds)  # a referenced object does not exist yet
    if obs.remote_probe is not None:
        # keep RemoteConnectionProbe current; a failing one is retried as often as upstream's probe runs
        return Result(requeue_after=PROBE_SECONDS if obs.remote_probe else PROBE_RETRY_SECONDS)
    return None


async def _reconcile_delete(ctx: Ctx, obs: rc.Observed) -> Result | None:
    kube = ctx.kube
    c = obs.cluster
    md = c["metadata"]
    if FINALIZER_CLUSTER not in (md.get("finalizers") or []):
        return None
    plan = rc.deletion_plan(obs)
    for obj in plan.delete:
        g = gvk.of_object(obj)
        if g is not None:
            ctx.log.info("cluster %s/%s: deleting %s %s", md["namespace"], md["name"], obj["kind"],
                         obj["metadata"]["name"])
            await delete_obj(kube, g, obj)
    status = rc.compute_status(obs)
    status["conditions"] = cond.set_condition(status["conditions"], cond.DELETING, True, plan.reason, plan.message,
                                              observed_generation=md.get("generation"))
    c2 = await kube.update_status(CLUSTER, c, status)
    if plan.step != "done":
        return Result(requeue_after=ctx.settings.poll_seconds)
    ctx.workload.forget(md["namespace"], md["name"])
    await ensure_metadata(kube, CLUSTER, c2 or c, remove_finalizer=FINALIZER_CLUSTER)
    return None


def controller() -> Controller:
    m = _label_or_owner()
    return Controller(
        gvk=CLUSTER,
        reconcile=reconcile,
        watches=[(DOCKER_CLUSTER, m), (KUBEADM_CONTROL_PLANE, m), (MACHINE, cluster_label_mapper),
                 (MACHINE_DEPLOYMENT, cluster_label_mapper), (MACHINE_SET, cluster_label_mapper),
                 (MACHINE_POOL, cluster_label_mapper)],
    )
