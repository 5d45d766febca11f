from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.kube.conversion_webhook import (
    CONVERT_PATH,
    crds_serving_v1beta1,
    v1beta1_schema,
    webhook_conversion,
    with_capd_rules,
    with_v1beta1,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_conversion_by_url_or_by_service() -> None:
    by_url = webhook_conversion(b"PEM", url="https://172.18.0.1:9443/convert")
    assert by_url == {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "caBundle": base64.b64encode(b"PEM").decode(), "url": "https://172.18.0.1:9443/convert"}}}
    by_service = webhook_conversion(b"PEM", service={"namespace": "capd-py-system", "name": "capd-py-webhook",
                                                     "port": 443})
    assert by_service["webhook"]["clientConfig"]["service"] == {
        "namespace": "capd-py-system", "name": "capd-py-webhook", "port": 443, "path": CONVERT_PATH}
    with pytest.raises(ValueError):
        webhook_conversion(b"PEM")


def test_the_crd_serves_v1beta1_without_storing_it() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "cluster.x-k8s.io_machines.yaml").read_text())
    schema = v1beta1_schema(crd)
    assert schema["properties"]["spec"]["properties"]["nodeDrainTimeout"]["type"] == "string"
    conversion = webhook_conversion(b"PEM", url="https://127.0.0.1:9443/convert")
    out = with_v1beta1(crd, schema, conversion)
    assert [(v["name"], v["served"], v["storage"]) for v in out["spec"]["versions"]] == [
        ("v1beta2", True, True), ("v1beta1", True, False)]
    spoke = out["spec"]["versions"][1]
    assert spoke["schema"]["openAPIV3Schema"] == schema
    assert spoke["subresources"] == crd["spec"]["versions"][0]["subresources"]
    assert spoke["deprecated"] is True
    assert out["spec"]["conversion"] == conversion
    assert with_v1beta1(out, schema, conversion) == out, "idempotent"
    assert crd["spec"]["versions"][0]["name"] == "v1beta2" and len(crd["spec"]["versions"]) == 1


def test_every_crd_gets_a_v1beta1_version() -> None:
    conversion = webhook_conversion(b"PEM", url="https://127.0.0.1:9443/convert")
    crds = crds_serving_v1beta1(conversion)
    assert len(crds) == 27
    # upstream v1.14 serves DevMachinePool(Template) at v1beta2 only (no v1beta1 to serve, no conversion); the
    # other four Dev* kinds have a deprecated v1beta1 like every other kind
    pools = [c for c in crds if c["spec"]["names"]["kind"] in ("DevMachinePool", "DevMachinePoolTemplate")]
    assert len(pools) == 2
    for crd in pools:
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta2"] and "conversion" not in crd["spec"]
    assert len([c for c in crds if c["spec"]["names"]["kind"].startswith("Dev") and c not in pools]) == 4
    for crd in (c for c in crds if c not in pools):
        # upstream's runtime group serves v1alpha1 (deprecated) beside v1beta2, not v1beta1
        older = "v1alpha1" if crd["spec"]["group"] == "runtime.cluster.x-k8s.io" else "v1beta1"
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta2", older], crd["metadata"]["name"]
        assert crd["spec"]["conversion"] == conversion


def _version(crd: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v["name"] == name)  # type: ignore[no-any-return]


def test_v1beta1_has_upstreams_printer_columns_and_subresources() -> None:
    """Upstream's v1beta1 versions do not always share them with v1beta2: a DevMachine's v1beta1 columns are
    Cluster, Machine, ProviderID, Ready, Age; a Dev/DockerMachineTemplate's v1beta1 has no status subresource."""
    crds = {c["spec"]["names"]["kind"]: c for c in crds_serving_v1beta1(webhook_conversion(b"ca", url="https://h/c"))}
    columns = [(c["name"], c["jsonPath"]) for c in _version(crds["DevMachine"], "v1beta1")["additionalPrinterColumns"]]
    assert columns == [("Cluster", ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"),
                       ("Machine", '.metadata.ownerReferences[?(@.kind=="Machine")].name'),
                       ("ProviderID", ".spec.providerID"), ("Ready", ".status.ready"),
                       ("Age", ".metadata.creationTimestamp")]
    assert "Provisioned" in [c["name"] for c in _version(crds["DevMachine"], "v1beta2")["additionalPrinterColumns"]]
    for kind in ("DevMachineTemplate", "DockerMachineTemplate"):
        assert "subresources" not in _version(crds[kind], "v1beta1"), kind
        assert _version(crds[kind], "v1beta2")["subresources"] == {"status": {}}, kind
    assert _version(crds["DevCluster"], "v1beta1")["subresources"] == {"status": {}}


def _rules(crd: dict[str, Any], version: str, path: str) -> list[str]:
    node = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
    for part in path.split("."):
        node = node["properties"][part]
    return [r["message"] for r in node.get("x-kubernetes-validations") or []]


def test_v1beta1_gets_capd_pys_rules_for_versions_immutable_fields_and_replicas() -> None:
    crds = {c["spec"]["names"]["kind"]: c for c in crds_serving_v1beta1(webhook_conversion(b"ca", url="https://h/convert"))}
    # (a Machine's immutable clusterName is the webhooks' since 2026-12-08, as upstream's: no schema rule to copy)
    for kind, path in [("Machine", "spec.version"), ("MachineSet", "spec.replicas"),
                       ("MachineDeployment", "spec.template.spec.version"), ("KubeadmControlPlane", "spec.version"),
                       ("KubeadmControlPlane", "spec.replicas"), ("DockerMachineTemplate", "spec.template.spec"),
                       ("ClusterResourceSetBinding", "spec.clusterName"), ("Cluster", "spec.topology.version"),
                       ("DevMachineTemplate", "spec.template.spec"), ("DevClusterTemplate", "spec.template.spec")]:
        hub, spoke = _rules(crds[kind], "v1beta2", path), _rules(crds[kind], "v1beta1", path)
        assert hub and set(hub) <= set(spoke), (kind, path)
    assert any("supported range is v1.30.0" in m for m in _rules(crds["KubeadmControlPlane"], "v1beta1",
                                                                  "spec.version"))
    # a Machine's or a topology's version: semver only, as upstream's webhooks (the admission oracle's #1344, #1488)
    assert not any("supported range" in m for m in _rules(crds["Machine"], "v1beta1", "spec.version"))


def test_a_rule_naming_a_field_v1beta1_lacks_is_left_out() -> None:
    rules = [{"rule": "has(self.a) == has(oldSelf.a)", "message": "a"},
             {"rule": "self.size() > 0", "message": "methods are no fields"}]
    hub: dict[str, Any] = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"a": {"type": "string"}}, "x-kubernetes-validations": rules}}}
    spoke: dict[str, Any] = {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {"b": {"type": "string"}}}}}
    out = with_capd_rules("DockerMachine", hub, spoke)
    assert out["properties"]["spec"]["x-kubernetes-validations"] == [
        {"rule": "self.size() > 0", "message": "methods are no fields"}]
    assert "x-kubernetes-validations" not in spoke["properties"]["spec"]  # not changed in place
