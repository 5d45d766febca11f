"""`capd-py get clusters` and `capd-py get nodes`: tables (pure: objects in, rows/text out).

Clusters show what `kubectl get clusters` prints for upstream's v1beta2 printer columns (class, Available,
control plane and worker replica counts, phase, age, version). Nodes join three views of each machine of a
cluster: the Machine (management cluster), its workload Node (when the workload API answers) and its container.
"""

from __future__ import annotations

import datetime as _dt
import io
from typing import Any

from rich.console import Console
from rich.table import Table

from capd_py.api import conditions, contract
from capd_py.api.labels import CONTROL_PLANE, POWER_STATE_ANNOTATION
from capd_py.cli.describe import since
from capd_py.reconcile.powerstate import phase as power_phase

CLUSTER_HEADER = ("NAME", "CLUSTERCLASS", "AVAILABLE", "CP DESIRED", "CP AVAILABLE", "W DESIRED", "W AVAILABLE",
                  "PHASE", "AGE", "VERSION")
NODE_HEADER = ("NAME", "ROLE", "MACHINE PHASE", "NODE STATUS", "VERSION", "INTERNAL-IP", "CONTAINER")


def _s(v: Any) -> str:
    return "" if v is None else str(v)


def cluster_row(c: dict[str, Any], now: _dt.datetime) -> tuple[str, ...]:
    st = c.get("status") or {}
    spec = c.get("spec") or {}
    topo = spec.get("topology") or {}
    cp, w = st.get("controlPlane") or {}, st.get("workers") or {}
    avail = conditions.get(c, conditions.AVAILABLE)
    # a stopped or frozen cluster's status is frozen too (its objects are paused): the power state says what it is
    power = power_phase((c["metadata"].get("annotations") or {}).get(POWER_STATE_ANNOTATION))
    return (c["metadata"]["name"], _s((topo.get("classRef") or {}).get("name")), _s((avail or {}).get("status")),
            _s(cp.get("desiredReplicas")), _s(cp.get("availableReplicas")), _s(w.get("desiredReplicas")),
            _s(w.get("availableReplicas")), power or _s(st.get("phase")),
            since(c["metadata"].get("creationTimestamp"), now),
            _s(topo.get("version")))


def _node_ready(node: dict[str, Any] | None) -> str:
    if node is None:
        return ""
    c = next((x for x in (node.get("status") or {}).get("conditions") or [] if x.get("type") == "Ready"), None)
    if c is None:
        return "Unknown"
    return {"True": "Ready", "False": "NotReady"}.get(str(c.get("status")), "Unknown")


def _internal_ip(node: dict[str, Any] | None, machine: dict[str, Any]) -> str:
    for src in (node, machine):
        for a in ((src or {}).get("status") or {}).get("addresses") or []:
            if a.get("type") == "InternalIP":
                return str(a.get("address"))
    return ""


def node_rows(machines: list[dict[str, Any]], nodes: list[dict[str, Any]] | None,
              container_states: dict[str, str]) -> list[tuple[str, ...]]:
    """One row per Machine: its node name (nodeRef, else the machine name), role, phase, the Node's Ready state
    (`nodes` None: the workload API did not answer -> "?"), kubelet version, InternalIP, container state."""
    by_name = {n["metadata"]["name"]: n for n in nodes or []}
    out: list[tuple[str, ...]] = []
    for m in sorted(machines, key=lambda m: (CONTROL_PLANE not in (m["metadata"].get("labels") or {}),
                                             m["metadata"]["name"])):
        node_name = contract.dig(m, "status", "nodeRef", "name") or m["metadata"]["name"]
        node = by_name.get(str(node_name))
        role = "control-plane" if CONTROL_PLANE in (m["metadata"].get("labels") or {}) else "worker"
        status = "?" if nodes is None else (_node_ready(node) or "NoNode")
        version = contract.dig(node, "status", "nodeInfo", "kubeletVersion") if node else None
        out.append((str(node_name), role, _s((m.get("status") or {}).get("phase")), status,
                    _s(version or (m.get("spec") or {}).get("version")), _internal_ip(node, m),
                    container_states.get(str(node_name), container_states.get(m["metadata"]["name"], "missing"))))
    return out


def table(header: tuple[str, ...], body: list[tuple[str, ...]]) -> str:
    t = Table(box=None, pad_edge=False, padding=(0, 2, 0, 0), show_edge=False)
    for h in header:
        t.add_column(h, no_wrap=True, overflow="ignore")
    for r in body:
        t.add_row(*r)
    width = sum(max(len(x[i]) for x in [header, *body]) + 2 for i in range(len(header))) + 1
    out = io.StringIO()
    Console(file=out, width=width, color_system=None, highlight=False, emoji=False, markup=False).print(t)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
