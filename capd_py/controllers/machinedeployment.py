"""MachineDeployment controller on the reconcile skeleton (thin I/O around capd_py.reconcile.machinedeployment)."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract, selectors
from capd_py.api.gvk import MACHINE, MACHINE_DEPLOYMENT, MACHINE_SET
from capd_py.api.labels import (
    CLUSTER_NAME,
    DEPLOYMENT_NAME,
    FINALIZER_MACHINE_DEPLOYMENT,
    REVISION_ANNOTATION,
    TEMPLATE_HASH,
)
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj, ensure_metadata, read_ref
from capd_py.controllers.mappers import Controller, Mapper, owner_mapper, referrers_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.kube.client import KubeError
from capd_py.reconcile import coreutil
from capd_py.reconcile import machinedeployment as rmd


def _deployment_label_mapper() -> Mapper:
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        name = (obj["metadata"].get("labels") or {}).get(DEPLOYMENT_NAME)
        return [(obj["metadata"].get("namespace") or "", name)] if name else []
    return m


async def _read(ctx: Ctx, md: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                       list[dict[str, Any]]]:
    """(the cluster's MachineSets, those this MachineDeployment owns, its Machines)."""
    namespace, name = md["metadata"]["namespace"], md["metadata"]["name"]
    cn = contract.dig(md, "spec", "clusterName") or ""
    if not cn:
        return [], [], []
    all_ms = await ctx.kube.list(MACHINE_SET, namespace, labels={CLUSTER_NAME: cn})
    machines = await ctx.kube.list(MACHINE, namespace, labels={CLUSTER_NAME: cn, DEPLOYMENT_NAME: name[:63]})
    return all_ms, [ms for ms in all_ms if rmd.owns(md, ms)], machines


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    md = sub.obj
    _, owned, machines = await _read(ctx, md)
    for ms in owned:
        await delete_obj(ctx.kube, MACHINE_SET, ms)
    return Outcome(status=rmd.compute_status(md, owned, None, machines), done=not owned,
                   requeue_after=ctx.settings.poll_seconds if owned else None)


def _metadata(md: dict[str, Any], cluster: dict[str, Any] | None) -> dict[str, Any]:
    """The Cluster as owner (unless something controls the MachineDeployment), its label, and the selector
    defaults in the finalizer's patch (a new MachineDeployment needs both)."""
    cn = contract.dig(md, "spec", "clusterName") or ""
    owner = None
    if cluster is not None and contract.controller_owner(md) is None:
        owner = contract.owner_ref(cluster, controller=False)
    return {"also": rmd.spec_defaults_patch(md), "owner": owner, "labels": {CLUSTER_NAME: cn} if cn else None}


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, md, cluster, namespace, name = ctx.kube, sub.obj, sub.cluster, sub.namespace, sub.name
    all_ms, owned, machines = await _read(ctx, md)
    if cluster is not None and not coreutil.is_deleting(cluster):
        # the Cluster owns the templates (as upstream), so they go with it; a missing one is the MachineSet's concern
        for ref in rmd.template_refs(md):
            read = await read_ref(ctx, namespace, ref, watcher="MachineDeployment")
            tpl, g = read.obj, read.gvk
            if tpl is not None and g is not None and not coreutil.is_deleting(tpl):
                await ensure_metadata(kube, g, tpl, owner=contract.owner_ref(cluster, controller=False))

    # adopt orphan MachineSets of this deployment
    sel = contract.dig(md, "spec", "selector")
    for ms in all_ms:
        if contract.controller_owner(ms) is None and not coreutil.is_deleting(ms) and \
                (ms["metadata"].get("labels") or {}).get(DEPLOYMENT_NAME) == name[:63] and \
                selectors.selector_matches(sel, contract.dig(ms, "spec", "template", "metadata", "labels")):
            owned.append(await ensure_metadata(kube, MACHINE_SET, ms, owner=contract.owner_ref(md)))

    h = rmd.template_hash(md)
    new = next((ms for ms in owned if (ms["metadata"].get("labels") or {}).get(TEMPLATE_HASH) == h
                and not coreutil.is_deleting(ms)), None)
    olds = [ms for ms in owned if ms is not new]
    replicas = coreutil.replicas_of(md)
    stype, surge, unavail = rmd.strategy(md)
    max_rev = max([rmd.revision(ms) for ms in owned] or [0])

    if contract.dig(md, "spec", "paused"):
        return Outcome(status=rmd.compute_status(md, owned, new["metadata"]["name"] if new else None, machines))

    if new is None:
        old_states = [rmd.MS.of(ms) for ms in olds]
        probe = rmd.MS("__new__", 0)
        if stype == rmd.ON_DELETE:
            initial = rmd.on_delete(replicas, probe, old_states).replicas["__new__"]
        else:
            initial = rmd.rolling_update(replicas, surge, unavail, probe, old_states).replicas["__new__"]
        desired = rmd.desired_machine_set(md, h, initial, max_rev + 1)
        try:
            new = await kube.create(MACHINE_SET, desired)
        except KubeError as e:
            if not e.conflict:
                raise
            # a MachineSet of that name exists (being deleted or not ours yet)
            return Outcome(status=None, requeue_after=0.5)
        owned.append(new)
        ctx.log.info("machinedeployment %s/%s: created MachineSet %s (revision %d)", namespace, name,
                     new["metadata"]["name"], max_rev + 1)
    else:
        patch = rmd.in_place_updates(md, new)
        if rmd.revision(new) < max_rev:  # an older template is current again
            patch = patch or {}
            patch["metadata"] = {"annotations": {REVISION_ANNOTATION: str(max_rev + 1)}}
        if patch:
            new = await kube.merge_patch(MACHINE_SET, namespace, new["metadata"]["name"], patch)
            owned = [new if ms["metadata"]["uid"] == new["metadata"]["uid"] else ms for ms in owned]

    new_state = rmd.MS.of(new)
    old_states = [rmd.MS.of(ms) for ms in olds]
    if stype == rmd.ON_DELETE:
        scale = rmd.on_delete(replicas, new_state, old_states)
    else:
        scale = rmd.rolling_update(replicas, surge, unavail, new_state, old_states)
    updated: list[dict[str, Any]] = []
    for ms in owned:
        want = scale.replicas.get(ms["metadata"]["name"])
        if want is not None and want != coreutil.replicas_of(ms, 0) and not coreutil.is_deleting(ms):
            ms = await kube.merge_patch(MACHINE_SET, namespace, ms["metadata"]["name"], {"spec": {"replicas": want}})
        updated.append(ms)
    owned = updated

    rev = str(rmd.revision(new))
    md = await ensure_metadata(kube, MACHINE_DEPLOYMENT, md, annotations={REVISION_ANNOTATION: rev})

    for ms in rmd.cleanup([ms for ms in owned if ms["metadata"]["name"] != new["metadata"]["name"]]):
        ctx.log.info("machinedeployment %s/%s: deleting old MachineSet %s", namespace, name, ms["metadata"]["name"])
        await delete_obj(kube, MACHINE_SET, ms)

    return Outcome(status=rmd.compute_status(md, owned, new["metadata"]["name"], machines), obj=md)


KIND = Kind(MACHINE_DEPLOYMENT, reconcile=_reconcile, delete=_delete, finalizer=FINALIZER_MACHINE_DEPLOYMENT,
            metadata=_metadata)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=MACHINE_DEPLOYMENT, reconcile=reconcile,
                      watches=[(MACHINE_SET, owner_mapper("MachineDeployment")),
                               (MACHINE, _deployment_label_mapper())],
                      ref_mapper=referrers_mapper(MACHINE_DEPLOYMENT,
                                                  ("spec", "template", "spec", "bootstrap", "configRef"),
                                                  ("spec", "template", "spec", "infrastructureRef")))
