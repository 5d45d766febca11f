"""capd_py.reconcile.topology.variables: ClusterClass variable schemas, defaulting and Cluster values.

Where upstream's own tests (release-1.13 internal/topology/variables/*_test.go) pin a message, the expected strings
here are those messages (upstream quotes the variable's whole JSON value as the bad value). During development the
cases here were also run through cluster-api v1.13.6's internal/topology/variables itself: they agree except for
the two cosmetic differences the module docstring names."""

from __future__ import annotations

import copy
import glob
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.reconcile.topology import variables as V

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "upstream"


def _classes() -> dict[str, dict[str, Any]]:
    out = {}
    for f in sorted(glob.glob(str(FIXTURES / "*clusterclass*.yaml"))):
        for doc in yaml.safe_load_all(Path(f).read_text()):
            if doc and doc.get("kind") == "ClusterClass":
                out[Path(f).name] = doc
    return out


CLASSES = _classes()
QS_DEFS: list[dict[str, Any]] = CLASSES["docker-clusterclass-quick-start.yaml"]["spec"]["variables"]
PSS_DEFAULTS = {"enabled": True, "enforce": "baseline", "audit": "restricted", "warn": "restricted"}


def var(schema: dict[str, Any], name: str = "cpu", required: bool = True) -> list[dict[str, Any]]:
    return [{"name": name, "required": required, "schema": {"openAPIV3Schema": schema}}]


def check_value(schema: dict[str, Any], value: Any, name: str = "cpu") -> list[str]:
    return V.validate_values(var(schema, name), [{"name": name, "value": value}])


def check_class(schema: dict[str, Any], name: str = "var") -> list[str]:
    return V.validate_class_variables(var(schema, name, required=False))


# --- the vendored upstream ClusterClasses ------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", sorted(CLASSES))
def test_upstream_classes_are_valid(fixture: str) -> None:
    assert V.validate_class_variables(CLASSES[fixture]["spec"].get("variables") or []) == []


def test_quick_start_defaulting() -> None:
    values = [{"name": "podSecurityStandard", "value": {"enabled": False}}]
    before = copy.deepcopy(values)
    out = V.default_values(QS_DEFS, values)
    assert values == before  # inputs are never mutated
    # existing values first (with their nested defaults), then the class's top-level defaults in definition order
    assert out == [
        {"name": "podSecurityStandard", "value": {**PSS_DEFAULTS, "enabled": False}},
        {"name": "imageRepository", "value": ""},
        {"name": "etcdImageTag", "value": ""},
        {"name": "coreDNSImageTag", "value": ""},
    ]
    assert V.validate_values(QS_DEFS, out) == []
    # a variable with nested defaults but no top-level default is not created
    assert [v["name"] for v in V.default_values(QS_DEFS, [])] == ["imageRepository", "etcdImageTag", "coreDNSImageTag"]
    # an empty object or null takes the nested / top-level defaults
    assert V.default_values(QS_DEFS, [{"name": "podSecurityStandard", "value": {}}])[0]["value"] == PSS_DEFAULTS
    null = V.default_values(QS_DEFS, [{"name": "etcdImageTag", "value": None}])
    assert null[0] == {"name": "etcdImageTag", "value": ""}


def test_defaulting_is_idempotent_and_keeps_order() -> None:
    once = V.default_values(QS_DEFS, [{"name": "coreDNSImageTag", "value": "v1.8.5"}])
    assert V.default_values(QS_DEFS, once) == once
    assert [v["name"] for v in once] == ["coreDNSImageTag", "imageRepository", "etcdImageTag"]


def test_machine_overrides_get_nested_defaults_only() -> None:
    out = V.default_values(QS_DEFS, [{"name": "podSecurityStandard", "value": {"audit": "baseline"}}],
                           top_level_missing=False)
    assert out == [{"name": "podSecurityStandard", "value": {**PSS_DEFAULTS, "audit": "baseline"}}]


def test_nested_defaulting_in_arrays_and_maps() -> None:
    item = {"type": "object", "properties": {"port": {"type": "integer", "default": 80},
                                             "proto": {"type": "string", "default": "TCP"}}}
    defs = var({"type": "object", "properties": {
        "list": {"type": "array", "items": item},
        "map": {"type": "object", "additionalProperties": item},
        "obj": {"type": "object", "default": {}, "properties": {"x": {"type": "string", "default": "y"}}},
    }}, "net")
    value = {"list": [{"port": 1}, {}], "map": {"a": {"proto": "UDP"}}}
    out = V.default_values(defs, [{"name": "net", "value": value}])
    assert out[0]["value"] == {"list": [{"port": 1, "proto": "TCP"}, {"port": 80, "proto": "TCP"}],
                               "map": {"a": {"port": 80, "proto": "UDP"}}, "obj": {"x": "y"}}


def test_undefined_duplicated_or_broken_entries_are_left_alone() -> None:
    values: list[dict[str, Any]]
    values = [{"name": "nope", "value": 1}, {"name": "etcdImageTag", "value": None},
              {"name": "etcdImageTag", "value": None}]
    out = V.default_values(QS_DEFS, values)
    assert out[:3] == values
    broken = var({"type": "integer", "maximum": 1.5, "default": 1}, "b")
    assert V.default_values(broken, [{"name": "b", "value": None}]) == [{"name": "b", "value": None}]


def test_values_map_overrides_replace_cluster_values() -> None:
    cluster: list[dict[str, Any]]
    cluster = [{"name": "etcdImageTag", "value": "3.5.3-0"}, {"name": "podSecurityStandard", "value": {}}]
    m = V.values_map(QS_DEFS, cluster, [{"name": "podSecurityStandard", "value": {"enabled": False}}])
    assert m == {"etcdImageTag": "3.5.3-0", "podSecurityStandard": {**PSS_DEFAULTS, "enabled": False},
                 "imageRepository": "", "coreDNSImageTag": ""}
    m["etcdImageTag"] = "changed"
    assert cluster[0]["value"] == "3.5.3-0"


# --- Cluster values: upstream's messages ---------------------------------------------------------------------------


def test_missing_required_unknown_and_duplicate() -> None:
    assert V.validate_values(var({"type": "integer"}), []) == [
        'spec.topology.variables: Required value: required variable "cpu" must be set']
    assert V.validate_values(var({"type": "integer"}), [{"name": "cpu", "value": 1},
                                                        {"name": "location", "value": "us-east-1"}]) == [
        'spec.topology.variables[location]: Invalid value: "\\"us-east-1\\"": variable is not defined']
    assert V.validate_values(var({"type": "integer"}), [{"name": "cpu", "value": 1}, {"name": "cpu", "value": 2}]) == [
        'spec.topology.variables[cpu]: Invalid value: "2": variable "cpu" is set more than once']
    conflicting = var({"type": "integer"}) + var({"type": "string"})
    assert V.validate_values(conflicting, [{"name": "cpu", "value": 1}]) == [
        'spec.topology.variables: Invalid value: "[Name: cpu,Name: cpu]": variable definitions in the ClusterClass '
        'not valid: variable "cpu" has conflicting definitions']


def test_overrides_need_nothing_and_report_under_their_path() -> None:
    path = "spec.topology.workers.machineDeployments[md-0].variables.overrides"
    assert V.validate_values(QS_DEFS, [], path, overrides=True) == []
    assert V.validate_values(var({"type": "string"}), [{"name": "cpu", "value": 1}, {"name": "location", "value": "x"}],
                             path, overrides=True) == [
        f'{path}[cpu].value: Invalid value: "1": must be of type string: "integer"',
        f'{path}[location]: Invalid value: "\\"x\\"": variable is not defined']


UPSTREAM_VALUE_CASES: list[tuple[dict[str, Any], Any, list[str]]] = [
    ({"type": "string"}, 1, ['value: Invalid value: "1": must be of type string: "integer"']),
    ({"type": "integer", "maximum": 10}, 99, ['value: Invalid value: "99": should be less than or equal to 10']),
    ({"type": "integer", "minimum": 1}, 0, ['value: Invalid value: "0": should be greater than or equal to 1']),
    ({"type": "integer", "minimum": 1, "exclusiveMinimum": True}, 1,
     ['value: Invalid value: "1": should be greater than 1']),
    ({"type": "integer"}, "1", ['value: Invalid value: "\\"1\\"": must be of type integer: "string"']),
    ({"type": "integer"}, 2.0, []),  # a float64 that is an integer is an integer
    ({"type": "number"}, 2, []),
    ({"type": "string", "pattern": "^[0-9]+$"}, "000000a",
     ["value: Invalid value: \"\\\"000000a\\\"\": should match '^[0-9]+$'"]),
    ({"type": "string", "format": "uri"}, "not a URI",
     ['value: Invalid value: "\\"not a URI\\"": must be of type uri: "not a URI"']),
    ({"type": "string", "maxLength": 3}, "abcd", ["value: Too long: may not be more than 3 bytes"]),
    ({"type": "string", "minLength": 3}, "ab", ['value: Invalid value: "\\"ab\\"": should be at least 3 chars long']),
    ({"type": "string", "enum": ["us-east-1", "us-east-2"]}, "us-east-invalid",
     ['value: Unsupported value: "\\"us-east-invalid\\"": supported values: "us-east-1", "us-east-2"']),
    ({"type": "string", "enum": [1, 2]}, 3,
     ['value: Invalid value: "3": must be of type string: "integer"',
      'value: Unsupported value: "3": supported values: "1", "2"']),
    ({"type": "integer", "enum": [1, 2]}, 1, []),
    ({"type": "object", "properties": {"enabled": {"type": "boolean"}}}, {"enabled": "not-a-bool"},
     ['value.enabled: Invalid value: "{\\"enabled\\":\\"not-a-bool\\"}": enabled in body must be of type boolean: '
      '"string"']),
    ({"type": "object", "properties": {"enabled": {"type": "boolean"}}}, "not-a-object",
     ['value: Invalid value: "\\"not-a-object\\"": must be of type object: "string"']),
    ({"type": "object", "required": ["url"], "properties": {"url": {"type": "string"}, "enabled": {"type": "boolean"}}},
     {"enabled": "true"},
     ['value.enabled: Invalid value: "{\\"enabled\\":\\"true\\"}": enabled in body must be of type boolean: "string"',
      "value.url: Required value"]),
    ({"type": "object", "maxProperties": 2, "properties": {k: {"type": "boolean"} for k in "abc"}},
     {"a": True, "b": False, "c": True},
     ['value: Too many: "{\\"a\\":true,\\"b\\":false,\\"c\\":true}": must have at most 2 items']),
    ({"type": "object", "properties": {"location": {"type": "string"}, "url": {"type": "string"}},
      "enum": [{"location": "us-east-1", "url": "us-east-1-url"}, {"location": "us-east-2", "url": "us-east-2-url"}]},
     {"location": "us-east-2", "url": "wrong-url"},
     ['value: Unsupported value: "{\\"location\\":\\"us-east-2\\",\\"url\\":\\"wrong-url\\"}": supported values: '
      '"{\\"location\\":\\"us-east-1\\",\\"url\\":\\"us-east-1-url\\"}", '
      '"{\\"location\\":\\"us-east-2\\",\\"url\\":\\"us-east-2-url\\"}"']),
    ({"type": "array", "items": {"type": "string", "enum": ["enumValue1", "enumValue2"]}},
     ["enumValue1", "enumValueInvalid"],
     ['value.[1]: Unsupported value: "[\\"enumValue1\\",\\"enumValueInvalid\\"]": supported values: "enumValue1", '
      '"enumValue2"']),  # sic: upstream's path for array items
    ({"type": "array", "items": {"type": "string"}, "maxItems": 3}, ["1", "2", "3", "4"],
     ['value: Too many: "[\\"1\\",\\"2\\",\\"3\\",\\"4\\"]": must have at most 3 items']),
    ({"type": "array", "items": {"type": "string"}, "minItems": 3}, ["1", "2"],
     ['value: Invalid value: "[\\"1\\",\\"2\\"]": should have at least 3 items']),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, ["1", "1"],
     ['value: Invalid value: "[\\"1\\",\\"1\\"]": shouldn\'t contain duplicates']),
    ({"type": "object", "oneOf": [{"required": ["propertyA"]}, {"required": ["propertyB"]}],
      "properties": {"propertyA": {"type": "boolean"}, "propertyB": {"type": "boolean"}}},
     {"propertyA": True, "propertyB": True},
     ['value: Invalid value: "{\\"propertyA\\":true,\\"propertyB\\":true}": "" must validate one and only one schema '
      "(oneOf). Found 2 valid alternatives"]),
    ({"type": "object", "anyOf": [{"required": ["propertyA"]}, {"required": ["propertyB"]}],
      "properties": {"propertyA": {"type": "boolean"}, "propertyB": {"type": "boolean"}}}, {},
     ['value: Invalid value: "{}": "" must validate at least one schema (anyOf)', "value.propertyA: Required value"]),
    ({"type": "object", "allOf": [{"required": ["propertyA"]}], "properties": {"propertyA": {"type": "boolean"}}}, {},
     ["value.propertyA: Required value", 'value: Invalid value: "{}": "" must validate all the schemas (allOf). None '
                                         "validated"]),
    ({"type": "object", "not": {"required": ["propertyA"]}, "properties": {"propertyA": {"type": "boolean"}}},
     {"propertyA": True},
     ['value: Invalid value: "{\\"propertyA\\":true}": "" must not validate the schema (not)']),
    ({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}, "10%", []),
    ({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}, 3, []),
    ({"x-kubernetes-int-or-string": True}, True,
     ['value: Invalid value: "true": must be of type integer,string: "boolean"']),
    ({"type": "string"}, None, ['value: Invalid value: "": must be of type string: "null"']),  # null: Raw is empty
]


@pytest.mark.parametrize(("schema", "value", "want"), UPSTREAM_VALUE_CASES,
                         ids=[f"case{i}" for i in range(len(UPSTREAM_VALUE_CASES))])
def test_value_against_schema(schema: dict[str, Any], value: Any, want: list[str]) -> None:
    assert check_value(schema, value) == [f"spec.topology.variables[cpu].{w}" for w in want]


def test_fields_the_schema_does_not_declare() -> None:
    obj = {"type": "object", "properties": {"knownProperty": {"type": "boolean"}}}
    assert check_value(obj, {"knownProperty": False, "unknownProperty": True}, "testObject") == [
        'spec.topology.variables[testObject]: Invalid value: "{\\"knownProperty\\":false,\\"unknownProperty\\":true}": '
        'failed validation: "unknownProperty" field(s) are not specified in the variable schema of variable '
        '"testObject"']
    nested = {"type": "object", "properties": {"test": obj}}
    assert 'failed validation: "test.unknownProperty" field(s)' in check_value(
        nested, {"test": {"knownProperty": False, "unknownProperty": True}})[0]
    in_list = {"type": "array", "items": obj}
    assert 'failed validation: "variableValue[1].x" field(s)' in check_value(in_list, [{}, {"x": 1}])[0]
    # preserve-unknown-fields keeps them, but declared nested properties are still checked
    preserving = {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "properties": {"test": obj}}
    assert check_value(preserving, {"anything": {"goes": 1}}) == []
    assert 'failed validation: "test.unknownProperty" field(s)' in check_value(
        preserving, {"test": {"unknownProperty": True}})[0]
    # maps accept any key
    assert check_value({"type": "object", "additionalProperties": {"type": "string"}}, {"a": "b", "c": "d"}) == []


@pytest.mark.parametrize(("fmt", "good", "bad"), [
    ("uri", "https://example.com/x?y=1", "not a URI"), ("ipv4", "10.0.0.1", "10.0.0.256"),
    ("ipv6", "fd00::1", "10.0.0.1"), ("cidr", "10.0.0.0/8", "10.0.0.0/33"), ("date-time", "2024-01-02T03:04:05Z",
                                                                            "2024-01-02 03:04:05"),
    ("date", "2024-02-29", "2023-02-29"), ("uuid", "123e4567-e89b-12d3-a456-426614174000", "123"),
    ("hostname", "a.example.com", "-bad-"), ("email", "a@example.com", "nope"), ("mac", "00:00:5e:00:53:01", "00:00"),
    ("duration", "1h30m", "soon"), ("byte", "aGk=", "aGk"),
])
def test_formats(fmt: str, good: str, bad: str) -> None:
    schema = {"type": "string", "format": fmt}
    assert check_value(schema, good) == []
    assert check_value(schema, bad) == [
        f'spec.topology.variables[cpu].value: Invalid value: "\\"{bad}\\"": must be of type {fmt}: "{bad}"']
    # formats upstream does not know are ignored, as CRD validation strips them
    assert check_value({"type": "string", "format": "kubernetes-version"}, "anything") == []


def test_cel_rules_are_evaluated_and_listed() -> None:
    defs = var({"type": "object", "properties": {"n": {"type": "integer", "x-kubernetes-validations": [
        {"rule": "self <= 1"}]}}, "x-kubernetes-validations": [{"rule": "has(self.n)"}]})
    assert V.validate_values(defs, [{"name": "cpu", "value": {"n": 99}}]) == [
        'spec.topology.variables[cpu].value.n: Invalid value: "{\\"n\\":99}": failed rule: self <= 1']
    transition = var({"type": "integer", "x-kubernetes-validations": [
        {"rule": "self >= oldSelf", "message": "cannot shrink", "reason": "FieldValueForbidden"}]})
    assert V.validate_values(transition, [{"name": "cpu", "value": 1}]) == []  # no old value: not run
    assert V.validate_values(transition, [{"name": "cpu", "value": 1}], old_values=[{"name": "cpu", "value": 2}]) == [
        "spec.topology.variables[cpu].value: Forbidden: cannot shrink"]
    assert V.cel_rules(defs) == [
        "spec.variables[cpu].schema.openAPIV3Schema.x-kubernetes-validations[0]",
        "spec.variables[cpu].schema.openAPIV3Schema.properties[n].x-kubernetes-validations[0]"]
    e2e = CLASSES["e2e-clusterclass-quick-start.yaml"]["spec"]["variables"]
    assert V.cel_rules(e2e) == [
        "spec.variables[kubeadmControlPlaneMaxSurge].schema.openAPIV3Schema.x-kubernetes-validations[0]"]


def test_keywords_upstream_drops_are_reported_and_ignored() -> None:
    defs = var({"type": "integer", "multipleOf": 2, "nullable": True, "title": "t"})
    assert V.unsupported_keywords(defs) == [f"spec.variables[cpu].schema.openAPIV3Schema.{k}"
                                            for k in ("multipleOf", "nullable", "title")]
    assert V.validate_class_variables(defs) == []
    assert V.validate_values(defs, [{"name": "cpu", "value": 3}]) == []  # as upstream: no multipleOf there
    assert V.validate_values(defs, [{"name": "cpu", "value": None}]) == [
        'spec.topology.variables[cpu].value: Invalid value: "": must be of type integer: "null"']


# --- ClusterClass definitions ------------------------------------------------------------------------------------


def test_names() -> None:
    string = {"openAPIV3Schema": {"type": "string"}}
    defs = [{"name": "cpu", "schema": string}, {"name": "cpu", "schema": string}, {"name": "builtin", "schema": string},
            {"name": "path.tovariable", "schema": string}, {"name": "", "schema": string}]
    assert V.validate_class_variables(defs) == [
        'spec.variables[cpu].name: Invalid value: "cpu": variable name must be unique. Variable with name "cpu" is '
        "defined more than once",
        'spec.variables[builtin].name: Invalid value: "builtin": "builtin" is a reserved variable name',
        'spec.variables[path.tovariable].name: Invalid value: "path.tovariable": variable name cannot contain "."',
        "spec.variables[].name: Required value: variable name must be defined",
    ]


def test_missing_schema() -> None:
    assert V.validate_class_variables([{"name": "a"}, {"name": "b", "schema": {"openAPIV3Schema": {}}}]) == [
        "spec.variables[a].schema.openAPIV3Schema: Required value: a variable needs a schema",
        "spec.variables[b].schema.openAPIV3Schema: Required value: a variable needs a schema"]


P = "spec.variables[var].schema.openAPIV3Schema"

CLASS_CASES: list[tuple[dict[str, Any], list[str]]] = [
    ({"type": "null"},
     [f'{P}.type: Unsupported value: "null": supported values: "array", "boolean", "integer", "number", "object", '
      '"string"']),
    ({"type": ""}, [f"{P}.type: Required value: must not be empty for specified object fields"]),
    ({"type": "object", "properties": {"nestedField": {}}},
     [f"{P}.properties[nestedField].type: Required value: must not be empty for specified object fields"]),
    ({"type": "array", "items": {}}, [f"{P}.items.type: Required value: must not be empty for specified array items"]),
    ({"type": "array"}, [f"{P}.items: Required value: must be specified"]),
    ({"type": "object", "properties": {"noProxy": {"type": "invalidType"}}},
     [f'{P}.properties[noProxy].type: Unsupported value: "invalidType": supported values: "array", "boolean", '
      '"integer", "number", "object", "string"']),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
     [f"{P}: Forbidden: additionalProperties and properties are mutually exclusive"]),
    ({"type": "string", "maxLength": 6, "default": "veryLongValueIsInvalid"},
     [f"{P}.default: Too long: may not be more than 6 bytes"]),
    ({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": -100, "minimum": 1}}}}},
     [f"{P}.properties[spec].properties[replicas].default: Invalid value: -100:  in body should be greater than or "
      "equal to 1"]),
    ({"type": "object", "default": {"spec": {"replicas": -100}},
      "properties": {"spec": {"type": "object", "properties": {"replicas": {"type": "integer", "minimum": 1}}}}},
     [f"{P}.default.spec.replicas: Invalid value: -100: spec.replicas in body should be greater than or equal to 1"]),
    ({"type": "object", "properties": {"spec": {"type": "object", "required": ["replicas"], "default": {"value": 100},
                                                "properties": {"replicas": {"type": "integer", "default": 100},
                                                               "value": {"type": "integer"}}}}},
     [f"{P}.properties[spec].default.replicas: Required value"]),
    ({"type": "object", "default": {"unknown": 1}, "properties": {"a": {"type": "string"}}},
     [f'{P}.default: Invalid value: {{"unknown":1}}: must not have unknown fields']),
    ({"type": "string", "maxLength": 6, "example": "veryLongValueIsInvalid"},
     [f"{P}.example: Too long: may not be more than 6 bytes"]),
    ({"type": "integer", "minimum": 0, "enum": [1, -1]},
     [f"{P}.enum[1]: Invalid value: -1:  in body should be greater than or equal to 0"]),
    ({"type": "boolean", "default": "yes"},
     [f'{P}.default: Invalid value: "string":  in body must be of type boolean: "string"']),
    ({"type": "object", "allOf": [{"type": "object", "default": {}, "description": "dropped upstream, so allowed",
                                   "x-kubernetes-validations": [{"rule": "true"}],
                                   "properties": {"metadata": {"type": "string"}}}]},
     [f"{P}.allOf[0].default: Forbidden: must be undefined to be structural",
      f"{P}.allOf[0].properties[metadata].type: Forbidden: must be empty to be structural",
      f"{P}.allOf[0].properties[metadata]: Forbidden: must not be specified in a nested context",
      f"{P}.allOf[0].type: Forbidden: must be empty to be structural",
      f"{P}.allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural"]),
    ({"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}, []),
    ({"type": "string", "pattern": "([a-z"},
     [f"{P}.pattern: Invalid value: \"([a-z\": must be a valid regular expression, but isn't: error parsing regexp: "
      "missing closing ]: `[a-z`"]),
    ({"type": "integer", "maximum": 1.5}, [f"{P}.maximum: Invalid value: 1.5: must be an integer"]),
    ({"type": "object", "additionalProperties": True},
     [f"{P}.additionalProperties: Invalid value: true: must be a schema: ClusterClass variables do not support a "
      "boolean here"]),
    ({"type": "integer", "x-kubernetes-validations": [
        {"rule": ""}, {"rule": "self > 0", "message": " "}, {"rule": "self > 0", "reason": "InternalError"},
        {"rule": "self > 0\n&& true"}, {"rule": "self > 0", "messageExpression": " "}]},
     [f"{P}.x-kubernetes-validations[0].rule: Required value: rule is not specified",
      f'{P}.x-kubernetes-validations[1].message: Invalid value: " ": message must be non-empty if specified',
      f'{P}.x-kubernetes-validations[2].reason: Unsupported value: "InternalError": supported values: '
      '"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"',
      f"{P}.x-kubernetes-validations[3].message: Required value: message must be specified if rule contains line "
      "breaks",
      f"{P}.x-kubernetes-validations[4].messageExpression: Required value: messageExpression must be non-empty if "
      "specified"]),
    ({"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}},
                                       "list": {"type": "array", "items": {"type": "string"}}},
      "x-kubernetes-validations": [{"rule": "true", "fieldPath": ".a.b"}, {"rule": "true", "fieldPath": ".a.c"},
                                   {"rule": "true", "fieldPath": ".list[0]"}, {"rule": "true", "fieldPath": "['a']"}]},
     [f'{P}.x-kubernetes-validations[1].fieldPath: Invalid value: ".a.c": fieldPath must be a valid path: does not '
      "refer to a valid field",
      f'{P}.x-kubernetes-validations[2].fieldPath: Invalid value: ".list[0]": fieldPath must be a valid path: '
      "expected single quoted string but got 0"]),
    # oldSelf where old and new cannot be matched: under a list's items (variable lists are atomic), and, as
    # upstream's validateSchema reads the path it set while visiting the items, on a list's own rules too
    ({"type": "object", "properties": {
        "list": {"type": "array", "x-kubernetes-validations": [{"rule": "self.size() >= oldSelf.size()"}],
                 "items": {"type": "object", "properties": {"name": {"type": "string", "x-kubernetes-validations": [
                     {"rule": "self == oldSelf"}, {"rule": "self != 'x'"}]}}}},
        "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}}},
     [f'{P}.properties[list].items.properties[name].x-kubernetes-validations[0].rule: Invalid value: "self == '
      f'oldSelf": oldSelf cannot be used on the uncorrelatable portion of the schema within {P}.properties[list].items',
      f'{P}.properties[list].x-kubernetes-validations[0].rule: Invalid value: "self.size() >= oldSelf.size()": '
      f"oldSelf cannot be used on the uncorrelatable portion of the schema within {P}.properties[list].items"]),
]


@pytest.mark.parametrize(("schema", "want"), CLASS_CASES, ids=[f"case{i}" for i in range(len(CLASS_CASES))])
def test_class_schema(schema: dict[str, Any], want: list[str]) -> None:
    assert check_class(schema) == want


def test_labels_and_annotations() -> None:
    bad = {"labels": {".label-key": "v"}, "annotations": {".annotation-key": "v"}}
    defs = [{"name": "variable", "deprecatedV1Beta1Metadata": bad,
             "schema": {"openAPIV3Schema": {"type": "object", "x-metadata": bad, "properties": {
                 "enabled": {"type": "boolean", "x-metadata": {"labels": {"ok": "bad value!"}}}}}}}]
    errs = V.validate_class_variables(defs)
    assert [e.split(": ")[0] for e in errs] == [
        "spec.variables[variable].deprecatedV1Beta1Metadata.labels",
        "spec.variables[variable].deprecatedV1Beta1Metadata.annotations",
        "spec.variables[variable].schema.openAPIV3Schema.x-metadata.labels",
        "spec.variables[variable].schema.openAPIV3Schema.x-metadata.annotations",
        "spec.variables[variable].schema.openAPIV3Schema.properties[enabled].x-metadata.labels[ok]"]
    assert 'Invalid value: ".label-key": name part must consist of alphanumeric characters' in errs[0]
    assert "a valid label must be an empty string" in errs[4]


def test_upstream_e2e_class_metadata_is_valid() -> None:
    defs = CLASSES["e2e-clusterclass-quick-start.yaml"]["spec"]["variables"]
    assert any("deprecatedV1Beta1Metadata" in d for d in defs)
    assert V.validate_class_variables(defs) == []


def test_invalid_definitions_never_crash_value_functions() -> None:
    broken: list[dict[str, Any]]
    broken = [{"name": "a", "schema": {"openAPIV3Schema": {"type": "object", "properties": []}}}, {"no": "name"}]
    assert V.validate_class_variables(broken)
    assert V.default_values(broken, [{"name": "a", "value": {}}]) == [{"name": "a", "value": {}}]
    errs = V.validate_values(broken, [{"name": "a", "value": {}}])
    assert errs == ['spec.topology.variables[a]: Internal error: failed to convert schema definition for variable "a"; '
                    "ClusterClass should be checked: [schema.properties: Invalid value: []: must be a map of schemas]"]


def test_kube_openapi_quirks_upstream_has() -> None:
    """Found by comparing with cluster-api's own code on random schemas; all three are upstream behaviour."""
    # the same message is reported once (required here and in allOf)
    obj = {"type": "object", "required": ["c"], "allOf": [{"required": ["c"]}], "properties": {"c": {"type": "string"}}}
    assert check_value(obj, {}) == ["spec.topology.variables[cpu].value.c: Required value",
                                    'spec.topology.variables[cpu].value: Invalid value: "{}": "" must validate all '
                                    "the schemas (allOf). None validated"]
    # the value is converted to the enum entry's type: a float meets an integer entry truncated
    assert check_value({"type": "number", "enum": [2, 5]}, 2.5) == []
    assert check_value({"type": "number", "enum": [2, 5]}, 3.5) == [
        'spec.topology.variables[cpu].value: Unsupported value: "3.5": supported values: "2", "5"']
    # schema defaults are validated with their format kept (values and examples see it stripped)
    assert check_class({"type": "string", "format": "bogus", "default": 2.5}) == [
        'spec.variables[var].schema.openAPIV3Schema.default: Invalid value: "float64":  in body must be of type bogus: '
        '"float64"']
    assert check_class({"type": "string", "format": "bogus", "example": 2.5}) == [
        'spec.variables[var].schema.openAPIV3Schema.example: Invalid value: "number":  in body must be of type string: '
        '"number"']
