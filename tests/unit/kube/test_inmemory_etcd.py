"""The in-memory etcd the KCP unit tests use behaves like the real client where KCP relies on it."""

from __future__ import annotations

import pytest

from capd_py.kube.etcd import EtcdClients, EtcdError
from capd_py.kube.inmemory_etcd import FakeEtcd

pytestmark = pytest.mark.unit


def test_is_an_etcd_clients_factory() -> None:
    clients: EtcdClients = FakeEtcd()  # what Ctx.etcd holds
    assert clients.for_node(object(), "n1") is not None  # type: ignore[arg-type]


async def test_members_status_and_first_member_leads() -> None:
    etcd = FakeEtcd.with_members("n1", "n2", "n3")
    c = etcd.for_node(None, "n2")
    members = await c.members()
    assert [m.name for m in members] == ["n1", "n2", "n3"]
    assert len({m.id for m in members}) == 3 and all(m.client_urls for m in members)
    assert (await c.status()).leader == members[0].id
    assert etcd.calls == [("n2", "members", ""), ("n2", "status", "")]


async def test_move_leader_and_remove() -> None:
    etcd = FakeEtcd.with_members("n1", "n2", leader="n2")
    n1, n2 = etcd.by_name("n1"), etcd.by_name("n2")
    assert n1 is not None and n2 is not None
    c = etcd.for_node(None, "n1")
    with pytest.raises(EtcdError, match="not the leader"):
        await c.move_leader(n1, n2.id)
    with pytest.raises(EtcdError, match="no etcd member"):
        await c.move_leader(n2, 999)
    await c.move_leader(n2, n1.id)
    assert etcd.leader == n1.id
    await c.remove_member(n2.id)
    assert etcd.names() == ["n1"] and etcd.removed == [("n1", "n2")]
    with pytest.raises(EtcdError, match="not found"):
        await c.remove_member(n2.id)


async def test_removing_the_leader_elects_another() -> None:
    etcd = FakeEtcd.with_members("n1", "n2", "n3")
    n1 = etcd.by_name("n1")
    assert n1 is not None and etcd.leader == n1.id
    await etcd.for_node(None, "n2").remove_member(n1.id)
    assert etcd.leader in {m.id for m in etcd.members.values()}


async def test_a_node_without_a_member_cannot_answer_and_failures_can_be_injected() -> None:
    etcd = FakeEtcd.with_members("n1")
    with pytest.raises(EtcdError, match="no etcd member on node n9"):
        await etcd.for_node(None, "n9").members()
    etcd.fail["status"] = EtcdError("timed out")
    with pytest.raises(EtcdError, match="timed out"):
        await etcd.for_node(None, "n1").status()
    assert ("n1", "status", "") in etcd.calls
