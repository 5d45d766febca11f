"""Small pure helpers shared by the core Cluster API decision modules (Cluster, Machine, MachineSet,
MachineDeployment, MachineHealthCheck): label selectors, int-or-percent values, metadata patches,
time parsing. No I/O."""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from capd_py.api import contract, gvk
from capd_py.api.admission import core as admission_core
from capd_py.api.labels import CLUSTER_NAME, PAUSED_ANNOTATION

# --- time ---------------------------------------------------------------------------------------


def parse_time(s: str | None) -> _dt.datetime | None:
    if not s:
        return None
    try:
        return _dt.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.UTC)
    except ValueError:
        try:
            return _dt.datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            return None


def iso(t: _dt.datetime) -> str:
    return t.astimezone(_dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


# --- int or percent -----------------------------------------------------------------------------


def scaled_value(v: int | str | None, total: int, round_up: bool, default: int | str = 0) -> int:
    """intstr.GetScaledValueFromIntOrPercent: ints are taken as is, "25%" of `total` rounded."""
    if v is None:
        v = default
    if isinstance(v, int):
        return v
    s = str(v).strip()
    if s.endswith("%"):
        pct = int(s[:-1])
        raw = pct * total / 100
        return math.ceil(raw) if round_up else math.floor(raw)
    return int(s)


# --- hashing ------------------------------------------------------------------------------------


def stable_hash(obj: Any, length: int = 10) -> str:
    """A short stable hash of a JSON-able value (key order independent); DNS-label safe."""
    data = json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(data).hexdigest()[:length]


# --- metadata -----------------------------------------------------------------------------------


def is_paused(obj: dict[str, Any], cluster: dict[str, Any] | None) -> bool:
    if PAUSED_ANNOTATION in (obj.get("metadata", {}).get("annotations") or {}):
        return True
    return bool(cluster and contract.dig(cluster, "spec", "paused"))


def is_deleting(obj: dict[str, Any] | None) -> bool:
    return bool(obj and obj.get("metadata", {}).get("deletionTimestamp"))


def _group(api_version: object) -> str:
    return gvk.group_of(str(api_version or ""))


def ensure_owner_ref(refs: list[dict[str, Any]], owner: dict[str, Any]) -> list[dict[str, Any]]:
    """`refs` with `owner` in it, as upstream's util.EnsureOwnerRef: a reference to the same object (group, kind
    and name; any version) is brought to `owner`'s apiVersion and uid (a stale uid is an older object of that
    name; a stale version is what a restore or upstream's e2e leaves), else `owner` is appended. A controller
    flag already there stays (the topology controller's claim on an object capd-py also owns)."""
    out = [dict(r) for r in refs]
    for r in out:
        if (r.get("kind") == owner.get("kind") and r.get("name") == owner.get("name")
                and _group(r.get("apiVersion")) == _group(owner.get("apiVersion"))):
            r.update({k: owner[k] for k in ("apiVersion", "uid") if k in owner})
            for flag in ("controller", "blockOwnerDeletion"):
                if owner.get(flag):
                    r[flag] = True
            return out
    return [*out, dict(owner)]


def current_owner_refs(refs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`refs` with every reference to a kind capd-py serves at the version it serves (upstream's controllers do the
    same through EnsureOwnerRef; its e2e rewrites all owner references to <group>/v1alpha1 and expects them back).
    References to kinds capd-py does not serve (a third-party provider's) are left as they are."""
    out = []
    for r in refs:
        served = gvk.by_group_kind(_group(r.get("apiVersion")), str(r.get("kind") or ""))
        out.append({**r, "apiVersion": served.api_version} if served and r.get("apiVersion") != served.api_version
                   else r)
    return out


def ensured_owner_refs(refs: list[dict[str, Any]], owner: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The owner references a controller leaves: each at the version capd-py serves (current_owner_refs), and
    `owner`, when given, ensured among them (ensure_owner_ref)."""
    current = current_owner_refs(refs)
    return current if owner is None else ensure_owner_ref(current, owner)


def metadata_patch(obj: dict[str, Any], *, finalizer: str | None = None, owner: dict[str, Any] | None = None,
                   labels: Mapping[str, str | None] | None = None,
                   annotations: Mapping[str, str | None] | None = None,
                   remove_finalizer: str | None = None) -> dict[str, Any] | None:
    """A JSON merge patch for metadata that adds a finalizer / owner reference / labels, or None when
    nothing is missing. Lists are replaced whole by merge patch, so the full desired list is sent
    together with resourceVersion (optimistic concurrency). A label or annotation whose value is None is skipped."""
    md = obj.get("metadata") or {}
    patch: dict[str, Any] = {}
    fins = list(md.get("finalizers") or [])
    new_fins = list(fins)
    if finalizer and finalizer not in new_fins:
        new_fins.append(finalizer)
    if remove_finalizer and remove_finalizer in new_fins:
        new_fins = [f for f in new_fins if f != remove_finalizer]
    if new_fins != fins:
        patch["finalizers"] = new_fins
    refs = list(md.get("ownerReferences") or [])
    ensured = ensured_owner_refs(refs, owner)
    if ensured != refs:
        patch["ownerReferences"] = ensured
    cur_labels = md.get("labels") or {}
    add_l = {k: v for k, v in (labels or {}).items() if v is not None and cur_labels.get(k) != v}
    if add_l:
        patch["labels"] = add_l
    cur_ann = md.get("annotations") or {}
    add_a = {k: v for k, v in (annotations or {}).items() if v is not None and cur_ann.get(k) != v}
    if add_a:
        patch["annotations"] = add_a
    if not patch:
        return None
    patch["resourceVersion"] = md.get("resourceVersion")
    return {"metadata": patch}


def merge_patches(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """One JSON merge patch doing what `a` then `b` do (b wins where both set the same leaf)."""
    out = dict(a)
    for k, v in b.items():
        out[k] = merge_patches(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def in_place_spec_patch(want: dict[str, Any], have: dict[str, Any]) -> dict[str, Any] | None:
    """A JSON merge patch ({"spec": ...}) giving a Machine's spec the `want` fields (upstream's in-place
    propagation from a MachineSet, MachinePool or KCP template), None when they match. Unset, empty and zero count
    as one; an object field is replaced whole (its keys `want` lacks are removed: merge patches merge objects)."""
    patch: dict[str, Any] = {}
    for f, v in want.items():
        cur = have.get(f)
        if (v or None) == (cur or None):
            continue
        if isinstance(v, dict) and isinstance(cur, dict):
            v = {**{k: None for k in cur if k not in v}, **v}
        patch[f] = v or None
    return {"spec": patch} if patch else None


def selector_defaults_patch(obj: dict[str, Any], name_label: str) -> dict[str, Any] | None:
    """What upstream's defaulting webhook adds to a MachineSet/MachineDeployment (we run none): its
    own name label (`name_label`) and the cluster-name label in spec.selector.matchLabels and
    spec.template.metadata.labels. None when both are present."""
    want = {name_label: obj["metadata"]["name"][:63]}
    cn = contract.dig(obj, "spec", "clusterName")
    if cn:
        want[CLUSTER_NAME] = cn
    sel = contract.dig(obj, "spec", "selector", "matchLabels", default={}) or {}
    tl = contract.dig(obj, "spec", "template", "metadata", "labels", default={}) or {}
    ps = {k: v for k, v in want.items() if sel.get(k) != v}
    pt = {k: v for k, v in want.items() if tl.get(k) != v}
    patch: dict[str, Any] = {}
    if ps:
        patch["selector"] = {"matchLabels": ps}
    if pt:
        patch["template"] = {"metadata": {"labels": pt}}
    return {"spec": patch} if patch else None


def cluster_labels(cluster_name: str) -> dict[str, str]:
    return {CLUSTER_NAME: cluster_name}


def ref_of(obj: dict[str, Any]) -> dict[str, str]:
    """A v1beta2 ContractVersionedObjectReference pointing at `obj`."""
    return {"apiGroup": obj["apiVersion"].rpartition("/")[0], "kind": obj["kind"], "name": obj["metadata"]["name"]}


def ref_str(r: dict[str, str] | None) -> str:
    if not r:
        return "<none>"
    return f"{r.get('kind')} {r.get('name')}"


def replicas_of(obj: dict[str, Any], default: int | None = None) -> int:
    """spec.replicas; unset (no defaulting webhook ran: CRDs installed without one) reads as `default`, or, without
    one, as the defaulting webhook would have set it (the autoscaler's min size, else 1; 1 when its annotations
    cannot be parsed, which the webhook would have refused)."""
    v = contract.dig(obj, "spec", "replicas")
    if v is not None:
        return int(v)
    if default is not None:
        return default
    try:
        return admission_core.default_replicas(obj, None)
    except admission_core.DefaultingError:
        return 1


def status_int(obj: dict[str, Any], field: str) -> int:
    return int(contract.dig(obj, "status", field) or 0)


def with_v1beta1_counters(status: dict[str, Any], **counts: int) -> dict[str, Any]:
    """`status` with `counts` in status.deprecated.v1beta1, the replica counters upstream still keeps for v1beta1
    clients (its conversion serves them as a v1beta1 object's status.readyReplicas ...); the rest of
    deprecated.v1beta1 (conditions, failureReason) stays as it is."""
    deprecated = dict(status.get("deprecated") or {})
    deprecated["v1beta1"] = {**(deprecated.get("v1beta1") or {}), **counts}
    return {**status, "deprecated": deprecated}


def v1beta1_int(obj: dict[str, Any] | None, field: str) -> int:
    """A counter of status.deprecated.v1beta1 (0 when unset)."""
    return int(contract.dig(obj or {}, "status", "deprecated", "v1beta1", field) or 0)


# (status, reason, message) of a condition, for a caller's own setter
Condition = tuple[bool, str, str]


def scaling_conditions(current: int, want: int, up_allowed: bool = True) -> tuple[Condition, Condition]:
    """The ScalingUp and ScalingDown conditions of a replica set of any kind (as upstream words them)."""
    up: Condition = ((True, "ScalingUp", f"Scaling up from {current} to {want} replicas")
                     if current < want and up_allowed else (False, "NotScalingUp", ""))
    down: Condition = ((True, "ScalingDown", f"Scaling down from {current} to {want} replicas")
                       if current > want else (False, "NotScalingDown", ""))
    return up, down


def machines_up_to_date_condition(total: int, up_to_date: int) -> Condition:
    """MachinesUpToDate over `total` machines of which `up_to_date` are."""
    if not total:
        return True, "NoReplicas", ""
    if up_to_date >= total:
        return True, "UpToDate", ""
    return False, "NotUpToDate", f"{total - up_to_date} Machine(s) not up to date"

