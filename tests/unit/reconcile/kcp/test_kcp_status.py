"""KubeadmControlPlane status and conditions from observed state."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import conditions
from capd_py.api.etcd import EtcdAlarm, EtcdMember
from capd_py.reconcile import certs
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import etcdhealth as eh
from capd_py.reconcile.kcp import status

try:
    from kcp_fixtures import NOW, kcp, view
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import NOW, kcp, view  # type: ignore[no-redef]

MEMBERS = "one member per Machine with a Node"

pytestmark = pytest.mark.unit


def conds(st: conditions.StatusBuilder) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in st.final()["conditions"]}


def run(views: list[rk.MachineView], *, initialized: bool = True, reachable: bool = True, error: str = "",
        versions: list[str] | None = None, etcd: eh.EtcdObservation | str | None = MEMBERS,
        **spec: Any) -> conditions.StatusBuilder:
    """`etcd`: what etcd reported (by default a healthy member for each Machine with a Node; None: an external
    etcd)."""
    k = kcp(**spec)
    st = conditions.StatusBuilder(k)
    obs = eh.EtcdObservation(tuple(EtcdMember(i + 1, v.node_ref) for i, v in enumerate(views) if v.node_ref)) \
        if etcd == MEMBERS else etcd
    if not reachable and etcd == MEMBERS:
        obs = eh.EtcdObservation(failure=eh.Cond(conditions.UNKNOWN, "ConnectionDown", error))
    assert not isinstance(obs, str)
    assessment = eh.assess(views, obs, NOW, NOW) if obs is not None and initialized else None
    status.apply(st, k, views, versions if versions is not None else ["v1.34.4"] * len(views), initialized,
                 reachable, error, assessment)
    return st


def test_healthy_three() -> None:
    st = run([view("m1"), view("m2"), view("m3")], versions=["v1.34.4", "v1.33.9", ""])
    s = st.final()
    assert (s["replicas"], s["readyReplicas"], s["availableReplicas"], s["upToDateReplicas"]) == (3, 3, 3, 3)
    assert s["version"] == "v1.33.9" and s["initialization"] == {"controlPlaneInitialized": True}
    assert s["observedGeneration"] == 2
    c = conds(st)
    for t in (rk.INITIALIZED, rk.AVAILABLE, rk.MACHINES_READY, rk.MACHINES_UP_TO_DATE, rk.ETCD_CLUSTER_HEALTHY,
              rk.COMPONENTS_HEALTHY):
        assert c[t]["status"] == "True", t
    for t in (rk.ROLLING_OUT, rk.SCALING_UP, rk.SCALING_DOWN, rk.REMEDIATING, rk.DELETING):
        assert c[t]["status"] == "False", t


def test_not_initialized() -> None:
    c = conds(run([view("m1", healthy=False)], initialized=False))
    assert c[rk.INITIALIZED]["reason"] == "NotInitialized"
    assert c[rk.AVAILABLE]["message"] == "Control plane not yet initialized"
    assert c[rk.ETCD_CLUSTER_HEALTHY]["status"] == "Unknown" and c[rk.ETCD_CLUSTER_HEALTHY]["reason"] == "HealthUnknown"
    assert c[rk.SCALING_UP]["message"] == "Scaling up from 1 to 3 replicas"
    assert c[rk.INITIALIZED]["message"] == "Control plane not yet initialized"


def test_not_initialized_says_which_api_address_failed() -> None:
    err = "https://172.19.0.3:6443: TimeoutError: no answer within 10s"
    c = conds(run([view("m1", healthy=False)], initialized=False, reachable=False, error=err))
    assert c[rk.INITIALIZED]["status"] == "False" and c[rk.INITIALIZED]["reason"] == "NotInitialized"
    assert c[rk.INITIALIZED]["message"] == ("Control plane not yet initialized: the workload cluster API is not "
                                            f"reachable: {err}")
    assert c[rk.AVAILABLE]["message"] == "Control plane not yet initialized"  # as upstream


def test_no_machines() -> None:
    c = conds(run([], initialized=True))
    assert c[rk.MACHINES_READY]["reason"] == "NoReplicas" and c[rk.MACHINES_UP_TO_DATE]["reason"] == "NoReplicas"


def test_available_while_a_machine_joins() -> None:
    """Upstream's Available through a scale-up from 1: a joining machine without a Node (its etcd member not added,
    or a learner) does not vote; once its member is promoted it counts by what etcd says, not by its Pods."""
    joining = view("m2", healthy=False)
    c = conds(run([view("m1"), joining]))
    assert c[rk.AVAILABLE]["status"] == "True" and c[rk.AVAILABLE]["message"] == "", c[rk.AVAILABLE]
    learner = view("m2", pods_ready={"kube-apiserver": True})
    obs = eh.EtcdObservation((EtcdMember(1, "m1"), EtcdMember(2, "m2", is_learner=True)))
    c = conds(run([view("m1"), learner], etcd=obs))
    assert c[rk.AVAILABLE]["status"] == "True"
    assert c[rk.ETCD_CLUSTER_HEALTHY]["message"] == ("* Machine m2:\n  * EtcdMemberHealthy: Waiting for learner etcd "
                                                     "member to be promoted")
    promoted = view("m2", pods_ready={"kube-apiserver": True})
    assert conds(run([view("m1"), promoted]))[rk.AVAILABLE]["status"] == "True"
    assert conds(run([view("m1"), view("m2"), view("m3", healthy=False)]))[rk.AVAILABLE]["status"] == "True"


def test_an_etcd_member_is_healthy_by_what_etcd_says_not_by_its_pod() -> None:
    """After a kubelet restart (capd-py kicks it after a control-plane join) the etcd Pod's readiness lags while
    the member serves: the member list and alarms decide (upstream's EtcdMemberHealthy)."""
    kicked = view("m2")
    kicked.pods_ready["etcd"] = False
    c = conds(run([view("m1"), kicked]))
    assert c[rk.AVAILABLE]["status"] == "True" and c[rk.ETCD_CLUSTER_HEALTHY]["status"] == "True"


def test_available_needs_one_machine_with_every_component_healthy() -> None:
    m1, m2 = view("m1"), view("m2")
    m1.pods_ready["kube-scheduler"] = False
    m2.pods_ready["kube-apiserver"] = False
    c = conds(run([m1, m2]))
    assert c[rk.AVAILABLE]["status"] == "False"
    assert c[rk.AVAILABLE]["message"] == ("* There are no Machines with healthy control plane components, at least 1 "
                                          "required")
    m2.pods_ready["kube-apiserver"] = True
    assert conds(run([m1, m2]))[rk.AVAILABLE]["status"] == "True"


def test_quorum_and_component_health() -> None:
    long_unhealthy = {"type": "EtcdMemberHealthy", "status": "False", "lastTransitionTime": "2026-01-01T11:00:00Z"}
    sick = view("m2", etcd_member=long_unhealthy)
    sick.pods_ready["kube-scheduler"] = False
    obs = eh.EtcdObservation((EtcdMember(1, "m1"), EtcdMember(2, "m2"), EtcdMember(3, "m3")),
                             (EtcdAlarm(2, "NOSPACE"), EtcdAlarm(3, "NOSPACE")))
    c = conds(run([view("m1"), sick, view("m3", etcd_member=long_unhealthy)], etcd=obs))
    assert c[rk.AVAILABLE]["status"] == "False"
    assert c[rk.AVAILABLE]["message"] == ("* 1 of 3 etcd members is healthy, at least 2 healthy member required for "
                                          "etcd quorum")
    assert c[rk.MACHINES_READY]["message"] == "Machine m2 not ready"
    assert c[rk.ETCD_CLUSTER_HEALTHY]["message"] == ("* Machines m2, m3:\n  * EtcdMemberHealthy: Etcd reports "
                                                     "alarms: NOSPACE")
    assert c[rk.COMPONENTS_HEALTHY]["message"] == "Control plane components not healthy on m2 (kube-scheduler)"


def test_external_etcd() -> None:
    """With an external etcd (no member on the machines) Available goes by the components, and EtcdClusterHealthy is
    not the KCP's to set (upstream v1beta2)."""
    no_etcd_pods = [view(n, pods_ready={p: True for p in rk.STATIC_PODS[:3]}) for n in ("m1", "m2")]
    c = conds(run(no_etcd_pods, etcd=None))
    assert c[rk.AVAILABLE]["status"] == "True" and rk.ETCD_CLUSTER_HEALTHY not in c
    no_etcd_pods[0].pods_ready["kube-apiserver"] = no_etcd_pods[1].pods_ready["kube-apiserver"] = False
    assert conds(run(no_etcd_pods, etcd=None))[rk.AVAILABLE]["status"] == "False"


def test_workload_unreachable() -> None:
    c = conds(run([view("m1")], reachable=False, error="ConnectionRefusedError: no"))
    assert c[rk.ETCD_CLUSTER_HEALTHY]["reason"] == "ConnectionDown"
    msg = "The workload cluster API is not reachable: ConnectionRefusedError: no"
    assert c[rk.COMPONENTS_HEALTHY]["message"] == msg


def test_rollout_scale_down_remediation() -> None:
    ms = [view("m1", outdated=True), view("m2", deleting=True), view("m3", remediate=True), view("m4"), view("m5")]
    c = conds(run(ms))
    assert c[rk.ROLLING_OUT]["message"] == "Rolling out 1 not up-to-date replicas: Version v1.33.0, v1.34.4 required"
    assert c[rk.MACHINES_UP_TO_DATE]["message"] == "m1: Version v1.33.0, v1.34.4 required"
    assert c[rk.SCALING_DOWN]["message"] == "Scaling down from 5 to 3 replicas"
    assert c[rk.REMEDIATING]["status"] == "True" and "m3" in c[rk.REMEDIATING]["message"]


def test_progress_adds_what_a_step_waits_for() -> None:
    k = kcp()
    st = conditions.StatusBuilder(k)
    status.progress(st, k, rk.Action("scale-up"), 1)
    assert st.conds == []
    status.progress(st, k, rk.Action("wait", "WaitingForMachinesHealthy", "waiting for m2"), 2)
    assert conds(st)[rk.SCALING_UP]["message"] == "Scaling up from 2 to 3 replicas; waiting for m2"
    status.progress(st, k, rk.Action("wait", "WaitingForMachineDeletion", "waiting for m9"), 3)
    assert conds(st)[rk.SCALING_DOWN]["message"] == "Scaling down from 3 to 3 replicas; waiting for m9"


def test_spec_status_and_certificates() -> None:
    k = kcp(replicas=2)
    st = conditions.StatusBuilder(k)
    status.set_spec_status(st, k, "c1")
    assert st.status["selector"] == "cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/control-plane"
    assert conds(st)[rk.REPLICAS_WARNING]["reason"] == "EvenReplicas"
    status.set_certificates(st, [])
    assert conds(st)[rk.CERTIFICATES_AVAILABLE]["reason"] == "Available"
    status.set_certificates(st, ["ca: bad", "sa: bad"])
    assert conds(st)[rk.CERTIFICATES_AVAILABLE]["message"] == "ca: bad; sa: bad"
    good = {p: certs.generate(p) for p in (certs.CLUSTER_CA,)}
    assert status.certificate_problems(good) == []
    broken = {certs.CLUSTER_CA: certs.KeyPair(cert=b"not a certificate", key=good[certs.CLUSTER_CA].key)}
    assert [p.split(":")[0] for p in status.certificate_problems(broken)] == [certs.CLUSTER_CA]


def test_machines_up_to_date_condition_is_written_only_when_it_changes() -> None:
    m: dict[str, Any] = {"metadata": {"name": "m1", "generation": 1}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready", "message": "", "lastTransitionTime": "t"}]}}
    st = status.machine_conditions_status(m, view("m1"))
    assert st is not None
    got = {c["type"]: c for c in st["conditions"]}
    assert got["UpToDate"]["status"] == "True" and got["Ready"]["status"] == "True"
    assert status.machine_conditions_status({**m, "status": st}, view("m1")) is None
    old = view("m1", outdated=True)
    st2 = status.machine_conditions_status({**m, "status": st}, old)
    assert st2 is not None
    c = {c["type"]: c for c in st2["conditions"]}["UpToDate"]
    assert (c["status"], c["reason"]) == ("False", "NotUpToDate") and "v1.33.0" in c["message"]


def test_status_version_is_the_lowest_machine_version() -> None:
    # upstream Machines.LowestVersion: semver order (a pre-release before its release, numeric not textual
    # comparison), machines without a parseable version left out
    assert status.min_version(["v1.35.4", "v1.34.4", "v1.35.0"]) == "v1.34.4"
    assert status.min_version(["v1.34.10", "v1.34.9"]) == "v1.34.9"
    assert status.min_version(["v1.35.0", "v1.35.0-rc.1"]) == "v1.35.0-rc.1"
    assert status.min_version(["", "garbage", "v1.35.4"]) == "v1.35.4"
    assert status.min_version(["", "garbage"]) is None
    # during an upgrade status.version stays at the old version until the last old machine is gone
    st = run([view("m1"), view("m2")], versions=["v1.35.4", "v1.34.4"])
    assert st.final()["version"] == "v1.34.4"
    st = run([view("m1"), view("m2")], versions=["v1.35.4", "v1.35.4"])
    assert st.final()["version"] == "v1.35.4"


def _status(initialized: bool, healthy: str, available: str) -> dict:
    return {"initialization": {"controlPlaneInitialized": initialized},
            "conditions": [{"type": "ControlPlaneComponentsHealthy", "status": healthy},
                           {"type": "Available", "status": available}]}


def test_recheck_soon_until_every_component_is_healthy_and_available() -> None:
    # a Pod turning Ready wakes nothing: the pass after the last one must come soon, not 30 s later
    assert status.recheck_after(_status(False, "Unknown", "False"), True, 5.0) == 5.0
    assert status.recheck_after(_status(True, "Unknown", "False"), True, 5.0) == 5.0  # not answering: no hurry
    assert status.recheck_after(_status(True, "False", "False"), True, 5.0) == status.COMING_UP_RECHECK
    assert status.recheck_after(_status(True, "True", "False"), True, 5.0) == status.COMING_UP_RECHECK
    assert status.recheck_after(_status(True, "True", "False"), True, 1.0) == 1.0
    assert status.recheck_after(_status(True, "True", "True"), True, 5.0) == status.STEADY_RECHECK
    assert status.recheck_after(_status(True, "True", "True"), True, 60.0) == 60.0
    assert status.recheck_after(_status(True, "True", "True"), False, 5.0) is None
    assert status.recheck_after({}, True, 5.0) == 5.0


def test_v1beta1_counters() -> None:
    # upstream's updateV1Beta1Status: updated = up-to-date Machines, ready = Ready control-plane Nodes,
    # unavailable = Machines minus those; no Node counted while the workload cluster cannot be read
    views = [view("m1"), view("m2", outdated=True), view("m3", healthy=False)]
    assert run(views).final()["deprecated"]["v1beta1"] == {"updatedReplicas": 2, "readyReplicas": 2,
                                                          "unavailableReplicas": 1}
    assert run(views, reachable=False).final()["deprecated"]["v1beta1"] == {
        "updatedReplicas": 2, "readyReplicas": 0, "unavailableReplicas": 3}
