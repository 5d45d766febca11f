"""Remediation decisions (upstream: internal/controllers/remediation.go, simplified): a control-plane
Machine a MachineHealthCheck marked (OwnerRemediated=False) is replaced by deleting it, one at a time,
never the last one and never while another member is unhealthy (etcd quorum comes first)."""

from __future__ import annotations

from capd_py.reconcile.kcp.common import Action, MachineView


def machines_to_remediate(live: list[MachineView]) -> list[MachineView]:
    """Marked machines, oldest first (the order remediation takes them in)."""
    return sorted((m for m in live if m.remediate), key=lambda m: (m.created, m.name))


def remediation_action(live: list[MachineView]) -> Action | None:
    """The step remediation asks for, or None when no machine is marked."""
    to_fix = machines_to_remediate(live)
    if not to_fix:
        return None
    sick = to_fix[0]
    others = [m for m in live if m.name != sick.name]
    if not others:
        return Action("wait", "CannotBeRemediated", f"Machine {sick.name} needs remediation, but it is the "
                      "only control-plane machine: scale up first or fix it by hand")
    bad = sorted(m.name for m in others if not m.healthy)
    if bad:
        return Action("wait", "RemediationDeferred", f"Machine {sick.name} needs remediation; waiting for "
                      f"Machine {', '.join(bad)} to be healthy first to keep etcd quorum")
    return Action("scale-down", "Remediating", f"Remediating unhealthy Machine {sick.name}", machine=sick.name)


def remediating_message(live: list[MachineView]) -> str:
    """The Remediating condition message; empty when nothing is marked."""
    fix = sorted(v.name for v in live if v.remediate)
    if not fix:
        return ""
    return f"Machine {', '.join(fix)} marked for remediation by a MachineHealthCheck"
