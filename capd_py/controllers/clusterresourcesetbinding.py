"""ClusterResourceSetBinding controller: a binding whose Cluster is gone or being deleted is deleted
(upstream's clusterresourcesetbinding controller). Bindings are written by the ClusterResourceSet
controller."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, CLUSTER_RESOURCE_SET_BINDING
from capd_py.controllers.context import Ctx
from capd_py.controllers.manager import Controller
from capd_py.controllers.queue import Result
from capd_py.kube.cache import Reader
from capd_py.reconcile import clusterresourceset as rcrs
from capd_py.reconcile import coreutil


def cluster_to_binding(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A Cluster's binding has the Cluster's name."""
    md = obj["metadata"]
    ns = md.get("namespace") or ""
    return [(ns, md["name"])] if cache.get(CLUSTER_RESOURCE_SET_BINDING, ns, md["name"]) is not None else []


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    b = await kube.get(CLUSTER_RESOURCE_SET_BINDING, namespace, name)
    if b is None or coreutil.is_deleting(b):
        return None
    cname = contract.dig(b, "spec", "clusterName") or name
    cluster = await kube.get(CLUSTER, namespace, cname)
    if rcrs.binding_obsolete(b, cluster):
        ctx.log.info("clusterresourcesetbinding %s/%s: deleting, Cluster %s is %s", namespace, name, cname,
                     "gone" if cluster is None else "being deleted")
        await kube.delete(CLUSTER_RESOURCE_SET_BINDING, namespace, name, uid=b["metadata"].get("uid"))
    return None


def controller() -> Controller:
    return Controller(gvk=CLUSTER_RESOURCE_SET_BINDING, reconcile=reconcile, watches=[(CLUSTER, cluster_to_binding)])
