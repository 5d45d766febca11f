"""What a status write sends: the difference between the status a reconcile read and the one it wants.

Upstream's patch helper diffs the object before and after a reconcile and patches only the difference, so two
controllers that own different parts of one status (the Cluster controller and the topology controller, a
core controller and a provider's) never overwrite each other. The same rule here, as pure functions:
- fields other than `conditions`: a JSON merge patch (RFC 7386) from before to after; a field nobody changed
  is not in it, so it cannot clobber a newer value another writer put there;
- `conditions`: a list, which a merge patch can only replace whole, so the change is kept per condition type
  (set or removed) and applied onto the newest list the API server has; conditions this reconcile did not
  change stay as the other writers left them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONDITIONS = "conditions"


def merge_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns `before` into `after` (removed keys become None)."""
    out: dict[str, Any] = {}
    for k, v in after.items():
        old = before.get(k)
        if k not in before or old != v:
            if isinstance(old, Mapping) and isinstance(v, Mapping):
                sub = merge_diff(old, v)
                if sub:
                    out[k] = sub
            else:
                out[k] = v
    for k in before:
        if k not in after:
            out[k] = None
    return out


def _by_type(conditions: Iterable[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in conditions or [] if isinstance(c, Mapping)}


def condition_changes(before: Iterable[Mapping[str, Any]] | None, after: Iterable[Mapping[str, Any]] | None,
                      owned: Iterable[str] | None = None) -> dict[str, dict[str, Any] | None]:
    """Condition type -> its new value (None: removed) for every type that differs between the lists.
    With `owned`, only those types are considered (a writer that owns a few conditions of a shared list)."""
    b, a = _by_type(before), _by_type(after)
    keep = set(owned) if owned is not None else None
    out: dict[str, dict[str, Any] | None] = {}
    for t in [*a, *(t for t in b if t not in a)]:
        if keep is not None and t not in keep:
            continue
        if b.get(t) != a.get(t):
            out[t] = dict(a[t]) if t in a else None
    return out


def apply_condition_changes(conditions: Iterable[Mapping[str, Any]] | None,
                            changes: Mapping[str, dict[str, Any] | None]) -> list[dict[str, Any]]:
    """`conditions` with `changes` applied: changed types in place, removed ones dropped, new ones appended."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for c in conditions or []:
        t = str(c.get("type"))
        seen.add(t)
        if t not in changes:
            out.append(dict(c))
        elif changes[t] is not None:
            out.append(dict(changes[t] or {}))
    out.extend(dict(v) for t, v in changes.items() if t not in seen and v is not None)
    return out


@dataclass(frozen=True)
class StatusPatch:
    """A status write: `fields` as a merge patch (without conditions) and per-type condition changes."""

    fields: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, dict[str, Any] | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.fields or self.conditions)

    def body(self, current_conditions: Iterable[Mapping[str, Any]] | None) -> dict[str, Any]:
        """The `status` of the merge patch, with the condition changes applied onto `current_conditions` (the
        newest list known: the object's on the first try, the API server's after a conflict)."""
        out = dict(self.fields)
        if self.conditions:
            out[CONDITIONS] = apply_condition_changes(current_conditions, self.conditions)
        return out


def status_patch(before: Mapping[str, Any] | None, after: Mapping[str, Any],
                 owned_conditions: Iterable[str] | None = None) -> StatusPatch:
    """The write that takes status `before` to `after` (nothing when they are equal)."""
    before = before or {}
    fields = merge_diff({k: v for k, v in before.items() if k != CONDITIONS},
                        {k: v for k, v in after.items() if k != CONDITIONS})
    conds = condition_changes(before.get(CONDITIONS), after.get(CONDITIONS), owned_conditions)
    return StatusPatch(fields, conds)
