"""MachineSet controller (thin I/O around capd_py.reconcile.machineset)."""

from __future__ import annotations

from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, features
from capd_py.api.gvk import KUBEADM_CONTROL_PLANE, MACHINE, MACHINE_DEPLOYMENT, MACHINE_SET
from capd_py.api.labels import CLUSTER_NAME, DEPLOYMENT_NAME, FINALIZER_MACHINE_SET, TEMPLATE_HASH
from capd_py.controllers import entropy, lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, ensure_metadata, get_ref, gvk_of, read_ref
from capd_py.controllers.mappers import Controller, owner_mapper, referrers_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import KubeError
from capd_py.reconcile import coreutil, preflight
from capd_py.reconcile import machinedeployment as rmd
from capd_py.reconcile import machineset as rms


class TemplateMissing(Exception):
    pass


async def _clone(ctx: Ctx, ms: dict[str, Any], ref: dict[str, str] | None, name: str) -> dict[str, Any] | None:
    if ref is None:
        return None
    ns = ms["metadata"]["namespace"]
    read = await read_ref(ctx, ns, ref, watcher="MachineSet")
    tpl = read.obj
    if tpl is None:
        raise TemplateMissing(read.missing)
    obj = rms.clone_from_template(tpl, name, ns, contract.dig(ms, "spec", "clusterName"),
                                  contract.owner_ref(ms, controller=False))
    g = await gvk_of(ctx, obj)
    if g is None:
        raise TemplateMissing(f"unknown kind {obj['kind']}")
    try:
        return await ctx.kube.create(g, obj)
    except KubeError as e:
        if e.conflict:  # already there from an earlier attempt
            existing = await ctx.kube.get(g, ns, name)
            if existing is not None:
                return existing
        raise


async def _create_machine(ctx: Ctx, ms: dict[str, Any]) -> str:
    name = rms.machine_name(ms, entropy.random_suffix())
    tspec = contract.dig(ms, "spec", "template", "spec", default={}) or {}
    boot_ref = contract.ref(tspec, "bootstrap", "configRef")
    infra_ref = contract.ref(tspec, "infrastructureRef")
    created: list[dict[str, Any]] = []
    try:
        boot = await _clone(ctx, ms, boot_ref, name)
        if boot is not None:
            created.append(boot)
        infra = await _clone(ctx, ms, infra_ref, name)
        if infra is None:
            raise TemplateMissing("spec.template.spec.infrastructureRef is not set")
        created.append(infra)
        await ctx.kube.create(MACHINE, rms.new_machine(ms, name, boot, infra))
    except Exception:
        for obj in created:  # do not leak clones of a Machine that was never created
            g = await gvk_of(ctx, obj)
            if g is not None:
                try:
                    await ctx.kube.delete(g, obj["metadata"]["namespace"], obj["metadata"]["name"])
                except KubeError:
                    pass
        raise
    return name


async def _is_old_on_delete(ctx: Ctx, ms: dict[str, Any]) -> bool:
    """True for a MachineSet of an OnDelete MachineDeployment whose template is no longer current."""
    o = contract.controller_owner(ms, "MachineDeployment")
    if not o:
        return False
    md = await ctx.kube.get(MACHINE_DEPLOYMENT, ms["metadata"]["namespace"], o["name"])
    if md is None or md["metadata"].get("uid") != o.get("uid") or rmd.strategy(md)[0] != rmd.ON_DELETE:
        return False
    return (ms["metadata"].get("labels") or {}).get(TEMPLATE_HASH) != rmd.template_hash(md)


async def _within_max_in_flight(ctx: Ctx, ms: dict[str, Any], candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    o = contract.controller_owner(ms, "MachineDeployment")
    if not o:
        return candidates
    ns = ms["metadata"]["namespace"]
    md = await ctx.kube.get(MACHINE_DEPLOYMENT, ns, o["name"])
    mif = contract.dig(md, "spec", "remediation", "maxInFlight")
    if md is None or mif is None:
        return candidates
    dm = await ctx.kube.list(MACHINE, ns, labels={DEPLOYMENT_NAME: o["name"][:63]})
    return rms.limit_remediation(candidates, dm, mif, coreutil.replicas_of(md))


async def _preflight(ctx: Ctx, ms: dict[str, Any], cluster: dict[str, Any], action: str) -> preflight.Outcome:
    """Upstream's MachineSet preflight checks for `action` (reads the control plane and, for the skip annotation,
    the bootstrap config template)."""
    ns = ms["metadata"]["namespace"]
    enabled = ctx.settings.machineset_preflight_checks
    if not enabled or not ctx.settings.enabled(features.MACHINE_SET_PREFLIGHT_CHECKS):
        return preflight.Outcome()
    tpl = None
    if preflight.needs_bootstrap_template(ms):
        tpl = await get_ref(ctx, ns, contract.ref(ms, "spec", "template", "spec", "bootstrap", "configRef"))
    skip = preflight.skipped(ms, tpl)
    if preflight.ALL in skip:
        return preflight.Outcome()
    cp = await get_ref(ctx, ns, contract.ref(cluster, "spec", "controlPlaneRef"))
    return preflight.run(cluster, cp, ms, skip, enabled, action)


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    ms = sub.obj
    owned = await _machines(ctx, ms)
    for m in owned:
        await delete_obj(ctx.kube, MACHINE, m)
    return Outcome(status=rms.compute_status(ms, owned), done=not owned,
                   requeue_after=ctx.settings.poll_seconds if owned else None)


async def _machines(ctx: Ctx, ms: dict[str, Any]) -> list[dict[str, Any]]:
    cn = contract.dig(ms, "spec", "clusterName") or ""
    return rms.machines_of(ms, await ctx.kube.list(MACHINE, ms["metadata"]["namespace"], labels={CLUSTER_NAME: cn})
                           if cn else [])


def _metadata(ms: dict[str, Any], cluster: dict[str, Any] | None) -> dict[str, Any]:
    """The Cluster as owner of a stand-alone MachineSet (rms.cluster_adopts), its label, and the selector defaults
    in the finalizer's patch (a MachineSet made by hand needs all of them)."""
    cn = contract.dig(ms, "spec", "clusterName") or ""
    owner = None
    if cluster is not None and rms.cluster_adopts(ms):
        owner = contract.owner_ref(cluster, controller=False)
    return {"also": rms.spec_defaults_patch(ms), "owner": owner, "labels": {CLUSTER_NAME: cn} if cn else None}


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, ms, cluster = ctx.kube, sub.obj, sub.cluster
    namespace, name = sub.namespace, sub.name
    cn = contract.dig(ms, "spec", "clusterName") or ""
    machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cn}) if cn else []
    owned = rms.machines_of(ms, machines)
    for m in rms.orphans_to_adopt(ms, machines):
        owned.append(await ensure_metadata(kube, MACHINE, m, owner=contract.owner_ref(ms, controller=True)))

    if cluster is None:
        return Outcome(status=rms.compute_status(ms, owned), requeue_after=ctx.settings.poll_seconds)
    if not coreutil.is_deleting(cluster):
        # as upstream's reconcileExternalTemplateReference: the Cluster owns the templates (any kind, found through
        # the contract), so they go with it; reading them also starts the watch of their kind
        for ref in rmd.template_refs(ms):
            read = await read_ref(ctx, namespace, ref, watcher="MachineSet")
            if read.obj is not None and read.gvk is not None and not coreutil.is_deleting(read.obj):
                await ensure_metadata(kube, read.gvk, read.obj, owner=contract.owner_ref(cluster, controller=False))

    # in-place propagation of template labels/annotations to existing Machines (additive)
    want_labels = rms.machine_labels(ms)
    want_ann = contract.dig(ms, "spec", "template", "metadata", "annotations", default={}) or {}
    owned = [m if coreutil.is_deleting(m) else
             await ensure_metadata(kube, MACHINE, m, labels=want_labels, annotations=want_ann) for m in owned]
    for i, m in enumerate(owned):
        ip = None if coreutil.is_deleting(m) else rms.in_place_machine_patch(ms, m)
        if ip:
            owned[i] = await kube.merge_patch(MACHINE, namespace, m["metadata"]["name"], ip)

    p = rms.plan(ms, owned)
    if coreutil.is_deleting(cluster):
        p.create = 0  # the Cluster is going away: do not replace Machines
    elif p.create and await _is_old_on_delete(ctx, ms):
        p.create = 0  # OnDelete: a Machine deleted from an old MachineSet is replaced by the new one
    requeue: float | None = None
    if p.remediate:
        p.remediate = await _within_max_in_flight(ctx, ms, p.remediate)
    if p.remediate:
        held = await _preflight(ctx, ms, cluster, preflight.REMEDIATION)
        if held.blocked:
            msg = preflight.remediation_deferred_message(held.messages())
            for m in p.remediate:
                await lifecycle.write_status(kube, MACHINE, m, preflight.deferred_machine_status(m, msg))
            p.remediate = []
            requeue = preflight.REQUEUE_SECONDS
    scale_up_held: list[str] = []
    if p.create:
        held = await _preflight(ctx, ms, cluster, preflight.SCALE_UP)
        if held.blocked:
            scale_up_held = held.messages()
            p.create = 0
            requeue = preflight.REQUEUE_SECONDS
    for m in p.remediate:
        ctx.log.info("machineset %s/%s: remediating unhealthy machine %s", namespace, name, m["metadata"]["name"])
        await delete_obj(kube, MACHINE, m)
    for m in p.delete:
        await delete_obj(kube, MACHINE, m)
    error_msg = ""
    for _ in range(p.create):
        try:
            await _create_machine(ctx, ms)
        except TemplateMissing as e:
            error_msg = str(e)
            requeue = ctx.settings.poll_seconds
            break
    if p.create or p.delete or p.remediate:
        owned = rms.machines_of(ms, await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cn}))
    st = rms.compute_status(ms, owned, p, preflight=scale_up_held, creation_error=error_msg)
    if scale_up_held:
        held_msg = preflight.scaling_up_message(len(owned), coreutil.replicas_of(ms), scale_up_held)
        st["conditions"] = cond.set_condition(st["conditions"], rms.SCALING_UP, True, "ScalingUp", held_msg,
                                              observed_generation=ms["metadata"].get("generation"))
    if error_msg:
        msg = f"Cannot create Machines: {error_msg}"
        prev = cond.get(ms, rms.SCALING_UP) or {}
        st["conditions"] = cond.set_condition(st["conditions"], rms.SCALING_UP, True, "ScalingUp", msg,
                                              observed_generation=ms["metadata"].get("generation"))
        if prev.get("message") != msg:  # one Event per distinct failure, not one per retry
            await events.record(kube, ms, "FailedCreate", error_msg)
    return Outcome(status=st, requeue_after=requeue)




KIND = Kind(MACHINE_SET, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_MACHINE_SET, metadata=_metadata)
reconcile = reconciler(KIND)


def _held_by_control_plane(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A KubeadmControlPlane's change reaches the MachineSets of its cluster whose scale up the preflight checks
    hold, so they go on as soon as it is stable (upstream waits for its 15 s requeue; a new cluster's workers would
    be created that much later)."""
    md = obj.get("metadata") or {}
    ns, cluster = md.get("namespace") or "", (md.get("labels") or {}).get(CLUSTER_NAME)
    if not cluster:
        return []
    return [(ns, ms["metadata"]["name"]) for ms in cache.list(MACHINE_SET, ns, labels={CLUSTER_NAME: cluster})
            if preflight.held(ms)]


def controller() -> Controller:
    # a template kind found through the contract: the MachineSets cloning from it hear of it (it may appear later)
    return Controller(gvk=MACHINE_SET, reconcile=reconcile, watches=[(MACHINE, owner_mapper("MachineSet")),
                                                                      (KUBEADM_CONTROL_PLANE, _held_by_control_plane)],
                      ref_mapper=referrers_mapper(MACHINE_SET, ("spec", "template", "spec", "bootstrap", "configRef"),
                                                  ("spec", "template", "spec", "infrastructureRef")))
