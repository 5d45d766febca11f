"""Upstream's annotation-based preservation of hub data across a down-conversion.

from_hub stores the hub object (without metadata) as JSON in `cluster.x-k8s.io/conversion-data`, as
upstream's utilconversion.MarshalData does. to_hub takes it out again and restores what v1beta1 cannot say.
Upstream restores a hand-picked list of fields per kind; here one rule covers every field: a value the
v1beta1 client did not change (its plain up-conversion equals the up-conversion of the stored object's
down-conversion) is taken from the stored object, a value it changed wins. That makes the round trip
v1beta2 -> v1beta1 -> v1beta2 exact and still keeps edits made through v1beta1.
"""

from __future__ import annotations

import json
from typing import Any

from capd_py.api.conversion.fields import ConversionError, Obj

DATA_ANNOTATION = "cluster.x-k8s.io/conversion-data"

_MISSING: Any = object()


def store(hub: Obj, spoke: Obj) -> None:
    """Record the hub object (all but metadata) on the down-converted spoke."""
    data = {k: v for k, v in hub.items() if k != "metadata"}
    annotations = spoke.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[DATA_ANNOTATION] = json.dumps(data, separators=(",", ":"), sort_keys=True)


def take(spoke: Obj) -> Obj | None:
    """Remove the stored hub data from a spoke object (None when there is none)."""
    metadata = spoke.get("metadata")
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    if not isinstance(annotations, dict) or DATA_ANNOTATION not in annotations:
        return None
    raw = annotations.pop(DATA_ANNOTATION)
    if not annotations:
        metadata.pop("annotations")  # type: ignore[union-attr]
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise ConversionError(f"annotation {DATA_ANNOTATION} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConversionError(f"annotation {DATA_ANNOTATION} is not a JSON object")
    return data


def merge(stored: Any, baseline: Any, converted: Any) -> Any:
    """Three-way merge: `converted` (what the v1beta1 object says now) wins wherever it differs from
    `baseline` (what the stored object looks like after a trip through v1beta1); elsewhere `stored`.

    Dicts merge key by key; lists of equal length element by element (extraArgs, conditions, failure
    domains keep their stored extras when the v1beta1 client only read them); anything else is atomic.
    Returns _MISSING for "no value".
    """
    if converted == baseline:
        return stored
    if isinstance(converted, dict) and isinstance(baseline, dict) and isinstance(stored, dict):
        out: Obj = {}
        for key in [*converted, *(k for k in baseline if k not in converted),
                    *(k for k in stored if k not in converted and k not in baseline)]:
            value = merge(stored.get(key, _MISSING), baseline.get(key, _MISSING), converted.get(key, _MISSING))
            if value is not _MISSING:
                out[key] = value
        return out
    if (
        isinstance(converted, list) and isinstance(baseline, list) and isinstance(stored, list)
        and len(converted) == len(baseline) == len(stored)
    ):
        merged = [merge(s, b, c) for s, b, c in zip(stored, baseline, converted, strict=True)]
        return [m for m in merged if m is not _MISSING]
    return converted


def restore(stored: Obj, baseline: Obj, converted: Obj) -> Obj:
    """The restored hub object: metadata always from `converted` (the live object's)."""
    body = merge(
        {k: v for k, v in stored.items() if k != "metadata"},
        {k: v for k, v in baseline.items() if k != "metadata"},
        {k: v for k, v in converted.items() if k != "metadata"},
    )
    out: Obj = dict(body) if isinstance(body, dict) else {}
    if "metadata" in converted:
        out["metadata"] = converted["metadata"]
    out["apiVersion"] = converted["apiVersion"]
    out["kind"] = converted["kind"]
    return out
