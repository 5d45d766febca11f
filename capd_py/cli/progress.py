"""What a long wait shows (pure): which machines of a cluster are pending and why, from their conditions.

    rs1-control-plane-x7k2p  Provisioned   waiting for the control plane to initialize
    rs1-md-0-abcde-fghij     Provisioning  DockerMachine: bootstrap running: step 3/9 (kubeadm join)
"""

from __future__ import annotations

import re
from typing import Any

from capd_py.api import conditions, godur

_BULLET = re.compile(r"^\s*\*\s*")
# the Machine conditions that say why it is not Ready yet, in the order a machine goes through them
_STEPS = ("BootstrapConfigReady", "InfrastructureReady", "NodeReady", "NodeHealthy")


def parse_duration(text: str) -> float:
    """`--wait` values as kind and clusterctl take them: a Go duration (90s, 5m, 1h30m) or plain seconds (0: do
    not wait)."""
    t = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    try:
        seconds = godur.parse(t)
    except ValueError:
        seconds = None
    if seconds is None or seconds < 0:  # a wait cannot be negative
        raise ValueError(f"invalid duration {text!r}: use e.g. 90s, 5m, 1h30m or seconds")
    return seconds


def _first_line(msg: str) -> str:
    lines = [_BULLET.sub("", x).strip() for x in msg.splitlines() if x.strip()]
    return lines[0] if lines else ""


def why(machine: dict[str, Any]) -> str:
    """The first step of the machine that is not done, with its message; else its Ready condition's."""
    for t in _STEPS:
        c = conditions.get(machine, t)
        if c is not None and c.get("status") != "True":
            return f"{t}: {_first_line(str(c.get('message') or c.get('reason') or ''))}".rstrip(": ")
    c = conditions.get(machine, conditions.READY)
    if c is None:
        return "waiting for the controllers"
    return _first_line(str(c.get("message") or c.get("reason") or ""))


def progress_lines(cluster: dict[str, Any] | None, machines: list[dict[str, Any]], limit: int = 8) -> list[str]:
    """One line per machine that is not Ready yet (name, phase, why), sorted; the Cluster's Available message
    when every machine is Ready (or there are none yet). At most `limit` lines, then "... and N more"."""
    pending = sorted((m for m in machines if not conditions.is_true(m, conditions.READY)),
                     key=lambda m: m["metadata"]["name"])
    if not pending:
        c = conditions.get(cluster, conditions.AVAILABLE) if cluster else None
        msg = _first_line(str((c or {}).get("message") or (c or {}).get("reason") or ""))
        return [msg] if msg else []
    width = max(len(m["metadata"]["name"]) for m in pending[:limit])
    out = [f"{m['metadata']['name'].ljust(width)}  {str((m.get('status') or {}).get('phase') or '').ljust(12)}  "
           f"{why(m)}".rstrip() for m in pending[:limit]]
    if len(pending) > limit:
        out.append(f"... and {len(pending) - limit} more")
    return out


def normalize_wait(argv: list[str], default: str = "10m") -> list[str]:
    """A bare `--wait` (kind's and the old boolean spelling: last, or followed by an option or by something
    that is not a duration, like a cluster name) means: wait, with the default timeout."""
    out = []
    for i, a in enumerate(argv):
        if a == "--wait":
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            if nxt is None or nxt.startswith("-") or not _is_duration(nxt):
                out.append(f"--wait={default}")
                continue
        out.append(a)
    return out


def _is_duration(text: str) -> bool:
    try:
        parse_duration(text)
    except ValueError:
        return False
    return True
