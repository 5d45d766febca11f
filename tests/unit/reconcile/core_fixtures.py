"""Plain-data builders for the core controller unit tests (no I/O)."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from capd_py.testing import builders

NOW = _dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=_dt.UTC)


def ts(seconds_ago: float) -> str:
    return (NOW - _dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(ctype: str, status: str, seconds_ago: float = 0, reason: str = "R") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": "", "lastTransitionTime": ts(seconds_ago)}


def machine(name: str, *, cluster: str = "c1", labels: dict[str, str] | None = None, age: float = 100,
            conds: list[dict[str, Any]] | None = None, node: str | None = None, owner: dict[str, Any] | None = None,
            annotations: dict[str, str] | None = None, deleting: bool = False, version: str | None = None,
            uid: str | None = None) -> dict[str, Any]:
    m = builders.machine(name, cluster=cluster, labels=labels, uid=uid or f"uid-{name}", generation=1,
                         created=ts(age), annotations=dict(annotations or {}), resource_version="1",
                         owners=[owner] if owner else None, deleted_at=ts(1) if deleting else None,
                         spec={}, status={"conditions": list(conds or [])})
    if version:
        m["spec"]["version"] = version
    if node:
        m["status"]["nodeRef"] = {"name": node}
    return m


def healthy_machine(name: str, **kw: Any) -> dict[str, Any]:
    conds = [condition("Ready", "True", 1000), condition("Available", "True", 1000),
             condition("NodeHealthy", "True", 1000)]
    return machine(name, node=f"node-{name}", conds=conds, **kw)


def owner_ref(kind: str, name: str, uid: str | None = None, controller: bool = True) -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind, "name": name,
                         "uid": uid or f"uid-{name}"}
    if controller:
        o["controller"] = True
        o["blockOwnerDeletion"] = True
    return o
