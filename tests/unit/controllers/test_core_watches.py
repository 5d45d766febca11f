"""The core controllers' watch mappers route events on related objects to the right keys."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.controllers import cluster, machine, machinedeployment, machinehealthcheck, machineset
from capd_py.controllers.mappers import Controller
from capd_py.kube.cache import Store

pytestmark = pytest.mark.unit


def keys(c: Controller, g: gvk.GVK, obj: dict) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for wg, mapper in c.watches:
        if wg == g:
            out |= set(mapper(obj, Store()))
    return out


def owned_by(kind: str, name: str, controller: bool = True, labels: dict | None = None) -> dict:
    ref: dict[str, Any] = {"apiVersion": "x/v1", "kind": kind, "name": name, "uid": "u"}
    if controller:
        ref["controller"] = True
    return {"metadata": {"name": "o", "namespace": "ns", "ownerReferences": [ref], "labels": labels or {}}}


def test_primary_kinds() -> None:
    assert [m.controller().gvk for m in (cluster, machine, machineset, machinedeployment, machinehealthcheck)] == \
        [gvk.CLUSTER, gvk.MACHINE, gvk.MACHINE_SET, gvk.MACHINE_DEPLOYMENT, gvk.MACHINE_HEALTH_CHECK]


def test_machineset_watches_its_machines() -> None:
    c = machineset.controller()
    assert keys(c, gvk.MACHINE, owned_by("MachineSet", "ms1")) == {("ns", "ms1")}
    assert keys(c, gvk.MACHINE, owned_by("MachineSet", "ms1", controller=False)) == set()


def test_machinedeployment_watches_machinesets_and_machines() -> None:
    c = machinedeployment.controller()
    assert keys(c, gvk.MACHINE_SET, owned_by("MachineDeployment", "md1")) == {("ns", "md1")}
    m = owned_by("MachineSet", "ms1", labels={"cluster.x-k8s.io/deployment-name": "md1"})
    assert keys(c, gvk.MACHINE, m) == {("ns", "md1")}


def test_machine_watches_bootstrap_and_infra() -> None:
    c = machine.controller()
    for g in (gvk.KUBEADM_CONFIG, gvk.DOCKER_MACHINE):
        assert keys(c, g, owned_by("Machine", "m1")) == {("ns", "m1")}


def test_cluster_watches_by_label_and_owner() -> None:
    c = cluster.controller()
    assert keys(c, gvk.DOCKER_CLUSTER, owned_by("Cluster", "c1", controller=False)) == {("ns", "c1")}
    labelled = {"metadata": {"name": "x", "namespace": "ns", "labels": {"cluster.x-k8s.io/cluster-name": "c2"}}}
    assert keys(c, gvk.KUBEADM_CONTROL_PLANE, labelled) == {("ns", "c2")}
    for g in (gvk.MACHINE, gvk.MACHINE_SET, gvk.MACHINE_DEPLOYMENT):
        assert keys(c, g, labelled) == {("ns", "c2")}


def test_a_control_plane_change_reaches_machinesets_the_preflight_checks_hold() -> None:
    def ms(name: str, msg: str, cluster: str = "c1") -> dict:
        return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1",
                             "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
                "status": {"conditions": [{"type": "ScalingUp", "status": "True", "reason": "ScalingUp",
                                           "message": msg, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    store = Store()
    store.serve(gvk.MACHINE_SET)
    held = 'Scaling up from 0 to 1 replicas is blocked because:\n* KubeadmControlPlane ns/cp is provisioning ' \
           '("ControlPlaneIsStable" preflight check failed)'
    for o in (ms("held", held), ms("scaling", "Scaling up from 0 to 1 replicas"), ms("other", held, "c2")):
        store.observe(gvk.MACHINE_SET, o)
    kcp = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
           "metadata": {"name": "cp", "namespace": "ns", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}}}
    mappers = [m for g, m in machineset.controller().watches if g == gvk.KUBEADM_CONTROL_PLANE]
    assert [k for m in mappers for k in m(kcp, store)] == [("ns", "held")]


def test_machinehealthcheck_watches_the_machines_it_selects() -> None:
    """upstream's machineToMachineHealthCheck: an MHC made before its Machines (a topology Cluster's) hears of them."""
    store = Store()
    store.serve(gvk.MACHINE_HEALTH_CHECK)

    def mhc(name: str, cluster: str, selector: dict) -> dict:
        return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"},
                "spec": {"clusterName": cluster, "selector": selector}}
    for o in (mhc("workers", "c1", {"matchLabels": {"topology.cluster.x-k8s.io/deployment-name": "md-0"}}),
              mhc("cp", "c1", {"matchLabels": {"cluster.x-k8s.io/control-plane": ""}}),
              mhc("other", "c2", {"matchLabels": {"topology.cluster.x-k8s.io/deployment-name": "md-0"}}),
              mhc("empty", "c1", {})):
        store.observe(gvk.MACHINE_HEALTH_CHECK, o)
    [mapper] = [m for g, m in machinehealthcheck.controller().watches if g == gvk.MACHINE]
    worker: dict[str, Any] = {"metadata": {"name": "w", "namespace": "ns", "labels": {
        "topology.cluster.x-k8s.io/deployment-name": "md-0"}}, "spec": {"clusterName": "c1"}}
    assert set(mapper(worker, store)) == {("ns", "workers")}
    cp = {"metadata": {"name": "m", "namespace": "ns", "labels": {"cluster.x-k8s.io/control-plane": ""}},
          "spec": {"clusterName": "c1"}}
    assert set(mapper(cp, store)) == {("ns", "cp")}
    assert set(mapper({**worker, "metadata": {**worker["metadata"], "namespace": "other"}}, store)) == set()
