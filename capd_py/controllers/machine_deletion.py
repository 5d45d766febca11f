"""The Machine's deletion (controllers/machine.py's `Kind.delete`): read the Machine's providers and, when it may be
deleted, its Node; ask capd_py.reconcile.machine_deletion.decide_deletion; apply. The reads and writes the decision
asks for on the way (the Node's Pods and volumes, cordon, evictions, the Node's deletion) happen in the same pass."""

from __future__ import annotations

import asyncio
import datetime as _dt
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import (
    DAEMON_SET,
    MACHINE,
    MACHINE_DRAIN_RULE,
    NAMESPACE,
    NODE,
    PERSISTENT_VOLUME,
    POD,
    VOLUME_ATTACHMENT,
)
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, read_ref
from capd_py.controllers.skeleton import Outcome, Subject
from capd_py.kube.client import Kube, KubeError, WorkloadError
from capd_py.reconcile import coreutil
from capd_py.reconcile import drain as rd
from capd_py.reconcile import machine as rm
from capd_py.reconcile import machine_deletion as rdel

Obj = dict[str, Any]
NODE_LOOKUP_TIMEOUT = 5.0


async def workload(ctx: Ctx, ns: str, cluster: Obj | None) -> Kube | None:
    if cluster is None:
        return None
    try:
        return await ctx.workload.get(ns, cluster["metadata"]["name"])
    except WorkloadError as e:  # an unreadable kubeconfig is "not reachable" too
        ctx.log.debug("workload client for %s/%s: %s", ns, cluster["metadata"]["name"], e)
        return None


async def _pods(ctx: Ctx, wl: Kube, m: Obj, cluster: Obj | None, node: Obj, now: _dt.datetime) -> rd.PodDeleteList:
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
                                node_unreachable=rd.node_unreachable(node))


async def _evict(ctx: Ctx, wl: Kube, m: Obj, a: rdel.Evict) -> dict[str, str]:
    """One eviction per Pod: pod key -> EVICTED, NOT_FOUND or why the API server refused."""
    outcomes: dict[str, str] = {}
    for item in a.pods:
        md = item.pod["metadata"]
        try:
            await wl.acall("POST", POD.path(md["namespace"], md["name"], "eviction"),
                           body=rd.eviction(item.pod, a.grace_period_seconds))
            outcomes[item.key] = rd.EVICTED
            ctx.log.info("machine %s/%s: evicting Pod %s (order %d)", m["metadata"]["namespace"],
                         m["metadata"]["name"], item.key, item.order)
        except KubeError as e:
            outcomes[item.key] = rd.NOT_FOUND if e.not_found else rd.eviction_failure(e.status, e.message, e.body)
    return outcomes


async def _node_for_deletion(ctx: Ctx, m: Obj, cluster: Obj | None) -> tuple[Kube | None, Obj | None]:
    """(workload client, the Machine's Node) when the Node may be deleted and the workload cluster answers."""
    ns, name = m["metadata"]["namespace"], m["metadata"]["name"]
    others = 0
    if rm.is_control_plane(m):
        cn = contract.dig(m, "spec", "clusterName") or ""
        others = sum(1 for o in await ctx.kube.list(MACHINE, ns, labels={CLUSTER_NAME: cn, CONTROL_PLANE: ""})
                     if o["metadata"]["name"] != name and not coreutil.is_deleting(o))
    allowed, why = rdel.is_delete_node_allowed(m, cluster, others)
    if not allowed:
        ctx.log.debug("machine %s/%s: node not deleted: %s", ns, name, why)
        return None, None
    wl = await workload(ctx, ns, cluster)
    if wl is None:
        ctx.log.debug("machine %s/%s: workload cluster not reachable, skipping node drain/deletion", ns, name)
        return None, None
    try:
        # bounded: a pooled connection to a control plane being removed can hang a request for the client's
        # full 30 s (measured in the control-plane rollouts); a fresh connection next time goes elsewhere.
        # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation (see queue._next)
        async with asyncio.timeout(NODE_LOOKUP_TIMEOUT):
            return wl, await wl.get(NODE, None, contract.dig(m, "status", "nodeRef", "name"))
    except (*WorkloadError, TimeoutError) as e:  # the Node cannot be handled: the deletion goes on without it
        ctx.log.info("machine %s/%s: workload unreachable during deletion: %s", ns, name, e)
        return None, None


async def _decide_deletion(ctx: Ctx, wl: Kube | None, cluster: Obj | None, obs: rdel.Observed) -> rdel.Action:
    """Ask, apply what only gathers or prepares (read Pods / volumes, cordon, evict, delete the Node), ask again,
    until the decision is one that ends the pass."""
    m = obs.machine
    for _ in range(10):
        a = rdel.decide_deletion(obs)
        if wl is None or (isinstance(a, rdel.TERMINAL) and not isinstance(a, rdel.DeleteNode)):
            return a
        if isinstance(a, rdel.DeleteNode):
            if obs.node_delete_failed:
                return a  # failed in this pass, not out of time: try again shortly
            try:
                await wl.delete(NODE, None, a.node)
                ctx.log.info("machine %s/%s: deleted node %s", m["metadata"]["namespace"], m["metadata"]["name"],
                             a.node)
                return a
            except WorkloadError as e:  # retried until nodeDeletionTimeoutSeconds passes
                ctx.log.info("machine %s/%s: deleting node %s failed: %s", m["metadata"]["namespace"],
                             m["metadata"]["name"], a.node, e)
                obs.node_delete_failed = True
        elif isinstance(a, rdel.Cordon):
            obs.node = await wl.merge_patch(NODE, None, a.node, {"spec": {"unschedulable": True}})
        elif isinstance(a, rdel.Evict):
            obs.evictions = await _evict(ctx, wl, m, a)
        elif isinstance(a, rdel.Observe) and a.what == rdel.PODS and obs.node is not None:
            obs.pods = await _pods(ctx, wl, m, cluster, obs.node, obs.now)
        elif isinstance(a, rdel.Observe) and a.what == rdel.VOLUME_ATTACHMENTS:
            obs.volume_attachments = await wl.list(VOLUME_ATTACHMENT)
        elif isinstance(a, rdel.Observe) and a.what == rdel.PERSISTENT_VOLUMES:
            obs.persistent_volumes = await wl.list(PERSISTENT_VOLUME)
        else:
            raise RuntimeError(f"machine deletion: cannot apply {a!r}")
    raise RuntimeError("machine deletion: no decision after 10 steps")


async def delete(ctx: Ctx, sub: Subject) -> Outcome:
    m, cluster, ns, name = sub.obj, sub.cluster, sub.namespace, sub.name
    now = coreutil.utcnow()
    cfg_ref = contract.ref(m, "spec", "bootstrap", "configRef")
    b_read = await read_ref(ctx, ns, cfg_ref, watcher="Machine")
    i_read = await read_ref(ctx, ns, contract.ref(m, "spec", "infrastructureRef"), watcher="Machine")
    wl, node = await _node_for_deletion(ctx, m, cluster)
    obs = rdel.Observed(machine=m, now=now, infra_exists=i_read.obj is not None,
                        bootstrap_exists=b_read.obj is not None, node_delete_allowed=wl is not None, node=node)
    a = await _decide_deletion(ctx, wl, cluster, obs)
    if isinstance(a, rdel.RemoveFinalizer):
        return Outcome(done=True)
    if isinstance(a, (rdel.WaitForDrain, rdel.WaitForVolumeDetach)) and a.log:
        ctx.log.info("machine %s/%s: %s", ns, name, a.log)

    status = rm.compute_status(rm.Observed(machine=m, cluster=cluster, bootstrap=b_read.obj,
                                           bootstrap_ref=cfg_ref is not None, infra=i_read.obj, now=now))
    if a.started:
        status["deletion"] = {**(status.get("deletion") or {}), **a.started}
    status["conditions"] = cond.set_condition(status.get("conditions"), cond.DELETING, True, a.reason, a.message,
                                              observed_generation=m["metadata"].get("generation"))
    status["phase"] = rm.PHASE_DELETING
    retry = ctx.settings.poll_seconds
    if isinstance(a, rdel.DeleteInfra | rdel.DeleteBootstrap):
        for obj, g in ((i_read.obj, i_read.gvk), (b_read.obj, b_read.gvk)):
            if obj is not None and g is not None:
                await delete_obj(ctx.kube, g, obj)
    elif isinstance(a, rdel.DeleteNode):
        retry = min(2.0, retry)
    elif isinstance(a, rdel.WaitForDrain):
        retry = min(rd.DRAIN_RETRY_SECONDS, retry)
    elif isinstance(a, rdel.WaitForVolumeDetach):
        retry = min(rd.VOLUME_DETACH_RETRY_SECONDS, retry)
    return Outcome(status=status, done=False, requeue_after=retry)
