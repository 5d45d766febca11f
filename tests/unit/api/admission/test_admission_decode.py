"""Objects of the wrong JSON types are refused before any rule, as upstream's decoder refuses them (400)."""

from __future__ import annotations

import base64
import json

import pytest

from capd_py.api.admission.decode import decode_error, zero_null_items
from capd_py.api.admission.review import admit
from capd_py.kube.admission_webhook import served_schemas

pytestmark = pytest.mark.unit

SCHEMA = {"type": "object", "properties": {"spec": {"type": "object", "properties": {
    "version": {"type": "string"}, "replicas": {"type": "integer"}, "paused": {"type": "boolean"},
    "maxSurge": {"x-kubernetes-int-or-string": True}, "list": {"type": "array", "items": {"type": "string"}},
    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
    "free": {"x-kubernetes-preserve-unknown-fields": True}}}}}


@pytest.mark.parametrize("spec,error", [
    ({"version": 1}, "json: cannot unmarshal number into Go struct field spec.version of type string"),
    ({"replicas": 1.5}, "json: cannot unmarshal number into Go struct field spec.replicas of type integer"),
    ({"replicas": True}, "json: cannot unmarshal bool into Go struct field spec.replicas of type integer"),
    ({"paused": "true"}, "json: cannot unmarshal string into Go struct field spec.paused of type boolean"),
    ({"maxSurge": 1.5}, "json: cannot unmarshal number into Go struct field spec.maxSurge of type IntOrString"),
    ({"list": ["a", 1]}, "json: cannot unmarshal number into Go struct field spec.list of type string"),
    ({"labels": {"a": []}}, "json: cannot unmarshal array into Go struct field spec.labels.a of type string"),
    ("x", "json: cannot unmarshal string into Go struct field spec of type object"),
])
def test_a_value_go_cannot_decode_is_named(spec: object, error: str) -> None:
    assert decode_error({"spec": spec}, SCHEMA) == error


def test_what_go_decodes_passes() -> None:
    ok = {"spec": {"version": "v1", "replicas": 3, "paused": None, "maxSurge": "10%", "list": [],
                   "labels": {"a": "b"}, "free": {"any": [1, "x"]}, "unknown": 5}}
    assert decode_error(ok, SCHEMA) is None


def test_admission_refuses_an_undecodable_object_with_400_before_its_rules() -> None:
    review = {"request": {"uid": "u", "operation": "CREATE",
                          "resource": {"group": "cluster.x-k8s.io", "resource": "machines"},
                          "object": {"metadata": {"name": "m"}, "spec": {"version": 1}}}}
    out = admit(review, mutate=True, schema=SCHEMA)["response"]
    assert out["allowed"] is False and out["status"]["code"] == 400
    assert out["status"]["message"].startswith("json: cannot unmarshal number")


DURATIONS = {"type": "object", "properties": {"provisioning": {"type": "object", "properties": {
    "startupDuration": {"type": "string"}, "startupJitter": {"type": "string"}}},
    "bootstrapTimeout": {"type": "string"}}}


@pytest.mark.parametrize("value,error", [
    ({"provisioning": {"startupDuration": "x"}}, 'time: invalid duration "x"'),
    ({"provisioning": {"startupDuration": "true"}}, 'time: invalid duration "true"'),
    ({"provisioning": {"startupDuration": "a/b"}}, 'time: invalid duration "a/b"'),
    ({"provisioning": {"startupDuration": "10"}}, 'time: missing unit in duration "10"'),
    ({"bootstrapTimeout": "3d"}, 'time: unknown unit "d" in duration "3d"'),
    ({"provisioning": {"startupDuration": "1m30s", "startupJitter": "x"}}, None),  # the jitter is a plain string
    ({"bootstrapTimeout": "0"}, None),
])
def test_a_go_duration_field_decodes_as_time_parseduration(value: object, error: str | None) -> None:
    """Upstream's DevMachine(Template) startupDuration and bootstrapTimeout are metav1.Duration: its decoder refuses a
    string time.ParseDuration refuses (the admission oracle's #215/#293/#347: capd-py accepted them)."""
    assert decode_error(value, DURATIONS) == error


INTS = {"type": "object", "properties": {"replicas": {"type": "integer", "format": "int32"},
                                        "generation": {"type": "integer", "format": "int64"},
                                        "plain": {"type": "integer"}}}


@pytest.mark.parametrize("value,error", [
    ({"replicas": 2147483648}, "json: cannot unmarshal number 2147483648 into Go struct field replicas of type int32"),
    ({"replicas": -2147483649},
     "json: cannot unmarshal number -2147483649 into Go struct field replicas of type int32"),
    ({"generation": 1 << 63}, f"json: cannot unmarshal number {1 << 63} into Go struct field generation of type int64"),
    ({"replicas": 2147483647, "generation": (1 << 63) - 1, "plain": 1 << 70}, None),
])
def test_an_integer_outside_its_go_type_does_not_decode(value: object, error: str | None) -> None:
    """An int32 field given 2^31 is refused by upstream's decoder (400), before the schema's maximum (the admission
    oracle's #25 and #397)."""
    assert decode_error(value, INTS) == error


LISTS = {"type": "object", "properties": {
    "taints": {"type": "array", "items": {"type": "object", "properties": {"key": {"type": "string"}}}},
    "names": {"type": "array", "items": {"type": "string"}},
    "free": {"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}}


def test_a_null_item_of_a_list_of_structs_decodes_as_the_zero_struct() -> None:
    taints: list[dict[str, str] | None] = [{"key": "a"}, None]
    sent = {"taints": taints, "names": ["x", None], "free": [None], "other": None}
    assert zero_null_items(sent, LISTS) == {"taints": [{"key": "a"}, {}], "names": ["x", None], "free": [None],
                                             "other": None}
    assert taints[1] is None  # a copy


def _kcp_with_a_null_taint() -> dict[str, object]:
    return {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
            "metadata": {"name": "k", "namespace": "ns"},
            "spec": {"version": "v1.34.4", "replicas": 1,
                     "machineTemplate": {"spec": {"infrastructureRef": {
                         "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "t"},
                         "taints": [{"key": "a", "effect": "NoSchedule", "propagation": "Always"}, None]}}}}


@pytest.mark.parametrize("mutate", [True, False])
def test_a_null_list_item_is_read_as_its_zero_struct_not_a_crash(mutate: bool) -> None:
    """The admission oracle's #281: a KubeadmControlPlane's taints[1] null made capd-py's webhook fail with a 500. The
    rules read it as upstream's read it decoded (the zero struct); the defaults' patch answers it as `{}`, as
    upstream's re-encoded object does (the schema then names the taint's required fields)."""
    group, resource = "controlplane.cluster.x-k8s.io", "kubeadmcontrolplanes"
    review = {"request": {"uid": "u", "operation": "CREATE",
                          "kind": {"group": group, "version": "v1beta2", "kind": "KubeadmControlPlane"},
                          "resource": {"group": group, "version": "v1beta2", "resource": resource},
                          "namespace": "ns", "object": _kcp_with_a_null_taint()}}
    out = admit(review, mutate=mutate, schema=served_schemas()[(group, resource)])["response"]
    if mutate:
        ops = json.loads(base64.b64decode(out["patch"])) if "patch" in out else []
        assert out["allowed"] is True
        assert [o for o in ops if "taints" in o["path"]] == [
            {"op": "replace", "path": "/spec/machineTemplate/spec/taints",
             "value": [{"key": "a", "effect": "NoSchedule", "propagation": "Always"}, {}]}]
    else:  # the gate is off: the taints are refused, as upstream's webhook refuses them
        assert out["allowed"] is False and out["status"]["code"] == 422


CLUSTER_CLASS = served_schemas()[("cluster.x-k8s.io", "clusterclasses")]


def _class_with(schema: object) -> dict[str, object]:
    return {"spec": {"variables": [{"name": "v", "required": False, "schema": {"openAPIV3Schema": schema}}]}}


@pytest.mark.parametrize("schema,error", [
    ({"type": "object", "properties": {"enabled": {"type": 1}}},
     "json: cannot unmarshal number into Go struct field JSONSchemaProps.spec.variables.schema.openAPIV3Schema."
     "properties.type of type string"),
    ({"type": "integer", "maximum": 1.5},
     "json: cannot unmarshal number 1.5 into Go struct field JSONSchemaProps.spec.variables.schema.openAPIV3Schema."
     "maximum of type int64"),
    ({"type": "object", "additionalProperties": True},
     "json: cannot unmarshal bool into Go struct field JSONSchemaProps.spec.variables.schema.openAPIV3Schema."
     "additionalProperties of type v1beta2.JSONSchemaProps"),
    ({"type": "string", "x-kubernetes-validations": [{"rule": 1}]},
     "json: cannot unmarshal number into Go struct field ValidationRule.spec.variables.schema.openAPIV3Schema."
     "x-kubernetes-validations.rule of type string"),
    ({"type": "array", "items": {"type": "string", "required": ["a", 2]}},
     "json: cannot unmarshal number into Go struct field JSONSchemaProps.spec.variables.schema.openAPIV3Schema."
     "items.required of type string"),
    ({"type": "object", "x-metadata": {"labels": {"a": 1}}},
     "json: cannot unmarshal number into Go struct field VariableSchemaMetadata.spec.variables.schema."
     "openAPIV3Schema.x-metadata.labels of type string"),
    # what decodes: any JSON in default/example/enum, whole numbers as int64
    ({"type": "object", "default": {"x": [1, True]}, "example": 2.5, "enum": [{"a": 1}, "s"], "maximum": 3.0}, None),
])
def test_a_clusterclass_variable_schema_decodes_as_upstreams_jsonschemaprops(schema: object,
                                                                            error: str | None) -> None:
    """Cluster API's JSONSchemaProps is a Go struct (typed fields, int64 bounds) where the CRD keeps the schema
    untyped: upstream's webhook refuses what does not decode with 400 (the admission oracle's #607)."""
    assert decode_error(_class_with(schema), CLUSTER_CLASS) == error
