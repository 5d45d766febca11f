"""Upstream CAPD v1.14's Dev* webhooks (test/infrastructure/docker/internal/webhooks/dev*.go): the backend defaults
to docker, the docker backend's DevCluster defaults as a DockerCluster's, failure domains sorted, customImage
immutable, template metadata checked; and the AdmissionReview answers with upstream's messages."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from capd_py.api import features
from capd_py.api.admission import KINDS, admit, dev, webhook_name

pytestmark = pytest.mark.unit

INFRA = "infrastructure.cluster.x-k8s.io"


def obj(kind: str, spec: Any = None, template: bool = False, name: str = "x") -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": f"{INFRA}/v1beta2", "kind": kind, "metadata": {"name": name}}
    if spec is not None:
        out["spec"] = {"template": {"spec": spec}} if template else spec
    return out


def review(o: dict[str, Any], resource: str, old: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "UPDATE" if old else "CREATE", "resource": {
            "group": INFRA, "version": "v1beta2", "resource": resource},
        "object": o, "oldObject": old, "name": o["metadata"]["name"], "namespace": "ns"}}


@pytest.mark.parametrize("spec", [None, {}, {"backend": {}}])
def test_no_backend_defaults_to_docker(spec: Any) -> None:
    assert dev.default_devmachine(obj("DevMachine", spec))["spec"]["backend"] == {"docker": {}}
    got = dev.default_devmachinetemplate(obj("DevMachineTemplate", spec, template=True))
    assert got["spec"]["template"]["spec"]["backend"] == {"docker": {}}
    cluster = dev.default_devcluster(obj("DevCluster", spec))["spec"]
    # loadBalancer: {} as upstream's Go re-encoding answers (a struct omitempty never drops)
    assert cluster == {"backend": {"docker": {"loadBalancer": {}}}, "controlPlaneEndpoint": {"port": 6443}}
    tcluster = dev.default_devclustertemplate(obj("DevClusterTemplate", spec, template=True))
    assert tcluster["spec"]["template"]["spec"] == cluster


def test_in_memory_backend_is_left_alone() -> None:
    """upstream: the 6443 port and failure-domain defaults are the docker backend's only."""
    spec: dict[str, Any] = {"backend": {"inMemory": {}}}
    assert dev.default_devcluster(obj("DevCluster", spec))["spec"] == spec
    m = {"backend": {"inMemory": {"vm": {"provisioning": {"startupDuration": "1s"}}}}}
    assert dev.default_devmachine(obj("DevMachine", m))["spec"] == m


def test_docker_failure_domains_default_control_plane_false() -> None:
    spec = {"backend": {"docker": {"failureDomains": [{"name": "a"}, {"name": "b", "controlPlane": True}]}}}
    got = dev.default_devcluster(obj("DevCluster", spec))["spec"]
    assert got["backend"]["docker"]["failureDomains"] == [{"name": "a", "controlPlane": False},
                                                           {"name": "b", "controlPlane": True}]
    assert got["controlPlaneEndpoint"] == {"port": 6443}
    assert spec["backend"]["docker"]["failureDomains"][0] == {"name": "a"}, "the input is not changed"


def test_unsorted_failure_domains_refused_with_upstreams_message() -> None:
    spec = {"backend": {"docker": {"failureDomains": [{"name": "b"}, {"name": "a"}]}}}
    errs = dev.validate_devcluster(None, obj("DevCluster", spec))
    assert [(e.field, e.detail) for e in errs] == [("spec.backend.docker.failureDomains",
                                                    "failure domains must be sorted by name")]
    answer = admit(review(obj("DevCluster", spec, name="c1"), "devclusters"), mutate=False)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"].startswith(f'DevCluster.{INFRA} "c1" is invalid: '
                                                  "spec.backend.docker.failureDomains: Invalid value: ")
    assert answer["status"]["message"].endswith("failure domains must be sorted by name")
    terrs = dev.validate_devclustertemplate(None, obj("DevClusterTemplate", spec["backend"] and spec, template=True))
    assert [e.field for e in terrs] == ["spec.backend.docker.failureDomains"]
    sorted_spec = {"backend": {"docker": {"failureDomains": [{"name": "a"}, {"name": "b"}]}}}
    assert dev.validate_devcluster(None, obj("DevCluster", sorted_spec)) == []


def test_cluster_template_needs_the_topology_gate_and_valid_metadata() -> None:
    t = obj("DevClusterTemplate", {"backend": {"inMemory": {}}}, template=True)
    off = dev.validate_devclustertemplate(None, t, {features.CLUSTER_TOPOLOGY: False})
    assert [(e.field, e.detail) for e in off] == [
        ("spec", "can be set only if the ClusterTopology feature flag is enabled")]
    assert dev.validate_devclustertemplate(None, t, {features.CLUSTER_TOPOLOGY: True}) == []
    t["spec"]["template"]["metadata"] = {"labels": {"bad key!": "v"}}
    assert [e.field for e in dev.validate_devclustertemplate(None, t, {features.CLUSTER_TOPOLOGY: True})] == [
        "spec.template.metadata.labels"]


def test_machine_custom_image_cannot_change() -> None:
    old = obj("DevMachine", {"backend": {"docker": {"customImage": "a:1"}}})
    new = obj("DevMachine", {"backend": {"docker": {"customImage": "a:2"}}})
    assert [(e.field, e.detail) for e in dev.validate_devmachine(old, new)] == [
        ("spec.backend.docker.customImage", "cannot be modified")]
    assert dev.validate_devmachine(None, new) == []
    assert dev.validate_devmachine(old, old) == []
    other = obj("DevMachine", {"backend": {"docker": {"customImage": "a:1", "preLoadImages": ["p"]}}})
    assert dev.validate_devmachine(old, other) == [], "the other docker fields may change"
    answer = admit(review(new, "devmachines", old), mutate=False)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["message"] == (f'DevMachine.{INFRA} "x" is invalid: spec.backend.docker.customImage: '
                                           "Forbidden: cannot be modified")


def test_machine_template_metadata_checked() -> None:
    t = obj("DevMachineTemplate", {"backend": {"docker": {}}}, template=True)
    t["spec"]["template"]["metadata"] = {"labels": {"k": "-bad-"}}
    assert [e.field for e in dev.validate_devmachinetemplate(None, t)] == ["spec.template.metadata.labels"]


def test_defaulting_through_the_review_is_a_json_patch() -> None:
    answer = admit(review(obj("DevMachine", {}), "devmachines"), mutate=True)["response"]
    assert answer["allowed"] is True
    assert json.loads(base64.b64decode(answer["patch"])) == [
        {"op": "add", "path": "/spec/backend", "value": {"docker": {}}}]


def test_template_stored_before_defaulting_can_be_applied_unchanged() -> None:
    old = obj("DevMachineTemplate", {"backend": {}}, template=True)
    assert dev.default_devmachinetemplate(obj("DevMachineTemplate", {"backend": {}}, template=True), old) == old


def test_the_webhooks_are_upstreams() -> None:
    """Upstream v1.14 registers defaulting + validating webhooks for DevCluster(Template) and DevMachine(Template),
    none for DevMachinePool(Template)."""
    dev_kinds = {k.kind: k for k in KINDS if k.kind.startswith("Dev")}
    assert set(dev_kinds) == {"DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate"}
    assert all(k.default is not None and k.validate is not None for k in dev_kinds.values())
    assert webhook_name("default", dev_kinds["DevMachine"]) == f"default.devmachine.{INFRA}"
    assert webhook_name("validation", dev_kinds["DevCluster"]) == f"validation.devcluster.{INFRA}"


def test_upstream_v1_14_templates_pass_admission_unchanged() -> None:
    """Every Dev* object of upstream v1.14.0's own templates (tests/fixtures/upstream-v1.14, copied unchanged) is
    admitted, and the defaulting webhook leaves it as written (each names its backend) but for what upstream's adds."""
    from pathlib import Path

    import yaml

    by_kind = {k.kind: k for k in KINDS}
    seen = set()
    for f in sorted((Path(__file__).resolve().parents[3] / "fixtures" / "upstream-v1.14").glob("*.yaml")):
        for d in yaml.safe_load_all(f.read_text()):
            if not d or not str(d.get("kind", "")).startswith("Dev") or d["kind"] not in by_kind:
                continue
            k = by_kind[d["kind"]]
            seen.add(d["kind"])
            assert k.default is not None and k.validate is not None
            defaulted = k.default(d, None)
            want = copy.deepcopy(d)
            tspec = want["spec"]["template"]["spec"]
            if d["kind"] == "DevClusterTemplate" and "docker" in tspec["backend"]:  # upstream: port 6443, and
                tspec["controlPlaneEndpoint"] = {"port": 6443}  # loadBalancer: {} (its Go re-encoding)
                tspec["backend"]["docker"].setdefault("loadBalancer", {})
            assert defaulted == want, (f.name, d["metadata"]["name"])
            assert k.validate(None, defaulted, None) == [], (f.name, d["metadata"]["name"])
    assert seen == {"DevClusterTemplate", "DevMachineTemplate"}
