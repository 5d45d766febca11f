"""Scaling decisions (upstream: internal/controllers/scale.go and the failure-domain choice of
internal/control_plane.go), one step per reconcile:
- the first machine runs `kubeadm init`; nothing else is created until the control plane is initialised;
- scale up / down by one machine per step, and only while every other machine passes upstream's preflight
  check (a Node linked, its static pods Ready: not the Node's own Ready) and none is being deleted;
- scale down picks a machine marked with the delete annotation, else an outdated one, else the oldest,
  always from the failure domain with the most machines; its etcd member is removed before deletion;
- rollout: with maxSurge 1 (default) a new machine is added first and then an outdated one removed; with
  maxSurge 0 the outdated one goes first (what makes a machine outdated: `rollout.py`);
- remediation (`remediation.py`) goes before everything but initialisation and pending deletions;
- new machines go to the control-plane failure domain with the fewest machines.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

from capd_py.api import contract
from capd_py.reconcile.kcp.common import Action, MachineView, max_surge, replicas
from capd_py.reconcile.kcp.remediation import remediation_step


def control_plane_failure_domains(cluster: dict[str, Any] | None) -> list[str]:
    return [fd["name"] for fd in contract.failure_domains(cluster)
            if fd.get("name") and fd.get("controlPlane", True)]


def pick_failure_domain_for_scale_up(fds: list[str], machines: list[MachineView]) -> str:
    """The failure domain with the fewest machines (up-to-date ones count first, as upstream)."""
    if not fds:
        return ""

    def key(fd: str) -> tuple[int, int, str]:
        total = sum(1 for m in machines if m.failure_domain == fd and not m.deleting)
        up = sum(1 for m in machines if m.failure_domain == fd and not m.deleting and m.up_to_date)
        return (up, total, fd)
    return min(fds, key=key)


def pick_machine_for_scale_down(machines: list[MachineView], prefer_outdated: bool = True) -> MachineView | None:
    live = [m for m in machines if not m.deleting]
    if not live:
        return None
    pool = [m for m in live if m.delete_annotation]
    if not pool and prefer_outdated:
        pool = [m for m in live if not m.up_to_date]
    if not pool:
        pool = live
    counts: dict[str, int] = {}
    for m in live:
        counts[m.failure_domain] = counts.get(m.failure_domain, 0) + 1
    crowded = max(counts.get(m.failure_domain, 0) for m in pool)
    candidates = [m for m in pool if counts.get(m.failure_domain, 0) == crowded]
    return min(candidates, key=lambda m: (m.created, m.name))  # the oldest


def _gate(unhealthy: list[str], kind: str, **kw: Any) -> Action:
    """`kind` when every machine but the one being removed is healthy, else a wait naming the others
    (the machine being removed may be unhealthy, e.g. its etcd member is already gone)."""
    blocking = [n for n in unhealthy if n != kw.get("machine")]
    if blocking:
        return Action("wait", "WaitingForMachinesHealthy",
                      f"Waiting for Machine {', '.join(blocking)} to be healthy (Node registered, static "
                      f"pods Ready) before {'scaling up' if kind == 'scale-up' else 'scaling down'}",
                      rollout=kw.get("rollout", False))
    return Action(kind, **kw)


def next_action(kcp: dict[str, Any], cluster: dict[str, Any], machines: list[MachineView], initialized: bool,
                now: _dt.datetime | None = None) -> Action:
    want = replicas(kcp)
    live = [m for m in machines if not m.deleting]
    fds = control_plane_failure_domains(cluster)
    if not machines:
        if want == 0:
            return Action("none", message="No replicas requested")
        return Action("create-init", failure_domain=pick_failure_domain_for_scale_up(fds, machines),
                      message="Creating the first control-plane machine (kubeadm init)")
    # remediation first (upstream: before any scaling), also of the first machine before initialization
    fix = remediation_step(kcp, live, initialized, now or _dt.datetime.now(_dt.UTC), machines)
    if fix is not None:
        return fix
    if not initialized:
        return Action("wait", "WaitingForControlPlaneInitialized",
                      "Waiting for the first control-plane machine to initialize the control plane")
    deleting = [m.name for m in machines if m.deleting]
    if deleting:
        return Action("wait", "WaitingForMachineDeletion", f"Waiting for Machine {', '.join(sorted(deleting))} "
                      "to be deleted")
    unhealthy = sorted(m.name for m in live if not m.passes_preflight)
    outdated = [m for m in live if not m.up_to_date]

    if len(live) < want:
        return _gate(unhealthy, "scale-up", failure_domain=pick_failure_domain_for_scale_up(fds, live),
                     message=f"Scaling up control plane to {want} replicas (actual {len(live)})")
    if len(live) > want:
        target = pick_machine_for_scale_down(live)
        assert target is not None
        return _gate(unhealthy, "scale-down", machine=target.name, rollout=bool(outdated) and not target.up_to_date,
                     message=f"Scaling down control plane to {want} replicas (actual {len(live)})")
    if outdated:
        if max_surge(kcp) >= 1 or want == 1:
            return _gate(unhealthy, "scale-up", failure_domain=pick_failure_domain_for_scale_up(fds, live),
                         rollout=True, message=f"Rolling out: adding an up-to-date machine before removing "
                                               f"{len(outdated)} outdated")
        target = pick_machine_for_scale_down(live)
        assert target is not None
        return _gate(unhealthy, "scale-down", machine=target.name, rollout=True,
                     message="Rolling out (maxSurge 0): removing an outdated machine first")
    return Action("none")
