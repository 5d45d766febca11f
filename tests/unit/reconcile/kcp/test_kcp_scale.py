"""The next scaling step: gating on health, scale-down choice, rollout surge, failure domains."""

from __future__ import annotations

import pytest

from capd_py.reconcile.kcp import scale

try:
    from kcp_fixtures import CLUSTER, kcp, view
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import CLUSTER, kcp, view  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

FDS = {"status": {"failureDomains": [{"name": "a"}, {"name": "b", "controlPlane": True},
                                     {"name": "w", "controlPlane": False}, {"controlPlane": True}]}}


def test_control_plane_failure_domains_default_to_control_plane() -> None:
    assert scale.control_plane_failure_domains(FDS) == ["a", "b"]
    assert scale.control_plane_failure_domains(None) == []


def test_scale_up_goes_to_the_emptiest_failure_domain_counting_up_to_date_first() -> None:
    assert scale.pick_failure_domain_for_scale_up([], [view("m1")]) == ""
    assert scale.pick_failure_domain_for_scale_up(["a", "b"], [view("m1", fd="a")]) == "b"
    # an outdated machine in b counts less than an up-to-date one in a
    ms = [view("m1", fd="a"), view("m2", fd="b", outdated=True)]
    assert scale.pick_failure_domain_for_scale_up(["a", "b"], ms) == "b"
    # deleting machines do not count
    assert scale.pick_failure_domain_for_scale_up(["a", "b"], [view("m1", fd="a", deleting=True)]) == "a"


def test_scale_down_choice() -> None:
    assert scale.pick_machine_for_scale_down([view("m1", deleting=True)]) is None
    ms = [view("old", 0), view("new", 5, outdated=True)]
    assert scale.pick_machine_for_scale_down(ms).name == "new"  # type: ignore[union-attr]
    assert scale.pick_machine_for_scale_down(ms, prefer_outdated=False).name == "old"  # type: ignore[union-attr]


def test_scale_up_waits_for_every_machine_healthy() -> None:
    a = scale.next_action(kcp(), CLUSTER, [view("m1"), view("m2", healthy=False)], initialized=True)
    assert a.kind == "wait" and a.reason == "WaitingForMachinesHealthy" and "before scaling up" in a.message


def test_scale_down_target_and_message() -> None:
    a = scale.next_action(kcp(replicas=1), CLUSTER, [view("m1", 0), view("m2", 1)], initialized=True)
    assert a.kind == "scale-down" and a.machine == "m1" and not a.rollout
    assert a.message == "Scaling down control plane to 1 replicas (actual 2)"
    # scaling down an outdated machine while others are outdated is part of the rollout
    a = scale.next_action(kcp(replicas=1), CLUSTER, [view("m1", 0, outdated=True), view("m2", 1)], initialized=True)
    assert a.kind == "scale-down" and a.machine == "m1" and a.rollout


def test_rollout_wait_keeps_the_rollout_flag() -> None:
    ms = [view("m1", outdated=True), view("m2", healthy=False, outdated=True), view("m3", outdated=True)]
    a = scale.next_action(kcp(), CLUSTER, ms, initialized=True)
    assert a.kind == "wait" and a.rollout


@pytest.mark.parametrize("surge", ["0%", "34%", '0"', 0])
def test_max_surge_as_upstream_reads_it(surge: object) -> None:
    """upstream's KCP reads maxSurge with IntOrString.IntValue(): a string that is no integer is 0, so "34%" and
    upstream's e2e kcp-scale-in flavor's rendered `0"` scale in (one removed first) like 0."""
    ms = [view("m1", outdated=True), view("m2"), view("m3")]
    a = scale.next_action(kcp(rollout={"strategy": {"rollingUpdate": {"maxSurge": surge}}}), CLUSTER, ms,
                          initialized=True)
    assert a.kind == "scale-down" and a.machine == "m1"


def test_remediation_goes_before_scaling() -> None:
    ms = [view("m1"), view("m2", remediate=True)]
    a = scale.next_action(kcp(), CLUSTER, ms, initialized=True)  # 2 of 3: would scale up otherwise
    assert a.kind == "scale-down" and a.machine == "m2" and a.reason == "Remediating"


def test_steady() -> None:
    assert scale.next_action(kcp(), CLUSTER, [view("m1"), view("m2"), view("m3")], initialized=True).kind == "none"
