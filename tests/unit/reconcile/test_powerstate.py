"""reconcile/powerstate.py: the next step of stop / start / pause / resume for every state a (killed) command can
leave behind, one row each."""

from __future__ import annotations

import pytest

from capd_py.reconcile import powerstate as ps
from capd_py.reconcile.powerstate import Box, Observed

pytestmark = pytest.mark.unit

LB = Box("c-lb", ps.LB, "running")
CP = Box("c-control-plane-a", ps.CONTROL_PLANE, "running")
W = Box("c-md-0-x", ps.WORKER, "running")
UP = (LB, CP, W)


def boxes(status: str, *, only: tuple[Box, ...] = UP) -> tuple[Box, ...]:
    return tuple(Box(b.name, b.role, status) if b in only else b for b in UP)


DOWN = boxes("exited")
FROZEN = boxes("paused")
HALF_DOWN = boxes("exited", only=(W,))          # a stop killed after the workers
HALF_UP = (LB, *DOWN[1:])                      # a start killed after the load balancer
PAUSED_OK = dict(spec_paused=True, paused_reported=True)

ROWS: list[tuple[str, str, Observed, ps.Step]] = [
    # -- stop -------------------------------------------------------------------------------------------------
    ("stop: running -> record the intent first", ps.STOP, Observed(containers=UP), ps.SetState(ps.STOPPING)),
    ("stop: a user's spec.paused is remembered", ps.STOP, Observed(containers=UP, spec_paused=True),
     ps.SetState(ps.STOPPING, user_paused=True)),
    ("stop: then pause the objects", ps.STOP, Observed(ps.STOPPING, containers=UP), ps.PauseObjects()),
    ("stop: killed after the pause -> wait for the controllers", ps.STOP,
     Observed(ps.STOPPING, spec_paused=True, containers=UP), ps.WaitPaused()),
    ("stop: workers, control planes, load balancer last", ps.STOP, Observed(ps.STOPPING, containers=UP, **PAUSED_OK),
     ps.StopContainers(("c-md-0-x", "c-control-plane-a", "c-lb"))),
    ("stop: killed midway -> the rest", ps.STOP, Observed(ps.STOPPING, containers=HALF_DOWN, **PAUSED_OK),
     ps.StopContainers(("c-control-plane-a", "c-lb"))),
    ("stop: all down -> stopped", ps.STOP, Observed(ps.STOPPING, containers=DOWN, **PAUSED_OK),
     ps.SetState(ps.STOPPED)),
    ("stop: keeps the user's pause in the state", ps.STOP,
     Observed(ps.STOPPING, user_paused=True, containers=DOWN, **PAUSED_OK), ps.SetState(ps.STOPPED, True)),
    ("stop: again when stopped -> done", ps.STOP, Observed(ps.STOPPED, containers=DOWN, **PAUSED_OK),
     ps.Done("stopped (3 containers)")),
    ("stop: a frozen cluster -> intent first", ps.STOP,
     Observed(ps.PAUSED, containers=FROZEN, **PAUSED_OK), ps.SetState(ps.STOPPING)),
    ("stop: a frozen cluster is thawed before it is stopped", ps.STOP,
     Observed(ps.STOPPING, containers=FROZEN, **PAUSED_OK), ps.Thaw(("c-lb", "c-control-plane-a", "c-md-0-x"))),
    ("stop: no containers", ps.STOP, Observed(), ps.Fail("the cluster has no containers (not provisioned yet, or "
                                                         "deleted)")),
    # -- start ------------------------------------------------------------------------------------------------
    ("start: running, nothing recorded -> done", ps.START, Observed(containers=UP), ps.Done("running (3 containers)")),
    ("start: stopped -> intent", ps.START, Observed(ps.STOPPED, containers=DOWN, **PAUSED_OK),
     ps.SetState(ps.STARTING)),
    ("start: a user-paused stopped cluster keeps that", ps.START,
     Observed(ps.STOPPED, user_paused=True, containers=DOWN, **PAUSED_OK), ps.SetState(ps.STARTING, True)),
    ("start: load balancer first, then control planes, workers", ps.START,
     Observed(ps.STARTING, containers=DOWN, **PAUSED_OK), ps.StartContainers(("c-lb", "c-control-plane-a",
                                                                            "c-md-0-x"))),
    ("start: killed after the load balancer -> the rest", ps.START,
     Observed(ps.STARTING, containers=HALF_UP, **PAUSED_OK), ps.StartContainers(("c-control-plane-a", "c-md-0-x"))),
    ("start: containers stopped by hand (no state) -> paused before they come back", ps.START,
     Observed(ps.STARTING, containers=DOWN), ps.PauseObjects()),
    ("start: all up -> wait for the workload", ps.START, Observed(ps.STARTING, containers=UP, **PAUSED_OK),
     ps.WaitWorkload()),
    ("start: ready -> unpause", ps.START, Observed(ps.STARTING, containers=UP, workload_ready=True, **PAUSED_OK),
     ps.Unpause()),
    ("start: user-paused -> stays paused, state cleared", ps.START,
     Observed(ps.STARTING, user_paused=True, containers=UP, workload_ready=True, **PAUSED_OK), ps.SetState(None)),
    ("start: unpaused -> wait for Available", ps.START,
     Observed(ps.STARTING, containers=UP, workload_ready=True), ps.WaitAvailable()),
    ("start: killed after the unpause, Available -> clear the state", ps.START,
     Observed(ps.STARTING, containers=UP, workload_ready=True, available=True), ps.SetState(None)),
    ("start: a frozen cluster is resume's", ps.START, Observed(ps.PAUSED, containers=FROZEN, **PAUSED_OK),
     ps.Fail("the cluster is paused (frozen): `capd-py resume cluster` brings it back")),
    # -- pause (freeze) ---------------------------------------------------------------------------------------
    ("pause: running -> intent", ps.PAUSE, Observed(containers=UP), ps.SetState(ps.PAUSING)),
    ("pause: objects paused first", ps.PAUSE, Observed(ps.PAUSING, containers=UP), ps.PauseObjects()),
    ("pause: freeze all", ps.PAUSE, Observed(ps.PAUSING, containers=UP, **PAUSED_OK),
     ps.Freeze(("c-md-0-x", "c-control-plane-a", "c-lb"))),
    ("pause: all frozen -> paused", ps.PAUSE, Observed(ps.PAUSING, containers=FROZEN, **PAUSED_OK),
     ps.SetState(ps.PAUSED)),
    ("pause: again -> done", ps.PAUSE, Observed(ps.PAUSED, containers=FROZEN, **PAUSED_OK),
     ps.Done("paused (3 containers frozen)")),
    ("pause: a stopped cluster", ps.PAUSE, Observed(ps.STOPPED, containers=DOWN, **PAUSED_OK),
     ps.Fail("the cluster is stopped: `capd-py start cluster` first")),
    ("pause: a container down", ps.PAUSE, Observed(containers=HALF_DOWN),
     ps.Fail("some containers are not running: c-md-0-x (start the cluster first)")),
    # -- resume -----------------------------------------------------------------------------------------------
    ("resume: not paused -> done", ps.RESUME, Observed(containers=UP), ps.Done("running (3 containers)")),
    ("resume: paused -> intent", ps.RESUME, Observed(ps.PAUSED, containers=FROZEN, **PAUSED_OK),
     ps.SetState(ps.RESUMING)),
    ("resume: thaw, load balancer first", ps.RESUME, Observed(ps.RESUMING, containers=FROZEN, **PAUSED_OK),
     ps.Thaw(("c-lb", "c-control-plane-a", "c-md-0-x"))),
    ("resume: killed during the pause's freeze -> thaw what is frozen", ps.RESUME,
     Observed(ps.RESUMING, containers=boxes("paused", only=(W,)), **PAUSED_OK), ps.Thaw(("c-md-0-x",))),
    ("resume: thawed -> workload", ps.RESUME, Observed(ps.RESUMING, containers=UP, **PAUSED_OK), ps.WaitWorkload()),
    ("resume: ready -> unpause", ps.RESUME,
     Observed(ps.RESUMING, containers=UP, workload_ready=True, **PAUSED_OK), ps.Unpause()),
    ("resume: done", ps.RESUME, Observed(None, containers=UP, workload_ready=True, available=True),
     ps.Done("running (3 containers)")),
    ("start: done, a user's pause kept", ps.START, Observed(None, spec_paused=True, containers=UP),
     ps.Done("running (3 containers) (the cluster stays paused: spec.paused was set before)")),
    ("resume: a stopped cluster is start's", ps.RESUME, Observed(ps.STOPPED, containers=DOWN, **PAUSED_OK),
     ps.Fail("the cluster is stopped, not paused: `capd-py start cluster` brings it back")),
]


@pytest.mark.parametrize(("verb", "observed", "want"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_decide(verb: str, observed: Observed, want: ps.Step) -> None:
    assert ps.decide(verb, observed) == want


def test_each_verb_runs_to_done_from_every_state_it_leaves() -> None:
    """Apply each step's effect to the observation (what the CLI's effects do) and ask again: every verb ends in
    Done, and a run cut after any step and started again from what it left ends there too."""
    def effect(o: Observed, s: ps.Step) -> Observed:
        from dataclasses import replace
        match s:
            case ps.SetState(state=st, user_paused=u):
                return replace(o, state=st, user_paused=u and st is not None)
            case ps.PauseObjects():
                return replace(o, spec_paused=True)
            case ps.WaitPaused():
                return replace(o, paused_reported=True)
            case ps.StopContainers(names=n):
                return replace(o, containers=tuple(Box(b.name, b.role, "exited") if b.name in n else b
                                                   for b in o.containers), workload_ready=False)
            case ps.StartContainers(names=n) | ps.Thaw(names=n):
                return replace(o, containers=tuple(Box(b.name, b.role, "running") if b.name in n else b
                                                   for b in o.containers))
            case ps.Freeze(names=n):
                return replace(o, containers=tuple(Box(b.name, b.role, "paused") if b.name in n else b
                                                   for b in o.containers), workload_ready=False)
            case ps.WaitWorkload():
                return replace(o, workload_ready=True)
            case ps.Unpause():
                return replace(o, spec_paused=False, paused_reported=False)
            case ps.WaitAvailable():
                return replace(o, available=True)
        raise AssertionError(s)

    o = Observed(containers=UP, workload_ready=True, available=True)
    for verb, end_state in ((ps.STOP, ps.STOPPED), (ps.START, None), (ps.PAUSE, ps.PAUSED), (ps.RESUME, None)):
        trail = [o]
        for _ in range(20):
            s = ps.decide(verb, o)
            if isinstance(s, ps.Done):
                break
            assert not isinstance(s, ps.Fail), (verb, s)
            o = effect(o, s)
            trail.append(o)
        else:
            raise AssertionError(f"{verb} never done")
        assert o.state == end_state, (verb, o)
        for mid in trail:  # a re-run from any point it could be killed at
            m = mid
            for _ in range(20):
                s = ps.decide(verb, m)
                if isinstance(s, ps.Done):
                    break
                assert not isinstance(s, ps.Fail), (verb, mid, s)
                m = effect(m, s)
            assert m == o, (verb, mid, m)
    assert not o.spec_paused and o.state is None


def test_paused_reported() -> None:
    c = {"metadata": {"generation": 3}, "status": {"conditions": [
        {"type": "Paused", "status": "True", "observedGeneration": 3}]}}
    dm_paused = {"status": {"conditions": [{"type": "Paused", "status": "True"}]}}
    dm_running = {"status": {"conditions": [{"type": "Paused", "status": "False"}]}}
    assert ps.paused_reported(c, [dm_paused, {"status": {}}])      # no Paused condition: not waited for
    assert not ps.paused_reported(c, [dm_paused, dm_running])
    old = {"metadata": {"generation": 4}, "status": c["status"]}     # reported for the spec before the pause
    assert not ps.paused_reported(old, [])
    assert not ps.paused_reported({"metadata": {}, "status": {}}, [])


def test_available_needs_an_unpaused_reconcile() -> None:
    def cl(paused: str) -> dict:
        return {"status": {"conditions": [{"type": "Available", "status": "True"},
                                          {"type": "Paused", "status": paused}]}}
    assert ps.available(cl("False"))
    assert not ps.available(cl("True"))  # Available from before the pause: not a fresh answer


def test_workload_ready_needs_ready_nodes_and_fresh_leases() -> None:
    def node(name: str, ready: str) -> dict:
        return {"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}

    def lease(name: str, at: str) -> dict:
        return {"metadata": {"name": name}, "spec": {"renewTime": at}}
    since = 1_780_000_000.0  # 2026-05-28T20:26:40Z
    fresh, old = "2026-05-28T20:26:41.000000Z", "2026-05-28T20:26:39.500000Z"
    assert ps.workload_ready(["a", "b"], [node("a", "True"), node("b", "True")],
                             [lease("a", fresh), lease("b", fresh)], since) == []
    assert ps.workload_ready(["a", "b"], [node("a", "True"), node("b", "Unknown")],
                             [lease("a", old), lease("b", fresh)], since) == [
        "a: kubelet Lease not renewed yet", "b: Ready=Unknown"]
    assert ps.workload_ready(["a"], [], [], since) == ["a: no Node"]


def test_phase_shown_by_get_clusters() -> None:
    assert ps.phase(ps.STOPPED) == "Stopped" and ps.phase(ps.PAUSED) == "Paused" and ps.phase(None) is None


def test_delete_refused_while_stopped_or_frozen() -> None:
    assert ps.delete_refusal("dev", None) is None
    assert ps.delete_refusal("dev", ps.STOPPED) == (
        "cluster dev is stopped (its objects are paused for the controllers, so nothing would delete it): "
        "`capd-py start cluster dev` first")
    assert "`capd-py resume cluster dev` first" in (ps.delete_refusal("dev", ps.PAUSED) or "")


def test_static_pods_count_once_the_restarted_kubelet_reported_them() -> None:
    def node(name: str, cp: bool) -> dict:
        return {"metadata": {"name": name, "labels": {"node-role.kubernetes.io/control-plane": ""} if cp else {}}}

    def pod(name: str, ready: bool, started: str) -> dict:
        return {"metadata": {"name": name}, "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "c", "state": {"running": {"startedAt": started}}}]}}
    since = ps._ts("2026-12-05T08:31:40Z") + 0.6  # type: ignore[operator]
    nodes = [node("cp1", True), node("w1", False), node("other-cp", True)]
    fresh, stale = "2026-12-05T08:31:45Z", "2026-12-05T08:20:00Z"
    pods = [pod(f"{c}-cp1", True, fresh) for c in ps.STATIC_PODS]
    others = [p for p in pods if p["metadata"]["name"] != "etcd-cp1"]
    assert ps.static_pods_restarted(["cp1", "w1"], nodes, pods, since) == []  # other-cp is not this cluster's
    # the statuses from before the stop (Ready, running since long ago) do not count, nor a fresh pod not Ready
    old = [pod("etcd-cp1", True, stale), *others]
    assert ps.static_pods_restarted(["cp1"], nodes, old, since) == ["cp1: etcd not Ready since the restart yet"]
    probing = [pod("etcd-cp1", False, fresh), *others]
    assert ps.static_pods_restarted(["cp1"], nodes, probing, since) == ["cp1: etcd not Ready since the restart yet"]
    # started in the very second of the restart (startedAt has whole seconds): counts
    same_second = [pod("etcd-cp1", True, "2026-12-05T08:31:40Z"), *others]
    assert ps.static_pods_restarted(["cp1"], nodes, same_second, since) == []
    # no etcd static pod (external etcd): the others are enough
    assert ps.static_pods_restarted(["cp1"], nodes, others, since) == []
