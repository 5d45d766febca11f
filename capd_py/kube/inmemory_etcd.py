"""An in-memory etcd cluster for unit tests: `FakeEtcd` is an `EtcdClients` (put it on `Ctx.etcd`) whose
clients all see the same members and leader, and which records what was asked of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from capd_py.api.etcd import EtcdAlarm, EtcdMember, EtcdStatus
from capd_py.kube.etcd import EtcdClient, EtcdError


@dataclass
class FakeEtcd:
    members: dict[int, EtcdMember] = field(default_factory=dict)
    leader: int = 0
    # (node the client was made for, operation, argument) for every call
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    # (node the client was made for, name of the removed member)
    removed: list[tuple[str, str]] = field(default_factory=list)
    # operation name ("members", "status", "alarms", "move_leader", "remove_member") -> error to raise instead
    fail: dict[str, Exception] = field(default_factory=dict)
    # what `alarms()` reports, and what `status()` reports wrong (StatusResponse.errors) through a node's member
    alarm_list: list[EtcdAlarm] = field(default_factory=list)
    status_errors: dict[str, tuple[str, ...]] = field(default_factory=dict)
    _next_id: int = 0x10

    @classmethod
    def with_members(cls, *names: str, leader: str | None = None) -> FakeEtcd:
        f = cls()
        for n in names:
            f.add(n)
        if leader is not None:
            f.leader = f.by_name(leader).id  # type: ignore[union-attr]
        return f

    def add(self, name: str) -> EtcdMember:
        """A new member named after its node; the first one becomes the leader."""
        self._next_id += 1
        m = EtcdMember(self._next_id, name, (f"https://{name}:2379",))
        self.members[m.id] = m
        if not self.leader:
            self.leader = m.id
        return m

    def by_name(self, name: str) -> EtcdMember | None:
        return next((m for m in self.members.values() if m.name == name), None)

    def names(self) -> list[str]:
        return sorted(m.name for m in self.members.values())

    def for_node(self, workload: Any, node: str) -> EtcdClient:
        return FakeEtcdClient(self, node)


class FakeEtcdClient:
    def __init__(self, cluster: FakeEtcd, node: str):
        self.cluster = cluster
        self.node = node

    def _enter(self, op: str, arg: str = "") -> None:
        self.cluster.calls.append((self.node, op, arg))
        if op in self.cluster.fail:
            raise self.cluster.fail[op]
        if self.cluster.by_name(self.node) is None:
            # like exec into a pod whose etcd is no longer a member: nothing sensible answers
            raise EtcdError(f"no etcd member on node {self.node}")

    async def members(self) -> list[EtcdMember]:
        self._enter("members")
        return sorted(self.cluster.members.values(), key=lambda m: m.id)

    async def status(self) -> EtcdStatus:
        self._enter("status")
        return EtcdStatus(self.cluster.leader, self.cluster.status_errors.get(self.node, ()))

    async def alarms(self) -> list[EtcdAlarm]:
        self._enter("alarms")
        return list(self.cluster.alarm_list)

    async def move_leader(self, leader: EtcdMember, to: int) -> None:
        self._enter("move_leader", format(to, "x"))
        if leader.id != self.cluster.leader:
            raise EtcdError(f"etcd member {leader.hex_id} is not the leader")
        if to not in self.cluster.members:
            raise EtcdError(f"no etcd member {to:x}")
        self.cluster.leader = to

    async def remove_member(self, member_id: int) -> None:
        self._enter("remove_member", format(member_id, "x"))
        m = self.cluster.members.pop(member_id, None)
        if m is None:
            raise EtcdError(f"member {member_id:x} not found")
        self.cluster.removed.append((self.node, m.name))
        if self.cluster.leader == member_id:  # an election among the rest
            self.cluster.leader = min(self.cluster.members, default=0)
