"""The health of a KCP's etcd as upstream's KCP reads it (upstream: controlplane/kubeadm/internal/
workload_cluster_conditions.go updateManagedEtcdConditions, compareMachinesAndMembers, and controllers/status.go
setAvailableCondition): the member list and alarms read through one control-plane node's etcd (`EtcdObservation`)
give each Machine its EtcdMemberHealthy condition, the KCP its EtcdClusterHealthy condition, and the etcd half of
Available (a quorum of the voting members healthy, members and Machines matching).

Pure: the controller reads etcd (controllers/kcp/observe.py) and hands the result and the time in."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions
from capd_py.api.etcd import EtcdAlarm, EtcdMember
from capd_py.reconcile.drain import list_to_string
from capd_py.reconcile.kcp.common import ETCD_MEMBER_HEALTHY, MachineView, parse_time

# a Node whose etcd member is still missing after this long is a mismatch (upstream: the time it expects a new member
# to be seen), and a control plane initialized this long ago that reports no member list is not Available
MEMBER_GRACE = _dt.timedelta(minutes=2)
# how long a member's condition is other than True before Available (still True) says so (upstream: 10 s)
SURFACE_AFTER = _dt.timedelta(seconds=10)


@dataclass(frozen=True)
class Cond:
    status: str
    reason: str
    message: str = ""


@dataclass(frozen=True)
class EtcdObservation:
    """What one pass read of etcd. `members` None: not read; then `failure` (when set) is what every Machine with a
    Node (not deleting) reports, as upstream's getCurrentEtcdMembersAndAlarms does for each way reading fails."""

    members: tuple[EtcdMember, ...] | None = None
    alarms: tuple[EtcdAlarm, ...] = ()
    failure: Cond | None = None


def connect_failed(error: str) -> Cond:
    return Cond(conditions.UNKNOWN, "InspectionFailed", f"Failed to connect to etcd: {error}")


def endpoint_errors(endpoint: str, errors: tuple[str, ...]) -> Cond:
    return Cond(conditions.FALSE, "NotHealthy", f"Etcd endpoint {endpoint} reports errors: {', '.join(errors)}")


def members_failed(error: str) -> Cond:
    return Cond(conditions.UNKNOWN, "InspectionFailed", f"Failed to get etcd members: {error}")


def alarms_failed(error: str) -> Cond:
    return Cond(conditions.UNKNOWN, "InspectionFailed", f"Failed to get etcd alarms: {error}")


def nodes_to_ask(views: list[MachineView]) -> list[str]:
    """The control-plane nodes to read etcd through, those whose member was healthy last time first (most likely to
    answer again), then the rest in name order (upstream picks among those at random)."""
    with_node = [v for v in views if v.node_ref and v.node_name and not v.deleting]
    healthy = sorted(v.node_ref for v in with_node if (v.etcd_member or {}).get("status") == conditions.TRUE)
    return healthy + sorted(v.node_ref for v in with_node if v.node_ref not in healthy)


def member_conditions(views: list[MachineView], obs: EtcdObservation) -> dict[str, Cond]:
    """Each Machine's EtcdMemberHealthy, by Machine name."""
    out: dict[str, Cond] = {}
    by_name = {m.name: m for m in obs.members or ()}
    for v in views:
        if not v.node_ref:
            out[v.name] = Cond(conditions.UNKNOWN, "InspectionFailed",
                               f"Waiting for a Node with spec.providerID {v.provider_id} to exist" if v.provider_id
                               else f"Waiting for {v.infra_kind} to report spec.providerID")
        elif v.deleting:
            out[v.name] = Cond(conditions.FALSE, "Deleting", "Machine is deleting")
        elif obs.members is None:
            if obs.failure is not None:
                out[v.name] = obs.failure
        elif (member := by_name.get(v.node_ref)) is None:
            pass  # no member: said below, as for every Machine with a Node
        elif member.is_learner:
            out[v.name] = Cond(conditions.FALSE, "NotHealthy", "Waiting for learner etcd member to be promoted")
        elif alarms := [a.alarm for a in obs.alarms if a.member_id == member.id and a.alarm != "NONE"]:
            out[v.name] = Cond(conditions.FALSE, "NotHealthy", f"Etcd reports alarms: {', '.join(alarms)}")
        else:
            out[v.name] = Cond(conditions.TRUE, "Healthy")
    if obs.members is not None:
        for v in views:
            if v.node_ref and v.node_ref not in by_name:
                out[v.name] = Cond(conditions.FALSE, "NotHealthy",
                                   f"Etcd doesn't have an etcd member for Node {v.node_ref}")
    return out


def compare(views: list[MachineView], obs: EtcdObservation, now: _dt.datetime) -> tuple[bool, list[str]]:
    """Whether the etcd members and the Machines match (for Available), and what concerns the KCP as a whole (for
    EtcdClusterHealthy): a member without a Machine. A Machine whose Node is younger than MEMBER_GRACE may still be
    waiting for its member, and a member without a Machine while one is provisioning is most likely its member."""
    if obs.members is None:
        return not any(v.node_ref for v in views), []
    matching = True
    names = {m.name for m in obs.members}
    for v in views:
        if v.node_ref and v.node_ref not in names and not v.deleting and v.node_created is not None \
                and now - v.node_created > MEMBER_GRACE:
            matching = False
    errors = []
    refs = {v.node_ref for v in views if v.node_ref}
    provisioning = any(not v.node_ref for v in views)
    for m in obs.members:
        if m.name not in refs:
            errors.append(f"Etcd member {m.name or f'{m.id} (Name not yet assigned)'} does not have a corresponding "
                          "Machine")
            if not provisioning:
                matching = False
    return matching, errors


def cluster_condition(views: list[MachineView], members: dict[str, Cond], kcp_errors: list[str]) -> Cond:
    """EtcdClusterHealthy from the Machines' EtcdMemberHealthy (upstream aggregateConditionsFromMachinesToKCP): False
    when a member or the KCP reports an error, Unknown when one is unknown (not counting Machines without a provider
    ID yet), True when one is healthy; the message groups the Machines by what they report, most Machines first."""
    errors: set[str] = set()
    unknown: set[str] = set()
    info: set[str] = set()
    by_message: dict[str, list[str]] = {}
    for v in views:
        c = members.get(v.name)
        if c is None:
            continue
        if c.status == conditions.TRUE:
            info.add(v.name)
            continue
        if c.status == conditions.UNKNOWN and not v.provider_id:
            info.add(v.name)
            continue
        (errors if c.status == conditions.FALSE else unknown).add(v.name)
        message = f"  * {ETCD_MEMBER_HEALTHY}: {c.message or f'condition is {c.status}'}"
        by_message.setdefault(message, []).append(v.name)
    order = sorted(by_message, key=lambda m: (-len(by_message[m]), ",".join(by_message[m])))
    lines = []
    for message in order:
        names = sorted(by_message[message])
        lines.append(f"* Machine{'s' if len(names) > 1 else ''} {list_to_string(names, 3)}:\n{message}")
    lines += [f"* {e}" for e in kcp_errors]
    text = "\n".join(lines)
    if kcp_errors or errors:
        return Cond(conditions.FALSE, "NotHealthy", text)
    if unknown:
        return Cond(conditions.UNKNOWN, "HealthUnknown", text)
    if info:
        return Cond(conditions.TRUE, "Healthy")
    return Cond(conditions.UNKNOWN, "HealthUnknown", "No Machines reporting etcd member status")


def transition_time(current: dict[str, Any] | None, new: Cond, now: _dt.datetime) -> _dt.datetime:
    """When `new` took its status: the Machine's condition's lastTransitionTime when the status stays, else now."""
    if current and current.get("status") == new.status:
        return parse_time(current.get("lastTransitionTime")) or now
    return now


def availability(views: list[MachineView], obs: EtcdObservation, members: dict[str, Cond], matching: bool,
                 initialized_since: _dt.datetime | None, now: _dt.datetime) -> Cond:
    """Available, as upstream's setAvailableCondition for a control plane with its own (stacked) etcd, once
    initialized: the member list read, members matching Machines, a quorum of the voting members healthy, and one
    Machine with every control-plane component and its etcd member healthy. `initialized_since`: when Initialized
    turned True."""
    if obs.members is None:
        if initialized_since is not None and now - initialized_since < MEMBER_GRACE:
            return Cond(conditions.FALSE, "NotAvailable", "Waiting for etcd to report the list of members")
        return Cond(conditions.UNKNOWN, "InspectionFailed", "Failed to get etcd members")
    if not matching:
        return Cond(conditions.FALSE, "NotAvailable",
                    "The list of etcd members does not match the list of Machines and Nodes")

    def member_state(v: MachineView) -> str:
        c = members.get(v.name)
        if c is not None and c.status == conditions.TRUE:
            return "healthy"
        if c is None:
            return "unreported"
        since = transition_time(v.etcd_member, c, now)
        return "unhealthy" if now - since > SURFACE_AFTER else "unreported"

    with_id = [v for v in views if v.provider_id]
    cp_healthy = cp_unhealthy = cp_unreported = 0
    for v in with_id:
        state = member_state(v)
        if v.passes_preflight and state == "healthy":
            cp_healthy += 1
        elif not v.passes_preflight or state == "unhealthy":
            cp_unhealthy += 1
        else:
            cp_unreported += 1

    by_node = {v.node_ref: v for v in views if v.node_ref}
    provisioning = [v for v in views if not v.node_ref]
    voting = learners = healthy = unhealthy = unreported = 0
    for m in obs.members:
        if m.is_learner or not m.name:
            learners += 1
        else:
            voting += 1
        if not m.name:
            healthy += 1  # a member that has not started yet: transient
            continue
        machine = by_node.get(m.name)
        if machine is None:
            if len(provisioning) != 1:
                unhealthy += 1
                continue
            machine, provisioning = provisioning[0], []
        state = member_state(machine)
        if state == "healthy":
            healthy += 1
        elif state == "unhealthy":
            unhealthy += 1
        else:
            unreported += 1
    quorum = voting // 2 + 1
    learners_note = f" {learners} learner etcd member," if learners else ""

    def members_line(n: int) -> str:
        total = len(obs.members or ())
        verb = "is" if n == 1 else "are"  # upstream's words: "1 of 3 etcd members is healthy"
        return (f"* {n} of {total} etcd members {verb} healthy,{learners_note} at least {quorum} healthy member "
                "required for etcd quorum")

    if healthy >= quorum and cp_healthy >= 1:
        lines = []
        if unhealthy:
            lines.append(members_line(healthy + unreported))
        if cp_unhealthy:
            n = cp_healthy + cp_unreported
            lines.append(f"* 1 of {len(views)} Machines has healthy control plane components, at least 1 required"
                         if n == 1 else
                         f"* {n} of {len(views)} Machines have healthy control plane components, at least 1 required")
        return Cond(conditions.TRUE, "Available", "\n".join(lines))
    lines = []
    if healthy < quorum:
        lines.append(f"* There are no healthy etcd member,{learners_note} at least {quorum} healthy member required "
                     "for etcd quorum" if healthy == 0 else members_line(healthy))
    if cp_healthy < 1:
        lines.append("* There are no Machines with healthy control plane components, at least 1 required")
    return Cond(conditions.FALSE, "NotAvailable", "\n".join(lines))


@dataclass(frozen=True)
class Assessment:
    members: dict[str, Cond]   # each Machine's EtcdMemberHealthy, by name
    cluster: Cond              # the KCP's EtcdClusterHealthy
    available: Cond            # the KCP's Available, once initialized


def assess(views: list[MachineView], obs: EtcdObservation, initialized_since: _dt.datetime | None,
           now: _dt.datetime) -> Assessment:
    members = member_conditions(views, obs)
    matching, kcp_errors = compare(views, obs, now)
    return Assessment(members, cluster_condition(views, members, kcp_errors),
                      availability(views, obs, members, matching, initialized_since, now))


def managed(kcp: dict[str, Any]) -> bool:
    """Whether the control plane runs its own etcd (kubeadm's stacked etcd), not an external one."""
    etcd = ((((kcp.get("spec") or {}).get("kubeadmConfigSpec") or {}).get("clusterConfiguration") or {})
            .get("etcd") or {})
    return not etcd.get("external")


def initialized_since(kcp: dict[str, Any], now: _dt.datetime) -> _dt.datetime:
    """When the KCP's Initialized condition turned True (now, when it turns True in this pass)."""
    c = conditions.get(kcp, "Initialized")
    if c and c.get("status") == conditions.TRUE:
        return parse_time(c.get("lastTransitionTime")) or now
    return now
