"""Upstream CAPD v1.13's DockerCluster / DockerClusterTemplate defaulting webhooks (defaultDockerClusterSpec), and
that no other Docker kind gets a webhook default (upstream has none)."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.admission import KINDS, docker, json_patch

pytestmark = pytest.mark.unit


def dc(spec: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster",
                           "metadata": {"name": "dc"}}
    if spec is not None:
        out["spec"] = spec
    return out


def dct(spec: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerClusterTemplate",
                           "metadata": {"name": "dct"}}
    if spec is not None:
        out["spec"] = {"template": {"spec": spec}}
    return out


@pytest.mark.parametrize("spec", [None, {}, {"controlPlaneEndpoint": {}}, {"controlPlaneEndpoint": {"port": 0}}])
def test_endpoint_port_defaults_to_6443(spec: Any) -> None:
    assert docker.default_dockercluster(dc(spec))["spec"]["controlPlaneEndpoint"] == {"port": 6443}
    assert docker.default_dockerclustertemplate(dct(spec))["spec"]["template"]["spec"]["controlPlaneEndpoint"] == {
        "port": 6443}


def test_given_endpoint_is_kept() -> None:
    spec = {"controlPlaneEndpoint": {"host": "10.0.0.1", "port": 7443}}
    assert docker.default_dockercluster(dc(spec))["spec"]["controlPlaneEndpoint"] == spec["controlPlaneEndpoint"]
    got = docker.default_dockercluster(dc({"controlPlaneEndpoint": {"host": "10.0.0.1"}}))
    assert got["spec"]["controlPlaneEndpoint"] == {"host": "10.0.0.1", "port": 6443}


def test_failure_domains_control_plane_defaults_to_false() -> None:
    spec = {"failureDomains": [{"name": "a"}, {"name": "b", "controlPlane": True},
                               {"name": "c", "controlPlane": False, "attributes": {"k": "v"}}]}
    want = [{"name": "a", "controlPlane": False}, {"name": "b", "controlPlane": True},
            {"name": "c", "controlPlane": False, "attributes": {"k": "v"}}]
    assert docker.default_dockercluster(dc(spec))["spec"]["failureDomains"] == want
    assert docker.default_dockerclustertemplate(dct(spec))["spec"]["template"]["spec"]["failureDomains"] == want
    obj = dc(spec)
    docker.default_dockercluster(obj)
    assert obj["spec"]["failureDomains"][0] == {"name": "a"}  # the input is not changed


def test_defaulting_is_idempotent_and_patched() -> None:
    once = docker.default_dockercluster(dc({"failureDomains": [{"name": "a"}]}))
    assert docker.default_dockercluster(once) == once
    assert json_patch(once, docker.default_dockercluster(once)) == []
    assert json_patch(dc(), docker.default_dockercluster(dc())) == [
        {"op": "add", "path": "/spec", "value": {"controlPlaneEndpoint": {"port": 6443}, "loadBalancer": {}}}]


def test_template_stored_before_defaulting_can_be_applied_unchanged() -> None:
    """spec.template.spec is immutable (CEL): an unchanged re-apply of a template stored undefaulted must pass."""
    old = dct({"failureDomains": [{"name": "a"}]})
    assert docker.default_dockerclustertemplate(dct({"failureDomains": [{"name": "a"}]}), old) == old
    changed = docker.default_dockerclustertemplate(dct({"failureDomains": [{"name": "b"}]}), old)
    assert changed["spec"]["template"]["spec"]["failureDomains"] == [{"name": "b", "controlPlane": False}]


def test_only_docker_cluster_kinds_are_defaulted() -> None:
    """As upstream CAPD: DockerMachine, DockerMachineTemplate and DockerMachinePool(Template) have no defaulting
    webhook (their only defaults are run-time ones of the controllers)."""
    defaulted = {k.kind for k in KINDS if k.group == "infrastructure.cluster.x-k8s.io" and k.default is not None
                 and k.kind.startswith("Docker")}
    assert defaulted == {"DockerCluster", "DockerClusterTemplate"}


def test_a_null_failure_domain_becomes_an_empty_one_as_gos_decoder_makes_it() -> None:
    from capd_py.api.admission.docker import default_dockercluster
    out = default_dockercluster({"spec": {"failureDomains": [None, {"name": "fd1"}]}})
    assert out["spec"]["failureDomains"] == [{"controlPlane": False}, {"name": "fd1", "controlPlane": False}]


def test_load_balancer_is_an_empty_object_when_unset_as_upstreams_go_encoding_answers() -> None:
    """Upstream's webhook re-encodes the object from its Go type, where spec.loadBalancer is a struct that omitempty
    never drops: a DockerCluster(Template) is stored with `loadBalancer: {}` (the admission oracle found it)."""
    assert docker.default_dockercluster(dc())["spec"]["loadBalancer"] == {}
    assert docker.default_dockercluster(dc({"loadBalancer": None}))["spec"]["loadBalancer"] == {}
    assert docker.default_dockerclustertemplate(dct())["spec"]["template"]["spec"]["loadBalancer"] == {}
    given = {"loadBalancer": {"imageRepository": "r.example"}}
    assert docker.default_dockercluster(dc(given))["spec"]["loadBalancer"] == given["loadBalancer"]
