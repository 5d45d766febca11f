"""Machine controller (thin I/O around capd_py.reconcile.machine)."""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, features
from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_MACHINE,
    KUBEADM_CONFIG,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_POOL,
    MACHINE_SET,
    NODE,
    POD,
)
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE, FINALIZER_MACHINE
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, ensure_metadata, gvk_of, read_ref
from capd_py.controllers.manager import Controller, owner_mapper
from capd_py.controllers.queue import Result
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import coreutil, nodetaints
from capd_py.reconcile import machine as rm

HEALTHY_POLL = 30.0


async def _workload(ctx: Ctx, ns: str, cluster: dict[str, Any] | None) -> Kube | None:
    if cluster is None:
        return None
    try:
        return await ctx.workload.get(ns, cluster["metadata"]["name"])
    except Exception as e:  # noqa: BLE001 - an unreadable kubeconfig is "not reachable"
        ctx.log.debug("workload client for %s/%s: %s", ns, cluster["metadata"]["name"], e)
        return None


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
    except Exception as e:  # noqa: BLE001 - connection problems are reported as conditions
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


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    m = await kube.get(MACHINE, namespace, name)
    if m is None:
        return None
    cn = contract.dig(m, "spec", "clusterName") or ""
    cluster = await kube.get(CLUSTER, namespace, cn) if cn else None
    now = coreutil.utcnow()

    cfg_ref = contract.ref(m, "spec", "bootstrap", "configRef")
    infra_ref = contract.ref(m, "spec", "infrastructureRef")

    if await lifecycle.pause_if_needed(kube, MACHINE, m, cluster):
        return None

    if coreutil.is_deleting(m):
        return await _reconcile_delete(ctx, m, cluster, now)

    owner = None
    if cluster is not None and contract.controller_owner(m) is None:
        owner = contract.owner_ref(cluster, controller=False)
    m = await ensure_metadata(kube, MACHINE, m, finalizer=FINALIZER_MACHINE, owner=owner,
                              labels={CLUSTER_NAME: cn} if cn else None)

    b_read = await read_ref(ctx, namespace, cfg_ref, watcher="Machine")
    i_read = await read_ref(ctx, namespace, infra_ref, watcher="Machine")
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

    wl = await _workload(ctx, namespace, cluster)
    if wl is not None and (contract.dig(m, "spec", "providerID") or contract.dig(m, "status", "nodeRef", "name")):
        obs.workload_reachable, obs.node = await _find_node(ctx, wl, m)
    elif wl is not None:
        obs.workload_reachable = True
    if wl is not None and obs.node is not None:
        np = rm.node_metadata_patch(m, obs.node)
        if np:
            try:
                obs.node = await wl.merge_patch(NODE, None, obs.node["metadata"]["name"], np)
            except Exception as e:  # noqa: BLE001 - retried on the next poll
                ctx.log.info("machine %s/%s: labelling node failed: %s", namespace, name, e)
        tp = nodetaints.node_taints_patch(m, obs.node) \
            if ctx.settings.enabled(features.MACHINE_TAINT_PROPAGATION) else None
        if tp:
            try:
                obs.node = await wl.merge_patch(NODE, None, obs.node["metadata"]["name"], tp)
            except Exception as e:  # noqa: BLE001 - a conflict or an unreachable API: retried on the next poll
                ctx.log.info("machine %s/%s: tainting node failed: %s", namespace, name, e)

    status = rm.compute_status(obs)
    await kube.update_status(MACHINE, m, status)

    if status.get("phase") != rm.PHASE_RUNNING or not cond.is_true({"status": status}, cond.READY):
        if ctx.workload.nodes(namespace, cn) is not None:
            return Result(requeue_after=ctx.settings.node_watch_poll_seconds)  # the Node watch brings us back
        # Nodes polled: once the infrastructure is up, the Node turning Ready is near
        return Result(requeue_after=min(2.0, ctx.settings.poll_seconds) if contract.dig(m, "spec", "providerID")
                      else ctx.settings.poll_seconds)
    wait = rm.available_requeue(m, status, now)
    if wait is not None:
        return Result(requeue_after=wait)
    return Result(requeue_after=HEALTHY_POLL)


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


async def _drain(ctx: Ctx, wl: Kube, node_name: str) -> bool:
    """Cordon then evict; True when nothing evictable is left on the node."""
    node = await wl.get(NODE, None, node_name)
    if node is None:
        return True
    if not contract.dig(node, "spec", "unschedulable"):
        await wl.merge_patch(NODE, None, node_name, {"spec": {"unschedulable": True}})
    res = await wl.acall("GET", POD.path(None), query=[("fieldSelector", f"spec.nodeName={node_name}")])
    pods = list(res.get("items") or [])
    plan = rm.plan_drain(pods, node=node)
    for p in plan.evict:
        md = p["metadata"]
        try:
            await wl.acall("POST", POD.path(md["namespace"], md["name"], "eviction"), body=rm.eviction(p))
        except KubeError as e:
            if e.not_found:
                continue
            if e.status == 429:  # a PodDisruptionBudget blocks it for now
                ctx.log.info("eviction of %s/%s blocked by a disruption budget", md["namespace"], md["name"])
                continue
            raise
    return plan.done


NODE_LOOKUP_TIMEOUT = 5.0


async def _reconcile_delete(ctx: Ctx, m: dict[str, Any], cluster: dict[str, Any] | None,
                            now: _dt.datetime) -> Result | None:
    kube = ctx.kube
    md = m["metadata"]
    ns, name = md["namespace"], md["name"]
    if FINALIZER_MACHINE not in (md.get("finalizers") or []):
        return None
    cfg_ref = contract.ref(m, "spec", "bootstrap", "configRef")
    infra_ref = contract.ref(m, "spec", "infrastructureRef")
    b_read = await read_ref(ctx, ns, cfg_ref, watcher="Machine")
    i_read = await read_ref(ctx, ns, infra_ref, watcher="Machine")
    bootstrap, infra = b_read.obj, i_read.obj

    others = 0
    if rm.is_control_plane(m):
        cn = contract.dig(m, "spec", "clusterName") or ""
        for o in await kube.list(MACHINE, ns, labels={CLUSTER_NAME: cn, CONTROL_PLANE: ""}):
            if o["metadata"]["name"] != name and not coreutil.is_deleting(o):
                others += 1
    allowed, why = rm.is_delete_node_allowed(m, cluster, others)
    wl = await _workload(ctx, ns, cluster) if allowed else None
    node_name = contract.dig(m, "status", "nodeRef", "name")
    node_exists = False
    if wl is not None and node_name:
        try:
            # bounded: a pooled connection to a control plane being removed can hang a request for the client's
            # full 30 s (measured in the control-plane rollouts); a fresh connection next time goes elsewhere.
            # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation (see queue._next)
            async with asyncio.timeout(NODE_LOOKUP_TIMEOUT):
                node_exists = (await wl.get(NODE, None, node_name)) is not None
        except Exception as e:  # noqa: BLE001 - unreachable workload: the node cannot be handled
            ctx.log.info("machine %s/%s: workload unreachable during deletion: %s", ns, name, e)
            wl = None
    elif allowed:
        ctx.log.debug("machine %s/%s: workload cluster not reachable, skipping node drain/deletion", ns, name)
    node_ok = allowed and wl is not None

    obs = rm.Observed(machine=m, cluster=cluster, bootstrap=bootstrap, bootstrap_ref=cfg_ref is not None,
                      infra=infra, now=now)
    status = rm.compute_status(obs)
    kw: dict[str, Any] = dict(node_delete_allowed=node_ok, infra_exists=infra is not None,
                              bootstrap_exists=bootstrap is not None, node_exists=node_exists, now=now)
    step = rm.deletion_step(m, drain_done=False, **kw)
    if step.action == "drain" and wl is not None and node_name:
        dst = dict(status.get("deletion") or {})
        if not dst.get("nodeDrainStartTime"):
            dst["nodeDrainStartTime"] = coreutil.iso(now)
            status["deletion"] = dst
        if await _drain(ctx, wl, node_name):
            step = rm.deletion_step(m, drain_done=True, **kw)

    status["conditions"] = cond.set_condition(status.get("conditions"), cond.DELETING, True, step.reason,
                                              step.message, observed_generation=md.get("generation"))
    status["phase"] = rm.PHASE_DELETING
    m2 = await kube.update_status(MACHINE, m, status)
    m = m2 or m

    if step.action in ("drain", "wait_hook"):
        return Result(requeue_after=ctx.settings.poll_seconds)
    if step.action == "delete_providers":
        for obj, g in ((infra, i_read.gvk), (bootstrap, b_read.gvk)):
            if obj is not None and g is not None:
                await delete_obj(kube, g, obj)
        return Result(requeue_after=ctx.settings.poll_seconds)
    if step.action == "delete_node" and wl is not None and node_name:
        try:
            await wl.delete(NODE, None, node_name)
            ctx.log.info("machine %s/%s: deleted node %s", ns, name, node_name)
            return Result(requeue_after=min(2.0, ctx.settings.poll_seconds))
        except Exception as e:  # noqa: BLE001 - retried until nodeDeletionTimeoutSeconds passes
            ctx.log.info("machine %s/%s: deleting node %s failed: %s", ns, name, node_name, e)
            if rm.deletion_step(m, node_delete_failed=True, drain_done=True, **kw).action == "delete_node":
                return Result(requeue_after=min(2.0, ctx.settings.poll_seconds))
    if not allowed:
        ctx.log.debug("machine %s/%s: node not deleted: %s", ns, name, why)
    await ensure_metadata(kube, MACHINE, m, remove_finalizer=FINALIZER_MACHINE)
    return None


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


def controller() -> Controller:
    return Controller(
        gvk=MACHINE,
        reconcile=reconcile,
        watches=[(KUBEADM_CONFIG, owner_mapper("Machine")), (DOCKER_MACHINE, owner_mapper("Machine")),
                 (MACHINE_POOL, _pool_to_machines)],
        node_watches=[_node_to_machines],
        ref_mapper=_referrers,
    )
