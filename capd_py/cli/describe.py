"""`capd-py describe cluster`: a tree in the spirit of `clusterctl describe cluster` (v1beta2 layout).

Pure: `build_tree` takes the objects of one cluster as dicts, `render` turns the tree into text (a rich
table; styled on a terminal).

    NAME                                                  REPLICAS AVAILABLE READY UP TO DATE STATUS REASON ...
    Cluster/demo                                          2/2      2         2     2          True   Available
    ├─ClusterInfrastructure - DockerCluster/demo                                              True   Ready
    ├─ControlPlane - KubeadmControlPlane/demo-control-plane 1/1    1         1     1          True   Available
    │ └─Machine/demo-control-plane-x7k2p                  1        True      True  True       True   Ready
    └─Workers
      └─MachineDeployment/demo-md-0                       1/1      1         1     1          True   Available
        └─Machine/demo-md-0-abcde-fghij                   ...
"""

from __future__ import annotations

import datetime as _dt
import io
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from capd_py.api import conditions, contract
from capd_py.api import dockerhosts as dh
from capd_py.api.labels import CONTROL_PLANE, CONTROL_PLANE_NAME, DEPLOYMENT_NAME

HEADER = ("NAME", "REPLICAS", "AVAILABLE", "READY", "UP TO DATE", "STATUS", "REASON", "SINCE", "MESSAGE")

# The condition that sums up each kind (upstream: Available for the aggregates, Ready for the rest).
_SUMMARY = {"Cluster": "Available", "KubeadmControlPlane": "Available", "MachineDeployment": "Available",
            "MachinePool": "Available", "MachineSet": "Ready", "Machine": "Ready"}


@dataclass
class Node:
    name: str                      # row name, e.g. "Machine/demo-md-0-abc"
    obj: dict[str, Any] | None = None
    children: list[Node] = field(default_factory=list)
    counters: tuple[str, str, str, str] = ("", "", "", "")
    condition: dict[str, Any] | None = None
    # the object's other conditions shown under its row (`--show-conditions`)
    extra_conditions: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Options:
    """clusterctl describe cluster's flags: `show_conditions` is a comma-separated list of `all`, KIND or
    KIND/NAME, each optionally suffixed `+` (only conditions that are not in their normal state, plus Available
    and Ready); `grouping` merges sibling Machines whose Available, Ready and UpToDate conditions have the same
    status and reason into one "N Machines..." row; `show_machinesets` puts MachineSets between
    MachineDeployments and their Machines."""
    show_conditions: str = ""
    grouping: bool = True
    show_machinesets: bool = False


SHOWN_NONE, SHOWN_ALL, SHOWN_NONZERO = "", "all", "nonzero"
NONZERO_SUFFIX = "+"
# conditions whose normal state is False (upstream's negative polarity list)
_NEGATIVE = {"Paused", "Deleting", "RollingOut", "ScalingUp", "ScalingDown", "Updating", "Remediating"}


def conditions_filter(obj: dict[str, Any], spec: str) -> str:
    """Which of `obj`'s conditions `--show-conditions spec` shows: none, all, or the non-zero ones."""
    kind, name = str(obj.get("kind") or ""), str((obj.get("metadata") or {}).get("name") or "")
    for f in (x.strip() for x in spec.split(",")):
        if not f:
            continue
        nonzero = f.endswith(NONZERO_SUFFIX)
        f = f.removesuffix(NONZERO_SUFFIX)
        k, _, n = f.partition("/")
        if f.lower() == "all" or (k.lower() == kind.lower() and (not n or n == name)):
            return SHOWN_NONZERO if nonzero else SHOWN_ALL
    return SHOWN_NONE


def condition_is_zero(c: dict[str, Any]) -> bool:
    """A condition in its normal state with nothing to say (True, or False for negative polarity; no message)."""
    normal = "False" if c.get("type") in _NEGATIVE else "True"
    return c.get("status") == normal and not c.get("message")


def shown_conditions(obj: dict[str, Any], spec: str) -> list[dict[str, Any]]:
    mode = conditions_filter(obj, spec)
    if mode == SHOWN_NONE:
        return []
    conds = [dict(c) for c in (obj.get("status") or {}).get("conditions") or []]
    if mode == SHOWN_NONZERO:
        conds = [c for c in conds if c.get("type") in ("Available", "Ready") or not condition_is_zero(c)]
    return conds


def _kind_name(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind')}/{obj['metadata']['name']}"


def summary_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    kind = str(obj.get("kind") or "")
    c = conditions.get(obj, _SUMMARY.get(kind, conditions.READY))
    if c is None and kind in _SUMMARY:  # e.g. a provider that only sets Ready
        c = conditions.get(obj, conditions.READY)
    return c


def _n(v: Any) -> str:
    return "" if v is None else str(v)


def _replica_counters(st: dict[str, Any], desired: Any) -> tuple[str, str, str, str]:
    reps = st.get("replicas")
    if reps is None and desired is None:
        return ("", "", "", "")
    return (f"{_n(reps or 0)}/{_n(desired if desired is not None else '?')}", _n(st.get("availableReplicas")),
            _n(st.get("readyReplicas")), _n(st.get("upToDateReplicas")))


def _cond_status(obj: dict[str, Any], ctype: str) -> str:
    c = conditions.get(obj, ctype)
    return str(c.get("status", "")) if c else ""


def counters(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    kind = obj.get("kind")
    st = obj.get("status") or {}
    spec = obj.get("spec") or {}
    if kind == "Cluster":
        cp = st.get("controlPlane") or {}
        w = st.get("workers") or {}
        if not cp and not w:
            return ("", "", "", "")

        def tot(k: str) -> int | None:
            vals = [int(x[k]) for x in (cp, w) if x.get(k) is not None]
            return sum(vals) if vals else None
        reps, desired = tot("replicas"), tot("desiredReplicas")
        return (f"{_n(reps or 0)}/{_n(desired if desired is not None else '?')}", _n(tot("availableReplicas")),
                _n(tot("readyReplicas")), _n(tot("upToDateReplicas")))
    if kind in ("KubeadmControlPlane", "MachineDeployment", "MachineSet", "MachinePool"):
        return _replica_counters(st, spec.get("replicas"))
    if kind == "Machine":
        return ("", _cond_status(obj, "Available"), _cond_status(obj, "Ready"), _cond_status(obj, "UpToDate"))
    return ("", "", "", "")


def _leaf(obj: dict[str, Any], prefix: str = "", opts: Options | None = None) -> Node:
    return Node(prefix + _kind_name(obj), obj, counters=counters(obj), condition=summary_condition(obj),
                extra_conditions=shown_conditions(obj, opts.show_conditions) if opts else [])


def _group_key(m: dict[str, Any]) -> tuple[tuple[str, str] | None, ...]:
    def sr(t: str) -> tuple[str, str] | None:
        c = conditions.get(m, t)
        return (str(c.get("status")), str(c.get("reason"))) if c else None
    return (sr("Available"), sr("Ready"), sr("UpToDate"))


def _machine_children(machines: list[dict[str, Any]], opts: Options) -> list[Node]:
    """One row per Machine, or (grouping) one "N Machines..." row per set of two or more with the same
    Available/Ready/UpToDate status and reason; a Machine whose conditions are asked for stays on its own."""
    if not opts.grouping:
        return [_leaf(m, opts=opts) for m in machines]
    buckets: dict[tuple[tuple[str, str] | None, ...], list[dict[str, Any]]] = {}
    alone: list[dict[str, Any]] = []
    for m in machines:
        (alone if conditions_filter(m, opts.show_conditions) else buckets.setdefault(_group_key(m), [])).append(m)
    out = [_leaf(m, opts=opts) for m in alone]
    for group in buckets.values():
        if len(group) == 1:
            out.append(_leaf(group[0], opts=opts))
            continue
        names = [m["metadata"]["name"] for m in group]
        count = {t: str(sum(1 for m in group if conditions.is_true(m, t))) for t in ("Available", "Ready", "UpToDate")}
        ready = dict(summary_condition(group[0]) or {})
        ready["message"] = f"See {', '.join(names)}" if len(names) <= 2 else f"See {', '.join(names[:2])}, ..."
        out.append(Node(f"{len(group)} Machines...", None, counters=("", count["Available"], count["Ready"],
                                                                    count["UpToDate"]), condition=ready))
    return sorted(out, key=lambda n: (n.obj is None, n.name))


def build_tree(objects: list[dict[str, Any]], cluster_name: str, opts: Options | None = None) -> Node:
    """Arrange one cluster's objects: Cluster, its infrastructure, control plane (+ its machines) and
    Workers (MachineDeployments and MachinePools + their machines, then machines that belong to neither)."""
    opts = opts or Options(grouping=False)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for o in objects:
        by_kind.setdefault(str(o.get("kind")), []).append(o)
    for lst in by_kind.values():
        lst.sort(key=lambda o: o["metadata"]["name"])
    cluster = next((c for c in by_kind.get("Cluster", []) if c["metadata"]["name"] == cluster_name), None)
    if cluster is None:
        raise ValueError(f"cluster {cluster_name!r} not among the objects")
    root = _leaf(cluster, opts=opts)

    infra_ref = contract.ref(cluster, "spec", "infrastructureRef")
    cp_ref = contract.ref(cluster, "spec", "controlPlaneRef")

    def find(ref: dict[str, str] | None) -> dict[str, Any] | None:
        if not ref:
            return None
        return next((o for o in by_kind.get(ref["kind"], []) if o["metadata"]["name"] == ref["name"]), None)

    infra = find(infra_ref)
    if infra is not None:
        leaf = _leaf(infra, "ClusterInfrastructure - ", opts)
        host = dh.host_of(infra)
        if host:  # placed on a docker host (docs/multihost.md): where its containers are
            leaf.name += f" (docker host {host})"
        root.children.append(leaf)
    elif infra_ref:
        root.children.append(Node(f"ClusterInfrastructure - {infra_ref['kind']}/{infra_ref['name']}",
                                  condition={"status": "", "reason": "NotFound", "message": "object not found"}))

    machines = by_kind.get("Machine", [])
    placed: set[str] = set()
    cp = find(cp_ref)
    if cp is not None:
        cpn = _leaf(cp, "ControlPlane - ", opts)
        mine = []
        for m in machines:
            labels = m["metadata"].get("labels") or {}
            owner = contract.controller_owner(m, cp.get("kind"))
            if labels.get(CONTROL_PLANE_NAME) == cp["metadata"]["name"] or (owner and owner["name"] ==
                                                                              cp["metadata"]["name"]):
                mine.append(m)
                placed.add(m["metadata"]["name"])
        cpn.children.extend(_machine_children(mine, opts))
        root.children.append(cpn)

    workers = Node("Workers")
    for md in by_kind.get("MachineDeployment", []):
        mdn = _leaf(md, opts=opts)
        mine = [m for m in machines if m["metadata"]["name"] not in placed
                and (m["metadata"].get("labels") or {}).get(DEPLOYMENT_NAME) == md["metadata"]["name"]]
        placed.update(m["metadata"]["name"] for m in mine)
        if opts.show_machinesets:
            sets = [ms for ms in by_kind.get("MachineSet", [])
                    if (ms["metadata"].get("labels") or {}).get(DEPLOYMENT_NAME) == md["metadata"]["name"]]
            for ms in sets:
                msn = _leaf(ms, opts=opts)
                msn.children.extend(_machine_children(
                    [m for m in mine if (contract.controller_owner(m, "MachineSet") or {}).get("name")
                     == ms["metadata"]["name"]], opts))
                mdn.children.append(msn)
            set_names = {ms["metadata"]["name"] for ms in sets}
            mine = [m for m in mine if (contract.controller_owner(m, "MachineSet") or {}).get("name") not in set_names]
        mdn.children.extend(_machine_children(mine, opts))
        workers.children.append(mdn)
    for mp in by_kind.get("MachinePool", []):
        mpn = _leaf(mp, opts=opts)
        mine = []
        for m in machines:
            owner = contract.controller_owner(m, "MachinePool")
            if m["metadata"]["name"] not in placed and owner and owner.get("name") == mp["metadata"]["name"]:
                mine.append(m)
                placed.add(m["metadata"]["name"])
        mpn.children.extend(_machine_children(mine, opts))
        workers.children.append(mpn)
    others = [m for m in machines if m["metadata"]["name"] not in placed]
    cp_others = [m for m in others if CONTROL_PLANE in (m["metadata"].get("labels") or {})]
    if cp_others and cp is None:
        cpn = Node("ControlPlane")
        cpn.children.extend(_machine_children(cp_others, opts))
        root.children.append(cpn)
    workers.children.extend(_machine_children([m for m in others if m not in cp_others], opts))
    if workers.children:
        root.children.append(workers)
    return root


def since(ts: str | None, now: _dt.datetime) -> str:
    """Age like kubectl: 45s, 12m, 3h, 2d."""
    if not ts:
        return ""
    try:
        t = _dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.UTC)
    except ValueError:
        return ""
    s = max(0, int((now - t).total_seconds()))
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def rows(root: Node, now: _dt.datetime) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []

    def walk(n: Node, prefix: str, child_prefix: str) -> None:
        c = n.condition or {}
        msg_lines = str(c.get("message") or "").splitlines() or [""]
        out.append((prefix + n.name, *n.counters, str(c.get("status") or ""), str(c.get("reason") or ""),
                    since(c.get("lastTransitionTime"), now), msg_lines[0]))
        for extra in msg_lines[1:]:
            out.append((child_prefix + ("│ " if n.children else "  "), "", "", "", "", "", "", "", extra))
        # the object's other conditions, indented by a filler (upstream's layout), before its children
        cond_prefix = child_prefix + ("│ " if n.children else "  ") + " " * 10
        for i, oc in enumerate(n.extra_conditions):
            last = i == len(n.extra_conditions) - 1
            lines = str(oc.get("message") or "").splitlines() or [""]
            out.append((cond_prefix + ("└─" if last else "├─") + str(oc.get("type")), "", "", "", "",
                        str(oc.get("status") or ""), str(oc.get("reason") or ""),
                        since(oc.get("lastTransitionTime"), now), lines[0]))
            for extra in lines[1:]:
                out.append((cond_prefix + ("  " if last else "│ "), "", "", "", "", "", "", "", extra))
        for i, ch in enumerate(n.children):
            last = i == len(n.children) - 1
            walk(ch, child_prefix + ("└─" if last else "├─"), child_prefix + ("  " if last else "│ "))

    walk(root, "", "")
    return out


_STATUS_STYLE = {"True": "green", "False": "red", "Unknown": "yellow"}


def render(root: Node, now: _dt.datetime | None = None, color: bool = False) -> str:
    """The tree as an aligned rich table; `color` (a terminal) adds styles: dim tree guides, a bold
    header, the STATUS column green/red/yellow."""
    body = rows(root, now or _dt.datetime.now(_dt.UTC))
    table = Table(box=None, pad_edge=False, padding=(0, 1, 0, 0), header_style="bold" if color else "",
                  show_edge=False)
    for h in HEADER:
        table.add_column(h, no_wrap=True, overflow="ignore")
    status_col = HEADER.index("STATUS")
    for r in body:
        name = r[0]
        tree_part = name[:len(name) - len(name.lstrip("│├└─ "))]
        cells: list[Text | str] = [Text.assemble((tree_part, "dim" if color else ""), name[len(tree_part):])]
        cells += [Text(v, style=_STATUS_STYLE.get(v, "") if color and i == status_col else "")
                  for i, v in enumerate(r[1:], start=1)]
        table.add_row(*cells)
    width = sum(max(len(x[i]) for x in [HEADER, *body]) + 1 for i in range(len(HEADER))) + 1
    out = io.StringIO()
    console = Console(file=out, width=width, color_system="standard" if color else None, force_terminal=color,
                      highlight=False, emoji=False, markup=False)
    console.print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()) + "\n"
