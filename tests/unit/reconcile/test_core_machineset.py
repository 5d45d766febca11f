from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile import machineset as rms

try:
    from core_fixtures import NOW, condition, healthy_machine, machine, owner_ref
except ImportError:  # pragma: no cover - when tests/unit/reconcile becomes a package
    from .core_fixtures import NOW, condition, healthy_machine, machine, owner_ref  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def ms(replicas: int = 3, order: str | None = None, **spec: object) -> dict:
    s = {"clusterName": "c1", "replicas": replicas, "selector": {"matchLabels": {"pool": "a"}},
         "template": {"metadata": {"labels": {"pool": "a"}, "annotations": {"x": "y"}},
                      "spec": {"clusterName": "c1", "version": "v1.34.4",
                               "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                                           "kind": "KubeadmConfigTemplate", "name": "kct"}},
                               "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                     "kind": "DockerMachineTemplate", "name": "dmt"}}}}
    if order:
        s["deletion"] = {"order": order}
    s.update(spec)
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
            "metadata": {"name": "ms1", "namespace": "ns", "uid": "uid-ms1", "generation": 2,
                         "labels": {"cluster.x-k8s.io/deployment-name": "md1"}},
            "spec": s}


OWN = owner_ref("MachineSet", "ms1")


def owned(name: str, age: float = 100, **kw: object) -> dict:
    return healthy_machine(name, age=age, owner=OWN, **kw)


def names(ms_list: list[dict]) -> list[str]:
    return [m["metadata"]["name"] for m in ms_list]


def test_scale_up_creates_missing() -> None:
    p = rms.plan(ms(3), [owned("a")], NOW)
    assert p.create == 2 and p.delete == []


def test_scale_up_from_zero() -> None:
    assert rms.plan(ms(2), [], NOW).create == 2


def test_stable_no_actions() -> None:
    p = rms.plan(ms(2), [owned("a"), owned("b")], NOW)
    assert (p.create, p.delete, p.remediate) == (0, [], [])


def test_deleting_machines_still_count() -> None:
    # upstream: a replacement is created only once the deleted Machine is gone
    p = rms.plan(ms(2), [owned("a"), owned("b", deleting=True)], NOW)
    assert p.create == 0 and p.delete == []


def test_scale_down_counts_deleting_first() -> None:
    p = rms.plan(ms(1), [owned("a"), owned("b"), owned("c", deleting=True)], NOW)
    assert names(p.delete) == ["a"]  # c already goes; one more


def test_scale_down_oldest() -> None:
    ms_ = [owned("a", age=300), owned("b", age=100), owned("c", age=200)]
    p = rms.plan(ms(1, "Oldest"), ms_, NOW)
    assert names(p.delete) == ["a", "c"]


def test_scale_down_newest() -> None:
    ms_ = [owned("a", age=300), owned("b", age=100), owned("c", age=200)]
    p = rms.plan(ms(1, "Newest"), ms_, NOW)
    assert names(p.delete) == ["b", "c"]


def test_scale_down_random_is_deterministic_by_name() -> None:
    ms_ = [owned("c"), owned("a"), owned("b")]
    assert names(rms.plan(ms(1), ms_, NOW).delete) == ["a", "b"]


def test_delete_annotation_goes_first_then_unhealthy() -> None:
    marked = owned("z", age=1, annotations={"cluster.x-k8s.io/delete-machine": ""})
    unhealthy = machine("y", owner=OWN, age=5, node="n", conds=[condition("NodeHealthy", "False")])
    ms_ = [owned("a", age=1000), marked, unhealthy, owned("b", age=2000)]
    p = rms.plan(ms(2, "Oldest"), ms_, NOW)
    assert names(p.delete) == ["z", "y"]


def test_machine_without_node_is_unhealthy_for_priority() -> None:
    nonode = machine("n", owner=OWN, age=1)
    assert names(rms.machines_to_delete([owned("a", age=99999), nonode], 1, "Oldest", NOW)) == ["n"]


def test_failed_health_check_deleted_first() -> None:
    bad = owned("h", age=1)
    bad["status"]["conditions"].append(condition("HealthCheckSucceeded", "False"))
    assert names(rms.machines_to_delete([owned("a", age=99999), bad], 1, "Oldest", NOW)) == ["h"]


def test_unknown_order_rejected() -> None:
    with pytest.raises(ValueError):
        rms.machines_to_delete([owned("a")], 1, "Fastest", NOW)


def test_remediation_of_owner_remediated_false() -> None:
    bad = owned("bad")
    bad["status"]["conditions"].append(condition("OwnerRemediated", "False"))
    p = rms.plan(ms(2), [owned("a"), bad], NOW)
    assert names(p.remediate) == ["bad"]
    assert p.create == 0 and p.delete == []  # replaced once it is gone
    bad["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert rms.plan(ms(2), [owned("a"), bad], NOW).remediate == []
    assert rms.plan(ms(2), [owned("a")], NOW).create == 1


def test_orphans_adopted_only_when_matching() -> None:
    m1 = machine("o1", labels={"pool": "a"})
    m2 = machine("o2", labels={"pool": "b"})
    m3 = machine("o3", labels={"pool": "a"}, owner=owner_ref("MachineSet", "other"))
    m4 = machine("o4", labels={"pool": "a"}, cluster="c2")
    assert names(rms.orphans_to_adopt(ms(), [m1, m2, m3, m4])) == ["o1"]


def test_clone_from_template() -> None:
    tpl: dict[str, Any]
    tpl = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
           "metadata": {"name": "kct", "namespace": "ns"},
           "spec": {"template": {"metadata": {"labels": {"l": "v"}}, "spec": {"joinConfiguration": {"a": 1}}}}}
    owner = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms1", "uid": "u"}
    obj = rms.clone_from_template(tpl, "ms1-abcde", "ns", "c1", owner)
    assert obj["kind"] == "KubeadmConfig"
    assert obj["spec"] == {"joinConfiguration": {"a": 1}}
    assert obj["metadata"]["labels"] == {"l": "v", "cluster.x-k8s.io/cluster-name": "c1"}
    assert obj["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"] == "kct"
    assert obj["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-groupkind"] == \
        "KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io"
    assert obj["metadata"]["ownerReferences"] == [owner]
    obj["spec"]["joinConfiguration"]["a"] = 2
    assert tpl["spec"]["template"]["spec"]["joinConfiguration"]["a"] == 1  # deep copy


@pytest.mark.parametrize("tpl_spec", [None, {}, {"template": None}, {"template": {}}, {"template": {"spec": None}}])
def test_clone_of_a_template_without_spec_has_no_spec(tpl_spec: dict | None) -> None:
    """Upstream's e2e `-md-0` KubeadmConfigTemplate has no spec: the KubeadmConfig gets none either (`spec: {}`
    fails KubeadmConfig's minProperties: 1, as in upstream's CRD)."""
    tpl: dict = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfigTemplate",
                 "metadata": {"name": "md-0", "namespace": "ns"}}
    if tpl_spec is not None:
        tpl["spec"] = tpl_spec
    owner = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms1", "uid": "u"}
    obj = rms.clone_from_template(tpl, "ms1-abcde", "ns", "c1", owner)
    assert "spec" not in obj and obj["kind"] == "KubeadmConfig"
    assert obj["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}
    # an empty spec the template does carry is copied as is (upstream copies spec.template verbatim)
    dmt = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachineTemplate",
           "metadata": {"name": "md-0"}, "spec": {"template": {"spec": {}}}}
    assert rms.clone_from_template(dmt, "ms1-abcde", "ns", "c1", owner)["spec"] == {}


def test_new_machine_shape() -> None:
    s = ms()
    boot = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": "ms1-x"}}
    infra = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachine",
             "metadata": {"name": "ms1-x"}}
    m = rms.new_machine(s, "ms1-x", boot, infra)
    assert m["spec"]["bootstrap"]["configRef"] == {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                                   "kind": "KubeadmConfig", "name": "ms1-x"}
    assert m["spec"]["infrastructureRef"]["kind"] == "DockerMachine"
    labels = m["metadata"]["labels"]
    assert labels["pool"] == "a" and labels["cluster.x-k8s.io/set-name"] == "ms1"
    assert labels["cluster.x-k8s.io/deployment-name"] == "md1"
    assert labels["cluster.x-k8s.io/cluster-name"] == "c1"
    assert m["metadata"]["ownerReferences"][0]["controller"] is True
    assert m["metadata"]["annotations"] == {"x": "y"}


def test_machine_name_prefix() -> None:
    assert rms.machine_name(ms(), "b2c4d") == "ms1-b2c4d"


def test_machine_naming_template() -> None:
    s = ms(machineNaming={"template": "{{ .cluster.name }}-w-{{.machineSet.name}}-{{ .random }}"})
    assert rms.machine_name(s, "xyzzy") == "c1-w-ms1-xyzzy"
    s = ms(machineNaming={"template": "x" * 70 + "{{ .random }}"})
    assert rms.machine_name(s, "q7r8s") == "x" * 58 + "q7r8s"


def test_status_counts_and_conditions() -> None:
    a = owned("a", version="v1.34.4")
    b = machine("b", owner=OWN, conds=[condition("Ready", "False")], version="v1.34.4")
    c = owned("c", version="v1.33.0")
    st = rms.compute_status(ms(4), [a, b, c])
    assert (st["replicas"], st["readyReplicas"], st["availableReplicas"], st["upToDateReplicas"]) == (3, 2, 2, 2)
    assert st["selector"] == "pool=a"
    byt = {c["type"]: c for c in st["conditions"]}
    assert byt["ScalingUp"]["status"] == "True"
    assert byt["ScalingDown"]["status"] == "False"
    assert byt["MachinesReady"]["status"] == "False" and "b" in byt["MachinesReady"]["message"]
    assert byt["MachinesUpToDate"]["status"] == "False"
    assert byt["Remediating"]["reason"] == "NotRemediating"
    assert byt["Deleting"]["reason"] == "NotDeleting"
    assert st["observedGeneration"] == 2


def test_status_no_replicas() -> None:
    st = rms.compute_status(ms(0), [])
    byt = {c["type"]: c for c in st["conditions"]}
    assert byt["MachinesReady"]["reason"] == "NoReplicas"
    assert byt["MachinesReady"]["status"] == "True"


def test_status_is_stable() -> None:
    s = ms(1)
    a = owned("a", version="v1.34.4")
    st1 = rms.compute_status(s, [a])
    s["status"] = st1
    assert rms.compute_status(s, [a]) == st1


def test_in_place_machine_patch() -> None:
    s = ms()
    m = owned("a")
    # a Machine as upstream's webhook left it (nodeDeletionTimeoutSeconds defaulted) matches a template without
    # it: nothing to write on every pass; one made before the webhook defaulted it gets the default once
    assert rms.in_place_machine_patch(s, m) == {"spec": {"deletion": {"nodeDeletionTimeoutSeconds": 10}}}
    m["spec"]["deletion"] = {"nodeDeletionTimeoutSeconds": 10}
    assert rms.in_place_machine_patch(s, m) is None
    s["spec"]["template"]["spec"]["minReadySeconds"] = 30
    s["spec"]["template"]["spec"]["deletion"] = {"nodeDrainTimeoutSeconds": 60}
    assert rms.in_place_machine_patch(s, m) == {"spec": {"minReadySeconds": 30, "deletion": {
        "nodeDrainTimeoutSeconds": 60, "nodeDeletionTimeoutSeconds": 10}}}
    # a timeout the template no longer sets is removed (a merge patch keeps what it does not name)
    m["spec"].update(minReadySeconds=30, deletion={"nodeDrainTimeoutSeconds": 60, "nodeDeletionTimeoutSeconds": 10,
                                                   "nodeVolumeDetachTimeoutSeconds": 5})
    assert rms.in_place_machine_patch(s, m) == {"spec": {"deletion": {
        "nodeVolumeDetachTimeoutSeconds": None, "nodeDrainTimeoutSeconds": 60, "nodeDeletionTimeoutSeconds": 10}}}


def test_spec_defaults_patch() -> None:
    s = ms()
    want = {"cluster.x-k8s.io/set-name": "ms1", "cluster.x-k8s.io/cluster-name": "c1"}
    assert rms.spec_defaults_patch(s) == {"spec": {"selector": {"matchLabels": want},
                                                   "template": {"metadata": {"labels": want}}}}
    s["spec"]["selector"]["matchLabels"].update(want)
    s["spec"]["template"]["metadata"]["labels"].update(want)
    assert rms.spec_defaults_patch(s) is None


def test_limit_remediation_max_in_flight() -> None:
    cands = [owned("c"), owned("a"), owned("b")]
    assert rms.limit_remediation(cands, [], None, 3) == cands
    assert names(rms.limit_remediation(cands, [], 2, 3)) == ["a", "b"]
    going = owned("x", deleting=True)
    going["status"]["conditions"].append(condition("OwnerRemediated", "False"))
    assert names(rms.limit_remediation(cands, [going], 2, 3)) == ["a"]
    assert names(rms.limit_remediation(cands, [going], "50%", 4)) == ["a"]
    assert rms.limit_remediation(cands, [going], 1, 3) == []


def test_the_cluster_adopts_stand_alone_machinesets_only() -> None:
    """upstream's shouldAdopt: a MachineSet a MachineDeployment made waits for it to adopt it again."""
    def ms(labels: dict[str, str], owner_kinds: list[str]) -> dict[str, Any]:
        return {"metadata": {"name": "ms", "labels": labels, "ownerReferences": [
            {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": k, "name": "x", "uid": "u"} for k in owner_kinds]}}
    assert rms.cluster_adopts(ms({}, []))
    assert not rms.cluster_adopts(ms({}, ["Cluster"])) and not rms.cluster_adopts(ms({}, ["MachineDeployment"]))
    assert not rms.cluster_adopts(ms({"cluster.x-k8s.io/deployment-name": "md"}, []))


def test_v1beta1_counters_from_node_readiness_and_template_labels() -> None:
    # upstream's reconcileV1Beta1Status: labelled as the template says, Node Ready (the Machine's NodeReady
    # mirror), and of those available; a Machine without a Node counts for neither
    node_ready = condition("NodeReady", "True", 1000)
    a = owned("a", version="v1.34.4")
    a["status"]["conditions"].append(node_ready)
    b = owned("b", version="v1.34.4")  # Available, but no NodeReady seen yet
    c = owned("c", version="v1.34.4")
    c["status"]["conditions"] = [node_ready, condition("Available", "False", 10)]
    d = machine("d", owner=OWN, conds=[node_ready], version="v1.34.4")  # no nodeRef
    for m in (a, b, d):
        m["metadata"]["labels"] = {"pool": "a", "other": "x"}  # the template's labels, and more
    c["metadata"]["labels"] = {"pool": "b"}  # not labelled as the template
    st = rms.compute_status(ms(4), [a, b, c, d])
    counters = {k: v for k, v in st["deprecated"]["v1beta1"].items() if k != "conditions"}
    assert counters == {"fullyLabeledReplicas": 3, "readyReplicas": 2, "availableReplicas": 1}
    # what else deprecated.v1beta1 holds (a failureReason) stays
    s = ms(4)
    s["status"] = {"deprecated": {"v1beta1": {"failureReason": "InvalidConfiguration", "readyReplicas": 9}}}
    again = rms.compute_status(s, [a])["deprecated"]["v1beta1"]
    assert again["failureReason"] == "InvalidConfiguration" and again["readyReplicas"] == 1


def test_v1beta1_conditions_say_why_machines_are_not_created() -> None:
    # upstream's e2e (cluster_upgrade_runtimesdk) reads them: MachinesCreated False, PreflightCheckFailed, while the
    # preflight checks hold a scale up; Resized False while scaling; Ready their summary (the Error first)
    a = owned("a", version="v1.34.4")
    held = ['MachineSet version (1.34.4) and ControlPlane version (1.36.0) do not conform to kubeadm version skew '
            'policy ("KubeadmVersionSkew" preflight check failed)']
    st = rms.compute_status(ms(2), [a], preflight=held)
    byt = {c["type"]: c for c in st["deprecated"]["v1beta1"]["conditions"]}
    assert byt["MachinesCreated"] == {"type": "MachinesCreated", "status": "False", "severity": "Error",
                                      "reason": "PreflightCheckFailed", "message": held[0],
                                      "lastTransitionTime": byt["MachinesCreated"]["lastTransitionTime"]}
    assert (byt["Resized"]["status"], byt["Resized"]["reason"], byt["Resized"]["severity"]) == (
        "False", "ScalingUp", "Warning")
    assert byt["Resized"]["message"] == "Scaling up MachineSet to 2 replicas (actual 1)"
    assert (byt["Ready"]["status"], byt["Ready"]["reason"]) == ("False", "PreflightCheckFailed")
    # the count reached and every Node Ready: all True, without reasons; a second pass changes nothing
    a["status"]["conditions"].append(condition("NodeReady", "True", 1000))
    s = ms(1)
    s["status"] = rms.compute_status(s, [a])
    done = {c["type"]: c for c in s["status"]["deprecated"]["v1beta1"]["conditions"]}
    assert {t: (c["status"], "reason" in c) for t, c in done.items()} == {
        "MachinesCreated": ("True", False), "Resized": ("True", False), "Ready": ("True", False)}
    assert rms.compute_status(s, [a]) == s["status"]
