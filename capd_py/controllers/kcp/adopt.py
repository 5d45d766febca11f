"""Adoption (upstream: initControlPlaneScope, adoptMachines, adoptOwnedSecrets): the cluster's control-plane
Machines no controller owns become the KCP's, with their KubeadmConfigs' Secrets; the cluster's certificate and
kubeconfig Secrets are the KCP's, whoever made them; and the Cluster owns the machine infrastructure template. Who
may be adopted is `reconcile.kcp.adoption`."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import KUBEADM_CONFIG, KUBEADM_CONTROL_PLANE, MACHINE, SECRET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import ensure_metadata, read_ref
from capd_py.controllers.kcp import observe
from capd_py.controllers.queue import Result
from capd_py.kube import events
from capd_py.kube.client import Kube
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile.kcp import adoption
from capd_py.reconcile.kubeadmconfig import cluster_infrastructure_provisioned


async def adopt(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any]) -> Result | None:
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


async def control_cluster_secrets(kube: Kube, kcp: dict[str, Any], cname: str, purposes: tuple[str, ...]) -> None:
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


async def cluster_owns_template(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any]) -> None:
    """The Cluster owns the machine infrastructure template (as upstream), so it goes with the Cluster."""
    ref = contract.ref(kcp, "spec", "machineTemplate", "spec", "infrastructureRef")
    if ref is None or contract.dig(cluster, "metadata", "deletionTimestamp"):
        return
    read = await read_ref(ctx, kcp["metadata"]["namespace"], ref, watcher="KubeadmControlPlane")
    tpl, g = read.obj, read.gvk
    if tpl is not None and g is not None and not contract.dig(tpl, "metadata", "deletionTimestamp"):
        # no cluster-name label: a template may serve several Clusters (each adds its owner reference)
        await ensure_metadata(ctx.kube, g, tpl, owner=contract.owner_ref(cluster, controller=False))
