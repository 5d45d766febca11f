"""Building blocks shared by the per-kind conversions: paths, durations, references, status layout.

Every function here mutates the dict it is given; the dispatcher hands the per-kind code a deep copy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from capd_py.api import godur

Obj = dict[str, Any]


class ConversionError(ValueError):
    """An object that cannot be converted (the ConversionReview answers Failure with this message)."""


# ---------------------------------------------------------------------------------------------- paths


def get(obj: Mapping[str, Any], path: str) -> Any:
    """Value at a dotted path, None when any step is missing or not a dict."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return None
        cur = cur[part]
    return cur


def pop(obj: Obj, path: str) -> Any:
    """Remove and return the value at a dotted path (None if absent); empty parents stay."""
    *parents, last = path.split(".")
    cur: Any = obj
    for part in parents:
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    if not isinstance(cur, dict):
        return None
    return cur.pop(last, None)


def put(obj: Obj, path: str, value: Any) -> None:
    """Set a dotted path, creating parents; a None value sets nothing (the field stays omitted)."""
    if value is None:
        return
    *parents, last = path.split(".")
    cur = obj
    for part in parents:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            cur[part] = nxt
        cur = nxt
    cur[last] = value


def move(obj: Obj, src: str, dst: str, fn: Callable[[Any], Any] | None = None) -> None:
    """Move a field to another path (through `fn` when given), dropping parents it leaves empty."""
    value = pop(obj, src)
    prune_empty(obj, src.rsplit(".", 1)[0] if "." in src else "")
    if value is not None:
        put(obj, dst, fn(value) if fn else value)


def prune_empty(obj: Obj, path: str) -> None:
    """Drop the dict at `path` and then its ancestors while they are empty."""
    while path:
        value = get(obj, path)
        if value != {}:
            return
        pop(obj, path)
        path = path.rsplit(".", 1)[0] if "." in path else ""


# Raw JSON (variable values, schema defaults/examples): left exactly as written.
_RAW = frozenset({"value", "default", "example", "enum"})
# Kept even when empty: required fields upstream marshals without omitempty, and label selectors (an empty
# one matches everything).
_KEEP_EMPTY = frozenset({"template", "selector", "clusterSelector"})


def drop_empty(value: Any, keep: frozenset[str] = frozenset(), path: str = "") -> Any:
    """Drop `{}` and null values recursively, as Go drops zero-valued structs, nil maps and nil pointers marked
    omitempty/omitzero when upstream marshals a converted object (v1beta1 `nodeRegistration: {}` is absent in
    v1beta2, whose CRDs say minProperties: 1 there). `keep`: dotted paths of required objects kept even when
    empty (a Docker template's `spec.template.spec`). Lists are kept as they are: `taints: []` means "no
    taints"."""
    if isinstance(value, dict):
        out: Obj = {}
        for key, item in value.items():
            sub = f"{path}.{key}" if path else key
            if key in _RAW:
                out[key] = item
                continue
            item = drop_empty(item, keep, sub)
            if item is None:
                continue
            if item != {} or key in _KEEP_EMPTY or sub in keep:
                out[key] = item
        return out
    if isinstance(value, list):
        return [drop_empty(v, keep, path) for v in value]
    return value


def items(obj: Mapping[str, Any], path: str) -> list[Obj]:
    """The dict entries of the list at `path` (nothing when absent)."""
    value = get(obj, path)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


# ------------------------------------------------------------------------------------------ durations

def duration_to_seconds(value: Any) -> int:
    """A Go duration string (metav1.Duration, e.g. "10m0s", "1.5h", "300ms") as whole seconds.

    Upstream's ConvertToSeconds truncates (int32(d.Seconds())), so "1500ms" is 1 and "300ms" is 0.
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, str):
        raise ConversionError(f"invalid duration {value!r}")
    try:
        nanos = godur.parse_nanos(value)
    except ValueError as e:
        raise ConversionError(f"invalid duration {value!r}: {e}") from e
    whole = abs(nanos) // 1_000_000_000
    return -whole if nanos < 0 else whole


def seconds_to_duration(seconds: Any) -> str:
    """Whole seconds as Go's time.Duration.String() prints them ("0s", "45s", "10m0s", "1h0m0s")."""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise ConversionError(f"invalid seconds {seconds!r}")
    return godur.format_nanos(seconds * 1_000_000_000)


def duration_up(obj: Obj, src: str, dst: str) -> None:
    move(obj, src, dst, duration_to_seconds)


def duration_down(obj: Obj, src: str, dst: str) -> None:
    move(obj, src, dst, seconds_to_duration)


# ----------------------------------------------------------------------------------------- references

# The version a v1beta1 reference names for a group that v1beta2 references by group only. Upstream asks the
# CRD's contract labels (apiVersionGetter); every group capd-py serves is at v1beta2.
DEFAULT_GROUP_VERSIONS: Mapping[str, str] = {
    "cluster.x-k8s.io": "v1beta2",
    "bootstrap.cluster.x-k8s.io": "v1beta2",
    "controlplane.cluster.x-k8s.io": "v1beta2",
    "infrastructure.cluster.x-k8s.io": "v1beta2",
    "addons.cluster.x-k8s.io": "v1beta2",
}

VersionResolver = Callable[[str, str], str]
"""(group, kind) -> the version a v1beta1 ObjectReference should carry."""


def default_resolver(group: str, kind: str) -> str:
    version = DEFAULT_GROUP_VERSIONS.get(group)
    if version is None and group.endswith(".cluster.x-k8s.io"):
        # Third-party providers of the same contract: their current contract version.
        version = "v1beta2"
    if version is None:
        raise ConversionError(f"no API version known for group {group!r} (kind {kind})")
    return version


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def ref_up(ref: Any) -> Any:
    """v1beta1 corev1.ObjectReference -> v1beta2 ContractVersionedObjectReference {apiGroup, kind, name}."""
    if not isinstance(ref, dict):
        return ref
    out: Obj = {}
    if ref.get("apiVersion"):
        out["apiGroup"] = group_of(ref["apiVersion"])
    for key in ("kind", "name"):
        if ref.get(key):
            out[key] = ref[key]
    return out


def ref_down(ref: Any, namespace: str | None, resolve: VersionResolver) -> Any:
    """v1beta2 ContractVersionedObjectReference -> v1beta1 ObjectReference (namespace of the object)."""
    if not isinstance(ref, dict):
        return ref
    out: Obj = {}
    group, kind = ref.get("apiGroup", ""), ref.get("kind", "")
    if group:
        out["apiVersion"] = f"{group}/{resolve(group, kind)}"
    if kind:
        out["kind"] = kind
    if namespace:
        out["namespace"] = namespace
    if ref.get("name"):
        out["name"] = ref["name"]
    return out


def template_ref_up(ref: Any) -> Any:
    """v1beta1 ObjectReference -> a v1beta2 template reference {apiVersion, kind, name} (namespace dropped)."""
    if not isinstance(ref, dict):
        return ref
    return {k: ref[k] for k in ("apiVersion", "kind", "name") if ref.get(k)}


def template_ref_down(ref: Any, namespace: str | None) -> Any:
    if not isinstance(ref, dict):
        return ref
    out = {k: ref[k] for k in ("apiVersion", "kind") if ref.get(k)}
    if namespace:
        out["namespace"] = namespace
    if ref.get("name"):
        out["name"] = ref["name"]
    return out


# ------------------------------------------------------------------------------------ extraArgs lists


def args_up(args: Any) -> Any:
    """v1beta1 extraArgs map -> v1beta2 list of {name, value}, sorted by name as upstream's ConvertToArgs."""
    if not isinstance(args, dict):
        return args
    return [{"name": k, "value": str(args[k])} for k in sorted(args)]


def args_down(args: Any) -> Any:
    """v1beta2 extraArgs list -> v1beta1 map (a repeated name keeps its last value, as upstream)."""
    if not isinstance(args, list):
        return args
    return {a["name"]: a.get("value", "") for a in args if isinstance(a, dict) and "name" in a}


# -------------------------------------------------------------------------------------- status layout


def status_up(
    obj: Obj,
    *,
    deprecated: Sequence[str] = ("conditions", "failureReason", "failureMessage"),
    lifted: Sequence[str] = ("conditions",),
    initialization: Mapping[str, str] | None = None,
) -> None:
    """v1beta1 status -> v1beta2 layout.

    `deprecated`: v1beta1 fields that move under status.deprecated.v1beta1 (legacy conditions with severity,
    failure*, counters whose meaning changed). `lifted`: fields of status.v1beta2 that become top-level.
    `initialization`: v1beta1 booleans -> status.initialization keys (only true is carried: upstream's
    Convert_bool_To_Pointer_bool leaves false unset unless the annotation says it was set).
    """
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    old = {k: status.pop(k) for k in deprecated if k in status}
    new = status.pop("v1beta2", None) or {}
    for key in lifted:
        if key in new:
            status[key] = new[key]
    for bool_key, init_key in (initialization or {}).items():
        if status.pop(bool_key, None) is True:
            put(status, f"initialization.{init_key}", True)
    if old:
        put(status, "deprecated.v1beta1", old)
    if not status:
        obj.pop("status")


def status_down(
    obj: Obj,
    *,
    deprecated: Sequence[str] = ("conditions", "failureReason", "failureMessage"),
    lifted: Sequence[str] = ("conditions",),
    initialization: Mapping[str, str] | None = None,
) -> None:
    """v1beta2 status -> v1beta1 layout (the inverse of status_up)."""
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    new = {k: status.pop(k) for k in lifted if k in status}
    old = get(status, "deprecated.v1beta1") or {}
    status.pop("deprecated", None)
    for key in deprecated:
        if key in old:
            status[key] = old[key]
    init = status.pop("initialization", None)
    if isinstance(init, dict):
        for bool_key, init_key in (initialization or {}).items():
            status[bool_key] = bool(init.get(init_key, False))
    if new:
        status["v1beta2"] = new
    if not status:
        obj.pop("status")


def failure_domains_up(domains: Any) -> Any:
    """v1beta1 map name -> {controlPlane, attributes} -> v1beta2 list sorted by name."""
    if not isinstance(domains, dict):
        return domains
    out = []
    for name in sorted(domains):
        spec = domains[name] or {}
        entry: Obj = {"name": name, "controlPlane": bool(spec.get("controlPlane", False))}
        if spec.get("attributes"):
            entry["attributes"] = spec["attributes"]
        out.append(entry)
    return out


def failure_domains_down(domains: Any) -> Any:
    if not isinstance(domains, list):
        return domains
    out: Obj = {}
    for fd in domains:
        if not isinstance(fd, dict) or "name" not in fd:
            continue
        # controlPlane always written: an entry must not be an empty object (drop_empty would remove it).
        spec: Obj = {"controlPlane": bool(fd.get("controlPlane", False))}
        if fd.get("attributes"):
            spec["attributes"] = fd["attributes"]
        out[fd["name"]] = spec
    return out
