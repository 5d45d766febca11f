"""etcd membership decisions for scale down: which member belongs to the Machine being removed, and
whether leadership has to move off it first (upstream: RemoveEtcdMemberForMachine / ForwardEtcdLeadership)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions
from capd_py.api.etcd import EtcdMember
from capd_py.api.labels import KCP_CLEANUP_HOOK
from capd_py.reconcile.machine import R_WAITING_PRE_TERMINATE_HOOK


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


# --- the pre-terminate hook of a deleting control-plane Machine (upstream reconcilePreTerminateHook) -----------

@dataclass(frozen=True)
class HookStep:
    """What to do with KCP's pre-terminate hook this pass.
    kind: none (no deleting Machine of ours holds it) | wait (keep it; `message` says why, retried) |
    drop (remove the hook: nothing of etcd to do) | remove-member (remove `machine`'s etcd member through
    `via`'s etcd, then the hook)."""
    kind: str
    machine: str = ""
    via: str = ""           # node name of the member to talk through (and hand leadership to)
    node: str = ""          # node name of the member to remove
    message: str = ""


def hook_step(machines: Sequence[dict[str, Any]], views: Sequence[Any], workload_reachable: bool) -> HookStep:
    """One step for the deleting control-plane Machines of a KCP, in upstream's order.
    `machines`: the KCP's control-plane Machines; `views`: their MachineViews. The member goes only
    while the rest of the control plane can carry etcd: the hook is never dropped with the member still there
    because another member was not ready yet or the workload API did not answer (that lost etcd quorum: the
    deleted Machine's member stayed, and a two-member etcd with one member gone has no quorum)."""
    deleting = [m for m in machines if m["metadata"].get("deletionTimestamp")]
    if not deleting:
        return HookStep("none")
    if any(KCP_CLEANUP_HOOK not in (m["metadata"].get("annotations") or {}) for m in deleting):
        return HookStep("none")  # upstream: wait until a deleting Machine without the hook is gone
    # oldest deletion first, one at a time
    oldest = min(deleting, key=lambda m: (str(m["metadata"]["deletionTimestamp"]), m["metadata"]["name"]))
    name = oldest["metadata"]["name"]
    if (conditions.get(oldest, conditions.DELETING) or {}).get("reason") != R_WAITING_PRE_TERMINATE_HOOK:
        return HookStep("none")  # not drained yet: the hook runs after the drain, as upstream's
    if len(views) <= 1:
        return HookStep("drop", name)  # the last control-plane machine: no etcd cluster to keep
    target = next((v for v in views if v.name == name), None)
    if target is None or not target.node_name:
        return HookStep("drop", name)  # its member has no name (never joined): nothing to remove
    others = [v for v in views if v.name != name and not v.deleting]
    carrying = [v for v in others if v.passes_preflight]
    if not carrying:
        waiting_for = ", ".join(sorted(v.name for v in others)) or "another control-plane Machine"
        return HookStep("wait", name, message=(
            f"Cannot remove the etcd member of Machine {name} yet: waiting for {waiting_for} to be healthy "
            "(Node registered, static pods Ready) so that etcd keeps its quorum"))
    if not workload_reachable:
        return HookStep("wait", name, message=(
            f"Cannot remove the etcd member of Machine {name}: the workload cluster's API is not reachable"))
    via = max(carrying, key=lambda v: (v.created, v.name))  # upstream hands leadership to the newest Machine
    return HookStep("remove-member", name, via=via.node_name, node=target.node_name)
