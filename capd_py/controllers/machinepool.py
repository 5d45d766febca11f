"""MachinePool controller (thin I/O around capd_py.reconcile.machinepool): adopts the pool's bootstrap config and
infrastructure machine pool, copies the data secret name and provider IDs, keeps one Machine per infrastructure
machine of the pool ("MachinePool Machines"), matches workload Nodes for status.nodeRefs, and on deletion deletes
the infrastructure pool, the bootstrap config and the Machines and waits for them."""

from __future__ import annotations

import copy
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import (
    CLUSTER,
    DEV_MACHINE,
    DEV_MACHINE_POOL,
    DOCKER_MACHINE,
    DOCKER_MACHINE_POOL,
    KUBEADM_CONFIG,
    MACHINE,
    MACHINE_POOL,
    NODE,
)
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_MACHINE_POOL, MACHINE_POOL_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import RefRead, delete_obj, ensure_metadata, get_ref, gvk_of, owner_for, read_ref
from capd_py.controllers.mappers import Controller, owner_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, KubeError, WorkloadError
from capd_py.reconcile import coreutil
from capd_py.reconcile import machinepool as rmp


async def _adopt(ctx: Ctx, mp: dict[str, Any], obj: dict[str, Any] | None) -> dict[str, Any] | None:
    """upstream reconcileExternal: the MachinePool controls its bootstrap config and infrastructure pool, which
    carry the cluster-name label."""
    if obj is None or coreutil.is_deleting(obj):
        return obj
    g = await gvk_of(ctx, obj)
    if g is None:
        return obj
    cn = contract.dig(mp, "spec", "clusterName")
    return await ensure_metadata(ctx.kube, g, obj, owner=owner_for(mp, obj, controller=True),
                                 labels={CLUSTER_NAME: cn} if cn else None)


async def _workload_nodes(ctx: Ctx, ns: str, cluster: dict[str, Any] | None) -> tuple[Kube | None,
                                                                                      list[dict[str, Any]] | None]:
    if cluster is None:
        return None, None
    try:
        wl = await ctx.workload.get(ns, cluster["metadata"]["name"])
        if wl is None:
            return None, None
        watched = ctx.workload.nodes(ns, cluster["metadata"]["name"])
        if watched is not None:  # the cluster's Node watch is in sync: its copies, no request
            return wl, copy.deepcopy(list(watched.values()))
        return wl, await wl.list(NODE)
    except WorkloadError as e:  # an unreachable workload cluster (or an unreadable kubeconfig) only delays nodeRefs
        ctx.log.debug("machinepool: workload nodes of %s/%s: %s", ns, cluster["metadata"]["name"], e)
        return None, None


async def _infra_machines(ctx: Ctx, mp: dict[str, Any], infra: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """The infrastructure machines of the pool (status.infrastructureMachineKind, labelled with the pool's name);
    None when the infrastructure pool does not opt in to MachinePool Machines."""
    kind = rmp.infrastructure_machine_kind(infra)
    if infra is None or kind is None:
        return None
    g = await gvk_of(ctx, {"apiVersion": infra["apiVersion"], "kind": kind})
    if g is None:
        return None
    ctx.watch_kind("MachinePool", g)
    return await ctx.kube.list(g, mp["metadata"]["namespace"], labels=rmp.pool_labels(mp))


async def _list_machines(ctx: Ctx, mp: dict[str, Any]) -> list[dict[str, Any]]:
    return rmp.machines_of(mp, await ctx.kube.list(MACHINE, mp["metadata"]["namespace"], labels=rmp.pool_labels(mp)))


def _metadata(mp: dict[str, Any], cluster: dict[str, Any] | None) -> dict[str, Any]:
    """The Cluster as owner and its label."""
    cn = contract.dig(mp, "spec", "clusterName") or ""
    return {"owner": contract.owner_ref(cluster, controller=False) if cluster is not None else None,
            "labels": {CLUSTER_NAME: cn} if cn else None}


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, mp, cluster, namespace, name = ctx.kube, sub.obj, sub.cluster, sub.namespace, sub.name
    b_read = await read_ref(ctx, namespace, rmp.bootstrap_ref(mp), watcher="MachinePool")
    bootstrap = await _adopt(ctx, mp, b_read.obj)
    infra_error = rmp.infra_ref_problem(mp)
    i_read = RefRead(None) if infra_error else await read_ref(ctx, namespace, rmp.infra_ref(mp),
                                                              watcher="MachinePool")
    infra = await _adopt(ctx, mp, i_read.obj)
    obs = rmp.Observed(mp=mp, cluster=cluster, bootstrap=bootstrap, infra=infra, infra_error=infra_error,
                       bootstrap_missing=b_read.missing, infra_missing=i_read.missing,
                       bootstrap_contract=b_read.contract, infra_contract=i_read.contract)

    sp = rmp.spec_patch(mp, bootstrap, infra, b_read.contract, i_read.contract)
    if sp:
        mp = await kube.merge_patch(MACHINE_POOL, namespace, name, sp)
        obs.mp = mp

    machines = await _list_machines(ctx, mp)
    if cluster is not None and not coreutil.is_deleting(cluster):
        infra_machines = await _infra_machines(ctx, mp, infra)
        changed = False
        for want in rmp.machines_to_create(mp, infra_machines or [], machines):
            try:
                await kube.create(MACHINE, want)
                changed = True
            except KubeError as e:
                if not e.conflict:
                    raise
        for m in machines:
            patch = None if coreutil.is_deleting(m) else rmp.machine_patch(mp, m)
            if patch:
                patch.setdefault("metadata", {})["resourceVersion"] = m["metadata"]["resourceVersion"]
                await kube.merge_patch(MACHINE, namespace, m["metadata"]["name"], patch)
        if changed:
            machines = await _list_machines(ctx, mp)
    obs.machines = machines

    wl, obs.nodes = await _workload_nodes(ctx, namespace, cluster)
    if wl is not None and obs.nodes is not None:
        for node in rmp.retired_nodes(mp, obs.nodes):
            try:
                await wl.delete(NODE, None, node)
                ctx.log.info("machinepool %s/%s: deleted retired node %s", namespace, name, node)
            except WorkloadError as e:  # retried on the next pass
                ctx.log.info("machinepool %s/%s: deleting retired node %s: %s", namespace, name, node, e)

    status = rmp.compute_status(obs)
    old_refs = len(contract.dig(mp, "status", "nodeRefs", default=[]) or [])
    if len(status.get("nodeRefs") or []) != old_refs and status.get("nodeRefs"):
        await events.record(kube, mp, "SuccessfulSetNodeRefs",
                            ", ".join(r["name"] for r in status["nodeRefs"]), type_="Normal")
    if infra is None or cluster is None:  # a referenced object does not exist (yet)
        return Outcome(status=status, obj=mp, requeue_after=ctx.settings.poll_seconds)
    steady = status.get("phase") == rmp.PHASE_RUNNING and \
        len(status.get("nodeRefs") or []) == coreutil.replicas_of(mp) and \
        status.get("upToDateReplicas") == coreutil.replicas_of(mp)
    return Outcome(status=status, obj=mp, requeue_after=None if steady else ctx.settings.poll_seconds)


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    mp, cluster, ns = sub.obj, sub.cluster, sub.namespace
    bootstrap = await get_ref(ctx, ns, rmp.bootstrap_ref(mp), watcher="MachinePool")
    infra = await get_ref(ctx, ns, rmp.infra_ref(mp), watcher="MachinePool")
    machines = await _list_machines(ctx, mp)
    plan = rmp.deletion_plan(bootstrap, infra, machines)
    for obj in plan.delete:
        g = await gvk_of(ctx, obj)
        if g is not None:
            await delete_obj(ctx.kube, g, obj)
    if plan.done:
        return Outcome(done=True)
    status = rmp.compute_status(rmp.Observed(mp=mp, cluster=cluster, bootstrap=bootstrap, infra=infra,
                                             machines=machines))
    status["conditions"] = cond.set_condition(status["conditions"], cond.DELETING, True, "Deleting",
                                              "Waiting for " + ", ".join(plan.waiting[:5]) + " to be deleted",
                                              observed_generation=mp["metadata"].get("generation"))
    return Outcome(status=status, done=False, requeue_after=ctx.settings.poll_seconds)


KIND = Kind(MACHINE_POOL, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_MACHINE_POOL, metadata=_metadata)
reconcile = reconciler(KIND)


# --- wiring ---------------------------------------------------------------------------------------

def _by_pool_label(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """An infrastructure machine of a pool reaches the MachinePool named by its pool-name label."""
    labels = obj["metadata"].get("labels") or {}
    pool, cn = labels.get(MACHINE_POOL_NAME), labels.get(CLUSTER_NAME)
    if not pool or not cn:
        return []
    ns = obj["metadata"].get("namespace") or ""
    return [(ns, mp["metadata"]["name"]) for mp in cache.list(MACHINE_POOL, ns, labels={CLUSTER_NAME: cn})
            if rmp.label_value(mp["metadata"]["name"]) == pool]


def _pool_refs(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A provider's kinds referenced by MachinePools: owned by one, labelled with its pool's name, or referenced."""
    found = set(owner_mapper("MachinePool")(obj, cache)) | set(_by_pool_label(obj, cache))
    md = obj["metadata"]
    ns = md.get("namespace") or ""
    me = (obj.get("apiVersion", "").rpartition("/")[0], obj.get("kind"), md["name"])
    for mp in cache.list(MACHINE_POOL, ns):
        for r in (rmp.bootstrap_ref(mp), rmp.infra_ref(mp)):
            if r and (r["apiGroup"], r["kind"], r["name"]) == me:
                found.add((ns, mp["metadata"]["name"]))
    return sorted(found)


def _cluster_to_pools(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    ns = obj["metadata"].get("namespace") or ""
    return [(ns, mp["metadata"]["name"])
            for mp in cache.list(MACHINE_POOL, ns, labels={CLUSTER_NAME: obj["metadata"]["name"]})]


def _node_to_pools(namespace: str, cluster: str, node: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    pools = cache.list(MACHINE_POOL, namespace, labels={CLUSTER_NAME: cluster})
    return [(namespace, n) for n in rmp.pools_of_node(pools, node)]


def controller() -> Controller:
    return Controller(gvk=MACHINE_POOL, reconcile=reconcile, watches=[
        (MACHINE, owner_mapper("MachinePool")), (DOCKER_MACHINE, _by_pool_label),
        (DOCKER_MACHINE_POOL, owner_mapper("MachinePool")), (DEV_MACHINE, _by_pool_label),
        (DEV_MACHINE_POOL, owner_mapper("MachinePool")), (KUBEADM_CONFIG, owner_mapper("MachinePool")),
        (CLUSTER, _cluster_to_pools)], node_watches=[_node_to_pools], ref_mapper=_pool_refs)
