"""A small structural-schema check for converted objects (no jsonschema dependency in the project).

It checks what would make the API server refuse or silently prune a converted object: unknown fields
(pruning), types, required fields, enums, simple bounds. CEL rules are left to the envtest tier.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[4]
CRDS = ROOT / "crds"
# Upstream's v1beta1 schemas (hack/vendor_upstream_v1beta1.py): what a v1beta1 client may send and receive, and
# what the CRDs serve as v1beta1.
UPSTREAM_V1BETA1 = ROOT / "capd_py" / "kube" / "crds_v1beta1"


@cache
def _schemas() -> dict[tuple[str, str, str], dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for path in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            key = (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
            out[key] = version["schema"]["openAPIV3Schema"]
    for path in UPSTREAM_V1BETA1.glob("*.yaml"):
        ours = yaml.safe_load((CRDS / path.name).read_text())
        group, kind = ours["spec"]["group"], ours["spec"]["names"]["kind"]
        # the older version served (v1beta1; ExtensionConfig's v1alpha1), named in the file's header
        version = "v1alpha1" if "version v1alpha1:" in path.read_text().split("\n", 1)[0] else "v1beta1"
        out[(group, version, kind)] = yaml.safe_load(path.read_text())["openAPIV3Schema"]
    return out


def schema_for(api_version: str, kind: str) -> dict[str, Any]:
    group, version = api_version.rsplit("/", 1)
    return _schemas()[(group, version, kind)]


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,), "array": (list,), "string": (str,), "boolean": (bool,), "integer": (int,),
    "number": (int, float),
}


def check(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    errors: list[str] = []
    if value is None:
        return []  # null is dropped by the API server where the schema does not say nullable
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, int | str) or isinstance(value, bool):
            errors.append(f"{path}: not int-or-string: {value!r}")
        return errors
    typ = schema.get("type")
    if typ:
        ok = isinstance(value, _TYPES[typ]) and not (typ in ("integer", "number") and isinstance(value, bool))
        if not ok:
            return [f"{path}: expected {typ}, got {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", 1 << 30):
            errors.append(f"{path}: length of {value!r} out of bounds")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", 1 << 30):
            errors.append(f"{path}: {len(value)} items out of bounds")
        for i, item in enumerate(value):
            errors += check(item, schema.get("items", {}), f"{path}[{i}]")
    if isinstance(value, dict):
        props = schema.get("properties")
        if len(value) < schema.get("minProperties", 0):
            errors.append(f"{path}: fewer than {schema['minProperties']} properties")
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}.{key}: required")
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                errors += check(item, props[key], f"{path}.{key}")
            elif isinstance(additional, dict):
                errors += check(item, additional, f"{path}.{key}")
            elif props is not None and not schema.get("x-kubernetes-preserve-unknown-fields"):
                errors.append(f"{path}.{key}: unknown field (would be pruned)")
    return errors


def check_object(obj: dict[str, Any]) -> list[str]:
    """Errors of a whole object against its CRD version's schema (metadata is the API server's)."""
    schema = schema_for(obj["apiVersion"], obj["kind"])
    body = {k: v for k, v in obj.items() if k != "metadata"}
    props = dict(schema.get("properties", {}))
    props.pop("metadata", None)
    required = [r for r in schema.get("required", []) if r != "metadata"]  # upstream's MachineDrainRule lists it
    return check(body, {**schema, "properties": props, "required": required})
