"""KubeadmControlPlane controller: cluster certificates and kubeconfig, control-plane Machines (init,
one-at-a-time joins, scale down with etcd member removal, rollouts), status and deletion.

Thin: it reads the KCP, its Cluster, its Machines (with their KubeadmConfigs and infrastructure
machines) and the workload cluster's nodes and static pods (`observe.py`), asks the decisions in
`capd_py.reconcile.kcp` for the status and the next step, and applies at most one scaling step per
reconcile (`scale.py`). With nothing left to do (rolled out, at the replica count) it brings the
workload's kube-proxy and CoreDNS in step with the KCP, as upstream does last in its reconcile
(`capd_py.reconcile.kcp.workload_upgrade`). Services come from the context: `ctx.certificates` (cluster
certificate and kubeconfig secrets), `ctx.etcd` (etcd membership), `ctx.probe` (API server certificate expiry).
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from capd_py.api import conditions, contract
from capd_py.api.gvk import CLUSTER, CONFIG_MAP, GVK, KUBEADM_CONFIG, KUBEADM_CONTROL_PLANE, MACHINE, SECRET
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_KCP, KCP_REMEDIATION_IN_PROGRESS
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import ensure_metadata, read_ref
from capd_py.controllers.kcp import observe, scale
from capd_py.controllers.kcp.observe import Workload
from capd_py.controllers.manager import Controller, Mapper, owner_mapper, referrers_mapper
from capd_py.controllers.queue import Result
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import adoption
from capd_py.reconcile.kcp import observe as rk_observe
from capd_py.reconcile.kcp import status as kcp_status
from capd_py.reconcile.kcp import workload_upgrade as wu
from capd_py.reconcile.kubeadmconfig import cluster_infrastructure_provisioned

_Conds = conditions.StatusBuilder
DAEMON_SET = GVK("apps", "v1", "DaemonSet", "daemonsets")
DEPLOYMENT = GVK("apps", "v1", "Deployment", "deployments")


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


async def _owner_cluster(kube: Kube, kcp: dict[str, Any]) -> dict[str, Any] | None:
    for o in kcp["metadata"].get("ownerReferences") or []:
        if o.get("kind") == "Cluster" and str(o.get("apiVersion", "")).startswith("cluster.x-k8s.io/"):
            return await kube.get(CLUSTER, kcp["metadata"]["namespace"], o["name"])
    return None


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, namespace, name)
    if kcp is None:
        return None
    cluster = await _owner_cluster(kube, kcp)
    if kcp["metadata"].get("deletionTimestamp"):
        if await lifecycle.pause_if_needed(kube, KUBEADM_CONTROL_PLANE, kcp, cluster):
            return None  # paused first, as upstream: clusterctl move deletes a paused cluster's objects
        return await _delete(ctx, kcp, cluster)
    if cluster is None:
        ctx.log.getChild("kcp").debug("KCP %s/%s: waiting for the Cluster controller to set the owner reference",
                                      namespace, name)
        return None
    if await lifecycle.pause_if_needed(kube, KUBEADM_CONTROL_PLANE, kcp, cluster):
        return None
    kcp = await lifecycle.ensure_finalizer(kube, KUBEADM_CONTROL_PLANE, kcp, FINALIZER_KCP)
    st = _Conds(kcp)
    st.set(conditions.PAUSED, False, "NotPaused")
    # KCP annotations this pass changes (remediation in progress), written after the status: one write each
    pending: dict[str, str | None] = {}
    res = await _reconcile(ctx, kcp, cluster, st, pending)
    await lifecycle.write_status(kube, KUBEADM_CONTROL_PLANE, kcp, st.final())
    if pending:
        await kube.merge_patch(KUBEADM_CONTROL_PLANE, namespace, name, {"metadata": {"annotations": pending}})
    return res


# --- the main pass ------------------------------------------------------------------------------

async def _reconcile(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], st: _Conds,
                     pending: dict[str, str | None]) -> Result | None:
    kube = ctx.kube
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    poll = Result(requeue_after=ctx.settings.poll_seconds)
    stop = await _adopt(ctx, kcp, cluster)
    if stop is not None:  # as upstream: after adopting (or refusing to), the next pass starts afresh
        return stop
    try:
        found = await ctx.certificates.lookup_or_generate(kube, ns, cname, contract.owner_ref(kcp))
    except KubeError as e:
        st.set(rk.CERTIFICATES_AVAILABLE, False, "InternalError", f"Cannot generate certificates: {e}")
        raise
    await _control_cluster_secrets(kube, kcp, cname, certs_mod.PURPOSES)
    problems = kcp_status.certificate_problems(found)
    kcp_status.set_certificates(st, problems)
    if problems:
        await events.record(kube, kcp, "CertificatesCorrupted", "; ".join(problems))
        return None
    kcp_status.set_spec_status(st, kcp, cname)
    await _cluster_owns_template(ctx, kcp, cluster)

    machines = await observe.owned_machines(kube, kcp, cname)
    initialized = bool(contract.dig(st.status, "initialization", "controlPlaneInitialized"))
    w = Workload()
    endpoint = contract.control_plane_endpoint(cluster)
    if endpoint is not None:
        await ctx.certificates.ensure_kubeconfig(kube, cluster, contract.owner_ref(kcp),
                                                 found[certs_mod.CLUSTER_CA], endpoint)
        await _control_cluster_secrets(kube, kcp, cname, (certs_mod.KUBECONFIG,))
        if machines:
            w = await observe.workload(ctx, cluster)
            if w.reachable and w.nodes:
                initialized = True
    if initialized:
        await observe.record_certificate_expiries(ctx, kcp, machines, w)
    views = await observe.views(ctx, kcp, machines, w, _now())
    if rk.stale_in_progress(kcp, views):
        pending[KCP_REMEDIATION_IN_PROGRESS] = None
    _status(kcp, st, views, machines, initialized, w, pending)
    await _machines_up_to_date(kube, machines, views)
    for m in machines:  # taints, readiness gates, deletion timeouts: changed in place, no rollout
        ip = None if m["metadata"].get("deletionTimestamp") else rk.machine_in_place_patch(kcp, m)
        if ip:
            await kube.merge_patch(MACHINE, ns, m["metadata"]["name"], ip)
    problem = await scale.run_cleanup_hooks(ctx, kcp, machines, views, w.kube, kcp_deleting=False)
    if problem:
        st.set(rk.SCALING_DOWN, True, "ScalingDown", problem)
        await events.record(kube, kcp, "EtcdMemberRemovalFailed", problem)

    if not cluster_infrastructure_provisioned(cluster):
        st.set(rk.SCALING_UP, False, "WaitingForClusterInfrastructure",
               "Waiting for Cluster status.initialization.infrastructureProvisioned")
        return None
    if endpoint is None:
        st.set(rk.SCALING_UP, False, "WaitingForControlPlaneEndpoint", "Waiting for Cluster spec.controlPlaneEndpoint")
        return None

    action = rk.next_action(kcp, cluster, views, initialized, _now())
    if action.machine_condition and action.machine:
        await _owner_remediated(kube, machines, action)
    if action.kind == "scale-up" and w.kube is not None:
        problem = await scale.sync_kubeadm_config(ctx, w.kube, kcp, cluster)
        if problem:
            st.set(rk.SCALING_UP, True, "ScalingUp", f"Cannot update kube-system/kubeadm-config: {problem}")
            return Result(requeue_after=15.0)
    if action.kind in ("create-init", "scale-up"):
        problem = await scale.create_machine(ctx, kcp, cluster, init=action.kind == "create-init",
                                             failure_domain=action.failure_domain)
        if problem:
            st.set(rk.SCALING_UP, True, "ScalingUp", f"Cannot create a Machine: {problem}")
            await events.record(kube, kcp, "MachineCreationFailed", problem)
            return Result(requeue_after=30.0)
        if rk.replacement_annotation(kcp):  # the replacement exists: the remediation is complete
            pending[KCP_REMEDIATION_IN_PROGRESS] = None
        after = await _restatus(ctx, kcp, cluster, st, initialized, w, pending)
        kcp_status.progress(st, kcp, rk.next_action(kcp, cluster, after, initialized),
                            len(await observe.owned_machines(kube, kcp, cname)))
        return poll
    if action.kind == "scale-down":
        problem = await scale.scale_down(ctx, kcp, views, action, w.kube)
        if problem:
            st.set(rk.SCALING_DOWN, True, "ScalingDown", problem)
            await events.record(kube, kcp, "EtcdMemberRemovalFailed", problem)
            return Result(requeue_after=15.0)
        if action.remediation_start:
            pending[KCP_REMEDIATION_IN_PROGRESS] = action.remediation_start
            await events.record(kube, kcp, "MachineRemediated", action.message)
        after = await _restatus(ctx, kcp, cluster, st, initialized, w, pending)
        kcp_status.progress(st, kcp, rk.next_action(kcp, cluster, after, initialized), len(after))
        return poll
    if action.kind == "wait":
        kcp_status.progress(st, kcp, action, len(views))
        return poll
    if action.kind == "none" and initialized and w.reachable and w.kube is not None:
        # as upstream, once rolled out and at the replica count: kube-proxy and CoreDNS follow the KCP
        problem = await _update_workload_addons(ctx, w.kube, kcp, cluster)
        if problem:
            await events.record(kube, kcp, "WorkloadAddonsUpdateFailed", problem)
            return Result(requeue_after=60.0)
    # steady: keep health fresh without writing anything when nothing changes
    return Result(requeue_after=max(ctx.settings.poll_seconds, 30.0)) if views else None


# --- adoption (upstream: initControlPlaneScope, adoptMachines, adoptOwnedSecrets) ---------------

async def _adopt(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any]) -> Result | None:
    """Take over the cluster's control-plane Machines that no controller owns, or say why not. None: nothing to
    adopt, go on; a Result: this pass ends here (adopted, refused, or other owners' Machines beside ours)."""
    kube = ctx.kube
    if not cluster_infrastructure_provisioned(cluster) or contract.control_plane_endpoint(cluster) is None:
        return None  # as upstream: no control-plane Machine can exist before
    ns, cname, name = cluster["metadata"]["namespace"], cluster["metadata"]["name"], kcp["metadata"]["name"]
    log = ctx.log.getChild("kcp")
    machines = await observe.cluster_machines(kube, ns, cname)
    candidates = adoption.adoptable(cname, machines)
    if not candidates:
        others = adoption.not_owned(kcp, cname, machines)
        if others:
            log.error("KCP %s/%s cannot reconcile: %s (%s)", ns, name, adoption.MIXED_MANAGEMENT, ", ".join(others))
            return Result(requeue_after=30.0)
        return None
    # a live read: do not adopt Machines the garbage collector just orphaned from a KCP being deleted
    live = await getattr(kube, "live", kube).get(KUBEADM_CONTROL_PLANE, ns, name)
    if live is None or live["metadata"].get("deletionTimestamp"):
        log.info("KCP %s/%s is being deleted: not adopting its cluster's Machines", ns, name)
        return Result()
    decision = adoption.decide(kcp, candidates)
    if decision.event:  # as upstream: an event, and no retry until something changes
        await events.record(kube, kcp, adoption.ADOPTION_FAILED, decision.event)
        return Result()
    if decision.error:
        log.error("KCP %s/%s: %s", ns, name, decision.error)
        await events.record(kube, kcp, adoption.ADOPTION_FAILED, decision.error)
        return Result(requeue_after=30.0)
    kcp_ref = contract.owner_ref(kcp)
    secrets = await kube.list(SECRET, ns, labels={CLUSTER_NAME: cname})
    for m in candidates:
        cref = contract.ref(m, "spec", "bootstrap", "configRef")
        assert cref is not None  # decide checked it
        cfg = await kube.get(KUBEADM_CONFIG, ns, cref["name"])
        if cfg is None:
            log.info("KCP %s/%s: KubeadmConfig %s of Machine %s not found yet", ns, name, cref["name"],
                     m["metadata"]["name"])
            return Result(requeue_after=ctx.settings.poll_seconds)
        for sec in secrets:
            refs = adoption.config_secret_owner_refs(sec, cfg, kcp_ref)
            if refs is not None:
                await kube.merge_patch(SECRET, ns, sec["metadata"]["name"], {"metadata": {
                    "ownerReferences": refs, "resourceVersion": sec["metadata"]["resourceVersion"]}})
        refs = adoption.machine_owner_refs(m, kcp_ref)
        if refs is not None:
            await kube.merge_patch(MACHINE, ns, m["metadata"]["name"], {"metadata": {
                "ownerReferences": refs, "resourceVersion": m["metadata"]["resourceVersion"]}})
        log.info("KCP %s/%s adopted Machine %s", ns, name, m["metadata"]["name"])
    return Result(requeue_after=ctx.settings.poll_seconds)


async def _control_cluster_secrets(kube: Kube, kcp: dict[str, Any], cname: str, purposes: tuple[str, ...]) -> None:
    """The cluster's certificate / kubeconfig Secrets are the KCP's, whoever made them (upstream
    ensureCertificatesOwnerRef, adoptKubeconfigSecret): a standalone control plane's KubeadmConfig or the
    Cluster made them before the KCP existed. User-provided Secrets (another type) are left alone."""
    ns = kcp["metadata"]["namespace"]
    kcp_ref = contract.owner_ref(kcp)
    for p in purposes:
        sec = await kube.get(SECRET, ns, certs_mod.secret_name(cname, p))
        refs = adoption.cluster_secret_owner_refs(sec, kcp_ref) if sec is not None else None
        if sec is not None and refs is not None:
            await kube.merge_patch(SECRET, ns, sec["metadata"]["name"], {"metadata": {
                "ownerReferences": refs, "resourceVersion": sec["metadata"]["resourceVersion"]}})


async def _update_workload_addons(ctx: Ctx, wl: Kube, kcp: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """upstream's UpdateKubeProxyImageInfo and UpdateCoreDNS: the kube-proxy DaemonSet's image follows
    spec.version, the CoreDNS Deployment's image the KCP's dns settings (the kubeadm-config first, as
    upstream). Missing add-ons are left alone; nothing is written when they are in step. Returns a problem."""
    log = ctx.log.getChild("kcp")
    where = f"{cluster['metadata']['namespace']}/{cluster['metadata']['name']}"
    try:
        if not wu.skip_kube_proxy(kcp):
            ds = await _workload_get(wl, DAEMON_SET, wu.KUBE_PROXY)
            patch = wu.kube_proxy_patch(kcp, ds)
            if patch is not None:
                await wl.merge_patch(DAEMON_SET, wu.KUBE_SYSTEM, wu.KUBE_PROXY, patch)
                log.info("updated the kube-proxy image of %s to %s", where, kcp["spec"]["version"])
        if not wu.skip_coredns(kcp):
            dep = await _workload_get(wl, DEPLOYMENT, wu.COREDNS)
            cm = await _workload_get(wl, CONFIG_MAP, wu.COREDNS) if dep is not None else None
            patch = wu.coredns_patch(kcp, dep, cm)
            if patch is not None:
                problem = await scale.sync_kubeadm_config(ctx, wl, kcp, cluster)
                if problem:
                    return f"Cannot update kube-system/kubeadm-config: {problem}"
                await wl.merge_patch(DEPLOYMENT, wu.KUBE_SYSTEM, wu.COREDNS, patch)
                log.info("updated the CoreDNS image of %s", where)
    except wu.WorkloadUpgradeError as e:
        return str(e)
    except KubeError as e:
        return f"Cannot update the workload's kube-proxy / CoreDNS: {e}"
    except Exception as e:  # noqa: BLE001 - workload API unreachable: retried
        return f"Cannot update the workload's kube-proxy / CoreDNS: {e.__class__.__name__}: {e}"
    return None


async def _workload_get(wl: Kube, g: GVK, name: str) -> dict[str, Any] | None:
    try:
        return dict(await wl.acall("GET", g.path(wu.KUBE_SYSTEM, name), timeout=observe.WORKLOAD_TIMEOUT))
    except KubeError as e:
        if e.not_found:
            return None
        raise


async def _cluster_owns_template(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any]) -> None:
    """The Cluster owns the machine infrastructure template (as upstream), so it goes with the Cluster."""
    ref = contract.ref(kcp, "spec", "machineTemplate", "spec", "infrastructureRef")
    if ref is None or contract.dig(cluster, "metadata", "deletionTimestamp"):
        return
    read = await read_ref(ctx, kcp["metadata"]["namespace"], ref, watcher="KubeadmControlPlane")
    tpl, g = read.obj, read.gvk
    if tpl is not None and g is not None and not contract.dig(tpl, "metadata", "deletionTimestamp"):
        # no cluster-name label: a template may serve several Clusters (each adds its owner reference)
        await ensure_metadata(ctx.kube, g, tpl, owner=contract.owner_ref(cluster, controller=False))


async def _machines_up_to_date(kube: Kube, machines: list[dict[str, Any]], views: list[rk.MachineView]) -> None:
    """The UpToDate condition of every owned Machine is the control plane's to set (as upstream KCP)."""
    by_name = {v.name: v for v in views}
    for m in machines:
        v = by_name.get(m["metadata"]["name"])
        status = kcp_status.machine_up_to_date_status(m, v) if v is not None else None
        if status is not None and not m["metadata"].get("deletionTimestamp"):
            await lifecycle.write_status(kube, MACHINE, m, status)


def _status(kcp: dict[str, Any], st: _Conds, views: list[rk.MachineView], machines: list[dict[str, Any]],
            initialized: bool, w: Workload, pending: dict[str, str | None]) -> None:
    kcp_status.apply(st, kcp, views, [str(contract.dig(m, "spec", "version") or "") for m in machines],
                     initialized, w.reachable, w.error)
    ann = {k: v for k, v in {**(kcp["metadata"].get("annotations") or {}), **pending}.items() if v is not None}
    last = rk.last_remediation({"metadata": {"annotations": ann}},
                               [m["metadata"].get("annotations") or {} for m in machines])
    if last is not None:
        st.status["lastRemediation"] = last


async def _owner_remediated(kube: Kube, machines: list[dict[str, Any]], action: rk.Action) -> None:
    """The remediated (or waiting) Machine says why, in its OwnerRemediated condition (as upstream KCP)."""
    assert action.machine_condition is not None
    known = next((x for x in machines if x["metadata"]["name"] == action.machine), None)
    # read again: this pass may have written its UpToDate condition already
    m = await kube.get(MACHINE, known["metadata"]["namespace"], action.machine) if known else None
    if m is not None:
        await lifecycle.write_status(kube, MACHINE, m, rk.owner_remediated_status(m, *action.machine_condition))


async def _restatus(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], st: _Conds, initialized: bool,
                    w: Workload, pending: dict[str, str | None]) -> list[rk.MachineView]:
    """Recompute the status after a step so it reflects the Machine just created / deleted (and equals
    what the next pass will compute, so that pass writes nothing)."""
    machines = await observe.owned_machines(ctx.kube, kcp, cluster["metadata"]["name"])
    views = await observe.views(ctx, kcp, machines, w, _now())
    _status(kcp, st, views, machines, initialized, w, pending)
    return views


# --- deletion -----------------------------------------------------------------------------------

async def _delete(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any] | None) -> Result | None:
    kube = ctx.kube
    md = kcp["metadata"]
    ns = md["namespace"]
    if not lifecycle.has_finalizer(kcp, FINALIZER_KCP):
        return None
    cname = cluster["metadata"]["name"] if cluster else (md.get("labels") or {}).get(CLUSTER_NAME)
    if cname:
        everything = await kube.list(MACHINE, ns, labels={CLUSTER_NAME: cname})
        ours = await observe.owned_machines(kube, kcp, cname)
        await scale.run_cleanup_hooks(ctx, kcp, ours, [], None, kcp_deleting=True)
        step = rk.deletion_step(everything, ours)
        if not step.done:
            by_name = {m["metadata"]["name"]: m for m in ours}
            for n in step.delete:
                await kube.delete(MACHINE, ns, n, uid=by_name[n]["metadata"].get("uid"))
            st = _Conds(kcp)
            st.set(rk.DELETING, True, step.reason, step.message)
            await lifecycle.write_status(kube, KUBEADM_CONTROL_PLANE, kcp, st.final())
            return Result(requeue_after=ctx.settings.poll_seconds)
    await lifecycle.remove_finalizer(kube, KUBEADM_CONTROL_PLANE, kcp, FINALIZER_KCP)
    return None


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
