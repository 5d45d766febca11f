"""MachineHealthCheck controller (thin I/O around capd_py.reconcile.machinehealthcheck).

Nodes live in the workload cluster, which is polled (Result(requeue_after=...)) rather than watched.
"""

from __future__ import annotations

from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, MACHINE, MACHINE_HEALTH_CHECK, NODE
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import ensure_metadata
from capd_py.controllers.manager import Controller
from capd_py.controllers.queue import Result
from capd_py.reconcile import coreutil
from capd_py.reconcile import machinehealthcheck as rmhc

POLL = 10.0


async def _nodes(ctx: Ctx, ns: str, cluster: str) -> dict[str, dict[str, Any]] | None:
    try:
        wl = await ctx.workload.get(ns, cluster)
        if wl is None:
            return None
        return {n["metadata"]["name"]: n for n in await wl.list(NODE)}
    except Exception as e:  # noqa: BLE001 - an unreachable workload cluster means "cannot tell"
        ctx.log.debug("mhc: workload %s/%s unreachable: %s", ns, cluster, e)
        return None


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    mhc = await kube.get(MACHINE_HEALTH_CHECK, namespace, name)
    if mhc is None or coreutil.is_deleting(mhc):
        return None
    cn = contract.dig(mhc, "spec", "clusterName") or ""
    cluster = await kube.get(CLUSTER, namespace, cn) if cn else None
    if await lifecycle.pause_if_needed(kube, MACHINE_HEALTH_CHECK, mhc, cluster):
        return None
    if cluster is not None:
        mhc = await ensure_metadata(kube, MACHINE_HEALTH_CHECK, mhc, labels={CLUSTER_NAME: cn},
                                    owner=contract.owner_ref(cluster, controller=False))

    machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cn}) if cn else []
    tmachines = rmhc.targets(mhc, machines)
    nodes: dict[str, dict[str, Any]] = {}
    if tmachines and cluster is not None and cond.is_true(cluster, "InfrastructureReady"):
        got = await _nodes(ctx, namespace, cn)
        if got is None:  # cannot see the workload cluster: do not judge Nodes blindly
            ctx.log.debug("mhc %s/%s: workload cluster not reachable yet", namespace, name)
            return Result(requeue_after=POLL)
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
    await lifecycle.write_status(kube, MACHINE_HEALTH_CHECK, mhc, rmhc.compute_status(mhc, out))
    if not tmachines:
        return Result(requeue_after=ctx.settings.resync_seconds)
    nxt = out.next_check if out.next_check is not None else POLL
    return Result(requeue_after=max(1.0, min(nxt, POLL)))


def controller() -> Controller:
    # Machines carry no MHC label, so a Machine event cannot be mapped to its MHCs without a list;
    # the MHC polls its targets instead (and the resync covers the rest).
    return Controller(gvk=MACHINE_HEALTH_CHECK, reconcile=reconcile, watches=[])
