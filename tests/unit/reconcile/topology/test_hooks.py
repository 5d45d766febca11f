"""Lifecycle hook decisions (reconcile/topology/hooks.py), as upstream's lifecycle_hooks.go / reconcile_state.go /
tracking.go decide them: which hook is due at each point of a creation, a one-step upgrade and a deletion, the
request each gets, what a blocking answer holds, the pending-hooks annotation, the cache of blocking answers, and
the condition messages. Also the desired state's holds (desired.compute with hold_control_plane / hold_workers)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from capd_py.api import runtime_hooks as RH
from capd_py.api.runtime_sdk import HookResult
from capd_py.reconcile.topology import desired as D
from capd_py.reconcile.topology import hooks as H

try:
    from test_desired import World, blueprint, cluster
except ImportError:  # pragma: no cover
    from .test_desired import World, blueprint, cluster  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

V1, V2 = "v1.34.4", "v1.35.0"
LIFECYCLE = frozenset(h.name for h in RH.HOOKS.values() if h.family == "lifecycle")
Answer = Callable[[H.Call], HookResult]


def _cluster(version: str = V2, refs: bool = True, pending: str | None = None,
             annotations: dict[str, str] | None = None, cp_initialized: bool = False) -> dict[str, Any]:
    ann = dict(annotations or {})
    if pending is not None:
        ann[H.PENDING_HOOKS] = pending
    c: dict[str, Any] = {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "ns", "annotations": ann,
                     "managedFields": [{"manager": "kubectl"}]},
        "spec": {"topology": {"version": version, "classRef": {"name": "quick-start"}}},
        "status": {"conditions": [{"type": "ControlPlaneInitialized", "status": "True" if cp_initialized else "False",
                                   "reason": "x"}]}}
    if refs:
        c["spec"]["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster",
                                          "name": "c1-x"}
        c["spec"]["controlPlaneRef"] = {"apiGroup": "controlplane.cluster.x-k8s.io",
                                        "kind": "KubeadmControlPlane", "name": "c1-y"}
    return c


def _cp(spec: str, status: str | None) -> dict[str, Any]:
    return {"kind": "KubeadmControlPlane", "metadata": {"name": "c1-y"}, "spec": {"version": spec},
            "status": {"version": status} if status else {}}


def run(view: H.View, answer: Answer | None = None) -> tuple[H.Decision, list[H.Call]]:
    """decide() until it decides, answering each call with `answer` (default: proceed)."""
    answers: dict[str, HookResult] = {}
    calls: list[H.Call] = []
    while True:
        step = H.decide(view, answers)
        if isinstance(step, H.Decision):
            return step, calls
        calls.append(step)
        answers[step.hook.name] = answer(step) if answer else HookResult()
        assert len(calls) < 20


def block(*hooks: str, seconds: int = 7, message: str = "wait") -> Answer:
    def a(call: H.Call) -> HookResult:
        return HookResult(retry_after_seconds=seconds, message=message) if call.hook.name in hooks else HookResult()
    return a


def names(calls: list[H.Call]) -> list[str]:
    return [c.hook.name for c in calls]


# --- creation --------------------------------------------------------------------------------------------------------

def test_before_cluster_create_blocks_creation_and_nothing_else_is_decided() -> None:
    d, calls = run(H.View(_cluster(refs=False), V2, registered=LIFECYCLE), block("BeforeClusterCreate"))
    assert names(calls) == ["BeforeClusterCreate"]
    req = calls[0].request
    assert (req["apiVersion"], req["kind"]) == ("hooks.runtime.cluster.x-k8s.io/v1alpha1", "BeforeClusterCreateRequest")
    # upstream's cleanupCluster: no status, no managedFields
    assert "status" not in req["cluster"] and "managedFields" not in req["cluster"]["metadata"]
    assert req["cluster"]["metadata"]["name"] == "c1" and req["cluster"]["kind"] == "Cluster"
    assert not d.create and d.retry_after_seconds == 7 and d.pending == frozenset()
    assert d.message("Cluster topology creation") == \
        "Following hooks are blocking Cluster topology creation: BeforeClusterCreate: wait"


@pytest.mark.parametrize("registered", [LIFECYCLE, frozenset()])
def test_creation_allowed_marks_after_control_plane_initialized(registered: frozenset[str]) -> None:
    d, calls = run(H.View(_cluster(refs=False), V2, registered=registered))
    assert names(calls) == (["BeforeClusterCreate"] if registered else [])  # no handler: no call, proceed
    assert d.create and d.pending == {"AfterControlPlaneInitialized"} and not d.blocking


def test_after_control_plane_initialized_once_the_condition_is_true() -> None:
    view = H.View(_cluster(pending="AfterControlPlaneInitialized"), V2, control_plane=_cp(V2, None),
                  registered=LIFECYCLE)
    d, calls = run(view)
    assert calls == [] and d.pending == {"AfterControlPlaneInitialized"}  # not initialized yet: wait
    view.cluster = _cluster(pending="AfterControlPlaneInitialized", cp_initialized=True)
    d, calls = run(view, block("AfterControlPlaneInitialized"))  # not a blocking hook: retryAfter means nothing
    assert names(calls) == ["AfterControlPlaneInitialized"] and d.pending == frozenset() and not d.blocking


# --- one upgrade, step by step ---------------------------------------------------------------------------------------

def _view(pending: str = "", cp: tuple[str, str | None] = (V1, V1), workers: tuple[str, ...] = (V1,),
          upgrading: bool = False, settled: bool = False, **kw: Any) -> H.View:
    return H.View(_cluster(pending=pending or None, **kw), V2, control_plane=_cp(*cp), worker_versions=list(workers),
                  workers_upgrading=upgrading, settled=settled, registered=LIFECYCLE)


UPGRADE = [
    # (what, view, blocking hooks, calls, pending after, hold cp, hold workers)
    ("start, BeforeClusterUpgrade blocks", _view(), ("BeforeClusterUpgrade",),
     ["BeforeClusterUpgrade"], "", True, False),
    ("start, BeforeControlPlaneUpgrade blocks", _view(), ("BeforeControlPlaneUpgrade",),
     ["BeforeClusterUpgrade", "BeforeControlPlaneUpgrade"], "AfterClusterUpgrade", True, False),
    ("start, both let go: the control plane moves", _view(), (),
     ["BeforeClusterUpgrade", "BeforeControlPlaneUpgrade"],
     "AfterClusterUpgrade,AfterControlPlaneUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade", False, False),
    ("an upgrade already started: no BeforeClusterUpgrade again", _view(pending="AfterClusterUpgrade"), (),
     ["BeforeControlPlaneUpgrade"],
     "AfterClusterUpgrade,AfterControlPlaneUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade", False, False),
    ("control plane upgrading: nothing is called",
     _view(pending="AfterClusterUpgrade,AfterControlPlaneUpgrade", cp=(V2, V1)), (), [],
     "AfterClusterUpgrade,AfterControlPlaneUpgrade", False, False),
    ("control plane provisioning: nothing is called", _view(cp=(V1, None)), (), [], "", False, False),
    ("control plane done, AfterControlPlaneUpgrade blocks",
     _view(pending="AfterClusterUpgrade,AfterControlPlaneUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade",
           cp=(V2, V2)), ("AfterControlPlaneUpgrade",), ["AfterControlPlaneUpgrade"],
     "AfterClusterUpgrade,AfterControlPlaneUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade", True, True),
    ("control plane done, BeforeWorkersUpgrade blocks",
     _view(pending="AfterClusterUpgrade,AfterControlPlaneUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade",
           cp=(V2, V2)), ("BeforeWorkersUpgrade",), ["AfterControlPlaneUpgrade", "BeforeWorkersUpgrade"],
     "AfterClusterUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade", True, True),
    ("workers may move", _view(pending="AfterClusterUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade", cp=(V2, V2)),
     (), ["BeforeWorkersUpgrade"], "AfterClusterUpgrade,AfterWorkersUpgrade", False, False),
    ("workers rolling: AfterWorkersUpgrade waits",
     _view(pending="AfterClusterUpgrade,AfterWorkersUpgrade", cp=(V2, V2), workers=(V2,), upgrading=True), (), [],
     "AfterClusterUpgrade,AfterWorkersUpgrade", False, False),
    ("workers done, AfterWorkersUpgrade blocks",
     _view(pending="AfterClusterUpgrade,AfterWorkersUpgrade", cp=(V2, V2), workers=(V2,), settled=True),
     ("AfterWorkersUpgrade",), ["AfterWorkersUpgrade"], "AfterClusterUpgrade,AfterWorkersUpgrade", True, False),
    ("workers done, AfterClusterUpgrade blocks (nothing held: the webhook refuses a new version)",
     _view(pending="AfterClusterUpgrade,AfterWorkersUpgrade", cp=(V2, V2), workers=(V2,), settled=True),
     ("AfterClusterUpgrade",), ["AfterWorkersUpgrade", "AfterClusterUpgrade"], "AfterClusterUpgrade", False, False),
    ("the end", _view(pending="AfterClusterUpgrade", cp=(V2, V2), workers=(V2,), settled=True), (),
     ["AfterClusterUpgrade"], "", False, False),
    ("no workers: no worker hooks", _view(workers=()), (), ["BeforeClusterUpgrade", "BeforeControlPlaneUpgrade"],
     "AfterClusterUpgrade,AfterControlPlaneUpgrade", False, False),
]


@pytest.mark.parametrize(("view", "blocking", "calls", "after", "hold_cp", "hold_workers"),
                         [u[1:] for u in UPGRADE], ids=[u[0] for u in UPGRADE])
def test_upgrade_hooks(view: H.View, blocking: tuple[str, ...], calls: list[str], after: str, hold_cp: bool,
                       hold_workers: bool) -> None:
    d, made = run(view, block(*blocking))
    assert names(made) == calls
    assert H.annotation_value(d.pending) == after
    assert (d.hold_control_plane, d.hold_workers) == (hold_cp, hold_workers)
    assert [b.hook for b in d.blocking] == list(blocking)
    assert d.retry_after_seconds == (7 if blocking else 0)


def test_upgrade_requests_carry_versions_and_plans() -> None:
    _, calls = run(_view())
    bcu, bcpu = (c.request for c in calls)
    assert bcu["kind"] == "BeforeClusterUpgradeRequest"
    for r in (bcu, bcpu):
        assert (r["fromKubernetesVersion"], r["toKubernetesVersion"]) == (V1, V2)
        assert r["controlPlaneUpgrades"] == [{"version": V2}] and r["workersUpgrades"] == [{"version": V2}]
    _, calls = run(_view(pending="AfterControlPlaneUpgrade,BeforeWorkersUpgrade", cp=(V2, V2)))
    acpu, bwu = (c.request for c in calls)
    assert acpu["kubernetesVersion"] == V2 and "controlPlaneUpgrades" not in acpu  # the control plane is there
    assert acpu["workersUpgrades"] == [{"version": V2}]
    assert (bwu["fromKubernetesVersion"], bwu["toKubernetesVersion"]) == (V1, V2)
    _, calls = run(_view(pending="AfterClusterUpgrade,AfterWorkersUpgrade", cp=(V2, V2), workers=(V2,),
                         settled=True))
    awu, acu = (c.request for c in calls)
    assert awu["kubernetesVersion"] == V2 and "workersUpgrades" not in awu
    assert acu == {"apiVersion": RH.API_VERSION, "kind": "AfterClusterUpgradeRequest", "cluster": acu["cluster"],
                   "kubernetesVersion": V2}


def test_before_upgrade_annotations_block_without_a_call() -> None:
    one = H.BEFORE_UPGRADE_ANNOTATION_PREFIX + "/a"
    d, calls = run(_view(annotations={one: ""}))
    assert calls == [] and d.hold_control_plane and d.retry_after_seconds == 20 * 60
    assert d.message("upgrade") == \
        f"Following hooks are blocking upgrade: BeforeClusterUpgrade: annotation {one} is set"
    two = H.BEFORE_UPGRADE_ANNOTATION_PREFIX + "/b"
    d, _ = run(_view(annotations={two: "", one: ""}))
    assert d.blocking[0].message == f"annotations {one}, {two} are set"
    d, calls = run(_view(pending="AfterClusterUpgrade", annotations={one: ""}))  # mid-upgrade: not consulted
    assert names(calls) == ["BeforeControlPlaneUpgrade"] and not d.blocking


def test_a_recent_blocking_answer_is_not_asked_again() -> None:
    view = _view()
    view.cached = {"BeforeClusterUpgrade": (3, "still busy")}
    d, calls = run(view)
    assert calls == [] and d.hold_control_plane
    assert d.blocking == [H.Blocked("BeforeClusterUpgrade", 3, "still busy")]


def test_hook_cache_expires() -> None:
    c = H.HookCache()
    c.add("ns", "c1", "BeforeClusterUpgrade", 10, "m", now=100.0)
    assert c.blocking("ns", "c1", 104.5) == {"BeforeClusterUpgrade": (6, "m")}
    assert c.blocking("ns", "other", 104.5) == {}
    assert c.blocking("ns", "c1", 110.0) == {}
    c.add("ns", "c2", "AfterClusterUpgrade", 1, "", now=200.0)
    assert list(c.entries) == [("ns", "c2", "AfterClusterUpgrade")]  # expired entries forgotten


# --- deletion --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("annotations", "blocks", "calls", "allowed", "message"), [
    ({}, True, ["BeforeClusterDelete"], False,
     "Cluster is deleting. Following hooks are blocking delete: BeforeClusterDelete: wait"),
    ({}, False, ["BeforeClusterDelete"], True, "Cluster is deleting"),
    ({H.OK_TO_DELETE: ""}, True, [], True, "Cluster is deleting"),
])
def test_before_cluster_delete(annotations: dict[str, str], blocks: bool, calls: list[str], allowed: bool,
                               message: str) -> None:
    c = _cluster(annotations=annotations)
    answers: dict[str, HookResult] = {}
    made: list[str] = []
    while not isinstance(step := H.before_delete(c, LIFECYCLE, {}, answers), H.Decision):
        made.append(step.hook.name)
        assert step.request["kind"] == "BeforeClusterDeleteRequest"
        answers[step.hook.name] = HookResult(retry_after_seconds=5, message="wait") if blocks else HookResult()
    assert made == calls and step.create == allowed and H.deleting_message(step) == message


def test_before_cluster_delete_without_handlers_allows() -> None:
    d = H.before_delete(_cluster(), frozenset(), {})
    assert isinstance(d, H.Decision) and d.create


# --- the annotation and the request's Cluster ------------------------------------------------------------------------

REMOVE = "<remove>"


@pytest.mark.parametrize(("have", "want", "patch"), [
    (None, [], None),
    (None, ["B", "A"], "A,B"),
    ("A,B", ["B", "A"], None),
    ("A,B", ["A"], "A"),
    ("A", [], REMOVE),  # the merge patch removes the annotation
    ("", [], REMOVE),
])
def test_pending_patch(have: str | None, want: list[str], patch: str | None) -> None:
    got = H.pending_patch(_cluster(pending=have), want)
    if patch is None:
        assert got is None
    else:
        assert got == {"metadata": {"annotations": {H.PENDING_HOOKS: None if patch is REMOVE else patch}}}


def test_request_cluster_drops_what_upstream_drops() -> None:
    c = _cluster(annotations={H.LAST_APPLIED: "{}", H.CONVERSION_DATA: "{}", "keep": "1"})
    out = H.request_cluster(c)
    assert out["metadata"]["annotations"] == {"keep": "1"} and "status" not in out
    assert c["metadata"]["annotations"][H.LAST_APPLIED] == "{}" and "status" in c  # the input is untouched


def test_upgrade_message_upstream_form() -> None:
    d = H.Decision(blocking=[H.Blocked("BeforeClusterUpgrade", 5, "busy")])
    assert H.upgrade_message(d, V2, "KubeadmControlPlane", V1, V1, ["md-b", "md-a"], [], []) == (
        f"Cluster is upgrading to {V2}\n"
        "  * Following hooks are blocking upgrade: BeforeClusterUpgrade: busy\n"
        f"  * KubeadmControlPlane pending upgrade to version {V2}\n"
        f"  * MachineDeployments md-a, md-b pending upgrade to version {V2}")
    d = H.Decision(blocking=[H.Blocked("AfterClusterUpgrade", 5, "")])
    assert H.upgrade_message(d, V2, "KubeadmControlPlane", V2, V2, [], [], []) == \
        f"Cluster is upgrading to {V2}\n  * Following hooks are blocking upgrade: AfterClusterUpgrade"
    assert H.name_list("MachineDeployment", "MachineDeployments", ["d", "c", "b", "a"]) == \
        "MachineDeployments a, b, c, ... (1 more)"


# --- desired state: what a hold keeps ---------------------------------------------------------------------------------

def _stable_at(w: World, version: str) -> None:
    kcp = w.of("KubeadmControlPlane")[0]
    kcp["status"] = {"version": version, "replicas": 1, "upToDateReplicas": 1}
    for md in w.of("MachineDeployment"):
        md["status"] = {"replicas": 1, "upToDateReplicas": 1}


def _compute(w: World, c: dict[str, Any], **holds: bool) -> D.Plan:
    c = copy.deepcopy(c)
    c["spec"].update(w.cluster_refs)
    plan = D.compute(c, blueprint(), w.current(), w.rand, **holds)
    w.apply(plan)
    return plan


def test_hold_control_plane_keeps_its_version() -> None:
    w = World()
    w.step(cluster(version=V1))
    _stable_at(w, V1)
    _compute(w, cluster(version=V2), hold_control_plane=True)
    assert w.of("KubeadmControlPlane")[0]["spec"]["version"] == V1
    assert w.of("MachineDeployment")[0]["spec"]["template"]["spec"]["version"] == V1
    _compute(w, cluster(version=V2))
    assert w.of("KubeadmControlPlane")[0]["spec"]["version"] == V2


def test_hold_workers_keeps_their_version_and_defers_new_ones() -> None:
    w = World()
    w.step(cluster(version=V1))
    _stable_at(w, V1)
    w.step(cluster(version=V2))
    _stable_at(w, V2)
    c = cluster(version=V2)
    c["spec"]["topology"]["workers"]["machineDeployments"].append({"class": "default-worker", "name": "md-1"})
    plan = _compute(w, c, hold_workers=True)
    assert [md["spec"]["template"]["spec"]["version"] for md in w.of("MachineDeployment")] == [V1]
    assert not plan.reconciled
    _compute(w, c)
    assert sorted(md["spec"]["template"]["spec"]["version"] for md in w.of("MachineDeployment")) == [V2, V2]


def test_a_failed_call_keeps_what_was_answered_before_it() -> None:
    view = _view(pending="AfterClusterUpgrade,AfterWorkersUpgrade", cp=(V2, V2), workers=(V2,), settled=True)
    d = H.decide(view, {"AfterWorkersUpgrade": HookResult()}, failed="AfterClusterUpgrade")
    assert isinstance(d, H.Decision) and d.failed == "AfterClusterUpgrade"
    assert d.pending == {"AfterClusterUpgrade"}  # AfterWorkersUpgrade was answered: done; the failed one stays
    d = H.before_delete(_cluster(), LIFECYCLE, {}, {}, failed="BeforeClusterDelete")
    assert isinstance(d, H.Decision) and not d.create
