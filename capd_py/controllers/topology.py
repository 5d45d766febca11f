"""Cluster topology controller (thin I/O around capd_py.reconcile.topology.desired).

For a Cluster with `spec.topology`: read the ClusterClass and its templates and what the Cluster already has,
compute the desired objects, write what differs (create for new names, server-side apply as
`capi-topology` otherwise), delete what the topology no longer has, and say how it went in the Cluster's
`TopologyReconciled` condition. A second controller of the Cluster kind, as upstream's
`topology/cluster` controller is beside the Cluster controller.
"""

from __future__ import annotations

import secrets
import string
import time
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, gvk
from capd_py.api.gvk import (
    CLUSTER,
    CLUSTER_CLASS,
    KUBEADM_CONTROL_PLANE,
    MACHINE_DEPLOYMENT,
    MACHINE_HEALTH_CHECK,
    MACHINE_POOL,
    MACHINE_SET,
)
from capd_py.api.labels import CLUSTER_NAME, TOPOLOGY_DEPLOYMENT_NAME, TOPOLOGY_OWNED, TOPOLOGY_POOL_NAME
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers import topology_external
from capd_py.controllers import topology_hooks as TH
from capd_py.controllers import topology_writes as TW
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, get_ref, gvk_of, resolve
from capd_py.controllers.mappers import Controller, Mapper, cluster_label_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.kube.client import KubeError
from capd_py.kube.contracts import Unresolved
from capd_py.reconcile import clusterclass as rcc
from capd_py.reconcile import coreutil
from capd_py.reconcile.cluster import TOPOLOGY_RECONCILED
from capd_py.reconcile.topology import desired as D
from capd_py.reconcile.topology import hooks as H

NAME = "ClusterTopology"
_ALPHABET = string.ascii_lowercase + string.digits


def _rand() -> str:
    # upstream's utilrand.String(5) alphabet leaves out vowels and look-alikes; any DNS-safe suffix will do
    return "".join(secrets.choice(_ALPHABET) for _ in range(5))


def _clusters_of_class() -> Mapper:
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        ns = obj["metadata"].get("namespace") or ""
        name = obj["metadata"]["name"]
        return [(c["metadata"].get("namespace") or "", c["metadata"]["name"])
                for c in cache.list(CLUSTER) if D.topology_of(c) and D.class_ref(c) == (ns, name)]
    return m


async def _gvk_of_ref(ctx: Ctx, ref: dict[str, Any] | None) -> gvk.GVK | None:
    """A ClusterClass template reference (apiVersion or apiGroup) resolved through its CRD's contract label."""
    if not ref:
        return None
    group = ref.get("apiGroup") if "apiGroup" in ref else gvk.group_of(ref.get("apiVersion", ""))
    try:
        return (await resolve(ctx, {"apiGroup": group or "", "kind": ref.get("kind", "")})).gvk
    except Unresolved:
        return None



async def _template(ctx: Ctx, ns: str, ref: dict[str, Any] | None, what: str) -> dict[str, Any]:
    g = await _gvk_of_ref(ctx, ref)
    if g is None or ref is None:
        raise D.TopologyError(f"{what}: {ref and ref.get('kind')} is not served (no CustomResourceDefinition "
                              "with a contract label)")
    obj = await ctx.kube.get(g, ns, ref["name"])
    if obj is None:
        raise D.TopologyError(f"{what}: {ref['kind']} {ns}/{ref['name']} not found")
    return obj


async def _blueprint(ctx: Ctx, cc: dict[str, Any]) -> D.Blueprint:
    ns = cc["metadata"].get("namespace") or "default"
    spec = cc.get("spec") or {}
    cpi_ref = contract.dig(spec, "controlPlane", "machineInfrastructure", "templateRef")
    bp = D.Blueprint(
        clusterclass=cc,
        infra_cluster_template=await _template(ctx, ns, contract.dig(spec, "infrastructure", "templateRef"),
                                               "spec.infrastructure.templateRef"),
        cp_template=await _template(ctx, ns, contract.dig(spec, "controlPlane", "templateRef"),
                                    "spec.controlPlane.templateRef"),
        cp_machine_infra_template=await _template(ctx, ns, cpi_ref, "spec.controlPlane.machineInfrastructure")
        if cpi_ref else None)
    for kind, target in (("machineDeployments", bp.md_classes), ("machinePools", bp.mp_classes)):
        for c in contract.dig(spec, "workers", kind) or []:
            path = f"spec.workers.{kind}[{c.get('class')}]"
            target[c["class"]] = D.WorkerClass(
                spec=c,
                bootstrap_template=await _template(ctx, ns, contract.dig(c, "bootstrap", "templateRef"),
                                                   f"{path}.bootstrap.templateRef"),
                infra_template=await _template(ctx, ns, contract.dig(c, "infrastructure", "templateRef"),
                                               f"{path}.infrastructure.templateRef"))
    return bp


async def _current(ctx: Ctx, cluster: dict[str, Any], bp: D.Blueprint) -> D.Current:
    kube = ctx.kube
    ns, name = cluster["metadata"].get("namespace") or "default", cluster["metadata"]["name"]
    owned = {CLUSTER_NAME: name, TOPOLOGY_OWNED: ""}
    cur = D.Current(infra_cluster=await get_ref(ctx, ns, contract.dig(cluster, "spec", "infrastructureRef")),
                    control_plane=await get_ref(ctx, ns, contract.dig(cluster, "spec", "controlPlaneRef")))
    if cur.control_plane is not None:
        cur.cp_machine_infra_template = await get_ref(
            ctx, ns, contract.dig(cur.control_plane, "spec", "machineTemplate", "spec", "infrastructureRef"))
    for md in await kube.list(MACHINE_DEPLOYMENT, ns, labels=owned):
        tname = (md["metadata"].get("labels") or {}).get(TOPOLOGY_DEPLOYMENT_NAME)
        if tname and not coreutil.is_deleting(md):
            ts = contract.dig(md, "spec", "template", "spec") or {}
            cur.machine_deployments[tname] = D.CurrentMD(
                md, await get_ref(ctx, ns, contract.dig(ts, "bootstrap", "configRef")),
                await get_ref(ctx, ns, ts.get("infrastructureRef")))
    for mp in await kube.list(MACHINE_POOL, ns, labels=owned):
        tname = (mp["metadata"].get("labels") or {}).get(TOPOLOGY_POOL_NAME)
        if tname and not coreutil.is_deleting(mp):
            ts = contract.dig(mp, "spec", "template", "spec") or {}
            cur.machine_pools[tname] = D.CurrentMP(
                mp, await get_ref(ctx, ns, contract.dig(ts, "bootstrap", "configRef")),
                await get_ref(ctx, ns, ts.get("infrastructureRef")))
    for mhc in await kube.list(MACHINE_HEALTH_CHECK, ns, labels=owned):
        cur.mhcs[mhc["metadata"]["name"]] = mhc
    # template copies of this cluster, and the ones its MachineSets still run from
    kinds = {(t["apiVersion"], t["kind"]) for t in
             [bp.cp_machine_infra_template, *[w.bootstrap_template for w in bp.md_classes.values()],
              *[w.infra_template for w in bp.md_classes.values()]] if t is not None}
    for api_version, kind in sorted(kinds):
        g = await gvk_of(ctx, {"apiVersion": api_version, "kind": kind})
        if g is not None:
            cur.templates += await kube.list(g, ns, labels=owned)
    for ms in await kube.list(MACHINE_SET, ns, labels={CLUSTER_NAME: name}):
        ts = contract.dig(ms, "spec", "template", "spec") or {}
        for ref in (contract.dig(ts, "bootstrap", "configRef"), ts.get("infrastructureRef")):
            if ref:
                cur.referenced_templates.add((ref.get("kind", ""), ref.get("name", "")))
    return cur


def _topology_reconciled(cluster: dict[str, Any], ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    """The Cluster's status with this controller's one condition set (the only one it owns)."""
    st = dict(cluster.get("status") or {})
    st["conditions"] = cond.set_condition(st.get("conditions"), TOPOLOGY_RECONCILED, ok, reason, message,
                                          observed_generation=cluster["metadata"].get("generation"))
    return st


def _outcome(cluster: dict[str, Any], ok: bool, reason: str, message: str = "",
             requeue_after: float | None = None) -> Outcome:
    return Outcome(status=_topology_reconciled(cluster, ok, reason, message), obj=cluster,
                   requeue_after=requeue_after, owned_conditions=(TOPOLOGY_RECONCILED,))


def _failed(cluster: dict[str, Any], message: str) -> Outcome:
    """TopologyReconciled=False with the cause, and the queue backs off (as upstream returns the error)."""
    out = _outcome(cluster, False, D.R_FAILED, message)
    out.failed = True
    return out


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, cluster = ctx.kube, sub.obj
    namespace, name = sub.namespace, sub.name
    if not D.topology_of(cluster):
        return Outcome(owned_conditions=())
    poll = ctx.settings.poll_seconds
    cns, cname = D.class_ref(cluster)
    cc = await kube.get(CLUSTER_CLASS, cns, cname)
    if cc is None:
        return _outcome(cluster, False, D.R_FAILED, f"ClusterClass {cns}/{cname} not found", poll)
    why = rcc.ready_for_topology(cc)
    if why:
        return _outcome(cluster, False, D.R_CLASS_NOT_RECONCILED, why, poll)
    hk: H.Decision | None = None
    created: list[dict[str, Any]] = []
    try:
        bp = await _blueprint(ctx, cc)
        cur = await _current(ctx, cluster, bp)
        if ctx.runtime_sdk.enabled():
            hk, cluster = await TH.lifecycle_hooks(ctx, cluster, cur)
            if not hk.create:
                return _outcome(cluster, False, H.R_CLUSTER_CREATING, hk.message("Cluster topology creation"),
                                hk.retry_after_seconds)
        plan = await topology_external.compute(ctx, cluster, bp, cur, _rand,  # external patches' calls too
                                               **TH.holds(hk))
        try:
            for w in plan.writes:
                await TW.write(ctx, w)
                if w.create:
                    created.append(w.obj)
            if plan.cluster_refs:
                cluster = await kube.merge_patch(CLUSTER, namespace, name, {"spec": plan.cluster_refs})
        except Exception:
            # upstream hangs what a pass creates off a temporary owner and collects it when the pass fails; here
            # the pass removes them itself: a pass retried while a write is refused leaves nothing behind (names
            # are new each pass: 353 DockerClusters and templates in 90 s before)
            await TW.remove_created(ctx, created)
            raise
        for obj in plan.deletes:
            g = await gvk_of(ctx, obj)
            if g is not None:
                ctx.log.info("topology %s/%s: deleting %s %s", namespace, name, obj["kind"], obj["metadata"]["name"])
                await delete_obj(kube, g, obj)
    except D.TopologyError as e:
        return _failed(cluster, str(e))
    except RuntimeSDKError as e:
        return _failed(cluster, str(e))
    except KubeError as e:
        if e.conflict:
            ctx.log.debug("topology %s/%s: write conflict (%s), reconciling again", namespace, name, e)
            raise
        # the API server refused what we computed (e.g. a patch made the spec invalid): that is the user's to fix
        ctx.log.warning("topology %s/%s: the API server refused a write: %s", namespace, name, e)
        return _failed(cluster, f"{e.reason}: {e}")
    if hk is not None and hk.blocking:
        # upstream: a blocking hook is the first detail of the upgrade's condition; look again when it said to
        return _outcome(cluster, False, H.R_CLUSTER_UPGRADING, TH.upgrade_message(hk, cluster, cur),
                        min(hk.retry_after_seconds, poll) if not plan.reconciled else hk.retry_after_seconds)
    return _outcome(cluster, plan.reconciled, plan.reason, plan.message, None if plan.reconciled else poll)


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    """The Cluster controller deletes what the Cluster has. With the RuntimeSDK gate on, as upstream's topology
    reconcileDelete: BeforeClusterDelete until it lets go, then the ok-to-delete annotation the Cluster controller
    waits for, and TopologyReconciled=False Deleting. (`done` is False only to have that status written: this
    controller has no finalizer.)"""
    cluster = sub.obj
    if not ctx.runtime_sdk.enabled() or not D.topology_of(cluster):
        return Outcome()
    ns, name = sub.namespace, sub.name
    cached = ctx.hook_cache.blocking(ns, name, time.monotonic())
    err: RuntimeSDKError | None
    try:
        registered = TH.registered(ctx)  # fails while the registry is not warmed up: "none" could be wrong
    except RuntimeSDKError as e:
        err = e
    else:
        d, err = await TH.ask(ctx, cluster,
                            lambda answers, failed: H.before_delete(cluster, registered, cached, answers, failed))
    if err is not None:
        out = _outcome(cluster, False, D.R_FAILED, str(err), ctx.settings.poll_seconds)
        out.done = False
        return out
    if d.create and not H.is_ok_to_delete(cluster):
        ctx.log.info("topology %s/%s: deletion unblocked by the BeforeClusterDelete hook", ns, name)
        cluster = await ctx.kube.merge_patch(CLUSTER, ns, name, H.OK_TO_DELETE_PATCH)
    out = _outcome(cluster, False, H.R_DELETING, H.deleting_message(d), d.retry_after_seconds or None)
    out.done = False
    return out


def _paused(sub: Subject) -> Outcome:
    if not D.topology_of(sub.obj):
        return Outcome(owned_conditions=())
    return _outcome(sub.obj, False, D.R_PAUSED, "Cluster is paused")


# the second controller of Clusters: the Cluster controller reports Paused and owns the finalizer
KIND = Kind(CLUSTER, reconcile=_reconcile, delete=_delete, cluster_name=lambda c: str(c["metadata"]["name"]),
            reports_paused=False, when_paused=_paused)
reconcile = reconciler(KIND)



def controller() -> Controller:
    return Controller(
        gvk=CLUSTER, reconcile=reconcile, name=NAME,
        watches=[(CLUSTER_CLASS, _clusters_of_class()),
                 (KUBEADM_CONTROL_PLANE, cluster_label_mapper),
                 (MACHINE_DEPLOYMENT, cluster_label_mapper),
                 (MACHINE_POOL, cluster_label_mapper)])
