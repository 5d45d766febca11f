"""Remediating control-plane Machines a MachineHealthCheck marked."""

from __future__ import annotations

import pytest

from capd_py.reconcile.kcp import remediation

try:
    from kcp_fixtures import view
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import view  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def test_nothing_marked() -> None:
    assert remediation.remediation_action([view("m1"), view("m2")]) is None
    assert remediation.remediating_message([view("m1")]) == ""


def test_oldest_marked_machine_first() -> None:
    ms = [view("m1"), view("m3", 3, remediate=True), view("m2", 2, remediate=True)]
    assert [m.name for m in remediation.machines_to_remediate(ms)] == ["m2", "m3"]
    a = remediation.remediation_action(ms)
    assert a is not None and a.kind == "scale-down" and a.machine == "m2" and a.reason == "Remediating"
    assert remediation.remediating_message(ms) == "Machine m2, m3 marked for remediation by a MachineHealthCheck"


def test_never_the_last_machine() -> None:
    a = remediation.remediation_action([view("m1", remediate=True)])
    assert a is not None and a.kind == "wait" and a.reason == "CannotBeRemediated"


def test_deferred_while_another_member_is_unhealthy() -> None:
    a = remediation.remediation_action([view("m1", remediate=True), view("m2", healthy=False), view("m3")])
    assert a is not None and a.kind == "wait" and a.reason == "RemediationDeferred" and "m2" in a.message
