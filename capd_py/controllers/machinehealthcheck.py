"""MachineHealthCheck controller (thin I/O around capd_py.reconcile.machinehealthcheck).

Machines are watched (upstream's machineToMachineHealthCheck: a Machine's event reaches the MachineHealthChecks of
its cluster whose selector matches it), so an MHC made before its Machines (a topology Cluster's) takes them on at
once instead of at the next resync. Nodes live in the workload cluster, which is polled (Result(requeue_after=...))
rather than watched.
"""

from __future__ import annotations

from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, selectors
from capd_py.api.gvk import MACHINE, MACHINE_HEALTH_CHECK, NODE
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.kube.client import WorkloadError
from capd_py.reconcile import machinehealthcheck as rmhc

POLL = 10.0


async def _nodes(ctx: Ctx, ns: str, cluster: str) -> dict[str, dict[str, Any]] | None:
    try:
        wl = await ctx.workload.get(ns, cluster)
        if wl is None:
            return None
        return {n["metadata"]["name"]: n for n in await wl.list(NODE)}
    except WorkloadError as e:  # an unreachable workload cluster means "cannot tell"
        ctx.log.debug("mhc: workload %s/%s unreachable: %s", ns, cluster, e)
        return None


def _metadata(mhc: dict[str, Any], cluster: dict[str, Any] | None) -> dict[str, Any]:
    if cluster is None:
        return {}
    return {"labels": {CLUSTER_NAME: cluster["metadata"]["name"]},
            "owner": contract.owner_ref(cluster, controller=False)}


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    return Outcome()  # nothing of ours to clean up


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, mhc, cluster = ctx.kube, sub.obj, sub.cluster
    namespace, name = sub.namespace, sub.name
    cn = contract.dig(mhc, "spec", "clusterName") or ""
    machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cn}) if cn else []
    tmachines = rmhc.targets(mhc, machines)
    nodes: dict[str, dict[str, Any]] = {}
    if tmachines and cluster is not None and cond.is_true(cluster, "InfrastructureReady"):
        got = await _nodes(ctx, namespace, cn)
        if got is None:  # cannot see the workload cluster: do not judge Nodes blindly
            ctx.log.debug("mhc %s/%s: workload cluster not reachable yet", namespace, name)
            return Outcome(status=None, requeue_after=POLL)
        nodes = got
    tgts: list[rmhc.Target] = []
    for m in tmachines:
        node_name = contract.dig(m, "status", "nodeRef", "name")
        pid = contract.dig(m, "spec", "providerID")
        if node_name:
            t = rmhc.Target(m, node=nodes.get(node_name), node_missing=node_name not in nodes)
        else:
            node = next((n for n in nodes.values() if pid and contract.dig(n, "spec", "providerID") == pid), None)
            t = rmhc.Target(m, node=node)
        tgts.append(t)

    out = rmhc.decide(mhc, cluster, tgts)
    for m in tmachines:
        new = out.machine_conditions.get(m["metadata"]["name"])
        if new is not None:
            st = dict(m.get("status") or {})
            st["conditions"] = new
            await lifecycle.write_status(kube, MACHINE, m, st)
    nxt = out.next_check if out.next_check is not None else POLL
    return Outcome(status=rmhc.compute_status(mhc, out),
                   requeue_after=max(1.0, min(nxt, POLL)) if tmachines else ctx.settings.resync_seconds)



KIND = Kind(MACHINE_HEALTH_CHECK, reconcile=_reconcile, delete=_delete, metadata=_metadata)
reconcile = reconciler(KIND)


def _machine_to_health_checks(machine: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """upstream machineToMachineHealthCheck: the MachineHealthChecks of the Machine's namespace and cluster whose
    selector matches its labels (Machines carry no MHC label: the cached MHCs are listed)."""
    md = machine.get("metadata") or {}
    ns, cluster = md.get("namespace") or "", contract.dig(machine, "spec", "clusterName")
    out = []
    for mhc in cache.list(MACHINE_HEALTH_CHECK, ns):
        sel = contract.dig(mhc, "spec", "selector")
        if contract.dig(mhc, "spec", "clusterName") == cluster and not selectors.selector_is_empty(sel) \
                and selectors.selector_matches(sel, md.get("labels")):
            out.append((ns, mhc["metadata"]["name"]))
    return out


def controller() -> Controller:
    return Controller(gvk=MACHINE_HEALTH_CHECK, reconcile=reconcile, watches=[(MACHINE, _machine_to_health_checks)])
