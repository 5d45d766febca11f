from __future__ import annotations

import pytest

from capd_py.reconcile import machinehealthcheck as rmhc
from capd_py.reconcile.machinehealthcheck import Target

try:
    from core_fixtures import NOW, condition, healthy_machine, machine, owner_ref, ts
except ImportError:  # pragma: no cover
    from .core_fixtures import NOW, condition, healthy_machine, machine, owner_ref, ts  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

CLUSTER = {"metadata": {"name": "c1"},
           "status": {"conditions": [condition("InfrastructureReady", "True", 5000),
                                     condition("ControlPlaneInitialized", "True", 4000)]}}


def mhc(max_unhealthy: int | str | None = None, startup: int | None = None, in_range: str | None = None) -> dict:
    checks: dict = {"unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 300},
                                                {"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]}
    if startup is not None:
        checks["nodeStartupTimeoutSeconds"] = startup
    trig: dict = {}
    if max_unhealthy is not None:
        trig["unhealthyLessThanOrEqualTo"] = max_unhealthy
    if in_range:
        trig["unhealthyInRange"] = in_range
    return {"metadata": {"name": "h", "namespace": "ns", "generation": 1},
            "spec": {"clusterName": "c1", "selector": {"matchLabels": {"pool": "a"}}, "checks": checks,
                     "remediation": {"triggerIf": trig}}}


def node(ready: str, since: float) -> dict:
    return {"metadata": {"name": "n"}, "status": {"conditions": [
        {"type": "Ready", "status": ready, "lastTransitionTime": ts(since), "reason": "K"}]}}


def m(name: str, **kw: object) -> dict:
    return healthy_machine(name, labels={"pool": "a"}, age=10000,
                           owner=owner_ref("MachineSet", "ms"), **kw)


def test_targets_select_by_cluster_and_selector() -> None:
    ms = [m("a"), healthy_machine("b", labels={"pool": "b"}), healthy_machine("c", labels={"pool": "a"}, cluster="x"),
          m("d", deleting=True), m("e", annotations={"cluster.x-k8s.io/skip-remediation": ""}),
          m("f", annotations={"cluster.x-k8s.io/paused": ""})]
    assert [x["metadata"]["name"] for x in rmhc.targets(mhc(), ms)] == ["a"]


def test_healthy_node() -> None:
    v = rmhc.evaluate(mhc(), CLUSTER, Target(m("a"), node=node("True", 100)), NOW)
    assert v.healthy


def test_unhealthy_condition_needs_timeout() -> None:
    v = rmhc.evaluate(mhc(), CLUSTER, Target(m("a"), node=node("False", 100)), NOW)
    assert v.healthy and v.next_check is not None and 190 < v.next_check < 210
    v = rmhc.evaluate(mhc(), CLUSTER, Target(m("a"), node=node("Unknown", 400)), NOW)
    assert not v.healthy and v.reason == "UnhealthyNode"


def test_node_startup_timeout() -> None:
    young = healthy_machine("y", labels={"pool": "a"}, age=100)
    young["status"].pop("nodeRef")
    v = rmhc.evaluate(mhc(startup=600), CLUSTER, Target(young), NOW)
    assert v.healthy and v.next_check is not None
    old = healthy_machine("o", labels={"pool": "a"}, age=10000)
    old["status"].pop("nodeRef")
    v = rmhc.evaluate(mhc(startup=600), CLUSTER, Target(old), NOW)
    assert not v.healthy and v.reason == "NodeStartupTimeout"
    # counted from the latest of: creation, cluster infra ready, CP initialized, machine infra ready
    old["status"]["conditions"].append(condition("InfrastructureReady", "True", 100))
    assert rmhc.evaluate(mhc(startup=600), CLUSTER, Target(old), NOW).healthy
    # 0 disables the check
    old2 = healthy_machine("o2", labels={"pool": "a"}, age=10000)
    old2["status"].pop("nodeRef")
    assert rmhc.evaluate(mhc(startup=0), CLUSTER, Target(old2), NOW).healthy


def test_node_gone() -> None:
    v = rmhc.evaluate(mhc(), CLUSTER, Target(m("a"), node=None, node_missing=True), NOW)
    assert not v.healthy and v.reason == "NodeDeleted"


def test_remediate_annotation() -> None:
    x = m("a", annotations={"cluster.x-k8s.io/remediate-machine": ""})
    v = rmhc.evaluate(mhc(), CLUSTER, Target(x, node=node("True", 1)), NOW)
    assert not v.healthy and v.reason == "HasRemediateAnnotation"


def test_not_evaluated_before_cluster_ready() -> None:
    cl = {"metadata": {"name": "c1"}, "status": {"conditions": [condition("InfrastructureReady", "False")]}}
    assert rmhc.evaluate(mhc(), cl, Target(m("a"), node_missing=True), NOW).healthy


def test_unhealthy_machine_conditions() -> None:
    h = mhc()
    h["spec"]["checks"]["unhealthyMachineConditions"] = [{"type": "Custom", "status": "False", "timeoutSeconds": 10}]
    x = m("a")
    x["status"]["conditions"].append(condition("Custom", "False", 60))
    v = rmhc.evaluate(h, CLUSTER, Target(x, node=node("True", 1)), NOW)
    assert not v.healthy and v.reason == "UnhealthyMachine"


def test_decide_marks_and_gates() -> None:
    tg = [Target(m("a"), node=node("True", 1)), Target(m("b"), node_missing=True),
          Target(m("c"), node=node("False", 1000))]
    out = rmhc.decide(mhc(), CLUSTER, tg, NOW)  # default 100%
    assert out.allowed and out.remediations_allowed == 1
    hc = {c["type"]: c for c in out.machine_conditions["b"]}
    assert hc["HealthCheckSucceeded"]["status"] == "False"
    assert hc["OwnerRemediated"]["reason"] == "WaitingForRemediation"
    assert {c["type"]: c for c in out.machine_conditions["a"]}["HealthCheckSucceeded"]["status"] == "True"
    st = rmhc.compute_status(mhc(), out)
    assert (st["expectedMachines"], st["currentHealthy"], st["remediationsAllowed"]) == (3, 1, 1)
    assert st["targets"] == ["a", "b", "c"]

    out = rmhc.decide(mhc(max_unhealthy=1), CLUSTER, tg, NOW)
    assert not out.allowed and out.remediations_allowed == 0
    assert "OwnerRemediated" not in {c["type"] for c in out.machine_conditions["b"]}
    st = rmhc.compute_status(mhc(max_unhealthy=1), out)
    ra = {c["type"]: c for c in st["conditions"]}["RemediationAllowed"]
    assert ra["status"] == "False" and ra["reason"] == "TooManyUnhealthy"

    out = rmhc.decide(mhc(max_unhealthy="40%"), CLUSTER, tg, NOW)  # ceil(1.2) = 2
    assert out.allowed and out.remediations_allowed == 0


def test_unhealthy_in_range() -> None:
    tg = [Target(m("a"), node_missing=True), Target(m("b"), node=node("True", 1))]
    assert rmhc.decide(mhc(in_range="[1-2]"), CLUSTER, tg, NOW).allowed
    assert not rmhc.decide(mhc(in_range="[2-3]"), CLUSTER, tg, NOW).allowed


def test_healthy_again_drops_owner_remediated() -> None:
    x = m("a")
    x["status"]["conditions"] += [condition("HealthCheckSucceeded", "False"), condition("OwnerRemediated", "False")]
    out = rmhc.decide(mhc(), CLUSTER, [Target(x, node=node("True", 1))], NOW)
    types = {c["type"] for c in out.machine_conditions["a"]}
    assert "OwnerRemediated" not in types


def test_stable_decide_no_writes() -> None:
    x = m("a")
    out = rmhc.decide(mhc(), CLUSTER, [Target(x, node=node("True", 1))], NOW)
    x["status"]["conditions"] = out.machine_conditions["a"]
    assert rmhc.decide(mhc(), CLUSTER, [Target(x, node=node("True", 1))], NOW).machine_conditions == {}


def test_kcp_machine_only_marked() -> None:
    cp = machine("cp", labels={"pool": "a", "cluster.x-k8s.io/control-plane": ""},
                 owner=owner_ref("KubeadmControlPlane", "kcp"), node="n", age=10000)
    out = rmhc.decide(mhc(), CLUSTER, [Target(cp, node_missing=True)], NOW)
    assert {c["type"] for c in out.machine_conditions["cp"]} >= {"HealthCheckSucceeded", "OwnerRemediated"}
