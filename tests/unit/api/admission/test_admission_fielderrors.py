from __future__ import annotations

import pytest

from capd_py.api.admission.fielderrors import forbidden, invalid, invalid_status, message, required

pytestmark = pytest.mark.unit


def test_errors_read_as_apimachinery_writes_them() -> None:
    assert str(invalid("metadata.name", "x", "bad")) == 'metadata.name: Invalid value: "x": bad'
    assert str(invalid("spec.replicas", 2, "bad")) == "spec.replicas: Invalid value: 2: bad"
    assert str(required("spec.bootstrap", "expected")) == "spec.bootstrap: Required value: expected"
    assert str(forbidden("spec.clusterName", "field is immutable")) == "spec.clusterName: Forbidden: field is immutable"


def test_one_error_plain_several_bracketed_duplicates_once() -> None:
    one = [forbidden("spec.replicas", "cannot be an even number when etcd is stacked")]
    assert message("KubeadmControlPlane", "controlplane.cluster.x-k8s.io", "cp", one) == (
        'KubeadmControlPlane.controlplane.cluster.x-k8s.io "cp" is invalid: '
        "spec.replicas: Forbidden: cannot be an even number when etcd is stacked")
    two = [forbidden("a", "x"), forbidden("a", "x"), required("b", "y")]
    assert message("Machine", "cluster.x-k8s.io", "m", two).endswith("[a: Forbidden: x, b: Required value: y]")


def test_status_is_a_422_with_field_causes() -> None:
    status = invalid_status("Machine", "cluster.x-k8s.io", "m", [required("spec.bootstrap", "expected")])
    assert status["code"] == 422 and status["reason"] == "Invalid" and status["status"] == "Failure"
    assert status["details"] == {"name": "m", "group": "cluster.x-k8s.io", "kind": "Machine", "causes": [
        {"reason": "FieldValueRequired", "message": "Required value: expected", "field": "spec.bootstrap"}]}
