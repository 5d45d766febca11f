"""MachinePool / DockerMachinePool watch mappers: events on related objects reach the right keys."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.api.labels import CLUSTER_NAME, MACHINE_POOL_NAME
from capd_py.controllers import dockermachinepool, kubeadmconfig, machine, machinepool
from capd_py.controllers.mappers import Controller
from capd_py.kube.cache import Store

pytestmark = pytest.mark.unit


def keys(c: Controller, g: gvk.GVK, obj: dict[str, Any], store: Store) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for wg, mapper in c.watches:
        if wg == g:
            out |= set(mapper(obj, store))
    return out


def pool() -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "c1-mp-0", "namespace": "ns", "uid": "uid-mp", "resourceVersion": "1",
                         "labels": {CLUSTER_NAME: "c1"}},
            "spec": {"clusterName": "c1", "template": {"spec": {
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                            "name": "c1-mp-0-config"}},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool",
                                      "name": "c1-dmp-0"}}}}}


def store_with_pool() -> Store:
    s = Store()
    for g in (gvk.MACHINE_POOL, gvk.MACHINE):
        s.serve(g)
    s.observe(gvk.MACHINE_POOL, pool())
    return s


def pool_member(kind: str, owner_kind: str | None = None, owner_uid: str = "uid-x") -> dict[str, Any]:
    md: dict[str, Any] = {"name": "c1-mp-0-abcde", "namespace": "ns", "uid": "uid-m", "resourceVersion": "1",
                          "labels": {MACHINE_POOL_NAME: "c1-mp-0", CLUSTER_NAME: "c1"}}
    if owner_kind:
        md["ownerReferences"] = [{"apiVersion": "x/v1", "kind": owner_kind, "name": "c1-mp-0" if owner_kind ==
                                  "MachinePool" else "c1-dmp-0", "uid": owner_uid, "controller": True}]
    return {"apiVersion": "x/v1", "kind": kind, "metadata": md}


def test_machine_pool_controller_watches() -> None:
    c, s = machinepool.controller(), store_with_pool()
    assert c.gvk == gvk.MACHINE_POOL
    assert keys(c, gvk.DOCKER_MACHINE, pool_member("DockerMachine"), s) == {("ns", "c1-mp-0")}
    assert keys(c, gvk.MACHINE, pool_member("Machine", "MachinePool"), s) == {("ns", "c1-mp-0")}
    assert keys(c, gvk.DOCKER_MACHINE_POOL, pool_member("DockerMachinePool", "MachinePool"), s) == \
        {("ns", "c1-mp-0")}
    cluster = {"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}}
    assert keys(c, gvk.CLUSTER, cluster, s) == {("ns", "c1-mp-0")}
    other = pool_member("DockerMachine")
    other["metadata"]["labels"][MACHINE_POOL_NAME] = "other"
    assert keys(c, gvk.DOCKER_MACHINE, other, s) == set()


def test_docker_machine_pool_controller_watches() -> None:
    c, s = dockermachinepool.controller(), store_with_pool()
    assert c.gvk == gvk.DOCKER_MACHINE_POOL
    assert keys(c, gvk.MACHINE_POOL, pool(), s) == {("ns", "c1-dmp-0")}
    dm = pool_member("DockerMachine")
    dm["metadata"]["ownerReferences"] = [{"apiVersion": "x/v1", "kind": "DockerMachinePool", "name": "c1-dmp-0",
                                          "uid": "u"}]
    assert keys(c, gvk.DOCKER_MACHINE, dm, s) == {("ns", "c1-dmp-0")}
    assert keys(c, gvk.MACHINE, pool_member("Machine", "MachinePool"), s) == {("ns", "c1-dmp-0")}
    assert keys(c, gvk.CLUSTER, {"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}}, s) == \
        {("ns", "c1-dmp-0")}


def test_kubeadm_config_and_machine_hear_of_their_pool() -> None:
    s = store_with_pool()
    assert keys(kubeadmconfig.controller(), gvk.MACHINE_POOL, pool(), s) == {("ns", "c1-mp-0-config")}
    s.observe(gvk.MACHINE, pool_member("Machine", "MachinePool", owner_uid="uid-mp"))
    assert keys(machine.controller(), gvk.MACHINE_POOL, pool(), s) == {("ns", "c1-mp-0-abcde")}
