"""The KCP hears of the Machines it may adopt: a control-plane Machine without a controller reaches its Cluster's
KCP (through the cached Cluster's controlPlaneRef); an owned one its owner; a worker or a controlled one nobody."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.controllers import kubeadmcontrolplane as kcp
from capd_py.kube.cache import Store
from capd_py.testing import builders

pytestmark = pytest.mark.unit

CLUSTER = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
           "metadata": {"name": "c1", "namespace": "ns", "resourceVersion": "1"},
           "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
                                        "name": "c1-cp"}}}


def machine(cp: bool = True, owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return builders.machine("m", control_plane=cp, owners=owners or [])


def keys(obj: dict[str, Any], store: Store) -> set[tuple[str, str]]:
    [mapper] = [m for g, m in kcp.controller().watches if g == gvk.MACHINE]
    return set(mapper(obj, store))


def test_adoptable_machine_reaches_its_clusters_kcp() -> None:
    s = Store()
    s.serve(gvk.CLUSTER)
    s.observe(gvk.CLUSTER, CLUSTER)
    cluster_owner = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "u"}
    assert keys(machine(owners=[cluster_owner]), s) == {("ns", "c1-cp")}
    assert keys(machine(cp=False), s) == set()
    ms_owner = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms", "uid": "x",
                "controller": True}
    assert keys(machine(owners=[ms_owner]), s) == set()
    kcp_owner = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
                 "name": "other-cp", "uid": "k", "controller": True}
    assert keys(machine(owners=[kcp_owner]), s) == {("ns", "other-cp")}
    assert keys(machine(), Store()) == set()  # the Cluster not cached (yet): its own event brings the KCP
