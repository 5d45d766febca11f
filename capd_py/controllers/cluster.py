"""Cluster controller (thin I/O around capd_py.reconcile.cluster)."""

from __future__ import annotations

import time
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, features, gvk
from capd_py.api.gvk import (
    CLUSTER,
    DEV_CLUSTER,
    DOCKER_CLUSTER,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    MACHINE_SET,
)
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_CLUSTER
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, ensure_metadata, gvk_of, list_cluster, owner_for, read_ref
from capd_py.controllers.mappers import Controller, Mapper, any_owner_mapper, cluster_label_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.reconcile import certs
from capd_py.reconcile import cluster as rc

PROBE_SECONDS = 30.0
PROBE_RETRY_SECONDS = 5.0


def _label_or_owner() -> Mapper:
    by_owner = any_owner_mapper("Cluster")

    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        return sorted(set(cluster_label_mapper(obj, cache)) | set(by_owner(obj, cache)))
    return m


def _referrers(by_label_or_owner: Mapper) -> Mapper:
    """A provider's infrastructure cluster or control plane reaches the Clusters that reference it (before it
    carries their label or owner reference), and those named by its label or owners."""
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        md = obj["metadata"]
        ns = md.get("namespace") or ""
        me = (gvk.group_of(obj.get("apiVersion") or ""), obj.get("kind"), md["name"])
        refs = {(ns, c["metadata"]["name"]) for c in cache.list(CLUSTER, ns)
                for r in (rc.infra_ref(c), rc.cp_ref(c)) if r and (r["apiGroup"], r["kind"], r["name"]) == me}
        return sorted(refs | set(by_label_or_owner(obj, cache)))
    return m


async def _observe(ctx: Ctx, c: dict[str, Any]) -> rc.Observed:
    ns, name = c["metadata"]["namespace"], c["metadata"]["name"]
    kube = ctx.kube
    infra = await read_ref(ctx, ns, rc.infra_ref(c), watcher="Cluster")
    cp = await read_ref(ctx, ns, rc.cp_ref(c), watcher="Cluster")
    return rc.Observed(
        cluster=c,
        infra=infra.obj, infra_missing=infra.missing, infra_contract=infra.contract,
        control_plane=cp.obj, cp_missing=cp.missing, cp_contract=cp.contract,
        machines=await list_cluster(kube, MACHINE, ns, name),
        machine_deployments=await list_cluster(kube, MACHINE_DEPLOYMENT, ns, name),
        machine_sets=await list_cluster(kube, MACHINE_SET, ns, name),
        machine_pools=await list_cluster(kube, MACHINE_POOL, ns, name),
    )



def _self(c: dict[str, Any]) -> str:
    return str(c["metadata"]["name"])


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, c = ctx.kube, sub.obj
    namespace, name = sub.namespace, sub.name
    obs = await _observe(ctx, c)
    for attr in ("infra", "control_plane"):
        obj = getattr(obs, attr)
        g = await gvk_of(ctx, obj)
        if obj is not None and g is not None:
            owner = owner_for(c, obj, controller=rc.controls_its_objects(c))
            setattr(obs, attr, await ensure_metadata(kube, g, obj, owner=owner,
                                                     labels={CLUSTER_NAME: name}))

    # as upstream's ClusterCache: probe once the infrastructure is provisioned (the kubeconfig appears with
    # the first control plane), so an API server the controllers cannot reach shows while the control plane
    # waits to be initialised, not only later
    init = (c.get("status") or {}).get("initialization") or {}
    provisioned = obs.infra is not None and contract.infra_provisioned(obs.infra, obs.infra_contract)
    if provisioned or init.get("infrastructureProvisioned") or init.get("controlPlaneInitialized"):
        probe = await ctx.workload.probe(namespace, name)
        if probe is not None:
            obs.remote_probe, obs.remote_probe_error = probe.ok, probe.message
            obs.remote_probe_last_success, obs.now = probe.last_success, time.time()

    sp = rc.spec_patch(obs)
    if sp:
        c = await kube.merge_patch(CLUSTER, namespace, name, sp)
        obs.cluster = c
    await _kubeconfig_without_control_plane(ctx, c)
    out = Outcome(status=rc.compute_status(obs), obj=c)
    if obs.infra is None or obs.control_plane is None and rc.cp_ref(c) is not None:
        out.requeue_after = ctx.settings.poll_seconds  # a referenced object does not exist yet
    elif obs.remote_probe is not None:
        # keep RemoteConnectionProbe current; a failing one is retried as often as upstream's probe runs
        out.requeue_after = PROBE_SECONDS if obs.remote_probe else PROBE_RETRY_SECONDS
    return out


async def _kubeconfig_without_control_plane(ctx: Ctx, c: dict[str, Any]) -> None:
    """As upstream's reconcileKubeconfig: a Cluster without a control plane provider (standalone control-plane
    Machines) gets its `<cluster>-kubeconfig` Secret from the Cluster controller, owned by the Cluster, once it
    has an endpoint and the cluster CA exists (the first control-plane Machine's KubeadmConfig makes it)."""
    endpoint = contract.control_plane_endpoint(c)
    if rc.cp_ref(c) is not None or endpoint is None:
        return
    ns, name = c["metadata"]["namespace"], c["metadata"]["name"]
    found, _ = await ctx.certificates.lookup(ctx.kube, ns, name, (certs.CLUSTER_CA,))
    if certs.CLUSTER_CA in found:
        await ctx.certificates.ensure_kubeconfig(ctx.kube, c, contract.owner_ref(c, controller=False),
                                                 found[certs.CLUSTER_CA], endpoint)


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    c = sub.obj
    md = c["metadata"]
    obs = await _observe(ctx, c)
    plan = rc.deletion_plan(obs, rc.waits_for_before_delete_hook(
        c, ctx.runtime_sdk.enabled(), ctx.settings.enabled(features.CLUSTER_TOPOLOGY)))
    for obj in plan.delete:
        g = await gvk_of(ctx, obj)
        if g is not None:
            ctx.log.info("cluster %s/%s: deleting %s %s", md["namespace"], md["name"], obj["kind"],
                         obj["metadata"]["name"])
            await delete_obj(ctx.kube, g, obj)
    if plan.step == "done":
        ctx.workload.forget(md["namespace"], md["name"])
        return Outcome(done=True)
    status = rc.compute_status(obs)
    status["conditions"] = cond.set_condition(status["conditions"], cond.DELETING, True, plan.reason, plan.message,
                                              observed_generation=md.get("generation"))
    return Outcome(status=status, done=False, requeue_after=ctx.settings.poll_seconds)


# a Cluster is its own cluster: its spec.paused pauses it
KIND = Kind(CLUSTER, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_CLUSTER, cluster_name=_self)
reconcile = reconciler(KIND)


def controller() -> Controller:
    m = _label_or_owner()
    return Controller(
        gvk=CLUSTER,
        reconcile=reconcile,
        watches=[(DOCKER_CLUSTER, m), (DEV_CLUSTER, m), (KUBEADM_CONTROL_PLANE, m), (MACHINE, cluster_label_mapper),
                 (MACHINE_DEPLOYMENT, cluster_label_mapper), (MACHINE_SET, cluster_label_mapper),
                 (MACHINE_POOL, cluster_label_mapper)],
        ref_mapper=_referrers(m),
    )
