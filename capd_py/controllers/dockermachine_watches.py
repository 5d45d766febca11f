"""Which infrastructure machines an event concerns (the DockerMachine controller's watches, and a DevMachine's with
the same functions over the Dev* kinds): its Machine, its Cluster and infrastructure cluster, a workload Node still
without its providerID. Mappers read the Store, never do I/O."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, GVK, INFRA_GROUP, MACHINE
from capd_py.api.infrakinds import DOCKER, InfraKinds
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.mappers import Mapper, NodeMapper
from capd_py.kube.cache import Reader
from capd_py.reconcile import dockermachine as dmr

Keys = list[tuple[str, str]]


def machine_mapper(k: InfraKinds) -> Callable[[dict[str, Any], Reader], Keys]:
    def machine_to_infra_machine(obj: dict[str, Any], cache: Reader) -> Keys:
        r = contract.ref(obj, "spec", "infrastructureRef")
        if r and r["kind"] == k.machine.kind and r["apiGroup"] in (INFRA_GROUP, ""):
            return [(obj["metadata"].get("namespace") or "", r["name"])]
        return []
    return machine_to_infra_machine


def cluster_mapper(k: InfraKinds) -> Mapper:
    """A Cluster / infrastructure cluster event reaches the cluster's machines of kind `k.machine`: those labelled
    with the cluster name, and the infrastructureRefs of the cluster's Machines (a machine not labelled yet)."""
    to_machine = machine_mapper(k)

    def cluster_to_infra_machines(obj: dict[str, Any], cache: Reader) -> Keys:
        md = obj.get("metadata") or {}
        ns = md.get("namespace") or ""
        cname = md["name"] if obj.get("kind") == CLUSTER.kind else (md.get("labels") or {}).get(CLUSTER_NAME)
        if not cname and obj.get("kind") == k.cluster.kind:
            o = contract.controller_owner(obj, "Cluster")
            cname = o["name"] if o else None
        if not cname:
            return []
        out = {(ns, dm["metadata"]["name"]) for dm in cache.list(k.machine, ns, labels={CLUSTER_NAME: cname})}
        for m in cache.list(MACHINE, ns, labels={CLUSTER_NAME: cname}):
            out.update(to_machine(m, cache))
        return sorted(out)
    return cluster_to_infra_machines


def node_mapper(k: InfraKinds) -> NodeMapper:
    """A workload Node without its providerID brings back the machine whose container registered it."""
    to_machine = machine_mapper(k)

    def node_to_infra_machine(namespace: str, cluster: str, node: dict[str, Any], cache: Reader) -> Keys:
        machines = {m["metadata"]["name"]: m for m in cache.list(MACHINE, namespace, labels={CLUSTER_NAME: cluster})}
        out: Keys = []
        for n in dmr.machines_awaiting_provider_id(cluster, list(machines.values()), node):
            out.extend(to_machine(machines[n], cache))
        return out
    return node_to_infra_machine


def watches(k: InfraKinds) -> list[tuple[GVK, Mapper]]:
    to_machines = cluster_mapper(k)
    return [(MACHINE, machine_mapper(k)), (CLUSTER, to_machines), (k.cluster, to_machines)]


# the DockerMachine controller's mappers, by their former names (tests and other modules use them)
machine_to_docker_machine = machine_mapper(DOCKER)
cluster_to_docker_machines = cluster_mapper(DOCKER)
node_to_docker_machine = node_mapper(DOCKER)
