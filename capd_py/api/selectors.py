"""Kubernetes label selectors (metav1.LabelSelector and its string form), one meaning for every layer."""

from __future__ import annotations

import re
from typing import Any


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str] | None) -> bool:
    """metav1.LabelSelector semantics; an empty selector matches everything."""
    labels = labels or {}
    sel = selector or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in vals:
            return False
        if op == "NotIn" and key in labels and labels[key] in vals:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def selector_string(selector: dict[str, Any] | None) -> str:
    """The string form used by the scale subresource (`status.selector`)."""
    sel = selector or {}
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        key, op, vals = e.get("key"), e.get("operator"), sorted(e.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({','.join(vals)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(vals)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def selector_is_empty(selector: dict[str, Any] | None) -> bool:
    sel = selector or {}
    return not sel.get("matchLabels") and not sel.get("matchExpressions")


_TERM = re.compile(r"\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|(in|notin)\s*\(([^)]*)\))?\s*")


def parse(selector: str) -> dict[str, Any]:
    """The string form (`a=b,c!=d,e in (x,y),f,!g`) as a LabelSelector dict; raises ValueError if malformed."""
    sel: dict[str, Any] = {"matchLabels": {}, "matchExpressions": []}
    rest = selector.strip()
    while rest:
        m = _TERM.match(rest)
        if not m or not m.group(2):
            raise ValueError(f"invalid label selector {selector!r}")
        neg, key, op, val, setop, vals = m.groups()
        if op in ("=", "=="):
            sel["matchLabels"][key] = val
        elif op == "!=":
            sel["matchExpressions"].append({"key": key, "operator": "NotIn", "values": [val]})
        elif setop:
            items = [v.strip() for v in vals.split(",") if v.strip()]
            sel["matchExpressions"].append({"key": key, "operator": "In" if setop == "in" else "NotIn",
                                            "values": items})
        else:
            sel["matchExpressions"].append({"key": key, "operator": "DoesNotExist" if neg else "Exists"})
        rest = rest[m.end():]
        if rest.startswith(","):
            rest = rest[1:]
        elif rest:
            raise ValueError(f"invalid label selector {selector!r}")
    return sel


def matches(selector: str, labels: dict[str, str] | None) -> bool:
    return selector_matches(parse(selector), labels)
