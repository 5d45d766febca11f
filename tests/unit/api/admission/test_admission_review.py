from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from capd_py.api.admission import KINDS, admit, json_patch, webhook_name

pytestmark = pytest.mark.unit

def apply_patch(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/replace/remove on objects (what json_patch emits)."""
    out = copy.deepcopy(doc)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        if not parts:
            out = op["value"]
            continue
        parent = out
        for p in parts[:-1]:
            parent = parent[p]
        if op["op"] == "remove":
            del parent[parts[-1]]
        else:
            parent[parts[-1]] = op["value"]
    return out


REF = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "t"}


def review(obj: dict[str, Any], resource: str, group: str = "cluster.x-k8s.io", operation: str = "CREATE",
           old: dict[str, Any] | None = None, sub: str | None = None) -> dict[str, Any]:
    req: dict[str, Any] = {"uid": "u1", "operation": operation, "resource": {
        "group": group, "version": "v1beta2", "resource": resource}, "object": obj, "oldObject": old,
        "name": obj.get("metadata", {}).get("name"), "namespace": "ns"}
    if sub:
        req["subResource"] = sub
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def md(name: str = "md-0") -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": name},
            "spec": {"clusterName": "c1", "template": {"spec": {"clusterName": "c1", "bootstrap": {
                "dataSecretName": "s"}, "infrastructureRef": REF}}}}


def test_defaulting_answers_with_a_json_patch_that_upstreams_defaults() -> None:
    obj = md()
    answer = admit(review(obj, "machinedeployments"), mutate=True)
    response = answer["response"]
    assert answer["kind"] == "AdmissionReview" and response["uid"] == "u1" and response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patched = apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    assert patched["spec"]["selector"]["matchLabels"] == {"cluster.x-k8s.io/deployment-name": "md-0",
                                                          "cluster.x-k8s.io/cluster-name": "c1"}


def test_nothing_to_default_no_patch() -> None:
    obj = {"metadata": {"name": "kc"}, "spec": {}}
    assert admit(review(obj, "kubeadmconfigs", "bootstrap.cluster.x-k8s.io"), mutate=True)["response"] == {
        "uid": "u1", "allowed": True}


def test_validation_refuses_with_upstreams_status() -> None:
    obj = md("a" * 64)
    answer = admit(review(obj, "machinedeployments"), mutate=False)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["code"] == 422
    assert answer["status"]["message"].startswith('MachineDeployment.cluster.x-k8s.io "' + "a" * 64 + '" is invalid: ')
    assert answer["status"]["details"]["causes"][0]["field"] == "metadata.name"


def test_the_defaulting_webhook_refuses_a_name_its_defaults_would_break() -> None:
    """The CRD schema would refuse the defaulted 64-character label before the validating webhook: refuse with
    upstream's validation errors, metadata.name first."""
    answer = admit(review(md("a" * 64), "machinedeployments"), mutate=True)["response"]
    assert answer["allowed"] is False
    assert answer["status"]["details"]["causes"][0]["field"] == "metadata.name"


def test_autoscaler_replicas_on_update_and_unparsable_annotations_refused() -> None:
    """calculateMachineDeploymentReplicas on UPDATE: replicas removed from an object the autoscaler now owns keep
    the old value when within min..max (clamped otherwise); an unparsable size is Denied with the Default error."""
    old, new = md(), md()
    old["spec"]["replicas"] = 5
    new["metadata"]["annotations"] = {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
                                      "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3"}
    response = admit(review(new, "machinedeployments", operation="UPDATE", old=old), mutate=True)["response"]
    patched = apply_patch(new, json.loads(base64.b64decode(response["patch"])))
    assert patched["spec"]["replicas"] == 3
    new["metadata"]["annotations"]["cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"] = "three"
    refused = admit(review(new, "machinedeployments"), mutate=True)["response"]
    assert refused["allowed"] is False and refused["status"]["code"] == 403
    assert refused["status"]["message"].endswith('strconv.ParseInt: parsing "three": invalid syntax')


def test_updates_see_the_old_object_and_deletions_pass() -> None:
    old, new = md(), md()
    new["spec"]["clusterName"] = new["spec"]["template"]["spec"]["clusterName"] = "c2"
    refused = admit(review(new, "machinedeployments", operation="UPDATE", old=old), mutate=False)["response"]
    assert refused["allowed"] is False and "spec.clusterName: Forbidden: field is immutable" in \
        refused["status"]["message"]
    new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert admit(review(new, "machinedeployments", operation="UPDATE", old=old), mutate=False)["response"][
        "allowed"] is True


def test_other_kinds_operations_and_subresources_pass() -> None:
    assert admit(review({"metadata": {"name": "x"}}, "dockermachines", "infrastructure.cluster.x-k8s.io"),
                 mutate=False)["response"]["allowed"] is True
    assert admit(review(md("a" * 64), "machinedeployments", operation="DELETE"), mutate=False)["response"][
        "allowed"] is True
    assert admit(review({"spec": {"replicas": 2}}, "machinedeployments", sub="scale", operation="UPDATE"),
                 mutate=False)["response"]["allowed"] is True


def test_kcp_scale_reads_the_kcp() -> None:
    kcp = {"spec": {"replicas": 1}}
    scale: dict[str, Any]
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "cp"}, "spec": {"replicas": 2}}
    rev = review(scale, "kubeadmcontrolplanes", "controlplane.cluster.x-k8s.io", "UPDATE", sub="scale")
    seen: list[tuple[str, str]] = []

    def read(ns: str, name: str) -> dict[str, Any]:
        seen.append((ns, name))
        return kcp
    answer = admit(rev, mutate=False, read=read)["response"]
    assert seen == [("ns", "cp")]
    assert answer["allowed"] is False
    assert answer["status"]["message"] == "replicas cannot be an even number when etcd is stacked"
    scale["spec"]["replicas"] = 3
    assert admit(rev, mutate=False, read=read)["response"]["allowed"] is True


def test_json_patch_round_trips() -> None:
    a = {"x": 1, "y": {"z": [1], "a/b": "c", "gone": 1}}
    b = {"x": 2, "y": {"z": [1, 2], "a/b": "d", "new": {"k": "v"}}, "w": None}
    assert apply_patch(a, json_patch(a, b)) == b
    assert json_patch(a, a) == []


def test_webhook_names_are_upstreams() -> None:
    names = {webhook_name("validation", k) for k in KINDS if k.validate}
    assert "validation.machinedeployment.cluster.x-k8s.io" in names
    assert "validation.kubeadmcontrolplane.controlplane.cluster.x-k8s.io" in names
    assert {webhook_name("default", k) for k in KINDS if k.default} == {
        "default.cluster.cluster.x-k8s.io", "default.machine.cluster.x-k8s.io", "default.machineset.cluster.x-k8s.io",
        "default.machinedeployment.cluster.x-k8s.io", "default.machinepool.cluster.x-k8s.io",
        "default.machinehealthcheck.cluster.x-k8s.io", "default.kubeadmcontrolplane.controlplane.cluster.x-k8s.io",
        "default.kubeadmconfigtemplate.bootstrap.cluster.x-k8s.io",
        "default.clusterresourceset.addons.cluster.x-k8s.io",
        "default.dockercluster.infrastructure.cluster.x-k8s.io",
        "default.dockerclustertemplate.infrastructure.cluster.x-k8s.io",
        # upstream v1.14's Dev* webhooks (test/infrastructure/docker/config/webhook/manifests.yaml)
        "default.devcluster.infrastructure.cluster.x-k8s.io",
        "default.devclustertemplate.infrastructure.cluster.x-k8s.io",
        "default.devmachine.infrastructure.cluster.x-k8s.io",
        "default.devmachinetemplate.infrastructure.cluster.x-k8s.io",
        # upstream's name, "addons" and all (internal/webhooks/extensionconfig.go)
        "default.extensionconfig.runtime.addons.cluster.x-k8s.io"}
    assert "validation.extensionconfig.runtime.cluster.x-k8s.io" in names


def test_a_name_that_is_no_label_value_is_refused_when_defaulting_unless_the_api_server_refuses_it() -> None:
    # 64 characters: a valid object name but no label value; the defaulted selector would meet the CRD's bound on
    # label values first, so the defaulting webhook answers with upstream's validation (metadata.name)
    long = admit(review(md("a" * 64), "machinedeployments"), mutate=True)["response"]
    assert long["allowed"] is False
    assert long["status"]["details"]["causes"][0]["field"] == "metadata.name"
    # "-a" is no object name: the API server's ObjectMeta validation refuses it, as upstream's, so the defaulting
    # webhook does not (the admission oracle's #443)
    assert admit(review(md("-a"), "machinedeployments"), mutate=True)["response"]["allowed"] is True
