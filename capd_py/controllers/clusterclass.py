"""ClusterClass controller (thin I/O around capd_py.reconcile.clusterclass): resolves the class's template
references, owns them (as upstream, so `clusterctl move` and deletion see the graph), asks each external patch's
DiscoverVariables extension for its variables (through `ctx.runtime_sdk`, RuntimeSDK gate on) and writes status."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract, gvk
from capd_py.api.gvk import (
    CLUSTER_CLASS,
    DOCKER_CLUSTER_TEMPLATE,
    DOCKER_MACHINE_POOL_TEMPLATE,
    DOCKER_MACHINE_TEMPLATE,
    KUBEADM_CONFIG_TEMPLATE,
    KUBEADM_CONTROL_PLANE_TEMPLATE,
)
from capd_py.api.runtime_hooks import DISCOVER_VARIABLES
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import ensure_metadata, resolve
from capd_py.controllers.mappers import Controller, Mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.kube.contracts import Unresolved
from capd_py.reconcile import clusterclass as rcc
from capd_py.reconcile import coreutil

TEMPLATE_KINDS = (DOCKER_CLUSTER_TEMPLATE, KUBEADM_CONTROL_PLANE_TEMPLATE, DOCKER_MACHINE_TEMPLATE,
                  KUBEADM_CONFIG_TEMPLATE, DOCKER_MACHINE_POOL_TEMPLATE, gvk.DEV_CLUSTER_TEMPLATE,
                  gvk.DEV_MACHINE_TEMPLATE, gvk.DEV_MACHINE_POOL_TEMPLATE)


def _classes_referencing() -> Mapper:
    """A template event reaches the ClusterClasses of its namespace that name it."""
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        ns = obj["metadata"].get("namespace") or ""
        name, kind = obj["metadata"]["name"], obj.get("kind")
        return [(ns, cc["metadata"]["name"]) for cc in cache.list(CLUSTER_CLASS, ns)
                if any(r.kind == kind and r.name == name for r in rcc.template_refs(cc))]
    return m


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, cc, namespace = ctx.kube, sub.obj, sub.namespace
    missing: list[rcc.TemplateRef] = []
    unknown: list[rcc.TemplateRef] = []
    for ref in rcc.template_refs(cc):
        try:  # through the template's CRD and its contract label, as any reference
            g = (await resolve(ctx, {"apiGroup": gvk.group_of(ref.api_version), "kind": ref.kind})).gvk
        except Unresolved:
            unknown.append(ref)
            continue
        tpl = await kube.get(g, namespace, ref.name)
        if tpl is None:
            missing.append(ref)
        elif not coreutil.is_deleting(tpl):
            await ensure_metadata(kube, g, tpl, owner=contract.owner_ref(cc, controller=False))
    discovered: list[rcc.Discovered] = []
    for call in rcc.discovery_calls(cc, ctx.runtime_sdk.enabled()):
        try:
            response = await ctx.runtime_sdk.call(call.extension, DISCOVER_VARIABLES, call.request, namespace)
            discovered.append(rcc.Discovered(call.patch, response=response))
        except RuntimeSDKError as e:
            discovered.append(rcc.Discovered(call.patch, error=str(e)))
    status = rcc.compute_status(cc, missing, unknown, discovered)
    # an extension not answering (or not registered yet) is asked again, as upstream requeues on the error
    failed = any(d.response is None for d in discovered)
    return Outcome(status=status, requeue_after=ctx.settings.poll_seconds if failed else None)


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    return Outcome()  # the templates go with their owner references


KIND = Kind(CLUSTER_CLASS, reconcile=_reconcile, delete=_delete, cluster_name=None)
reconcile = reconciler(KIND)


def controller() -> Controller:
    m = _classes_referencing()
    return Controller(gvk=CLUSTER_CLASS, reconcile=reconcile, watches=[(g, m) for g in TEMPLATE_KINDS])
