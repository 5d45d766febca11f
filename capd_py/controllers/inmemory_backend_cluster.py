"""A DevCluster's `inMemory` backend (upstream v1.14's in-memory cluster backend): no network, no load balancer;
the cluster's workload API is an in-memory store in this process (`ctx.workload.in_memory_cluster`,
capd_py/kube/inmemory_api.py) that every controller reaching the cluster through `ctx.workload` gets, and that users
reach over HTTPS at the endpoint: a port of this process's in-memory server (capd_py/kube/inmemory_api_server.py), given
here, listened on once the first control-plane machine's API server exists
(capd_py/controllers/inmemory_backend_machine.py).
"""

from __future__ import annotations

import logging

from capd_py.api import contract
from capd_py.api.gvk import DEV_CLUSTER
from capd_py.controllers import dockercluster, inmemory_backend_machine
from capd_py.controllers.context import Ctx
from capd_py.controllers.skeleton import Outcome, Subject
from capd_py.reconcile import inmemory_backend

log = logging.getLogger("capd_py.devcluster.inmemory")


async def reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    dc, ns = sub.obj, sub.namespace
    cluster_name = dockercluster.cluster_name_of(dc)
    if not cluster_name or sub.cluster is None:
        return Outcome(requeue_after=ctx.settings.poll_seconds)
    (await inmemory_backend_machine.cluster_store(ctx, ns, cluster_name)).infrastructure = sub.name
    server = ctx.workload.in_memory_server(ctx.settings.in_memory_host, ctx.settings.in_memory_ports)
    current = contract.control_plane_endpoint(dc)
    want, serves = inmemory_backend.listener_port(current, server.host)
    if serves:
        try:
            port = server.assign(ns, cluster_name, want)
        except OSError as e:  # the endpoint's port is another process's now (or the range is used up): retry
            log.warning("%s/%s: cannot bind the in-memory cluster's port: %s", ns, sub.name, e)
            return Outcome(requeue_after=ctx.settings.poll_seconds)
        if current is None:
            dc = await ctx.kube.merge_patch(DEV_CLUSTER, ns, sub.name, {
                "metadata": {"resourceVersion": dc["metadata"]["resourceVersion"]},
                "spec": {"controlPlaneEndpoint": inmemory_backend.endpoint(server.host, port)}})
            log.info("%s/%s: in-memory workload cluster %s at %s", ns, sub.name, cluster_name, server.address(port))
    return Outcome(status=inmemory_backend.cluster_status(dc), obj=dc)


async def delete(ctx: Ctx, sub: Subject) -> Outcome:
    """The in-memory workload cluster goes with its DevCluster (its machines are gone by then: the Cluster deletes
    the infrastructure cluster last)."""
    cluster_name = dockercluster.cluster_name_of(sub.obj)
    if cluster_name:
        await _drop(ctx, sub.namespace, cluster_name)
    return Outcome()


async def gone(ctx: Ctx, namespace: str, name: str) -> None:
    """The DevCluster `name` no longer exists and its deletion did not run here: a move (clusterctl's or capd-py's)
    took it to another management cluster paused, removing its finalizer. Its in-memory workload cluster leaves this
    process too: the port is given back, so the target's controllers can bind the same endpoint and rebuild the
    cluster there (its DevMachines make their Nodes, Pods and etcd members again), and this process keeps no store
    nobody reconciles. Clusters of a DevCluster that never reconciled here (no name recorded) are left alone."""
    for api in ctx.workload.in_memory.all():
        if api.namespace == namespace and api.infrastructure == name:
            log.info("%s/%s: gone without its deletion here (moved): in-memory workload cluster %s released",
                     namespace, name, api.cluster)
            await _drop(ctx, namespace, api.cluster)


async def _drop(ctx: Ctx, namespace: str, cluster_name: str) -> None:
    server = ctx.workload.in_memory_server(ctx.settings.in_memory_host, ctx.settings.in_memory_ports)
    await server.release(namespace, cluster_name)
    ctx.workload.in_memory.remove(namespace, cluster_name)
    ctx.workload.forget(namespace, cluster_name)
