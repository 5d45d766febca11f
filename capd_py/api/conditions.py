"""metav1.Condition helpers over plain dicts (v1beta2 `status.conditions`).

lastTransitionTime moves only when the status flips, so a reconcile that observes nothing new
produces an identical status and writes nothing.
"""

from __future__ import annotations

import copy
import datetime as _dt
from typing import Any

READY = "Ready"
AVAILABLE = "Available"
PAUSED = "Paused"
DELETING = "Deleting"
NODE_READY = "NodeReady"  # a Machine's mirror of its Node's Ready condition

TRUE, FALSE, UNKNOWN = "True", "False", "Unknown"


def now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def get(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def is_true(obj: dict[str, Any], ctype: str) -> bool:
    c = get(obj, ctype)
    return bool(c and c.get("status") == TRUE)


def set_condition(
    conditions: list[dict[str, Any]] | None,
    ctype: str,
    status: bool | str,
    reason: str,
    message: str = "",
    observed_generation: int | None = None,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Return a new list with `ctype` set; other conditions keep their order and content."""
    st = status if isinstance(status, str) else (TRUE if status else FALSE)
    out: list[dict[str, Any]] = []
    found = False
    for c in conditions or []:
        if c.get("type") != ctype:
            out.append(c)
            continue
        found = True
        ltt = c.get("lastTransitionTime") if c.get("status") == st else (now or now_iso())
        out.append(_cond(ctype, st, reason, message, observed_generation, ltt or now or now_iso()))
    if not found:
        out.append(_cond(ctype, st, reason, message, observed_generation, now or now_iso()))
    return out


# v1beta1's conditions (status.deprecated.v1beta1.conditions): a False one carries a severity; a True one no reason
SEVERITY_ERROR, SEVERITY_WARNING, SEVERITY_INFO = "Error", "Warning", "Info"


def set_v1beta1(conditions: list[dict[str, Any]] | None, ctype: str, status: bool, reason: str = "",
                message: str = "", severity: str = "", now: str | None = None) -> list[dict[str, Any]]:
    """`conditions` (v1beta1 form, upstream's v1beta1conditions.MarkTrue / MarkFalse) with `ctype` set: True drops
    reason, message and severity; the transition time moves only when the status does."""
    st = TRUE if status else FALSE
    c: dict[str, Any] = {"type": ctype, "status": st}
    if not status:
        c.update({k: v for k, v in (("severity", severity), ("reason", reason), ("message", message)) if v})
    old = next((o for o in conditions or [] if o.get("type") == ctype), None)
    c["lastTransitionTime"] = old["lastTransitionTime"] if old and old.get("status") == st and \
        old.get("lastTransitionTime") else (now or now_iso())
    if old is None:
        return [*(conditions or []), c]
    return [c if o.get("type") == ctype else o for o in conditions or []]


def v1beta1_summary(conditions: list[dict[str, Any]], types: tuple[str, ...], now: str | None = None
                    ) -> list[dict[str, Any]]:
    """`conditions` with Ready summarising `types` as upstream's v1beta1conditions.SetSummary does: True when all
    are True, else the first False of the highest severity (its reason, severity and message)."""
    rank = {SEVERITY_ERROR: 0, SEVERITY_WARNING: 1, SEVERITY_INFO: 2, "": 3}
    falses = [c for t in types for c in conditions if c.get("type") == t and c.get("status") == FALSE]
    if not falses:
        return set_v1beta1(conditions, READY, True, now=now)
    worst = min(falses, key=lambda c: rank.get(c.get("severity", ""), 3))
    return set_v1beta1(conditions, READY, False, worst.get("reason", ""), worst.get("message", ""),
                       worst.get("severity", ""), now=now)


def _cond(ctype: str, st: str, reason: str, message: str, gen: int | None, ltt: str) -> dict[str, Any]:
    c: dict[str, Any] = {"type": ctype, "status": st, "reason": reason, "message": message,
                         "lastTransitionTime": ltt}
    if gen is not None:
        c["observedGeneration"] = gen
    return c


class StatusBuilder:
    """Accumulates an object's status and conditions during one reconcile; `final()` gives the status
    to write (lifecycle.write_status patches only what differs from what the object carries)."""

    def __init__(self, obj: dict[str, Any]):
        self.status: dict[str, Any] = copy.deepcopy(obj.get("status") or {})
        self.conds: list[dict[str, Any]] = list(self.status.get("conditions") or [])
        self.gen: int | None = obj["metadata"].get("generation")

    def set(self, ctype: str, ok: bool | str, reason: str, message: str = "") -> None:
        self.conds = set_condition(self.conds, ctype, ok, reason, message, self.gen)

    def final(self) -> dict[str, Any]:
        out = dict(self.status)
        out["conditions"] = self.conds
        if self.gen is not None:
            out["observedGeneration"] = self.gen
        return out
