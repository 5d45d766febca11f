"""Helpers for topology-mutation handlers (upstream exp/runtime/topologymutation, the parts a Python handler needs):
the variables that apply to a template (global + the item's, `builtin` merged), dotted variable lookups
(`builtin.controlPlane.version`, `files[0].path`), and a GeneratePatches response item from an original and a
modified template: an RFC 6902 JSON patch (upstream's default format) or an RFC 7396 merge patch, base64-encoded as
upstream's `[]byte` field is on the wire."""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from capd_py.runtime_extension.types import GeneratePatchesResponseItem, Variable

JSON_PATCH = "JSONPatch"
JSON_MERGE_PATCH = "JSONMergePatch"
BUILTIN = "builtin"


class VariableNotFound(KeyError):
    """The variable (or a segment of its path) is not there (upstream topologymutation.IsNotFoundError)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "variable not found"


class VariableError(ValueError):
    """The variable is there but not of the asked-for type, or its path is malformed."""


def to_map(variables: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
    return {str(v["name"]): v.get("value") for v in variables or ()}


def _deep_merge(into: dict[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    for k, v in other.items():
        if isinstance(v, Mapping) and isinstance(into.get(k), dict):
            _deep_merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)
    return into


def merge_variables(*maps: Mapping[str, Any]) -> dict[str, Any]:
    """Later maps win; `builtin` is merged field by field (a template's builtin.controlPlane beside the request's
    builtin.cluster), as upstream's MergeVariableMaps decodes both into one Builtins struct."""
    out: dict[str, Any] = {}
    for m in maps:
        for name, value in m.items():
            if name == BUILTIN and isinstance(out.get(name), dict) and isinstance(value, Mapping):
                _deep_merge(out[name], value)
            else:
                out[name] = copy.deepcopy(value)
    return out


def template_variables(request: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any]:
    """The variables that apply to one request item: the request's, overridden by the item's."""
    return merge_variables(to_map(request.get("variables")), to_map(item.get("variables")))


_SEGMENT = re.compile(r"^([^\[\]]*)(?:\[(-?\d+)\])?$")


def get_variable(variables: Mapping[str, Any], path: str) -> Any:
    """The value at `path` (`name`, `name.field.sub`, `name[1].field`); VariableNotFound when absent, with
    upstream's messages."""
    first, *rest = path.split(".")
    value: Any = None
    for i, segment in enumerate([first, *rest]):
        m = _SEGMENT.match(segment)
        if m is None:
            raise VariableError(f"variable {path!r} has invalid syntax: failed to parse path segment {segment!r}")
        name, index = m.group(1), m.group(2)
        if i == 0:
            if name not in variables:
                raise VariableNotFound(f'variable "{first}" does not exist')
            value = variables[name]
        else:
            if not isinstance(value, Mapping) or name not in value:
                raise VariableNotFound(f'variable "{path}" does not exist: failed to lookup segment "{name}"')
            value = value[name]
        if index is not None:
            if int(index) < 0:
                raise VariableError(f"invalid array index {index} in path segment {segment!r}")
            if not isinstance(value, list):
                raise VariableError(f"variable {path!r} is invalid: failed to get array {name!r}")
            if len(value) <= int(index):
                raise VariableError(f"variable {path!r} is invalid: array does not have index {index}")
            value = value[int(index)]
    return value


def get_string_variable(variables: Mapping[str, Any], path: str) -> str:
    value = get_variable(variables, path)
    if not isinstance(value, str):
        # upstream strconv.Unquote's error on a JSON value that is not a string
        raise VariableError("invalid syntax")
    return value


def get_bool_variable(variables: Mapping[str, Any], path: str) -> bool:
    value = get_variable(variables, path)
    if not isinstance(value, bool):
        raise VariableError(f"variable {path!r} is not a boolean")
    return value


# -- patches -------------------------------------------------------------------------------------------------

def _pointer(path: str, key: str | int) -> str:
    return f"{path}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _same(a: Any, b: Any) -> bool:
    # True == 1 in Python; JSON tells them apart
    return type(a) is type(b) and a == b


def json_patch_ops(original: Any, modified: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations turning `original` into `modified`: removed/added keys, appended list items as adds at
    their index (what upstream's generator emits for an append), anything else replaced where it differs."""
    if isinstance(original, dict) and isinstance(modified, dict):
        ops: list[dict[str, Any]] = []
        for key in original:
            if key not in modified:
                ops.append({"op": "remove", "path": _pointer(path, key)})
        for key, value in modified.items():
            if key not in original:
                ops.append({"op": "add", "path": _pointer(path, key), "value": copy.deepcopy(value)})
            else:
                ops.extend(json_patch_ops(original[key], value, _pointer(path, key)))
        return ops
    if isinstance(original, list) and isinstance(modified, list):
        n = len(original)
        if len(modified) >= n and all(_equal(a, b) for a, b in zip(original, modified, strict=False)):
            return [{"op": "add", "path": _pointer(path, i), "value": copy.deepcopy(modified[i])}
                    for i in range(n, len(modified))]
        if len(modified) == n:
            return [op for i in range(n) for op in json_patch_ops(original[i], modified[i], _pointer(path, i))]
        return [{"op": "replace", "path": path, "value": copy.deepcopy(modified)}]
    if _equal(original, modified):
        return []
    return [{"op": "replace", "path": path, "value": copy.deepcopy(modified)}]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return _same(a, b)


def merge_patch(original: Any, modified: Any) -> Any:
    """RFC 7396 merge patch turning `original` into `modified` (None: nothing differs at this level's root)."""
    if not (isinstance(original, dict) and isinstance(modified, dict)):
        return copy.deepcopy(modified)
    out: dict[str, Any] = {}
    for key in original:
        if key not in modified:
            out[key] = None
    for key, value in modified.items():
        if key not in original:
            out[key] = copy.deepcopy(value)
        elif not _equal(original[key], value):
            out[key] = merge_patch(original[key], value) if isinstance(value, dict) and isinstance(
                original[key], dict) else copy.deepcopy(value)
    return out


def encode_patch(patch: Any) -> str:
    """The wire form of a patch: base64 of its compact JSON (upstream's []byte field)."""
    return base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()


def decode_patch(encoded: str) -> Any:
    return json.loads(base64.b64decode(encoded))


def patch_item(uid: str, original: Mapping[str, Any], modified: Mapping[str, Any],
               patch_type: str = JSON_PATCH) -> GeneratePatchesResponseItem:
    """The response item for the template `uid`: the patch from `original` to `modified` (an empty patch when they
    are equal, as upstream answers for a template it leaves alone)."""
    if patch_type == JSON_PATCH:
        patch: Any = json_patch_ops(dict(original), dict(modified))
    elif patch_type == JSON_MERGE_PATCH:
        patch = merge_patch(dict(original), dict(modified))
    else:
        raise ValueError(f"unknown patch type {patch_type!r}: {JSON_PATCH} or {JSON_MERGE_PATCH}")
    return {"uid": uid, "patchType": patch_type, "patch": encode_patch(patch)}


__all__ = ["JSON_MERGE_PATCH", "JSON_PATCH", "Variable", "VariableError", "VariableNotFound", "decode_patch",
           "encode_patch", "get_bool_variable", "get_string_variable", "get_variable", "json_patch_ops",
           "merge_patch", "merge_variables", "patch_item", "template_variables", "to_map"]
