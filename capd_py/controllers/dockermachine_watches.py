"""Which DockerMachines an event concerns (the DockerMachine controller's watches): its Machine, its Cluster and
DockerCluster, a workload Node still without its providerID. Mappers read the Store, never do I/O."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE, INFRA_GROUP, MACHINE
from capd_py.api.labels import CLUSTER_NAME
from capd_py.kube.cache import Reader
from capd_py.reconcile import dockermachine as dmr


def machine_to_docker_machine(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "infrastructureRef")
    if r and r["kind"] == DOCKER_MACHINE.kind and r["apiGroup"] in (INFRA_GROUP, ""):
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def cluster_to_docker_machines(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A Cluster / DockerCluster event reaches the cluster's DockerMachines: those labelled with the
    cluster name, and the infrastructureRefs of the cluster's Machines (a DockerMachine not labelled yet)."""
    md = obj.get("metadata") or {}
    ns = md.get("namespace") or ""
    cname = md["name"] if obj.get("kind") == CLUSTER.kind else (md.get("labels") or {}).get(CLUSTER_NAME)
    if not cname and obj.get("kind") == DOCKER_CLUSTER.kind:
        o = contract.controller_owner(obj, "Cluster")
        cname = o["name"] if o else None
    if not cname:
        return []
    out = {(ns, dm["metadata"]["name"]) for dm in cache.list(DOCKER_MACHINE, ns, labels={CLUSTER_NAME: cname})}
    for m in cache.list(MACHINE, ns, labels={CLUSTER_NAME: cname}):
        out.update(machine_to_docker_machine(m, cache))
    return sorted(out)


def node_to_docker_machine(namespace: str, cluster: str, node: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A workload Node without its providerID brings back the DockerMachine whose container registered it."""
    machines = {m["metadata"]["name"]: m for m in cache.list(MACHINE, namespace, labels={CLUSTER_NAME: cluster})}
    out: list[tuple[str, str]] = []
    for n in dmr.machines_awaiting_provider_id(cluster, list(machines.values()), node):
        out.extend(machine_to_docker_machine(machines[n], cache))
    return out
