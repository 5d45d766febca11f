"""What the KCP controller reads: its Machines (with their KubeadmConfigs and infrastructure machines),
the workload cluster's Nodes and control-plane static pods; and the API server certificate expiry it
notes on KubeadmConfigs (spec.rollout.before.certificatesExpiryDays)."""

from __future__ import annotations

import copy
import datetime as _dt
import time
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions, contract
from capd_py.api.gvk import KUBEADM_CONFIG, MACHINE, NODE, POD
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import get_ref
from capd_py.kube.client import Kube, Unreachable, WorkloadError
from capd_py.kube.etcd import EtcdError
from capd_py.kube.workload import unreachable
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import etcdhealth, rollout
from capd_py.reconcile.kcp.observe import CONTROL_PLANE_POD_SELECTOR

WORKLOAD_TIMEOUT = 10.0
# how long what etcd reported stands while the control-plane Nodes stay the same: each read is three etcdctl execs
# through the workload API (status, members, alarms), and a KCP coming up passes every 2 s (upstream reads etcd on
# every reconcile, through a port-forward and a gRPC client, which cost less than an exec)
ETCD_RECHECK = 10.0


@dataclass
class Workload:
    kube: Kube | None = None
    reachable: bool = False
    error: str = ""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)


async def cluster_machines(kube: Kube, namespace: str, cluster_name: str) -> list[dict[str, Any]]:
    return await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cluster_name})


async def owned_machines(kube: Kube, kcp: dict[str, Any], cluster_name: str) -> list[dict[str, Any]]:
    """The cluster's control-plane Machines this KCP owns (upstream: the control-plane Machines of the cluster,
    filtered by owner; an adopted Machine carries no control-plane-name label until the KCP adds it)."""
    ms = await cluster_machines(kube, kcp["metadata"]["namespace"], cluster_name)
    return rk.owned(kcp, [m for m in ms if CONTROL_PLANE in (m["metadata"].get("labels") or {})])


async def workload(ctx: Ctx, cluster: dict[str, Any]) -> Workload:
    w = Workload()
    w.kube = await ctx.workload.get(cluster["metadata"]["namespace"], cluster["metadata"]["name"])
    if w.kube is None:
        w.error = "kubeconfig not available"
        return w
    try:
        # short timeouts: an unreachable workload API must not hold the KCP key for minutes
        watched = ctx.workload.nodes(cluster["metadata"]["namespace"], cluster["metadata"]["name"])
        if watched is not None:  # the cluster's Node watch is in sync: its copies, no request
            w.nodes = copy.deepcopy(list(watched.values()))
        else:
            nodes = await w.kube.acall("GET", NODE.path(), timeout=WORKLOAD_TIMEOUT)
            w.nodes = list(nodes.get("items") or [])
        pods = await w.kube.acall("GET", POD.path("kube-system"),
                                  query=[("labelSelector", CONTROL_PLANE_POD_SELECTOR)], timeout=WORKLOAD_TIMEOUT)
        w.pods = {p["metadata"]["name"]: p for p in pods.get("items") or []}
        w.reachable = True
    except WorkloadError as e:  # an unreachable workload API is a state to report, not a crash
        # the address tried and the error (what did not answer, for Unreachable)
        w.error = unreachable(w.kube.host, e.cause if isinstance(e, Unreachable) else e, WORKLOAD_TIMEOUT)
    return w


async def _config(kube: Kube, ns: str, machine: dict[str, Any]) -> dict[str, Any] | None:
    cref = contract.ref(machine, "spec", "bootstrap", "configRef")
    return await kube.get(KUBEADM_CONFIG, ns, cref["name"]) if cref and cref["kind"] == "KubeadmConfig" else None


async def views(ctx: Ctx, kcp: dict[str, Any], machines: list[dict[str, Any]], w: Workload,
                now: _dt.datetime) -> list[rk.MachineView]:
    kube = ctx.kube
    out = []
    ns = kcp["metadata"]["namespace"]
    for m in machines:
        cfg = await _config(kube, ns, m)
        iref = contract.ref(m, "spec", "infrastructureRef")
        infra = await get_ref(ctx, ns, iref)
        out.append(rk.machine_view(kcp, m, cfg, infra, w.nodes, w.pods, now))
    return out


async def record_certificate_expiries(ctx: Ctx, kcp: dict[str, Any], machines: list[dict[str, Any]],
                                      w: Workload) -> None:
    """Like upstream: once per machine, note its API server certificate expiry on its KubeadmConfig
    (drives spec.rollout.before.certificatesExpiryDays). Best effort: unreachable nodes are retried."""
    if not rollout.tracks_certificate_expiry(kcp) or not w.reachable:
        return
    kube = ctx.kube
    ns = kcp["metadata"]["namespace"]
    for m in machines:
        cref = contract.ref(m, "spec", "bootstrap", "configRef")
        node = rk.node_for(m, w.nodes)
        if m["metadata"].get("deletionTimestamp") or not cref or node is None:
            continue
        cfg = await kube.get(KUBEADM_CONFIG, ns, cref["name"])
        if not rollout.needs_certificate_expiry(m, cfg):
            continue
        ip = rk.node_internal_ip(node)
        if not ip:
            continue
        expiry = await ctx.probe.serving_cert_not_after(ip, rollout.API_SERVER_PORT)
        if expiry:
            await kube.merge_patch(KUBEADM_CONFIG, ns, cref["name"], rollout.certificate_expiry_patch(expiry))


async def etcd(ctx: Ctx, kcp: dict[str, Any], w: Workload, views: list[rk.MachineView]) -> etcdhealth.EtcdObservation:
    """What the control plane's etcd reports, read through the first control-plane node whose etcd answers (those
    whose member was healthy last time first), as upstream's getCurrentEtcdMembersAndAlarms."""
    if not w.reachable or w.kube is None:
        return etcdhealth.EtcdObservation(failure=etcdhealth.Cond(
            conditions.UNKNOWN, "ConnectionDown", f"The workload cluster API is not reachable: {w.error}"))
    nodes = etcdhealth.nodes_to_ask(views)
    if not nodes:
        return etcdhealth.EtcdObservation()
    key = (kcp["metadata"]["namespace"], kcp["metadata"]["name"])
    cached = ctx.etcd_reads.get(key)
    if cached is not None and cached[1] == frozenset(nodes) and time.monotonic() - cached[0] < ETCD_RECHECK:
        return cached[2]
    obs = await _read_etcd(ctx, w.kube, nodes)
    ctx.etcd_reads[key] = (time.monotonic(), frozenset(nodes), obs)
    return obs


async def _read_etcd(ctx: Ctx, workload: Kube, nodes: list[str]) -> etcdhealth.EtcdObservation:
    error = ""
    for node in nodes:
        client = ctx.etcd.for_node(workload, node)
        try:
            st = await client.status()
        except EtcdError as e:
            error = str(e)
            continue
        if st.errors:
            return etcdhealth.EtcdObservation(failure=etcdhealth.endpoint_errors(f"etcd-{node}", st.errors))
        try:
            members = await client.members()
        except EtcdError as e:
            return etcdhealth.EtcdObservation(failure=etcdhealth.members_failed(str(e)))
        try:
            alarms = await client.alarms()
        except EtcdError as e:
            return etcdhealth.EtcdObservation(failure=etcdhealth.alarms_failed(str(e)))
        return etcdhealth.EtcdObservation(tuple(members), tuple(alarms))
    return etcdhealth.EtcdObservation(failure=etcdhealth.connect_failed(error))
