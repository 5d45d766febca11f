"""Drain planning and the volume-detach rule (capd_py.reconcile.drain), against upstream v1.13's drain package
and Machine controller."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile import drain as rd

try:
    from core_fixtures import NOW, ts
except ImportError:  # pragma: no cover
    from .core_fixtures import NOW, ts  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

Obj = dict[str, Any]


def pod(name: str, ns: str = "default", labels: dict[str, str] | None = None, owner: str | None = "ReplicaSet",
        phase: str = "Running", deleted: float | None = None, mirror: bool = False, empty_dir: bool = False,
        claims: tuple[str, ...] = ()) -> Obj:
    md: Obj = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if owner:
        md["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner" if owner != "DaemonSet" else "ds",
                                  "controller": True}]
    if mirror:
        md["annotations"] = {rd.MIRROR_POD_ANNOTATION: "x"}
    if deleted is not None:
        md["deletionTimestamp"] = ts(deleted)
    volumes: list[Obj] = [{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims]
    if empty_dir:
        volumes.append({"name": "scratch", "emptyDir": {}})
    return {"metadata": md, "spec": {"volumes": volumes}, "status": {"phase": phase}}


def rule(name: str, behavior: str, order: int | None = None, machines: list[Obj] | None = None,
         pods: list[Obj] | None = None, ns: str = "ns") -> Obj:
    drain: Obj = {"behavior": behavior}
    if order is not None:
        drain["order"] = order
    spec: Obj = {"drain": drain}
    if machines is not None:
        spec["machines"] = machines
    if pods is not None:
        spec["pods"] = pods
    return {"metadata": {"name": name, "namespace": ns}, "spec": spec}


NAMESPACES = {"default": {"metadata": {"name": "default", "labels": {"kubernetes.io/metadata.name": "default"}}},
              "monitoring": {"metadata": {"name": "monitoring", "labels": {"kubernetes.io/metadata.name": "monitoring",
                                                                           "tier": "ops"}}}}
MACHINE = {"metadata": {"name": "m1", "namespace": "ns", "labels": {"cluster.x-k8s.io/deployment-name": "md-0"}}}
CP_MACHINE = {"metadata": {"name": "cp1", "namespace": "ns", "labels": {"cluster.x-k8s.io/control-plane": ""}}}
CLUSTER = {"metadata": {"name": "c1", "namespace": "ns", "labels": {"stage": "production"}}}


def classify(p: Obj, rules: list[Obj] | None = None, daemonsets: set[str] | None = None,
             skip_after: int = 0) -> tuple[str, int, str]:
    got = rd.classify(p, rules=rules or [], namespaces=NAMESPACES,
                      daemonsets={"default/ds"} if daemonsets is None else daemonsets, now=NOW,
                      skip_deleted_after=skip_after)
    return got.behavior, got.order, got.error


APP = {"selector": {"matchLabels": {"app": "web"}}}


@pytest.mark.parametrize(("case", "p", "rules", "want"), [
    ("plain pod", pod("a"), [], ("Drain", 0, "")),
    ("DaemonSet pod", pod("a", owner="DaemonSet"), [], ("Skip", 0, "")),
    ("finished DaemonSet pod is drained", pod("a", owner="DaemonSet", phase="Succeeded"), [], ("Drain", 0, "")),
    ("mirror pod", pod("a", owner=None, mirror=True), [], ("Skip", 0, "")),
    ("finished pod is evicted (deleted)", pod("a", phase="Succeeded"), [], ("Drain", 0, "")),
    ("no controller, local storage: drained", pod("a", owner=None, empty_dir=True), [], ("Drain", 0, "")),
    ("label skip", pod("a", labels={"cluster.x-k8s.io/drain": "skip"}), [], ("Skip", 0, "")),
    ("label Skip (any case)", pod("a", labels={"cluster.x-k8s.io/drain": "SKIP"}), [], ("Skip", 0, "")),
    ("label wait-completed", pod("a", labels={"cluster.x-k8s.io/drain": "wait-completed"}), [],
     ("WaitCompleted", 0, "")),
    ("label WaitCompleted", pod("a", labels={"cluster.x-k8s.io/drain": "WaitCompleted"}), [],
     ("WaitCompleted", 0, "")),
    ("unknown label value is ignored", pod("a", labels={"cluster.x-k8s.io/drain": "later"}), [], ("Drain", 0, "")),
    ("rule with order", pod("a", labels={"app": "web"}), [rule("r", "Drain", 5, pods=[APP])], ("Drain", 5, "")),
    ("rule not matching the pod", pod("a", labels={"app": "db"}), [rule("r", "Drain", 5, pods=[APP])],
     ("Drain", 0, "")),
    ("rule without pods selects every pod", pod("a"), [rule("r", "Skip")], ("Skip", 0, "")),
    ("rule Skip", pod("a", labels={"app": "web"}), [rule("r", "Skip", pods=[APP])], ("Skip", 0, "")),
    ("rule WaitCompleted", pod("a", labels={"app": "web"}), [rule("r", "WaitCompleted", pods=[APP])],
     ("WaitCompleted", 0, "")),
    ("the label wins over rules", pod("a", labels={"app": "web", "cluster.x-k8s.io/drain": "skip"}),
     [rule("r", "Drain", 5, pods=[APP])], ("Skip", 0, "")),
    ("the first rule (by name, as given) wins", pod("a", labels={"app": "web"}),
     [rule("a", "Drain", 1, pods=[APP]), rule("b", "Skip", pods=[APP])], ("Drain", 1, "")),
    ("namespaceSelector matches", pod("a", ns="monitoring"),
     [rule("r", "Drain", -3, pods=[{"namespaceSelector": {"matchLabels": {"tier": "ops"}}}])], ("Drain", -3, "")),
    ("namespaceSelector does not match", pod("a"),
     [rule("r", "Drain", -3, pods=[{"namespaceSelector": {"matchLabels": {"tier": "ops"}}}])], ("Drain", 0, "")),
    ("selector AND namespaceSelector", pod("a", ns="monitoring"),
     [rule("r", "Skip", pods=[{"selector": {"matchLabels": {"app": "web"}},
                               "namespaceSelector": {"matchLabels": {"tier": "ops"}}}])], ("Drain", 0, "")),
    ("pods selectors are ORed", pod("a", labels={"app": "db"}),
     [rule("r", "Skip", pods=[APP, {"selector": {"matchExpressions": [
         {"key": "app", "operator": "In", "values": ["db"]}]}}])], ("Skip", 0, "")),
    ("unknown namespace is an error", pod("a", ns="gone"), [rule("r", "Skip")],
     ("", 0, "Pod Namespace does not exist")),
    ("DaemonSet skip comes before the rules", pod("a", owner="DaemonSet"), [rule("r", "Drain", 3)], ("Skip", 0, "")),
])
def test_classify(case: str, p: Obj, rules: list[Obj], want: tuple[str, int, str]) -> None:
    assert classify(p, rules) == want, case


def test_orphaned_daemonset_pod_is_drained() -> None:
    assert classify(pod("a", owner="DaemonSet"), daemonsets=set()) == ("Drain", 0, "")
    got = rd.classify(pod("a", owner="DaemonSet"), rules=[], namespaces=NAMESPACES, daemonsets=set(), now=NOW)
    assert got.warnings == (rd.W_DAEMONSET_ORPHANED,)


def test_terminating_pods_are_skipped_only_past_the_unreachable_grace() -> None:
    going = pod("a", deleted=2)
    assert classify(going) == ("Drain", 0, "")                    # reachable Node: waited for until gone
    assert classify(going, skip_after=1) == ("Skip", 0, "")       # unreachable: ignored after 1 s
    assert classify(pod("a", deleted=1), skip_after=1) == ("Drain", 0, "")


@pytest.mark.parametrize(("case", "machines", "machine", "cluster", "applies"), [
    ("no machines selector", None, MACHINE, CLUSTER, True),
    ("selector matches", [{"selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": "md-0"}}}],
     MACHINE, CLUSTER, True),
    ("selector does not match", [{"selector": {"matchExpressions": [
        {"key": "cluster.x-k8s.io/control-plane", "operator": "Exists"}]}}], MACHINE, CLUSTER, False),
    ("control plane selector", [{"selector": {"matchExpressions": [
        {"key": "cluster.x-k8s.io/control-plane", "operator": "Exists"}]}}], CP_MACHINE, CLUSTER, True),
    ("clusterSelector matches", [{"clusterSelector": {"matchLabels": {"stage": "production"}}}],
     MACHINE, CLUSTER, True),
    ("clusterSelector does not match", [{"clusterSelector": {"matchLabels": {"stage": "dev"}}}],
     MACHINE, CLUSTER, False),
    ("selector AND clusterSelector", [{"selector": {"matchLabels": {"os": "linux"}},
                                       "clusterSelector": {"matchLabels": {"stage": "production"}}}],
     MACHINE, CLUSTER, False),
    ("ORed", [{"selector": {"matchLabels": {"os": "linux"}}},
              {"clusterSelector": {"matchLabels": {"stage": "production"}}}], MACHINE, CLUSTER, True),
    ("no Cluster: only an empty clusterSelector", [{"clusterSelector": {"matchLabels": {"stage": "production"}}}],
     MACHINE, None, False),
])
def test_rules_for_machine(case: str, machines: list[Obj] | None, machine: Obj, cluster: Obj | None,
                           applies: bool) -> None:
    r = rule("r", "Skip", machines=machines)
    assert (rd.rules_for_machine([r], machine, cluster) == [r]) is applies, case


def test_rules_for_machine_keep_the_namespace_and_sort_by_name() -> None:
    rules = [rule("b", "Skip"), rule("a", "Drain", 1), rule("c", "Skip", ns="other")]
    assert [r["metadata"]["name"] for r in rd.rules_for_machine(rules, MACHINE, CLUSTER)] == ["a", "b"]


def plan(pods: list[Obj], rules: list[Obj]) -> rd.EvictionPlan:
    return rd.plan_evictions(rd.pods_for_eviction(pods, rules=rules, namespaces=NAMESPACES, daemonsets={"default/ds"},
                                                  now=NOW))


def names(items: list[rd.PodDelete]) -> list[str]:
    return [i.pod["metadata"]["name"] for i in items]


ORDERED = [rule("first", "Drain", -10, pods=[{"selector": {"matchLabels": {"app": "first"}}}]),
           rule("last", "Drain", 10, pods=[{"selector": {"matchLabels": {"app": "last"}}}])]


def test_order_groups_evict_the_lowest_order_first() -> None:
    pods = [pod("l1", labels={"app": "last"}), pod("f1", labels={"app": "first"}), pod("plain"),
            pod("f2", labels={"app": "first"}), pod("ds", owner="DaemonSet"),
            pod("wc", labels={"cluster.x-k8s.io/drain": "wait-completed"})]
    p = plan(pods, ORDERED)
    assert names(p.evict_now) == ["f1", "f2"]
    assert names(p.evict_later) == ["l1", "plain"]
    assert names(p.wait_later) == ["wc"] and names(p.ignored) == ["ds"]
    # the -10 group evicted, its Pods terminating: nothing else starts
    pods[1]["metadata"]["deletionTimestamp"] = pods[3]["metadata"]["deletionTimestamp"] = ts(1)
    p = plan(pods, ORDERED)
    assert names(p.evict_now) == [] and names(p.terminating) == ["f1", "f2"]
    # gone: order 0 next (the plain Pod), WaitCompleted Pods are waited for, never evicted
    p = plan([pods[0], pods[2], pods[4], pods[5]], ORDERED)
    assert names(p.evict_now) == ["plain"] and names(p.wait_now) == ["wc"] and names(p.evict_later) == ["l1"]
    p = plan([pods[0], pods[4]], ORDERED)
    assert names(p.evict_now) == ["l1"]
    assert plan([pods[4]], ORDERED).evict_now == []


def test_eviction_result_and_upstreams_condition_message() -> None:
    pods = [pod("l1", labels={"app": "last"}), pod("f1", labels={"app": "first"}), pod("f2", labels={"app": "first"}),
            pod("f3", labels={"app": "first"}), pod("old", labels={"app": "first"}, deleted=1),
            pod("wc", labels={"cluster.x-k8s.io/drain": "wait-completed"})]
    p = plan(pods, ORDERED)
    pdb = "Cannot evict pod as it would violate the pod's disruption budget."
    res = rd.eviction_result(p, {"default/f1": rd.EVICTED, "default/f2": pdb, "default/f3": rd.NOT_FOUND})
    assert not res.completed
    assert res.condition_message("2026-01-01T11:00:00Z") == (
        "Drain not completed yet (started at 2026-01-01T11:00:00Z):\n"
        "* Pods default/old, default/f1: deletionTimestamp set, but still not removed from the Node\n"
        "* Pod default/f2: cannot evict pod as it would violate the pod's disruption budget.\n"
        "After above Pods have been removed from the Node, the following Pods will be evicted: default/l1\n"
        "After above Pods have been removed from the Node, waiting for the following Pods to complete without "
        "eviction: default/wc")
    res = rd.eviction_result(rd.plan_evictions(rd.PodDeleteList([])), {})
    assert res.completed and res.condition_message("x") == ""
    res = rd.EvictionResult(wait_now=["a/1", "a/2", "a/3", "a/4"], failed={"boom": ["b/1"]})
    assert res.condition_message("T") == ("Drain not completed yet (started at T):\n"
                                          "* Pod b/1: failed to evict Pod, boom\n"
                                          "* Pods a/1, a/2, a/3, ... (1 more): waiting for completion")


def test_more_than_five_failures_are_summed_up() -> None:
    res = rd.EvictionResult(failed={f"e{i}": [f"ns/p{i}"] for i in range(7)} | {"e9": ["ns/x", "ns/y"]})
    lines = res.condition_message("T").splitlines()
    assert lines[1:6] == [f"* Pod ns/p{i}: failed to evict Pod, e{i}" for i in range(5)]
    assert lines[6] == "* 4 Pods with other issues"


def test_eviction_failure_text() -> None:
    body = {"details": {"causes": [{"reason": "DisruptionBudget", "message": "The disruption budget pdb needs 1 healthy"
                                                                            " pods and has 1 currently"}]}}
    assert rd.eviction_failure(429, "Cannot evict pod as it would violate the pod's disruption budget.", body) == (
        "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget pdb needs 1 healthy "
        "pods and has 1 currently")
    assert rd.eviction_failure(429, "too many", {}) == "too many"
    assert rd.eviction_failure(403, "forbidden", {"details": {"causes": [{"type": "NamespaceTerminating"}]}}) == (
        "Cannot evict pod from terminating namespace: unable to create eviction (kube-controller-manager should set "
        "deletionTimestamp)")
    assert rd.eviction_failure(500, "boom", None) == "boom"
    assert rd.eviction(pod("a"), 1)["deleteOptions"] == {"gracePeriodSeconds": 1}


# --- volumes ------------------------------------------------------------------------------------------

def node(volumes: tuple[str, ...] = ()) -> Obj:
    return {"metadata": {"name": "n1"}, "status": {"volumesAttached": [{"name": v, "devicePath": ""}
                                                                       for v in volumes]}}


def va(name: str, pv: str | None, node_name: str = "n1", attached: bool = True) -> Obj:
    source = {"persistentVolumeName": pv} if pv else {}
    return {"metadata": {"name": name}, "spec": {"nodeName": node_name, "attacher": "csi.example.com",
                                                 "source": source}, "status": {"attached": attached}}


def pv(name: str, claim: str | None = None, handle: str | None = None) -> Obj:
    spec: Obj = {}
    if claim:
        ns, _, n = claim.partition("/")
        spec["claimRef"] = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": n}
    if handle:
        spec["csi"] = {"driver": "csi.example.com", "volumeHandle": handle}
    return {"metadata": {"name": name}, "spec": spec}


CSI = "kubernetes.io/csi/csi.example.com^"


@pytest.mark.parametrize(("case", "n", "vas", "pvs", "ignore", "want"), [
    ("nothing attached", node(), [], [pv("pv1", "default/data")], set(), {}),
    ("attachment of another node / detached", node(), [va("a", "pv1", "n2"), va("b", "pv1", attached=False)],
     [pv("pv1", "default/data")], set(), {}),
    ("a VolumeAttachment of the node", node(), [va("a", "pv1")], [pv("pv1", "default/data")], set(),
     {"pvcs": ["default/data"]}),
    ("node.status.volumesAttached by CSI handle", node((CSI + "h1",)), [], [pv("pv1", "default/data", "h1")], set(),
     {"pvcs": ["default/data"]}),
    ("claims of skipped pods do not count", node(), [va("a", "pv1"), va("b", "pv2")],
     [pv("pv1", "default/data"), pv("pv2", "default/logs")], {"default/logs"}, {"pvcs": ["default/data"]}),
    ("PV without a claim", node(), [va("a", "pv1")], [pv("pv1")], set(), {"pvs_without_claim": ["pv1"]}),
    ("node volume without a PV", node(("kubernetes.io/csi/x^y",)), [], [], set(),
     {"node_volumes_without_pv": ["kubernetes.io/csi/x^y"]}),
    ("attachment without a PV", node(), [va("a", "pv9")], [], set(), {"attachment_pvs_without_pv": ["pv9"]}),
])
def test_attached_volumes(case: str, n: Obj, vas: list[Obj], pvs: list[Obj], ignore: set[str],
                          want: dict[str, list[str]]) -> None:
    got = rd.attached_volumes(n, vas, pvs, ignore)
    fields = ("pvcs", "pvs_without_claim", "node_volumes_without_pv", "attachment_pvs_without_pv")
    assert {f: getattr(got, f) for f in fields if getattr(got, f)} == want, case
    assert got.empty is (not want)


def test_volume_messages_and_errors() -> None:
    got = rd.attached_volumes(node(("kubernetes.io/csi/x^y",)), [va("a", "pv1"), va("b", "pv9")],
                              [pv("pv1", "default/data"), pv("pv2")], set())
    assert got.condition_message("T") == (
        "Waiting for Node volumes to be detached (started at T)\n"
        "* PersistentVolumeClaims: default/data\n"
        "* Node with .status.volumesAttached entries not matching a PersistentVolume: kubernetes.io/csi/x^y\n"
        "* VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume: pv9")
    bad = rd.attached_volumes(node(), [va("inline", None)], [], set())
    assert bad.error == "spec.source.persistentVolumeName for VolumeAttachment inline is not set" and not bad.empty


def test_claims_of_skipped_pods() -> None:
    pods = rd.pods_for_eviction([pod("keep", labels={"cluster.x-k8s.io/drain": "skip"}, claims=("logs",)),
                                 pod("go", claims=("data",))], rules=[], namespaces=NAMESPACES, daemonsets=set(),
                                now=NOW)
    assert rd.claims_of_skipped_pods(pods) == {"default/logs"}


def test_volume_wait_allowed() -> None:
    m: Obj = {"metadata": {"annotations": {}}, "spec": {"deletion": {"nodeVolumeDetachTimeoutSeconds": 60}},
              "status": {"deletion": {"waitForNodeVolumeDetachStartTime": ts(59)}}}
    assert rd.is_volume_detach_wait_allowed(m, NOW)
    m["status"]["deletion"]["waitForNodeVolumeDetachStartTime"] = ts(60)
    assert not rd.is_volume_detach_wait_allowed(m, NOW)
    m["metadata"]["annotations"][rd.EXCLUDE_WAIT_FOR_VOLUME_DETACH_ANNOTATION] = ""
    m["spec"]["deletion"] = {}
    assert not rd.is_volume_detach_wait_allowed(m, NOW)
