"""The clusterctl provider inventory capd-py records (reconcile/inventory.py): what upstream clusterctl's
`init` would have written for core, bootstrap kubeadm, control-plane kubeadm and infrastructure docker."""

from __future__ import annotations

import pytest

from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.reconcile import inventory

pytestmark = pytest.mark.unit


def test_providers_as_clusterctl_init_records_them() -> None:
    got = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in inventory.desired_providers()}
    assert sorted(got) == [("capd-system", "infrastructure-docker"),
                           ("capi-kubeadm-bootstrap-system", "bootstrap-kubeadm"),
                           ("capi-kubeadm-control-plane-system", "control-plane-kubeadm"),
                           ("capi-system", "cluster-api")]
    core = got[("capi-system", "cluster-api")]
    assert core["apiVersion"] == "clusterctl.cluster.x-k8s.io/v1alpha3" and core["kind"] == "Provider"
    assert (core["providerName"], core["type"], core["version"]) == ("cluster-api", "CoreProvider", CLUSTER_API_VERSION)
    docker = got[("capd-system", "infrastructure-docker")]
    assert (docker["providerName"], docker["type"]) == ("docker", "InfrastructureProvider")
    assert got[("capi-kubeadm-bootstrap-system", "bootstrap-kubeadm")]["type"] == "BootstrapProvider"
    assert got[("capi-kubeadm-control-plane-system", "control-plane-kubeadm")]["type"] == "ControlPlaneProvider"
    for (_, name), p in got.items():
        assert p["metadata"]["labels"] == {"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": name,
                                           "clusterctl.cluster.x-k8s.io/core": "inventory"}


def test_version_is_semver_with_v() -> None:
    # clusterctl parses it (move compares source and target versions; upgrade plan finds its release series)
    assert CLUSTER_API_VERSION.startswith("v1.13.")
    assert all(p["version"] == "v9.9.9" for p in inventory.desired_providers("v9.9.9"))


def test_namespaces_cover_every_provider() -> None:
    names = {n["metadata"]["name"] for n in inventory.namespaces()}
    assert names == {p["metadata"]["namespace"] for p in inventory.desired_providers()}


def test_crd_serves_what_clusterctl_reads() -> None:
    crd = inventory.provider_crd()
    assert crd["metadata"]["name"] == "providers.clusterctl.cluster.x-k8s.io"
    assert crd["metadata"]["labels"]["clusterctl.cluster.x-k8s.io/core"] == "inventory"
    # not labelled clusterctl.cluster.x-k8s.io: a move must not take the inventory along
    assert "clusterctl.cluster.x-k8s.io" not in crd["metadata"]["labels"]
    (v,) = crd["spec"]["versions"]
    assert v["name"] == "v1alpha3" and v["served"] and v["storage"]
    props = v["schema"]["openAPIV3Schema"]["properties"]
    assert {"providerName", "type", "version", "watchedNamespace"} <= set(props)
