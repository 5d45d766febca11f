from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from capd_py.api.admission import KINDS, webhook_name
from capd_py.kube import admission_webhook as aw
from capd_py.kube.conversion_webhook import app

pytestmark = pytest.mark.unit


def test_configurations_by_url() -> None:
    mutating, validating = aw.configurations(b"PEM", url="https://172.18.0.1:9443/convert")
    assert mutating["kind"] == "MutatingWebhookConfiguration" and mutating["metadata"]["name"] == aw.MUTATING_NAME
    assert validating["kind"] == "ValidatingWebhookConfiguration"
    for config, path in ((mutating, aw.MUTATE_PATH), (validating, aw.VALIDATE_PATH)):
        for hook in config["webhooks"]:
            assert hook["clientConfig"] == {"caBundle": base64.b64encode(b"PEM").decode(),
                                            "url": f"https://172.18.0.1:9443{path}"}
            # the webhook down: writes fail (nothing stored undefaulted or unvalidated); no side effects; v1 only
            assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
            assert hook["admissionReviewVersions"] == ["v1"] and hook["matchPolicy"] == "Equivalent"
            assert hook["rules"][0]["apiVersions"] == ["v1beta2"]  # v1beta1 writes arrive converted
    assert all(h["reinvocationPolicy"] == "Never" for h in mutating["webhooks"])
    assert {h["name"] for h in mutating["webhooks"]} == {webhook_name("default", k) for k in KINDS if k.default}
    names = {h["name"]: h for h in validating["webhooks"]}
    assert len(names) == len([k for k in KINDS if k.validate]) + 1
    scale = names["validation-scale.kubeadmcontrolplane.controlplane.cluster.x-k8s.io"]
    assert scale["rules"][0]["resources"] == ["kubeadmcontrolplanes/scale"]
    assert scale["rules"][0]["operations"] == ["UPDATE"]
    assert names["validation.machinedeployment.cluster.x-k8s.io"]["rules"][0] == {
        "apiGroups": ["cluster.x-k8s.io"], "apiVersions": ["v1beta2"], "operations": ["CREATE", "UPDATE"],
        "resources": ["machinedeployments"], "scope": "Namespaced"}


def test_configurations_by_service() -> None:
    service = {"namespace": "capd-py-system", "name": "capd-py-webhook", "port": 443}
    mutating, validating = aw.configurations(b"PEM", service=service)
    assert mutating["webhooks"][0]["clientConfig"]["service"] == {**service, "path": aw.MUTATE_PATH}
    assert validating["webhooks"][0]["clientConfig"]["service"] == {**service, "path": aw.VALIDATE_PATH}
    with pytest.raises(ValueError):
        aw.configurations(b"PEM")


def _review(obj: dict[str, Any], resource: str, group: str = "cluster.x-k8s.io") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "resource": {"group": group, "version": "v1beta2", "resource": resource},
        "namespace": "ns", "name": obj["metadata"]["name"], "object": obj}}


class FakeKube:
    def __init__(self, kcp: dict[str, Any] | None) -> None:
        self.kcp, self.reads = kcp, 0

    async def get(self, gvk: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return self.kcp


async def test_answers_defaulting_and_validation_without_reads() -> None:
    kube = FakeKube({"spec": {"replicas": 1}})
    machine = {"metadata": {"name": "m"}, "spec": {"clusterName": "c1", "version": "1.34.4"}}
    status, body = await aw.answer(_review(machine, "machines"), True, kube)  # type: ignore[arg-type]
    response = body["response"]
    assert status == 200 and response["allowed"] is True and response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    assert {"op": "replace", "path": "/spec/version", "value": "v1.34.4"} in ops
    status, body = await aw.answer(_review(machine, "machines"), False, kube)  # type: ignore[arg-type]
    assert body["response"]["allowed"] is False
    assert body["response"]["status"]["details"]["causes"][0]["field"] == "spec.bootstrap"
    assert kube.reads == 0, "no cluster reads for ordinary writes"
    assert (await aw.answer({"x": 1}, False, kube))[0] == 400  # type: ignore[arg-type]


async def test_a_kcp_scale_reads_the_kcp() -> None:
    kube = FakeKube({"spec": {"replicas": 1}})
    scale = _review({"metadata": {"name": "cp"}, "spec": {"replicas": 4}}, "kubeadmcontrolplanes",
                    "controlplane.cluster.x-k8s.io")
    scale["request"].update(operation="UPDATE", subResource="scale")
    _, body = await aw.answer(scale, False, kube)  # type: ignore[arg-type]
    assert body["response"]["allowed"] is False and kube.reads == 1
    assert body["response"]["status"]["message"] == "replicas cannot be an even number when etcd is stacked"
    _, body = await aw.answer(scale, False, None)
    assert body["response"]["allowed"] is False, "without a client: refused, never allowed unchecked"


def test_the_server_routes_conversion_admission_and_health() -> None:
    routes = {(r.method, r.resource.canonical) for r in app().router.routes() if r.resource is not None}
    assert {("POST", "/convert"), ("POST", aw.MUTATE_PATH), ("POST", aw.VALIDATE_PATH), ("GET", "/healthz")} <= routes


def test_gates_come_from_the_controllers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_FEATURE_GATES", "MachineTaintPropagation=true")
    assert aw.gates_from_environment()["MachineTaintPropagation"] is True
    monkeypatch.setenv("CAPD_PY_FEATURE_GATES", "NoSuchGate=true")
    assert aw.gates_from_environment()["MachineTaintPropagation"] is False
    monkeypatch.delenv("CAPD_PY_FEATURE_GATES")
    assert aw.gates_from_environment()["MachinePool"] is True


async def test_answers_follow_the_gates() -> None:
    machine = {"metadata": {"name": "m"}, "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "s"},
                                                   "taints": [{"key": "a", "effect": "NoSchedule"}]}}
    _, off = await aw.answer(_review(machine, "machines"), False, None)
    assert off["response"]["allowed"] is False
    _, on = await aw.answer(_review(machine, "machines"), False, None, {"MachineTaintPropagation": True})
    assert on["response"]["allowed"] is True


async def test_a_topology_cluster_reads_its_class_unless_it_is_being_deleted() -> None:
    cluster = {"metadata": {"name": "c"}, "spec": {"topology": {"classRef": {"name": "cc"}, "version": "v1.35.0"}}}
    kube = FakeKube({"metadata": {"name": "cc", "generation": 1}, "spec": {},
                     "status": {"observedGeneration": 1, "conditions": [{"type": "VariablesReady", "status": "True"}],
                                "variables": []}})
    status, body = await aw.answer(_review(cluster, "clusters"), True, kube)  # type: ignore[arg-type]
    assert status == 200 and body["response"]["allowed"] is True and kube.reads == 1
    deleting = {**cluster, "metadata": {"name": "c", "deletionTimestamp": "2026-12-07T00:00:00Z"}}
    await aw.answer(_review(deleting, "clusters"), True, kube)  # type: ignore[arg-type]
    await aw.answer(_review(deleting, "clusters"), False, kube)  # type: ignore[arg-type]
    assert kube.reads == 1, "a Cluster being deleted is never held up by (or waits for) its class"
