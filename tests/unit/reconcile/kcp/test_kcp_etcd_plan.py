"""Which etcd member goes with a machine, and when leadership moves off it first."""

from __future__ import annotations

from typing import Any

import pytest
from kcp_fixtures import view

from capd_py.api.etcd import EtcdMember
from capd_py.api.labels import KCP_CLEANUP_HOOK
from capd_py.reconcile.kcp import etcd

pytestmark = pytest.mark.unit

N1 = EtcdMember(1, "n1", ("https://10.0.0.1:2379",))
N2 = EtcdMember(2, "n2", ("https://10.0.0.2:2379",))
N3 = EtcdMember(3, "n3")


def test_member_of_node() -> None:
    assert etcd.member_of_node([N1, N2], "n2") == N2
    assert etcd.member_of_node([N1, N2], "n9") is None


def test_leadership_moves_to_the_member_we_talk_through_only_when_the_target_leads() -> None:
    assert etcd.leadership_target([N1, N2], N2, leader=2, via_node="n1") == 1
    assert etcd.leadership_target([N1, N2], N2, leader=1, via_node="n1") is None
    assert etcd.leadership_target([N1, N2], N2, leader=0, via_node="n1") is None  # unknown leader
    assert etcd.leadership_target([N2], N2, leader=2, via_node="n1") is None      # via is no member
    assert etcd.leadership_target([N1, N3], N3, leader=3, via_node="n1") is None  # target has no client URL


# --- the pre-terminate hook (upstream reconcilePreTerminateHook) -----------------------------------------------

def _deleting(name: str, ts: str = "2026-12-05T08:54:14Z", hook: bool = True, waiting: bool = True
              ) -> dict[str, Any]:
    """A deleting control-plane Machine: with or without KCP's hook, drained (waiting on pre-terminate hooks) or not."""
    return {"metadata": {"name": name, "deletionTimestamp": ts,
                         "annotations": {KCP_CLEANUP_HOOK: ""} if hook else {}},
            "status": {"conditions": [{"type": "Deleting", "status": "True",
                                       "reason": "WaitingForPreTerminateHook" if waiting else "DrainingNode"}]}}


def test_a_joined_machine_whose_node_is_not_ready_yet_carries_etcd() -> None:
    """The rollout of session 16's e2e: the new machine joined (static pods Ready) but its Node is not Ready yet;
    the old one's member must go through it, not be skipped (skipping lost quorum)."""
    joined = view("new", minutes=2, node_ready=False)
    old = view("old", deleting=True)
    step = etcd.hook_step([_deleting("old")], [old, joined], True)
    assert step == etcd.HookStep("remove-member", "old", via="new", node="old")


def test_no_member_carries_etcd_yet_or_no_workload_api_waits_with_the_hook() -> None:
    old = view("old", deleting=True)
    joining = view("new", minutes=2, pods_ready={"etcd": True}, node_ready=False)  # not every static pod Ready
    step = etcd.hook_step([_deleting("old")], [old, joining], True)
    assert step.kind == "wait" and "waiting for new to be healthy" in step.message and "quorum" in step.message
    step = etcd.hook_step([_deleting("old")], [old, view("new", minutes=2)], False)
    assert step.kind == "wait" and "not reachable" in step.message


def test_drop_only_when_there_is_no_etcd_member_to_keep_or_remove() -> None:
    assert etcd.hook_step([_deleting("last")], [view("last", deleting=True)], False) == \
        etcd.HookStep("drop", "last")
    never_joined = view("young", healthy=False, deleting=True)
    assert etcd.hook_step([_deleting("young")], [never_joined, view("a")], False) == \
        etcd.HookStep("drop", "young")


def test_one_machine_at_a_time_oldest_deletion_first_and_only_once_drained() -> None:
    views = [view("a", deleting=True), view("b", deleting=True), view("c", minutes=3), view("d", minutes=1)]
    two = [_deleting("b", "2026-12-05T08:00:01Z"), _deleting("a", "2026-12-05T08:00:02Z")]
    assert etcd.hook_step(two, views, True) == etcd.HookStep("remove-member", "b", via="c", node="b")
    not_drained = [_deleting("b", "2026-12-05T08:00:01Z", waiting=False), _deleting("a", "2026-12-05T08:00:02Z")]
    assert etcd.hook_step(not_drained, views, True).kind == "none"
    without_hook = [_deleting("b", hook=False), _deleting("a")]  # wait until that one is gone, as upstream
    assert etcd.hook_step(without_hook, views, True).kind == "none"
    assert etcd.hook_step([], views, True).kind == "none"
