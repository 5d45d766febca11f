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
