"""A DevMachine's `inMemory` backend (upstream v1.14's in-memory machine backend): no container. The machine's VM
record, Node, etcd member and control-plane Pods are written into its cluster's in-memory workload API
(capd_py/kube/inmemory_api.py) when capd_py/reconcile/inmemory_backend.py says their startup time has come; the Machine,
KubeadmControlPlane and Cluster controllers then find them as they find a real cluster's."""

from __future__ import annotations

import logging
from typing import Any

from capd_py.api import contract, infrakinds
from capd_py.api.gvk import DEV_MACHINE, MACHINE, SECRET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.skeleton import Outcome, Subject
from capd_py.kube.inmemory_api import KUBE_SYSTEM, InMemoryAPI
from capd_py.reconcile import certs, coreutil, inmemory_backend
from capd_py.reconcile.coreutil import utcnow

log = logging.getLogger("capd_py.devmachine.inmemory")

VM_RESOURCE = "cloudmachines"  # upstream's in-memory cloud keeps a CloudMachine per VM
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def _observe(api: InMemoryAPI, o: inmemory_backend.Observed) -> inmemory_backend.Observed:
    name = inmemory_backend.node_name(o.dm)
    vm = api.object(VM_RESOURCE, None, name)
    return inmemory_backend.Observed(
        o.dm, o.machine, o.cluster, o.now,
        vm_created=coreutil.parse_time((vm or {}).get("metadata", {}).get("creationTimestamp")),
        node=api.object("nodes", None, name) is not None,
        etcd=api.object("pods", KUBE_SYSTEM, f"etcd-{name}") is not None,
        api_server=api.object("pods", KUBE_SYSTEM, f"kube-apiserver-{name}") is not None)


async def reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    dm, cluster, ns = sub.obj, sub.cluster, sub.namespace
    owner = contract.controller_owner(dm, "Machine")
    machine = await ctx.kube.get(MACHINE, ns, owner["name"]) if owner else None
    if machine is None or cluster is None:
        return Outcome(requeue_after=ctx.settings.poll_seconds)
    api = await cluster_store(ctx, ns, cluster["metadata"]["name"])
    obs = _observe(api, inmemory_backend.Observed(dm, machine, cluster, utcnow()))
    plan = inmemory_backend.decide(obs)
    if plan.provider_id:
        dm = await ctx.kube.merge_patch(DEV_MACHINE, ns, sub.name, {
            "metadata": {"resourceVersion": dm["metadata"]["resourceVersion"]},
            "spec": {"providerID": plan.provider_id}})
    _make(api, dm, machine, inmemory_backend.Restore(plan.create_vm, plan.create_node, plan.create_etcd,
                                             plan.create_api_server))
    await _serve(ctx, ns, cluster["metadata"]["name"], obs, plan)
    return Outcome(status=plan.status, obj=dm, requeue_after=plan.requeue_after)


def _make(api: InMemoryAPI, dm: dict[str, Any], machine: dict[str, Any], parts: inmemory_backend.Restore) -> None:
    """Write the machine's parts into its cluster's store, in order: the VM record, the Node, the etcd Pod and
    member, the control-plane Pods (with the first one what `kubeadm init` uploads)."""
    name, version = inmemory_backend.node_name(dm), str(contract.dig(machine, "spec", "version") or "")
    cp = "cluster.x-k8s.io/control-plane" in ((machine.get("metadata") or {}).get("labels") or {})
    if parts.vm:
        api.put_object(VM_RESOURCE, {"apiVersion": "virtual.cluster.x-k8s.io/v1alpha1", "kind": "CloudMachine",
                                     "metadata": {"name": name}})
    if parts.node:
        api.add_node(name, inmemory_backend.provider_id(dm), cp, version, taints=[CONTROL_PLANE_TAINT] if cp else None)
        log.info("%s/%s: in-memory Node %s", api.namespace, dm["metadata"]["name"], name)
    if parts.etcd:
        api.add_static_pods(name, ["etcd"])
        api.etcd.add(name)
    if parts.api_server:
        api.add_static_pods(name, inmemory_backend.CONTROL_PLANE_PODS)
        api.add_kubeadm_objects(version)


async def cluster_store(ctx: Ctx, ns: str, cluster_name: str) -> InMemoryAPI:
    """The cluster's in-memory workload store; when this process has none yet (it restarted, or the cluster moved in
    from another management cluster) it is made with what the cluster's provisioned machines had in it
    (`inmemory_backend.restore`), before anyone else reads it (no await between making it and filling it)."""
    api = ctx.workload.in_memory.get(ns, cluster_name)
    if api is not None:
        return api
    dms = await ctx.kube.list(DEV_MACHINE, ns, labels={CLUSTER_NAME: cluster_name})
    machines = {m["metadata"]["name"]: m for m in await ctx.kube.list(MACHINE, ns, labels={CLUSTER_NAME: cluster_name})}
    api = ctx.workload.in_memory.get(ns, cluster_name)
    if api is not None:  # made by another pass meanwhile
        return api
    api = ctx.workload.in_memory_cluster(ns, cluster_name)
    restored = []
    for dm in dms:
        if infrakinds.backend(dm) != infrakinds.BACKEND_IN_MEMORY:
            continue
        owner = contract.controller_owner(dm, "Machine")
        machine = machines.get(owner["name"]) if owner else None
        parts = inmemory_backend.restore(dm, machine)
        if machine is not None and parts.vm:
            _make(api, dm, machine, parts)
            restored.append(dm["metadata"]["name"])
    if restored:
        log.info("%s/%s: in-memory workload cluster made again with the machines it had: %s", ns, cluster_name,
                 ", ".join(sorted(restored)))
    return api


async def _serve(ctx: Ctx, ns: str, cluster_name: str, obs: inmemory_backend.Observed,
                 plan: inmemory_backend.Plan) -> None:
    """The cluster's first API server opens its HTTPS listener, with a certificate signed by the cluster's CA (the
    `<cluster>-ca` Secret, made by KCP before any machine)."""
    server = ctx.workload.in_memory_server(ctx.settings.in_memory_host, ctx.settings.in_memory_ports)
    if server.port(ns, cluster_name) is None or \
            not inmemory_backend.should_serve(obs, plan, server.serving(ns, cluster_name)):
        return
    ca = certs.keypair_from_secret(await ctx.kube.get(SECRET, ns, certs.secret_name(cluster_name, "ca")))
    if ca is None or not ca.key:
        log.info("%s/%s: no CA Secret with a key: the in-memory API server waits", ns, cluster_name)
        return
    await server.serve(ns, cluster_name, ca)


async def delete(ctx: Ctx, sub: Subject) -> Outcome:
    """The VM goes, with its Node, the Node's Pods and its etcd member (if KCP has not removed it first)."""
    dm, ns = sub.obj, sub.namespace
    cluster_name = _cluster_name(dm, sub.cluster)
    api = ctx.workload.in_memory.get(ns, cluster_name) if cluster_name else None
    if api is None:
        return Outcome()
    name = inmemory_backend.node_name(dm)
    for resource, namespace in (("nodes", None), (VM_RESOURCE, None)):
        api.remove_object(resource, namespace, name)
    for m in [m for m in api.etcd.members.values() if m.name == name]:
        api.etcd.members.pop(m.id, None)
    if not api.call("GET", f"/api/v1/namespaces/{KUBE_SYSTEM}/pods",
                    query=[("labelSelector", "component=kube-apiserver")])["items"]:
        # the last API server is gone: the listener closes (upstream DeleteAPIServer); the port stays the cluster's
        server = ctx.workload.in_memory_server(ctx.settings.in_memory_host, ctx.settings.in_memory_ports)
        await server.stop(ns, cluster_name)
    return Outcome()


def _cluster_name(dm: dict[str, Any], cluster: dict[str, Any] | None) -> str:
    if cluster is not None:
        return str(cluster["metadata"]["name"])
    return str(((dm.get("metadata") or {}).get("labels") or {}).get("cluster.x-k8s.io/cluster-name") or "")
