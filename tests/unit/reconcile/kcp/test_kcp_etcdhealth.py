"""The KCP's etcd health as upstream's KCP reads it: each Machine's EtcdMemberHealthy from the member list and
alarms, the KCP's EtcdClusterHealthy (upstream's aggregation and messages) and Available's etcd half (members
matching Machines, a quorum of healthy voting members, the 2-minute and 10-second grace periods)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from capd_py.api import conditions
from capd_py.api.etcd import EtcdAlarm, EtcdMember
from capd_py.reconcile.kcp import etcdhealth as eh

try:
    from kcp_fixtures import NOW, view
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import NOW, view  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

OLD = NOW - dt.timedelta(minutes=10)  # Nodes made long ago
TRUE, FALSE, UNKNOWN = conditions.TRUE, conditions.FALSE, conditions.UNKNOWN


def cp(name: str, *, node_created: dt.datetime = OLD, member: dict[str, Any] | None = None, **kw: Any) -> Any:
    """A control-plane Machine `name` with its Node `name-node` (provider ID set)."""
    fields: dict[str, Any] = {"node_ref": f"{name}-node", "node_name": f"{name}-node", "provider_id": f"docker:////{name}",
                              "infra_kind": "DockerMachine", "node_created": node_created, "etcd_member": member}
    return view(name, **{**fields, **kw})


def members(*names: str, learners: tuple[str, ...] = ()) -> tuple[EtcdMember, ...]:
    return tuple(EtcdMember(i + 1, n, is_learner=n in learners) for i, n in enumerate(names))


def was(status: str, ago: float) -> dict[str, Any]:
    """The Machine's EtcdMemberHealthy as it is: `status` since `ago` seconds."""
    return {"type": "EtcdMemberHealthy", "status": status,
            "lastTransitionTime": (NOW - dt.timedelta(seconds=ago)).strftime("%Y-%m-%dT%H:%M:%SZ")}


def test_three_healthy_members() -> None:
    views = [cp("m1"), cp("m2"), cp("m3")]
    a = eh.assess(views, eh.EtcdObservation(members("m1-node", "m2-node", "m3-node")), OLD, NOW)
    assert set(a.members.values()) == {eh.Cond(TRUE, "Healthy")}
    assert a.cluster == eh.Cond(TRUE, "Healthy")
    assert a.available == eh.Cond(TRUE, "Available", "")


def test_a_machine_whose_member_was_removed() -> None:
    views = [cp("m1"), cp("m2"), cp("m3")]
    a = eh.assess(views, eh.EtcdObservation(members("m1-node", "m3-node")), OLD, NOW)
    assert a.members["m2"] == eh.Cond(FALSE, "NotHealthy", "Etcd doesn't have an etcd member for Node m2-node")
    assert a.cluster == eh.Cond(FALSE, "NotHealthy", "* Machine m2:\n"
                                "  * EtcdMemberHealthy: Etcd doesn't have an etcd member for Node m2-node")
    assert a.available == eh.Cond(FALSE, "NotAvailable",
                                  "The list of etcd members does not match the list of Machines and Nodes")
    # a Node younger than two minutes may still be waiting for its member: no mismatch yet
    young = [cp("m1"), cp("m2", node_created=NOW - dt.timedelta(seconds=30)), cp("m3")]
    assert eh.assess(young, eh.EtcdObservation(members("m1-node", "m3-node")), OLD, NOW).available == \
        eh.Cond(TRUE, "Available", "")


def test_a_learner_is_not_healthy_and_does_not_vote() -> None:
    views = [cp("m1"), cp("m2", member=was(FALSE, 60))]
    a = eh.assess(views, eh.EtcdObservation(members("m1-node", "m2-node", learners=("m2-node",))), OLD, NOW)
    assert a.members["m2"] == eh.Cond(FALSE, "NotHealthy", "Waiting for learner etcd member to be promoted")
    # one voting member, healthy: quorum 1; the learner is said once it has not been healthy for 10 s
    assert a.available == eh.Cond(TRUE, "Available", "* 1 of 2 etcd members is healthy, 1 learner etcd member, "
                                  "at least 1 healthy member required for etcd quorum\n"
                                  "* 1 of 2 Machines has healthy control plane components, at least 1 required")


def test_alarms_surface_in_available_after_ten_seconds() -> None:
    obs = eh.EtcdObservation(members("m1-node", "m2-node", "m3-node"), (EtcdAlarm(3, "NOSPACE"), EtcdAlarm(1, "NONE")))
    fresh = eh.assess([cp("m1"), cp("m2"), cp("m3", member=was(TRUE, 60))], obs, OLD, NOW)
    assert fresh.members["m3"] == eh.Cond(FALSE, "NotHealthy", "Etcd reports alarms: NOSPACE")
    assert fresh.members["m1"] == eh.Cond(TRUE, "Healthy")  # NONE is no alarm
    assert fresh.available == eh.Cond(TRUE, "Available", "")  # turned False just now: not said yet
    later = eh.assess([cp("m1"), cp("m2"), cp("m3", member=was(FALSE, 11))], obs, OLD, NOW)
    assert later.available.status == TRUE and later.available.message.startswith(
        "* 2 of 3 etcd members are healthy, at least 2 healthy member required for etcd quorum")


def test_quorum_lost() -> None:
    obs = eh.EtcdObservation(members("m1-node", "m2-node", "m3-node"),
                             (EtcdAlarm(2, "NOSPACE"), EtcdAlarm(3, "CORRUPT")))
    a = eh.assess([cp("m1"), cp("m2"), cp("m3")], obs, OLD, NOW)
    assert a.available == eh.Cond(FALSE, "NotAvailable", "* 1 of 3 etcd members is healthy, at least 2 healthy member "
                                  "required for etcd quorum")
    assert a.cluster.status == FALSE and a.cluster.message == (
        "* Machine m2:\n  * EtcdMemberHealthy: Etcd reports alarms: NOSPACE\n"
        "* Machine m3:\n  * EtcdMemberHealthy: Etcd reports alarms: CORRUPT")


def test_etcd_that_cannot_be_read() -> None:
    views = [cp("m1"), cp("m2")]
    obs = eh.EtcdObservation(failure=eh.connect_failed("exit 1: context deadline exceeded"))
    a = eh.assess(views, obs, NOW - dt.timedelta(seconds=30), NOW)
    assert set(a.members.values()) == {eh.Cond(UNKNOWN, "InspectionFailed",
                                               "Failed to connect to etcd: exit 1: context deadline exceeded")}
    assert a.cluster == eh.Cond(UNKNOWN, "HealthUnknown", "* Machines m1, m2:\n  * EtcdMemberHealthy: Failed to "
                                "connect to etcd: exit 1: context deadline exceeded")
    assert a.available == eh.Cond(FALSE, "NotAvailable", "Waiting for etcd to report the list of members")
    assert eh.assess(views, obs, OLD, NOW).available == eh.Cond(UNKNOWN, "InspectionFailed",
                                                                "Failed to get etcd members")
    errs = eh.EtcdObservation(failure=eh.endpoint_errors("etcd-m1-node", ("NOSPACE", "slow")))
    assert eh.assess(views, errs, OLD, NOW).members["m1"] == eh.Cond(
        FALSE, "NotHealthy", "Etcd endpoint etcd-m1-node reports errors: NOSPACE, slow")


def test_a_member_without_a_machine() -> None:
    obs = eh.EtcdObservation(members("m1-node", "stray") + (EtcdMember(9, ""),))
    a = eh.assess([cp("m1")], obs, OLD, NOW)
    assert a.cluster == eh.Cond(FALSE, "NotHealthy", "* Etcd member stray does not have a corresponding Machine\n"
                                "* Etcd member 9 (Name not yet assigned) does not have a corresponding Machine")
    assert a.available.message == "The list of etcd members does not match the list of Machines and Nodes"
    # while a Machine is provisioning, the member without a Machine is most likely its own
    provisioning = view("m2", healthy=False, infra_kind="DockerMachine")
    b = eh.assess([cp("m1"), provisioning], eh.EtcdObservation(members("m1-node", "stray")), OLD, NOW)
    assert b.members["m2"] == eh.Cond(UNKNOWN, "InspectionFailed",
                                      "Waiting for DockerMachine to report spec.providerID")
    # matching (Available asks no more), but that member is not healthy yet: 1 of 2 voting members, no quorum
    assert b.cluster.status == FALSE
    assert b.available == eh.Cond(FALSE, "NotAvailable", "* 1 of 2 etcd members is healthy, at least 2 healthy member "
                                  "required for etcd quorum")


def test_provisioning_and_deleting_machines() -> None:
    waiting = view("m2", healthy=False, infra_kind="DockerMachine", provider_id="docker:////m2")
    going = cp("m3", deleting=True)
    got = eh.member_conditions([cp("m1"), waiting, going], eh.EtcdObservation(members("m1-node", "m3-node")))
    assert got["m2"] == eh.Cond(UNKNOWN, "InspectionFailed", "Waiting for a Node with spec.providerID docker:////m2 "
                                "to exist")
    assert got["m3"] == eh.Cond(FALSE, "Deleting", "Machine is deleting")


def test_machines_are_grouped_by_message_most_first() -> None:
    views = [cp(n) for n in ("a", "b", "c", "d", "e")]
    got = eh.cluster_condition(views, {n: eh.Cond(UNKNOWN, "InspectionFailed", "x") for n in "abcd"}
                               | {"e": eh.Cond(FALSE, "NotHealthy", "y")}, [])
    assert got == eh.Cond(FALSE, "NotHealthy", "* Machines a, b, c, ... (1 more):\n  * EtcdMemberHealthy: x\n"
                          "* Machine e:\n  * EtcdMemberHealthy: y")
    assert eh.cluster_condition([], {}, []) == eh.Cond(UNKNOWN, "HealthUnknown",
                                                       "No Machines reporting etcd member status")


def test_nodes_asked_first_are_those_healthy_last_time() -> None:
    views = [cp("m1", member=was(FALSE, 5)), cp("m2", member=was(TRUE, 5)), cp("m3"), cp("m4", deleting=True),
             view("m5", healthy=False)]
    assert eh.nodes_to_ask(views) == ["m2-node", "m1-node", "m3-node"]


def test_managed_and_initialized_since() -> None:
    assert eh.managed({"spec": {"kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {"local": {}}}}}})
    assert not eh.managed({"spec": {"kubeadmConfigSpec": {"clusterConfiguration": {"etcd": {
        "external": {"endpoints": ["https://e:2379"]}}}}}})
    kcp = {"status": {"conditions": [{"type": "Initialized", "status": "True",
                                      "lastTransitionTime": "2026-01-01T11:00:00Z"}]}}
    assert eh.initialized_since(kcp, NOW) == NOW - dt.timedelta(hours=1)
    assert eh.initialized_since({}, NOW) == NOW
