"""A DevCluster's `inMemory` backend (upstream v1.14's in-memory cluster backend): no network, no load balancer;
the cluster's workload API is an in-memory store in this process (`ctx.workload.in_memory_cluster`,
capd_py/kube/inmemory.py) that every controller reaching the cluster through `ctx.workload` gets. The endpoint is a
name that resolves nowhere (`<cluster>.<namespace>.in-memory.invalid:6443`, capd_py/reconcile/inmemory.py): the
workload cluster is reachable by the controllers only, as upstream's is reachable through its manager's listener.
"""

from __future__ import annotations

import logging

from capd_py.api import contract
from capd_py.api.gvk import DEV_CLUSTER
from capd_py.controllers import dockercluster
from capd_py.controllers.context import Ctx
from capd_py.controllers.skeleton import Outcome, Subject
from capd_py.reconcile import inmemory

log = logging.getLogger("capd_py.devcluster.inmemory")


async def reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    dc, ns = sub.obj, sub.namespace
    cluster_name = dockercluster.cluster_name_of(dc)
    if not cluster_name or sub.cluster is None:
        return Outcome(requeue_after=ctx.settings.poll_seconds)
    ctx.workload.in_memory_cluster(ns, cluster_name)
    if contract.control_plane_endpoint(dc) is None:
        dc = await ctx.kube.merge_patch(DEV_CLUSTER, ns, sub.name, {
            "metadata": {"resourceVersion": dc["metadata"]["resourceVersion"]},
            "spec": {"controlPlaneEndpoint": inmemory.endpoint(ns, cluster_name)}})
        log.info("%s/%s: in-memory workload cluster %s ready", ns, sub.name, cluster_name)
    return Outcome(status=inmemory.cluster_status(dc), obj=dc)


async def delete(ctx: Ctx, sub: Subject) -> Outcome:
    """The in-memory workload cluster goes with its DevCluster (its machines are gone by then: the Cluster deletes
    the infrastructure cluster last)."""
    cluster_name = dockercluster.cluster_name_of(sub.obj)
    if cluster_name:
        ctx.workload.in_memory.remove(sub.namespace, cluster_name)
        ctx.workload.forget(sub.namespace, cluster_name)
    return Outcome()
