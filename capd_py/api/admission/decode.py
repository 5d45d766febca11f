"""What upstream's webhooks do before any rule: decode the object into its Go type. A mutating webhook sees the
object before the API server validates it against the CRD's schema, so a value of the wrong JSON type reaches it;
upstream's decoder refuses it (`admission.Errored(400, "json: cannot unmarshal ...")`) where capd-py's rules, written
for well-typed objects, would fail in the middle. `decode_error` is that first step, read from the CRD's schema.
Pure: no I/O."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from capd_py.api import godur

# The string fields of the kinds capd-py admits that upstream's Go types hold as metav1.Duration: decoding parses
# them (time.ParseDuration), so a string that is not a Go duration is refused there, before any rule (400 `time:
# invalid duration "x"`). The Dev* and Docker* kinds': DevMachine(Template)'s in-memory provisioning
# `startupDuration` (vm, node, apiServer, etcd) and the docker backend's / DockerMachine(Template)'s
# `bootstrapTimeout`. The CRD schema says only `type: string` for them, as upstream's does.
GO_DURATION_FIELDS = frozenset({"startupDuration", "bootstrapTimeout"})

_JSON_KIND = {bool: "bool", str: "string", int: "number", float: "number", list: "array", dict: "object"}


def _json_kind(value: Any) -> str:
    return _JSON_KIND.get(type(value), type(value).__name__)


def _fits(value: Any, schema: Mapping[str, Any]) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    t = schema.get("type")
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return True  # no type: anything (x-kubernetes-preserve-unknown-fields, embedded resources)


# an integer's Go type, by its schema's format: a number outside the type's range does not decode
_INT_RANGES = {"int32": (-(1 << 31), (1 << 31) - 1), "int64": (-(1 << 63), (1 << 63) - 1)}


def _property_schema(schema: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    """The schema of an object's `key`: its property's, else additionalProperties' (None: unknown, no type)."""
    props = schema.get("properties") or {}
    if key in props:
        return props[key]  # type: ignore[no-any-return]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def decode_error(value: Any, schema: Mapping[str, Any] | None, path: str = "") -> str | None:
    """The first value of `value` that does not decode into the type `schema` describes, as Go's encoding/json
    words it (null decodes into anything: Go's zero value), or None."""
    if value is None or not isinstance(schema, Mapping):
        return None
    if not _fits(value, schema):
        want = "IntOrString" if schema.get("x-kubernetes-int-or-string") else str(schema.get("type"))
        return f"json: cannot unmarshal {_json_kind(value)} into Go struct field {path.lstrip('.')} of type {want}"
    bounds = _INT_RANGES.get(str(schema.get("format"))) if schema.get("type") == "integer" else None
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        return (f"json: cannot unmarshal number {value} into Go struct field {path.lstrip('.')} of type "
                f"{schema.get('format')}")
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for k, v in value.items():
            sub = _property_schema(schema, k)
            if k == "openAPIV3Schema" and path.endswith(".schema"):
                # a ClusterClass variable's schema: the CRD types its first level only (as upstream's), Go decodes
                # it whole into JSONSchemaProps
                err = _schema_props_error(v, f"{path}.{k}".lstrip("."))
                if err:
                    return err
                continue
            err = decode_error(v, sub, f"{path}.{k}")
            if err is None and k in props and k in GO_DURATION_FIELDS and isinstance(v, str):
                err = _duration_error(v)
            if err:
                return err
    elif isinstance(value, list):
        items = schema.get("items")
        for v in value:
            err = decode_error(v, items if isinstance(items, Mapping) else None, path)
            if err:
                return err
    return None


# Cluster API v1beta2's JSONSchemaProps (a ClusterClass variable's schema) and the structs in it, field -> Go type
# (api/core/v1beta2/clusterclass_types.go): "json" holds any JSON value, "*" a nested JSONSchemaProps, "map*" a map of
# them, "[]*" a list of them
_GO_STRUCTS: dict[str, dict[str, str]] = {
    "JSONSchemaProps": {
        "description": "string", "example": "json", "type": "string", "properties": "map*",
        "additionalProperties": "*", "maxProperties": "int64", "minProperties": "int64", "required": "[]string",
        "items": "*", "maxItems": "int64", "minItems": "int64", "uniqueItems": "bool", "format": "string",
        "maxLength": "int64", "minLength": "int64", "pattern": "string", "maximum": "int64",
        "exclusiveMaximum": "bool", "minimum": "int64", "exclusiveMinimum": "bool",
        "x-kubernetes-preserve-unknown-fields": "bool", "enum": "[]json", "default": "json",
        "x-kubernetes-validations": "[]ValidationRule", "x-metadata": "VariableSchemaMetadata",
        "x-kubernetes-int-or-string": "bool", "allOf": "[]*", "oneOf": "[]*", "anyOf": "[]*", "not": "*"},
    "ValidationRule": {"rule": "string", "message": "string", "messageExpression": "string", "reason": "string",
                       "fieldPath": "string"},
    "VariableSchemaMetadata": {"labels": "map[string]string", "annotations": "map[string]string"},
}
# the struct a field's Go type holds (itself, or the values of its map or the items of its list)
_STRUCT_OF = {"*": "JSONSchemaProps", "map*": "JSONSchemaProps", "[]*": "JSONSchemaProps",
              "[]ValidationRule": "ValidationRule", "VariableSchemaMetadata": "VariableSchemaMetadata"}
_GO_TYPE_NAMES = {"*": "v1beta2.JSONSchemaProps", "map*": "map[string]v1beta2.JSONSchemaProps",
                  "[]*": "[]v1beta2.JSONSchemaProps", "[]ValidationRule": "[]v1beta2.ValidationRule",
                  "VariableSchemaMetadata": "v1beta2.VariableSchemaMetadata", "[]json": "[]v1.JSON"}


def _schema_props_error(value: Any, path: str, struct: str = "JSONSchemaProps") -> str | None:
    """The first field of a Go struct (_GO_STRUCTS) that `value` does not decode into, as encoding/json words it:
    the innermost struct's name, then the JSON field path from the object's root (no list index, no map key)."""
    if value is None:
        return None
    if not isinstance(value, dict):
        return f"json: cannot unmarshal {_json_kind(value)} into Go value of type v1beta2.{struct}"
    fields = _GO_STRUCTS[struct]
    for k, v in value.items():
        go = fields.get(k)
        if go is None or v is None or go == "json":
            continue
        where = f"{path}.{k}"
        wrong = functools.partial(_unmarshal_error, v, struct, where)
        if go in ("string", "bool"):
            if not isinstance(v, str if go == "string" else bool):
                return wrong(go)
        elif go == "int64":
            if isinstance(v, bool) or not isinstance(v, int | float):
                return wrong(go)
            if isinstance(v, float) and not v.is_integer() or not -(1 << 63) <= v < (1 << 63):
                return wrong(go, f"number {v}")
        elif not isinstance(v, list if go.startswith("[]") else dict):
            return wrong(_GO_TYPE_NAMES.get(go, go))
        elif go in _STRUCT_OF:  # a struct, or a map or list of them
            items: Iterable[Any] = [v] if go in ("*", "VariableSchemaMetadata") else \
                v.values() if isinstance(v, dict) else v
            for item in items:
                err = _schema_props_error(item, where, _STRUCT_OF[go])
                if err:
                    return err
        elif go in ("map[string]string", "[]string"):
            for item in v.values() if isinstance(v, dict) else v:
                if item is not None and not isinstance(item, str):
                    return wrong("string", _json_kind(item))
    return None


def _unmarshal_error(value: Any, struct: str, path: str, want: str, shown: str | None = None) -> str:
    """encoding/json's UnmarshalTypeError text."""
    return f"json: cannot unmarshal {shown or _json_kind(value)} into Go struct field {struct}.{path} of type {want}"


def _duration_error(text: str) -> str | None:
    """metav1.Duration's UnmarshalJSON: time.ParseDuration's error, as it words it."""
    try:
        godur.parse_nanos(text)
    except ValueError as e:
        return str(e)
    return None


def zero_null_items(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """`value` as upstream's rules read it, decoded into Go types: a null item of a list of structs is the struct's
    zero value, here `{}` (v1beta2's fields are all omitempty). A copy; the rest unchanged."""
    if not isinstance(schema, Mapping):
        return value
    if isinstance(value, dict):
        return {k: zero_null_items(v, _property_schema(schema, k)) for k, v in value.items()}
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return list(value)
        struct = items.get("type") == "object" and bool(items.get("properties"))
        return [{} if v is None and struct else zero_null_items(v, items) for v in value]
    return value
