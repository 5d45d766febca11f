"""Machine controller (thin I/O around capd_py.reconcile.machine)."""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, features
from capd_py.api.gvk import (
    CLUSTER,
    DAEMON_SET,
    DOCKER_MACHINE,
    KUBEADM_CONFIG,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_DRAIN_RULE,
    MACHINE_POOL,
    MACHINE_SET,
    NAMESPACE,
    NODE,
    PERSISTENT_VOLUME,
    POD,
    VOLUME_ATTACHMENT,
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
from capd_py.reconcile import drain as rd
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
    await lifecycle.write_status(kube, MACHINE, m, status)

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


@dataclass
class _Waiting:
    """One pass of the drain or of the volume wait: done, or the Deleting condition's message."""
    done: bool
    message: str = ""


async def _pods_for_eviction(ctx: Ctx, wl: Kube, m: dict[str, Any], cluster: dict[str, Any] | None,
                             node: dict[str, Any], now: _dt.datetime, unreachable: bool) -> rd.PodDeleteList:
    """The Node's Pods with what the drain does to each: the MachineDrainRules (from the cache) that select
    the Machine, and the workload cluster's Namespaces and DaemonSets the rules and filters look at."""
    node_name = node["metadata"]["name"]
    res = await wl.acall("GET", POD.path(None), query=[("fieldSelector", f"spec.nodeName={node_name}")])
    pods = list(res.get("items") or [])
    if not pods:
        return rd.PodDeleteList([])
    rules = rd.rules_for_machine(await ctx.kube.list(MACHINE_DRAIN_RULE, m["metadata"]["namespace"]), m, cluster)
    namespaces = {n["metadata"]["name"]: n for n in await wl.list(NAMESPACE)}
    daemonsets: set[str] = set()
    if any(o.get("kind") == "DaemonSet" for p in pods for o in p["metadata"].get("ownerReferences") or []):
        daemonsets = {rd.key(d) for d in await wl.list(DAEMON_SET)}
    return rd.pods_for_eviction(pods, rules=rules, namespaces=namespaces, daemonsets=daemonsets, now=now,
                                node_unreachable=unreachable)


async def _drain(ctx: Ctx, wl: Kube, m: dict[str, Any], cluster: dict[str, Any] | None, node_name: str,
                 started: str, now: _dt.datetime) -> _Waiting:
    """Cordon, then evict the Pods of the lowest order group still on the Node (upstream's drainNode)."""
    ns, name = m["metadata"]["namespace"], m["metadata"]["name"]
    node = await wl.get(NODE, None, node_name)
    if node is None:
        return _Waiting(True)
    if not contract.dig(node, "spec", "unschedulable"):
        await wl.merge_patch(NODE, None, node_name, {"spec": {"unschedulable": True}})
    unreachable = rd.node_unreachable(node)
    pods = await _pods_for_eviction(ctx, wl, m, cluster, node, now, unreachable)
    errors = pods.errors()
    if errors:
        ctx.log.info("machine %s/%s: failed to get Pods for eviction: %s", ns, name, "; ".join(errors))
        return _Waiting(False, "Error draining Node, please check controller logs for errors")
    if not pods.to_drain():
        return _Waiting(True)
    plan = rd.plan_evictions(pods)
    outcomes: dict[str, str] = {}
    for item in plan.evict_now:
        md = item.pod["metadata"]
        try:
            await wl.acall("POST", POD.path(md["namespace"], md["name"], "eviction"),
                           body=rd.eviction(item.pod, 1 if unreachable else None))
            outcomes[item.key] = rd.EVICTED
            ctx.log.info("machine %s/%s: evicting Pod %s (order %d)", ns, name, item.key, item.order)
        except KubeError as e:
            outcomes[item.key] = rd.NOT_FOUND if e.not_found else rd.eviction_failure(e.status, e.message, e.body)
    result = rd.eviction_result(plan, outcomes)
    if result.completed:
        return _Waiting(True)
    return _Waiting(False, result.condition_message(started))


async def _volumes_detached(ctx: Ctx, wl: Kube, m: dict[str, Any], cluster: dict[str, Any] | None, node_name: str,
                            started: str, now: _dt.datetime) -> _Waiting:
    """upstream's shouldWaitForNodeVolumes: the Node's attached volumes, less those of Pods the drain skipped."""
    node = await wl.get(NODE, None, node_name)
    if node is None or rd.node_unreachable(node):
        return _Waiting(True)
    attachments = await wl.list(VOLUME_ATTACHMENT)
    if not contract.dig(node, "status", "volumesAttached") and not any(
            contract.dig(va, "spec", "nodeName") == node_name and contract.dig(va, "status", "attached")
            for va in attachments):
        return _Waiting(True)
    pods = await _pods_for_eviction(ctx, wl, m, cluster, node, now, unreachable=False)
    ignore = rd.claims_of_skipped_pods(pods)
    attached = rd.attached_volumes(node, attachments, await wl.list(PERSISTENT_VOLUME), ignore)
    if attached.error or pods.errors():
        ctx.log.info("machine %s/%s: waiting for volumes to detach: %s", m["metadata"]["namespace"],
                     m["metadata"]["name"], attached.error or "; ".join(pods.errors()))
        return _Waiting(False, "Error waiting for volumes to be detached from Node, please check controller logs "
                               "for errors")
    return _Waiting(attached.empty, attached.condition_message(started))


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
    retry = ctx.settings.poll_seconds
    if step.action == "drain" and wl is not None and node_name:
        started = _start_time(status, "nodeDrainStartTime", now)
        drained = await _drain(ctx, wl, m, cluster, node_name, started, now)
        if drained.done:
            step = rm.deletion_step(m, drain_done=True, **kw)
        else:
            step.message = drained.message
            retry = min(rd.DRAIN_RETRY_SECONDS, retry)
    if step.action == "wait_volumes" and wl is not None and node_name:
        started = _start_time(status, "waitForNodeVolumeDetachStartTime", now)
        step.message = f"Waiting for Node volumes to be detached (started at {started})"
        detached = await _volumes_detached(ctx, wl, m, cluster, node_name, started, now)
        if detached.done:
            step = rm.deletion_step(m, drain_done=True, volumes_done=True, **kw)
        else:
            step.message = detached.message
            retry = min(rd.VOLUME_DETACH_RETRY_SECONDS, retry)

    status["conditions"] = cond.set_condition(status.get("conditions"), cond.DELETING, True, step.reason,
                                              step.message, observed_generation=md.get("generation"))
    status["phase"] = rm.PHASE_DELETING
    m2 = await lifecycle.write_status(kube, MACHINE, m, status)
    m = m2 or m

    if step.action in ("drain", "wait_volumes", "wait_hook"):
        return Result(requeue_after=retry)
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
            if rm.deletion_step(m, node_delete_failed=True, drain_done=True, volumes_done=True,
                                **kw).action == "delete_node":
                return Result(requeue_after=min(2.0, ctx.settings.poll_seconds))
    if not allowed:
        ctx.log.debug("machine %s/%s: node not deleted: %s", ns, name, why)
    await ensure_metadata(kube, MACHINE, m, remove_finalizer=FINALIZER_MACHINE)
    return None


def _start_time(status: dict[str, Any], field: str, now: _dt.datetime) -> str:
    """status.deletion.<field>, set to now the first time (upstream's nodeDrainStartTime and
    waitForNodeVolumeDetachStartTime)."""
    dst = dict(status.get("deletion") or {})
    if not dst.get(field):
        dst[field] = coreutil.iso(now)
        status["deletion"] = dst
    return str(dst[field])


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
