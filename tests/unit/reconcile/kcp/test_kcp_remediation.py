"""Remediating control-plane Machines a MachineHealthCheck marked."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import remediation

try:
    from kcp_fixtures import CLUSTER, NOW, kcp, machine, view
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import CLUSTER, NOW, kcp, machine, view  # type: ignore[no-redef]

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


# --- upstream's retry limits, in-progress tracking, pre-initialization remediation (issue 26) -----------------

def _data(machine_name: str, minutes_ago: int, retries: int) -> str:
    return remediation.RemediationData(machine_name, NOW - dt.timedelta(minutes=minutes_ago), retries).to_annotation()


def _kcp(remediation_spec: dict[str, Any] | None = None, in_progress: str | None = None) -> dict[str, Any]:
    k = kcp(**({"remediation": remediation_spec} if remediation_spec else {}))
    if in_progress:
        k["metadata"]["annotations"] = {remediation.IN_PROGRESS_ANNOTATION: in_progress}
    return k


def test_remediation_data_round_trips_as_upstream_json() -> None:
    d = remediation.RemediationData("m1", NOW, 2)
    assert d.to_annotation() == '{"machine":"m1","timestamp":"2026-01-01T12:00:00Z","retryCount":2}'
    assert remediation.RemediationData.from_annotation(d.to_annotation()) == d
    assert remediation.RemediationData.from_annotation("not json") is None
    assert d.to_status() == {"machine": "m1", "time": "2026-01-01T12:00:00Z", "retryCount": 2}


def test_a_first_remediation_starts_a_sequence_and_records_it() -> None:
    ms = [view("m1"), view("m2", 1, remediate=True), view("m3", 2)]
    a = remediation.remediation_step(_kcp(), ms, True, NOW)
    assert a is not None and a.kind == "scale-down" and a.machine == "m2"
    assert a.machine_condition == ("MachineDeleting", "Machine is deleting")
    assert remediation.RemediationData.from_annotation(a.remediation_start) == remediation.RemediationData("m2", NOW, 0)


def test_a_failing_replacement_is_a_retry_within_min_healthy_period() -> None:
    # m4 replaced m2 10 minutes ago (retry 0); it fails too: retry 1
    ms = [view("m1"), view("m3", 2), view("m4", 3, remediate=True, remediation_for=_data("m2", 10, 0))]
    a = remediation.remediation_step(_kcp(), ms, True, NOW)
    assert a is not None and a.kind == "scale-down"
    assert remediation.RemediationData.from_annotation(a.remediation_start) == remediation.RemediationData("m4", NOW, 1)
    # healthy for longer than minHealthyPeriodSeconds: a new sequence (retry 0)
    ms[2] = view("m4", 3, remediate=True, remediation_for=_data("m2", 90, 3))
    a = remediation.remediation_step(_kcp({"minHealthyPeriodSeconds": 3600}), ms, True, NOW)
    assert a is not None and remediation.RemediationData.from_annotation(a.remediation_start).retry_count == 0  # type: ignore[union-attr]


def test_retry_period_and_max_retry_hold_the_remediation_with_upstream_messages() -> None:
    ms = [view("m1"), view("m3", 2), view("m4", 3, remediate=True, remediation_for=_data("m2", 2, 1))]
    a = remediation.remediation_step(_kcp({"retryPeriodSeconds": 300}), ms, True, NOW)
    assert a is not None and a.kind == "wait" and a.reason == "RemediationDeferred" and a.machine == "m4"
    assert a.machine_condition == ("RemediationDeferred", "KubeadmControlPlane can't remediate this machine because "
                                   "the operation already failed in the latest 5m0s (RetryPeriodSeconds)")
    a = remediation.remediation_step(_kcp({"retryPeriodSeconds": 60, "maxRetry": 1}), ms, True, NOW)
    assert a is not None and a.kind == "wait" and a.reason == "CannotBeRemediated"
    assert a.machine_condition == ("CannotBeRemediated", "KubeadmControlPlane can't remediate this machine because "
                                   "the operation already failed 1 times (MaxRetry)")
    a = remediation.remediation_step(_kcp({"retryPeriodSeconds": 60, "maxRetry": 2}), ms, True, NOW)
    assert a is not None and a.kind == "scale-down"
    assert remediation.RemediationData.from_annotation(a.remediation_start).retry_count == 2  # type: ignore[union-attr]


def test_one_remediation_at_a_time_until_the_replacement_exists() -> None:
    # m2 was remediated 1 minute ago, its replacement is not created yet: m3 (also marked) waits
    ms = [view("m1", -60), view("m3", -30, remediate=True)]
    k = _kcp(in_progress=_data("m2", 1, 0))
    assert remediation.remediation_step(k, ms, True, NOW) is None
    assert rk.next_action(k, CLUSTER, ms, True, NOW).kind == "scale-up"  # the replacement comes first
    # a Machine created after the remediation started: the annotation is stale, remediation goes on
    ms.append(view("m5", 0))
    assert remediation.stale_in_progress(k, ms)
    a = remediation.remediation_step(k, ms, True, NOW)
    assert a is not None and a.kind == "scale-down" and a.machine == "m3"


def test_initialized_rules_with_machine_conditions() -> None:
    a = remediation.remediation_step(_kcp(), [view("m1", remediate=True)], True, NOW)
    assert a is not None and a.machine_condition == (
        "CannotBeRemediated", "KubeadmControlPlane can't remediate if current replicas are less or equal to 1")
    ms = [view("m1", remediate=True), view("m2", 1, healthy=False)]
    a = remediation.remediation_step(_kcp(), ms, True, NOW)
    assert a is not None and a.reason == "RemediationDeferred" and a.machine_condition == (
        "RemediationDeferred", "KubeadmControlPlane waiting for control plane Machine provisioning to complete before "
        "triggering remediation")
    ms = [view("m1", remediate=True), view("m2", 1), view("m3", 2, deleting=True)]
    a = remediation.remediation_step(_kcp(), [m for m in ms if not m.deleting], True, NOW, ms)
    assert a is not None and a.machine_condition is not None
    assert "Machine deletion to complete" in a.machine_condition[1]
    sick_pods = view("m2", 1)
    sick_pods.pods_ready["etcd"] = False
    a = remediation.remediation_step(_kcp(), [view("m1", remediate=True), sick_pods], True, NOW)
    assert a is not None and a.reason == "CannotBeRemediated" and "etcd quorum loss" in a.machine_condition[1]  # type: ignore[index]


def test_the_first_machine_is_remediated_before_initialization_within_max_retry() -> None:
    a = rk.next_action(_kcp(), CLUSTER, [view("m1", healthy=False, remediate=True)], False, NOW)
    assert a.kind == "scale-down" and a.machine == "m1"
    again = [view("m2", healthy=False, remediate=True, remediation_for=_data("m1", 5, 2))]
    a = rk.next_action(_kcp({"maxRetry": 2}), CLUSTER, again, False, NOW)
    assert a.kind == "wait" and a.reason == "CannotBeRemediated"
    # nothing marked: waiting for initialization as before
    assert rk.next_action(_kcp(), CLUSTER, [view("m1", healthy=False)], False, NOW).reason == \
        "WaitingForControlPlaneInitialized"


def test_most_broken_machine_first() -> None:
    ms = [view("m1", 0, remediate=True), view("m2", 5, healthy=False, remediate=True), view("m3", 9)]
    assert [m.name for m in remediation.machines_to_remediate(ms)] == ["m2", "m1"]


def test_replacement_carries_the_remediation_and_last_remediation_status() -> None:
    k = _kcp(in_progress=_data("m2", 1, 1))
    tpl = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate",
           "metadata": {"name": "cp-v1", "namespace": "ns"}, "spec": {"template": {"spec": {}}}}
    want = rk.desired_machine(k, {**CLUSTER, "spec": {"controlPlaneEndpoint": {"host": "h", "port": 6443}}}, tpl,
                              "m9", init=False, failure_domain="")
    assert not isinstance(want, str)
    assert want.machine["metadata"]["annotations"][remediation.FOR_ANNOTATION] == _data("m2", 1, 1)
    assert rk.last_remediation(k, []) == {"machine": "m2", "time": "2026-01-01T11:59:00Z", "retryCount": 1}
    older, newer = _data("a", 30, 0), _data("b", 3, 2)
    assert rk.last_remediation(_kcp(), [{remediation.FOR_ANNOTATION: older}, {remediation.FOR_ANNOTATION: newer},
                                        {}]) == {"machine": "b", "time": "2026-01-01T11:57:00Z", "retryCount": 2}
    assert rk.last_remediation(_kcp(), [{}]) is None


def test_owner_remediated_status_writes_only_changes() -> None:
    m = machine("m1", conditions=[{"type": "OwnerRemediated", "status": "False", "reason": "WaitingForRemediation",
                                   "message": "", "lastTransitionTime": "2026-01-01T10:00:00Z"}])
    st = rk.owner_remediated_status(m, "MachineDeleting", "Machine is deleting")
    c = next(c for c in st["conditions"] if c["type"] == "OwnerRemediated")
    assert (c["status"], c["reason"], c["message"]) == ("False", "MachineDeleting", "Machine is deleting")
    assert rk.owner_remediated_status({**m, "status": st}, "MachineDeleting", "Machine is deleting") == st
