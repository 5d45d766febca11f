"""Machine controller on the reconcile skeleton: thin I/O around capd_py.reconcile.machine (status) and
capd_py.reconcile.machine_deletion (the deletion sequence: read, `decide_deletion`, apply)."""

from __future__ import annotations

import copy
import datetime as _dt
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, features
from capd_py.api.gvk import (
    DEV_MACHINE,
    DOCKER_MACHINE,
    KUBEADM_CONFIG,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    MACHINE_SET,
    NODE,
)
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_MACHINE
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import ensure_metadata, gvk_of, read_ref
from capd_py.controllers.machine_deletion import delete, workload
from capd_py.controllers.mappers import Controller, owner_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, WorkloadError
from capd_py.reconcile import coreutil, nodetaints
from capd_py.reconcile import machine as rm

Obj = dict[str, Any]
HEALTHY_POLL = 30.0


async def _find_node(ctx: Ctx, wl: Kube, machine: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
    """(reachable, node): from the cluster's Node watch when it is in sync, else from the API server, by
    status.nodeRef.name, else by spec.providerID."""
    ns, cn = machine["metadata"]["namespace"], contract.dig(machine, "spec", "clusterName") or ""
    watched = ctx.workload.nodes(ns, cn)
    if watched is not None:
        found = rm.node_of_machine(watched.values(), machine)
        return True, copy.deepcopy(found) if found is not None else None
    node_name = contract.dig(machine, "status", "nodeRef", "name")
    pid = contract.dig(machine, "spec", "providerID")
    try:
        if node_name:
            node = await wl.get(NODE, None, node_name)
            if node is not None:
                return True, node
        if pid:
            return True, rm.node_of_machine(await wl.list(NODE), machine)
        return True, None
    except WorkloadError as e:  # connection problems are reported as conditions
        ctx.log.debug("workload node lookup failed: %s", e)
        return False, None


async def _adopt_external(ctx: Ctx, machine: dict[str, Any], obj: dict[str, Any] | None,
                          cluster: dict[str, Any] | None) -> dict[str, Any] | None:
    """Machine becomes the controller owner of its bootstrap config / infra machine (on-create
    owners such as the MachineSet are dropped), which also get the cluster-name label, in one patch."""
    if obj is None:
        return None
    g = await gvk_of(ctx, obj)
    if g is None:
        return obj
    cn = contract.dig(machine, "spec", "clusterName")
    cp_kind = contract.dig(cluster, "spec", "controlPlaneRef", "kind")
    refs = rm.external_owner_refs(obj, machine, cp_kind)
    md = obj["metadata"]
    also = ({"metadata": {"ownerReferences": refs, "resourceVersion": md.get("resourceVersion")}}
            if refs is not None else None)
    return await ensure_metadata(ctx.kube, g, obj, also=also, labels={CLUSTER_NAME: cn} if cn else None)


def _metadata(m: Obj, cluster: Obj | None) -> dict[str, Any]:
    """The Cluster as owner of a stand-alone Machine (rm.cluster_adopts) and its label."""
    cn = contract.dig(m, "spec", "clusterName") or ""
    owner = None
    if cluster is not None and rm.cluster_adopts(m):
        owner = contract.owner_ref(cluster, controller=False)
    return {"owner": owner, "labels": {CLUSTER_NAME: cn} if cn else None}


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, m, cluster, namespace, name = ctx.kube, sub.obj, sub.cluster, sub.namespace, sub.name
    now = coreutil.utcnow()
    cfg_ref = contract.ref(m, "spec", "bootstrap", "configRef")
    b_read = await read_ref(ctx, namespace, cfg_ref, watcher="Machine")
    i_read = await read_ref(ctx, namespace, contract.ref(m, "spec", "infrastructureRef"), watcher="Machine")
    bootstrap = await _adopt_external(ctx, m, b_read.obj, cluster)
    infra = await _adopt_external(ctx, m, i_read.obj, cluster)

    obs = rm.Observed(machine=m, cluster=cluster, bootstrap=bootstrap, bootstrap_ref=cfg_ref is not None,
                      infra=infra, now=now, bootstrap_missing=b_read.missing, infra_missing=i_read.missing,
                      bootstrap_contract=b_read.contract, infra_contract=i_read.contract)
    obs.machine_set, obs.machine_deployment = await _owners(ctx, m)
    obs.machine_pool = await _pool(ctx, m)
    sp = rm.spec_patch(obs)
    if sp:
        m = await kube.merge_patch(MACHINE, namespace, name, sp)
        obs.machine = m

    wl = await workload(ctx, namespace, cluster)
    if wl is not None and (contract.dig(m, "spec", "providerID") or contract.dig(m, "status", "nodeRef", "name")):
        obs.workload_reachable, obs.node = await _find_node(ctx, wl, m)
    elif wl is not None:
        obs.workload_reachable = True
    if wl is not None and obs.node is not None:
        obs.node = await _node_metadata(ctx, wl, m, obs.node)

    status = rm.compute_status(obs)
    return Outcome(status=status, obj=m, requeue_after=_requeue(ctx, m, status, now))


async def _node_metadata(ctx: Ctx, wl: Kube, m: Obj, node: Obj) -> Obj:
    """The Machine's labels/annotations, then (MachineTaintPropagation) its taints on its Node; each patch is made
    against the Node as the previous one left it (the taints' carries its resourceVersion)."""
    taints = ctx.settings.enabled(features.MACHINE_TAINT_PROPAGATION)
    for what, make in (("labelling", rm.node_metadata_patch), ("tainting", nodetaints.node_taints_patch)):
        p = make(m, node) if what == "labelling" or taints else None
        if not p:
            continue
        try:
            node = await wl.merge_patch(NODE, None, node["metadata"]["name"], p)
        except WorkloadError as e:  # a conflict or an unreachable API: retried on the next poll
            ctx.log.info("machine %s/%s: %s node failed: %s", m["metadata"]["namespace"], m["metadata"]["name"],
                         what, e)
    return node


def _requeue(ctx: Ctx, m: Obj, status: Obj, now: _dt.datetime) -> float:
    cn = contract.dig(m, "spec", "clusterName") or ""
    if status.get("phase") != rm.PHASE_RUNNING or not cond.is_true({"status": status}, cond.READY):
        if ctx.workload.nodes(m["metadata"]["namespace"], cn) is not None:
            return ctx.settings.node_watch_poll_seconds  # the Node watch brings us back
        # Nodes polled: once the infrastructure is up, the Node turning Ready is near
        return min(2.0, ctx.settings.poll_seconds) if contract.dig(m, "spec", "providerID") \
            else ctx.settings.poll_seconds
    wait = rm.available_requeue(m, status, now)
    return wait if wait is not None else HEALTHY_POLL


async def _owners(ctx: Ctx, m: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The controlling MachineSet and its controlling MachineDeployment, if any."""
    ns = m["metadata"]["namespace"]
    o = contract.controller_owner(m, "MachineSet")
    ms = await ctx.kube.get(MACHINE_SET, ns, o["name"]) if o else None
    if ms is None or (o and ms["metadata"].get("uid") != o.get("uid")):
        return None, None
    d = contract.controller_owner(ms, "MachineDeployment")
    md = await ctx.kube.get(MACHINE_DEPLOYMENT, ns, d["name"]) if d else None
    if md is None or (d and md["metadata"].get("uid") != d.get("uid")):
        return ms, None
    return ms, md


async def _pool(ctx: Ctx, m: dict[str, Any]) -> dict[str, Any] | None:
    """The controlling MachinePool, if any (MachinePool Machines)."""
    o = contract.controller_owner(m, "MachinePool")
    mp = await ctx.kube.get(MACHINE_POOL, m["metadata"]["namespace"], o["name"]) if o else None
    return mp if mp is not None and o and mp["metadata"].get("uid") == o.get("uid") else None


def _pool_to_machines(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A MachinePool change (its version) reaches its Machines (their UpToDate condition)."""
    return [(m["metadata"].get("namespace") or "", m["metadata"]["name"])
            for m in cache.owned_by(MACHINE, obj["metadata"]["uid"])]


def _referrers(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A provider's bootstrap config / infrastructure machine reaches its controller Machine, or (not adopted
    yet) the Machines that reference it."""
    owned = list(owner_mapper("Machine")(obj, cache))
    if owned:
        return owned
    md = obj["metadata"]
    ns = md.get("namespace") or ""
    me = (obj.get("apiVersion", "").rpartition("/")[0], obj.get("kind"), md["name"])
    out = []
    for m in cache.list(MACHINE, ns):
        for r in (contract.ref(m, "spec", "bootstrap", "configRef"), contract.ref(m, "spec", "infrastructureRef")):
            if r and (r["apiGroup"], r["kind"], r["name"]) == me:
                out.append((ns, m["metadata"]["name"]))
    return out


def _node_to_machines(namespace: str, cluster: str, node: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    machines = cache.list(MACHINE, namespace, labels={CLUSTER_NAME: cluster})
    return [(namespace, n) for n in rm.machines_of_node(machines, node)]


KIND = Kind(MACHINE, reconcile=_reconcile, delete=delete, finalizer=FINALIZER_MACHINE, metadata=_metadata)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(
        gvk=MACHINE,
        reconcile=reconcile,
        watches=[(KUBEADM_CONFIG, owner_mapper("Machine")), (DOCKER_MACHINE, owner_mapper("Machine")),
                 (DEV_MACHINE, owner_mapper("Machine")), (MACHINE_POOL, _pool_to_machines)],
        node_watches=[_node_to_machines],
        ref_mapper=_referrers,
    )
