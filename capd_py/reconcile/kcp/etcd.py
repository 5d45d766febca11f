"""etcd membership decisions for scale down: which member belongs to the Machine being removed, and
whether leadership has to move off it first (upstream: RemoveEtcdMemberForMachine / ForwardEtcdLeadership)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capd_py.api.etcd import EtcdMember


def member_of_node(members: Sequence[EtcdMember], node_name: str) -> EtcdMember | None:
    """kubeadm names each etcd member after its node."""
    return next((m for m in members if m.name == node_name), None)


def leadership_target(members: Sequence[EtcdMember], target: EtcdMember, leader: int, via_node: str) -> int | None:
    """The member to hand leadership to before removing `target`: the member we talk through, when
    `target` leads and can be reached; None when nothing has to move."""
    via = member_of_node(members, via_node)
    if leader != target.id or via is None or via.id == target.id or not target.client_urls:
        return None
    return via.id


# --- `etcdctl member list -w json` members as plain dicts -------------------------------------------

def etcd_member_to_remove(members: list[dict[str, Any]], node_name: str) -> dict[str, Any] | None:
    """From `etcdctl member list -w json` members, the one of `node_name` (kubeadm names members after
    the node)."""
    for m in members:
        if m.get("name") == node_name:
            return m
    return None


def member_id(member: dict[str, Any]) -> int:
    """etcdctl prints IDs as numbers (or hex strings with --hex)."""
    v = member.get("ID")
    return int(v, 16) if isinstance(v, str) else int(v or 0)


def member_id_hex(member: dict[str, Any]) -> str:
    return format(member_id(member), "x")
