"""The ClusterResourceSet controllers' watch mappers: Cluster / ConfigMap / Secret events reach the
ClusterResourceSets that select / list them (read from the Store, no I/O); a Cluster's events reach its
binding."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.controllers import clusterresourceset, clusterresourcesetbinding
from capd_py.controllers.mappers import Controller
from capd_py.kube.cache import Store

pytestmark = pytest.mark.unit


def crs(name: str, labels: dict[str, str], resources: list[tuple[str, str]], ns: str = "ns") -> dict[str, Any]:
    return {"apiVersion": gvk.CLUSTER_RESOURCE_SET.api_version, "kind": "ClusterResourceSet",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1"},
            "spec": {"clusterSelector": {"matchLabels": labels},
                     "resources": [{"kind": k, "name": n} for k, n in resources]}}


def obj(name: str, labels: dict[str, str] | None = None, ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "labels": labels or {}, "resourceVersion": "1"}}


@pytest.fixture
def store() -> Store:
    s = Store()
    s.replace(gvk.CLUSTER_RESOURCE_SET, [
        crs("cni", {"cni": "calico"}, [("ConfigMap", "calico"), ("Secret", "creds")]),
        crs("all", {"env": "dev"}, [("ConfigMap", "calico")]),
        crs("empty", {}, [("ConfigMap", "calico")]),
        crs("elsewhere", {"cni": "calico"}, [("ConfigMap", "calico")], ns="other"),
    ])
    s.replace(gvk.CLUSTER_RESOURCE_SET_BINDING, [obj("c1")])
    return s


def keys(c: Controller, g: gvk.GVK, o: dict[str, Any], store: Store) -> set[tuple[str, str]]:
    return {k for wg, m in c.watches if wg == g for k in m(o, store)}


def test_cluster_events_reach_the_sets_that_select_it(store: Store) -> None:
    c = clusterresourceset.controller()
    assert c.gvk == gvk.CLUSTER_RESOURCE_SET
    assert keys(c, gvk.CLUSTER, obj("c1", {"cni": "calico", "env": "dev"}), store) == {("ns", "cni"), ("ns", "all")}
    assert keys(c, gvk.CLUSTER, obj("c1", {"cni": "cilium"}), store) == set()


def test_configmap_and_secret_events_reach_the_sets_that_list_them(store: Store) -> None:
    c = clusterresourceset.controller()
    assert keys(c, gvk.CONFIG_MAP, obj("calico"), store) == {("ns", "cni"), ("ns", "all"), ("ns", "empty")}
    assert keys(c, gvk.SECRET, obj("creds"), store) == {("ns", "cni")}
    assert keys(c, gvk.SECRET, obj("calico"), store) == set()  # the kind counts
    assert keys(c, gvk.CONFIG_MAP, obj("unrelated"), store) == set()


def test_cluster_events_reach_its_binding(store: Store) -> None:
    c = clusterresourcesetbinding.controller()
    assert c.gvk == gvk.CLUSTER_RESOURCE_SET_BINDING
    assert keys(c, gvk.CLUSTER, obj("c1"), store) == {("ns", "c1")}
    assert keys(c, gvk.CLUSTER, obj("c2"), store) == set()


def test_registered() -> None:
    from capd_py.controllers.registry import all_controllers

    kinds = [c.gvk for c in all_controllers()]
    assert gvk.CLUSTER_RESOURCE_SET in kinds and gvk.CLUSTER_RESOURCE_SET_BINDING in kinds
