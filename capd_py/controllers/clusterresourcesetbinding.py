"""ClusterResourceSetBinding controller: a binding whose Cluster is gone or being deleted is deleted
(upstream's clusterresourcesetbinding controller). Bindings are written by the ClusterResourceSet
controller."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract, features
from capd_py.api.gvk import CLUSTER, CLUSTER_RESOURCE_SET_BINDING
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube.cache import Reader
from capd_py.reconcile import clusterresourceset as rcrs


def cluster_to_binding(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A Cluster's binding has the Cluster's name."""
    md = obj["metadata"]
    ns = md.get("namespace") or ""
    return [(ns, md["name"])] if cache.get(CLUSTER_RESOURCE_SET_BINDING, ns, md["name"]) is not None else []


def _cluster_name(b: dict[str, Any]) -> str:
    return str(contract.dig(b, "spec", "clusterName") or b["metadata"]["name"])


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    hooks_gate = ctx.settings.enabled(features.RUNTIME_SDK) and ctx.settings.enabled(features.CLUSTER_TOPOLOGY)
    if rcrs.binding_obsolete(sub.obj, sub.cluster, hooks_gate):
        ctx.log.info("clusterresourcesetbinding %s/%s: deleting, Cluster %s is %s", sub.namespace, sub.name,
                     _cluster_name(sub.obj), "gone" if sub.cluster is None else "being deleted")
        await ctx.kube.delete(CLUSTER_RESOURCE_SET_BINDING, sub.namespace, sub.name,
                              uid=sub.obj["metadata"].get("uid"))
    return Outcome()


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    return Outcome()  # nothing of ours to clean up


KIND = Kind(CLUSTER_RESOURCE_SET_BINDING, reconcile=_reconcile, delete=_delete, cluster_name=_cluster_name,
            pausable=False)
reconcile = reconciler(KIND)


def controller() -> Controller:
    return Controller(gvk=CLUSTER_RESOURCE_SET_BINDING, reconcile=reconcile, watches=[(CLUSTER, cluster_to_binding)])
