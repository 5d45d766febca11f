"""KubeadmControlPlane controller: cluster certificates and kubeconfig, control-plane Machines (init,
one-at-a-time joins, scale down with etcd member removal, rollouts), status and deletion.

Thin, on the skeleton (controllers/skeleton.py: pause before deletion, finalizer, status): it reads the KCP, its
Cluster, its Machines (with their KubeadmConfigs and infrastructure machines) and the workload cluster's nodes and
static pods (`observe.py`), asks the decisions in `capd_py.reconcile.kcp` for the status and the next step, and
applies at most one scaling step per reconcile (`scale.py`). With nothing left to do (rolled out, at the replica
count) it brings the workload's kube-proxy and CoreDNS in step with the KCP (`addons.py`), as upstream does last in
its reconcile. Adoption and ownership: `adopt.py`; writes to the Machines' conditions: `machines.py`. Services come
from the context: `ctx.certificates` (cluster certificate and kubeconfig secrets), `ctx.etcd` (etcd membership),
`ctx.probe` (API server certificate expiry).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions, contract
from capd_py.api.gvk import CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_KCP, KCP_REMEDIATION_IN_PROGRESS
from capd_py.controllers.context import Ctx
from capd_py.controllers.kcp import addons, adopt, machines, observe, scale
from capd_py.controllers.kcp.observe import Workload
from capd_py.controllers.mappers import Controller, Mapper, owner_mapper, referrers_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import KubeError
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import coreutil
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import adoption, etcdhealth
from capd_py.reconcile.kcp import observe as rk_observe
from capd_py.reconcile.kcp import status as kcp_status
from capd_py.reconcile.kubeadmconfig import cluster_infrastructure_provisioned

Obj = dict[str, Any]


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _owner_cluster_name(kcp: Obj) -> str:
    """As upstream's GetOwnerCluster: the Cluster is the one the KCP's owner references name."""
    return contract.core_owner_name(kcp, "Cluster")


def _has_its_cluster(sub: Subject) -> bool:
    """As upstream: a KCP whose Cluster has not made itself its owner (or does not exist) waits, untouched (no
    finalizer, no status); one being deleted goes on without it."""
    return coreutil.is_deleting(sub.obj) or sub.cluster is not None


@dataclass
class _Pass:
    """What one pass has read and decided so far (the status it builds, the KCP annotations it changes)."""

    ctx: Ctx
    kcp: Obj
    cluster: Obj
    st: conditions.StatusBuilder
    # KCP annotations this pass changes (remediation in progress), written at its end
    pending: dict[str, str | None] = field(default_factory=dict)
    machines: list[Obj] = field(default_factory=list)
    views: list[rk.MachineView] = field(default_factory=list)
    w: Workload = field(default_factory=Workload)
    initialized: bool = False
    # what the control plane's etcd reported (None: not read: not initialized, or an external etcd), and what
    # follows from it for the Machines and the KCP (made by `status`)
    etcd_read: etcdhealth.EtcdObservation | None = None
    etcd: etcdhealth.Assessment | None = None

    def status(self) -> None:
        if self.etcd_read is not None:
            now = _now()
            self.etcd = etcdhealth.assess(self.views, self.etcd_read, etcdhealth.initialized_since(self.kcp, now), now)
        kcp_status.apply_pass(self.st, self.kcp, self.views, self.machines, self.initialized, self.w.reachable,
                              self.w.error, self.pending, self.etcd)

    async def restatus(self) -> list[rk.MachineView]:
        """Recompute the status after a step so it reflects the Machine just created / deleted (and equals
        what the next pass will compute, so that pass writes nothing)."""
        self.machines = await observe.owned_machines(self.ctx.kube, self.kcp, self.cluster["metadata"]["name"])
        self.views = await observe.views(self.ctx, self.kcp, self.machines, self.w, _now())
        self.status()
        return self.views


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kcp, cluster = sub.obj, sub.cluster
    assert cluster is not None  # `reconcile` waits for the Cluster controller's owner reference
    p = _Pass(ctx, kcp, cluster, conditions.StatusBuilder(kcp))
    requeue = await _main(p)
    obj = None
    if p.pending:
        obj = await ctx.kube.merge_patch(KUBEADM_CONTROL_PLANE, sub.namespace, sub.name,
                                         {"metadata": {"annotations": p.pending}})
    return Outcome(status=p.st.final(), obj=obj, requeue_after=requeue)


async def _main(p: _Pass) -> float | None:
    ctx, kcp, cluster, st = p.ctx, p.kcp, p.cluster, p.st
    kube = ctx.kube
    cname = cluster["metadata"]["name"]
    stop = await adopt.adopt(ctx, kcp, cluster)
    if stop is not None:  # as upstream: after adopting (or refusing to), the next pass starts afresh
        return stop.requeue_after
    try:
        found = await ctx.certificates.lookup_or_generate(kube, cluster["metadata"]["namespace"], cname,
                                                          contract.owner_ref(kcp))
    except KubeError as e:
        st.set(rk.CERTIFICATES_AVAILABLE, False, "InternalError", f"Cannot generate certificates: {e}")
        raise
    await adopt.control_cluster_secrets(kube, kcp, cname, certs_mod.PURPOSES)
    problems = kcp_status.certificate_problems(found)
    kcp_status.set_certificates(st, problems)
    if problems:
        await events.record(kube, kcp, "CertificatesCorrupted", "; ".join(problems))
        return None
    kcp_status.set_spec_status(st, kcp, cname)
    await adopt.cluster_owns_template(ctx, kcp, cluster)

    p.machines = await observe.owned_machines(kube, kcp, cname)
    p.initialized = bool(contract.dig(st.status, "initialization", "controlPlaneInitialized"))
    endpoint = contract.control_plane_endpoint(cluster)
    if endpoint is not None:
        await ctx.certificates.ensure_kubeconfig(kube, cluster, contract.owner_ref(kcp),
                                                 found[certs_mod.CLUSTER_CA], endpoint)
        await adopt.control_cluster_secrets(kube, kcp, cname, (certs_mod.KUBECONFIG,))
        if p.machines:
            p.w = await observe.workload(ctx, cluster)
            if p.w.reachable and p.w.nodes:
                p.initialized = True
    if p.initialized:
        await observe.record_certificate_expiries(ctx, kcp, p.machines, p.w)
    p.views = await observe.views(ctx, kcp, p.machines, p.w, _now())
    if p.initialized and etcdhealth.managed(kcp):
        p.etcd_read = await observe.etcd(ctx, kcp, p.w, p.views)
    if rk.stale_in_progress(kcp, p.views):
        p.pending[KCP_REMEDIATION_IN_PROGRESS] = None
    p.status()
    await machines.set_conditions(kube, p.machines, p.views, p.etcd)
    await machines.patch_in_place(kube, kcp, p.machines)
    problem = await scale.run_cleanup_hooks(ctx, kcp, p.machines, p.views, p.w.kube, kcp_deleting=False)
    if problem:  # a deleting Machine waits for its etcd member's removal
        st.set(rk.SCALING_DOWN, True, "ScalingDown", problem)

    if not cluster_infrastructure_provisioned(cluster):
        st.set(rk.SCALING_UP, False, "WaitingForClusterInfrastructure",
               "Waiting for Cluster status.initialization.infrastructureProvisioned")
        return None
    if endpoint is None:
        st.set(rk.SCALING_UP, False, "WaitingForControlPlaneEndpoint", "Waiting for Cluster spec.controlPlaneEndpoint")
        return None
    return await _step(p, rk.next_action(kcp, cluster, p.views, p.initialized, _now()))


async def _step(p: _Pass, action: rk.Action) -> float | None:
    """Apply the one scaling step `action` names (or the add-on update when there is none)."""
    ctx, kcp, cluster, st, w = p.ctx, p.kcp, p.cluster, p.st, p.w
    kube = ctx.kube
    poll = ctx.settings.poll_seconds
    if action.machine_condition and action.machine:
        await machines.set_owner_remediated(kube, p.machines, action)
    if action.kind == "scale-up" and w.kube is not None:
        problem = await scale.sync_kubeadm_config(ctx, w.kube, kcp, cluster)
        if problem:
            st.set(rk.SCALING_UP, True, "ScalingUp", f"Cannot update kube-system/kubeadm-config: {problem}")
            return 15.0
    if action.kind in ("create-init", "scale-up"):
        problem = await scale.create_machine(ctx, kcp, cluster, init=action.kind == "create-init",
                                             failure_domain=action.failure_domain)
        if problem:
            st.set(rk.SCALING_UP, True, "ScalingUp", f"Cannot create a Machine: {problem}")
            await events.record(kube, kcp, "MachineCreationFailed", problem)
            return 30.0
        if rk.replacement_annotation(kcp):  # the replacement exists: the remediation is complete
            p.pending[KCP_REMEDIATION_IN_PROGRESS] = None
        after = await p.restatus()
        kcp_status.progress(st, kcp, rk.next_action(kcp, cluster, after, p.initialized), len(p.machines))
        return poll
    if action.kind == "scale-down":
        problem = await scale.scale_down(ctx, kcp, p.views, action, w.kube)
        if problem:
            st.set(rk.SCALING_DOWN, True, "ScalingDown", problem)
            await events.record(kube, kcp, "EtcdMemberRemovalFailed", problem)
            return 15.0
        if action.remediation_start:
            p.pending[KCP_REMEDIATION_IN_PROGRESS] = action.remediation_start
            await events.record(kube, kcp, "MachineRemediated", action.message)
        after = await p.restatus()
        kcp_status.progress(st, kcp, rk.next_action(kcp, cluster, after, p.initialized), len(after))
        return poll
    if action.kind == "wait":
        kcp_status.progress(st, kcp, action, len(p.views))
        return poll
    if action.kind == "none" and p.initialized and w.reachable and w.kube is not None:
        # as upstream, once rolled out and at the replica count: kube-proxy and CoreDNS follow the KCP
        problem = await addons.update_workload_addons(ctx, w.kube, kcp, cluster)
        if problem:
            await events.record(kube, kcp, "WorkloadAddonsUpdateFailed", problem)
            return 60.0
    return kcp_status.recheck_after(st.final(), bool(p.views), poll)


# --- deletion -----------------------------------------------------------------------------------

async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    """Workers first, then our Machines (upstream reconcileDelete); the finalizer goes (the skeleton) once they are
    gone. Without its Cluster, the cluster-name label still finds them."""
    kube, kcp, ns = ctx.kube, sub.obj, sub.namespace
    cname = sub.cluster["metadata"]["name"] if sub.cluster else (kcp["metadata"].get("labels") or {}).get(CLUSTER_NAME)
    if not cname:
        return Outcome(done=True)
    everything = await kube.list(MACHINE, ns, labels={CLUSTER_NAME: cname})
    ours = await observe.owned_machines(kube, kcp, cname)
    await scale.run_cleanup_hooks(ctx, kcp, ours, [], None, kcp_deleting=True)
    step = rk.deletion_step(everything, ours)
    if step.done:
        ctx.etcd_reads.pop((ns, sub.name), None)  # what its etcd last said goes with it
        return Outcome(done=True)
    by_name = {m["metadata"]["name"]: m for m in ours}
    for n in step.delete:
        await kube.delete(MACHINE, ns, n, uid=by_name[n]["metadata"].get("uid"))
    st = conditions.StatusBuilder(kcp)
    st.set(rk.DELETING, True, step.reason, step.message)
    return Outcome(status=st.final(), done=False, requeue_after=ctx.settings.poll_seconds)


KIND = Kind(KUBEADM_CONTROL_PLANE, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_KCP,
            cluster_name=_owner_cluster_name, ready=_has_its_cluster)


reconcile = reconciler(KIND)


# --- wiring -------------------------------------------------------------------------------------

def _cluster_to_kcp(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "controlPlaneRef")
    if r and r["kind"] == "KubeadmControlPlane":
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def _node_to_kcp(namespace: str, cluster: str, node: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    c = cache.get(CLUSTER, namespace, cluster)
    return _cluster_to_kcp(c, cache) if c is not None and rk_observe.node_concerns_control_plane(node, c) else []


def _machine_mapper() -> Mapper:
    """A Machine reaches the KCP owning it, and an adoptable one (control plane, no controller) its Cluster's KCP."""
    by_owner = owner_mapper("KubeadmControlPlane")

    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        keys = list(by_owner(obj, cache))
        cname = (obj["metadata"].get("labels") or {}).get(CLUSTER_NAME)
        if cname and adoption.adoptable(cname, [obj]):
            c = cache.get(CLUSTER, obj["metadata"].get("namespace") or "", cname)
            keys = sorted(set(keys) | set(_cluster_to_kcp(c, cache) if c is not None else []))
        return keys
    return m


def controller() -> Controller:
    watches: list[tuple[Any, Mapper]] = [(MACHINE, _machine_mapper()), (CLUSTER, _cluster_to_kcp)]
    return Controller(gvk=KUBEADM_CONTROL_PLANE, reconcile=reconcile, watches=watches, node_watches=[_node_to_kcp],
                      ref_mapper=referrers_mapper(KUBEADM_CONTROL_PLANE,
                                                  ("spec", "machineTemplate", "spec", "infrastructureRef")))
