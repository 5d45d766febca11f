"""Which etcd member goes with a machine, and when leadership moves off it first."""

from __future__ import annotations

import pytest

from capd_py.api.etcd import EtcdMember
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
