"""capd_py.controllers.skeleton: the one reconcile order every kind runs (pause before deletion, finalizer and
Paused only there, one status write), on an in-memory API."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import CLUSTER, MACHINE_SET
from capd_py.api.labels import PAUSED_ANNOTATION
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.skeleton import Kind, Outcome, Subject, run
from capd_py.kube.client import KubeError
from capd_py.runtime.protocol import RuntimeError_
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadKube

pytestmark = pytest.mark.unit

FIN = "test.cluster.x-k8s.io/finalizer"


class Recorder:
    def __init__(self, reconciled: Outcome | None = None, deleted: Outcome | None = None):
        self.calls: list[tuple[str, Any]] = []
        self._reconciled, self._deleted = reconciled or Outcome(), deleted or Outcome()

    async def reconcile(self, ctx: Ctx, sub: Subject) -> Outcome:
        self.calls.append(("reconcile", sub))
        return self._reconciled

    async def delete(self, ctx: Ctx, sub: Subject) -> Outcome:
        self.calls.append(("delete", sub))
        return self._deleted


def setup(rec: Recorder, paused_cluster: bool = False, annotations: dict[str, str] | None = None,
          finalizers: list[str] | None = None) -> tuple[Ctx, Kind, FakeWorkloadKube]:
    kube = FakeWorkloadKube(FakeRuntime(), "ns", "c1")
    kube.put_object("clusters", {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                 "metadata": {"name": "c1", "namespace": "ns"}, "spec": {"paused": paused_cluster}})
    kube.put_object("machinesets", {"apiVersion": MACHINE_SET.api_version, "kind": "MachineSet",
                                    "metadata": {"name": "ms", "namespace": "ns", "generation": 2,
                                                 "annotations": annotations or {}, "finalizers": finalizers or []},
                                    "spec": {"clusterName": "c1"}})
    ctx = Ctx(kube=kube, runtime=FakeRuntime(), settings=Settings(), workload=None)  # type: ignore[arg-type]
    return ctx, Kind(MACHINE_SET, reconcile=rec.reconcile, delete=rec.delete, finalizer=FIN), kube


def ms(kube: FakeWorkloadKube) -> dict[str, Any]:
    obj = kube.object("machinesets", "ns", "ms")
    assert obj is not None
    return obj


async def test_reconcile_gets_the_finalizer_and_its_cluster_then_status_says_not_paused() -> None:
    rec = Recorder(Outcome(status={"replicas": 1}, requeue_after=5))
    ctx, kind, kube = setup(rec)
    res = await run(ctx, kind, "ns", "ms")
    assert res is not None and res.requeue_after == 5
    [(what, sub)] = rec.calls
    assert what == "reconcile" and sub.cluster is not None and sub.cluster["metadata"]["name"] == "c1"
    assert FIN in sub.obj["metadata"]["finalizers"]  # before the kind's work: nothing it makes is orphaned
    got = ms(kube)
    assert got["metadata"]["finalizers"] == [FIN] and got["status"]["replicas"] == 1
    p = cond.get(got, cond.PAUSED)
    assert p is not None and (p["status"], p["reason"], p["observedGeneration"]) == ("False", "NotPaused", 2)


async def test_a_stripped_finalizer_is_put_back_and_a_stable_object_is_not_written() -> None:
    rec = Recorder(Outcome(status={"replicas": 1}))
    ctx, kind, kube = setup(rec)
    await run(ctx, kind, "ns", "ms")
    rv = ms(kube)["metadata"]["resourceVersion"]
    await run(ctx, kind, "ns", "ms")
    assert ms(kube)["metadata"]["resourceVersion"] == rv  # nothing changed: no write
    await kube.merge_patch(MACHINE_SET, "ns", "ms", {"metadata": {"finalizers": None}})
    await run(ctx, kind, "ns", "ms")
    assert ms(kube)["metadata"]["finalizers"] == [FIN]


@pytest.mark.parametrize(("cluster_paused", "annotations"), [(True, {}), (False, {PAUSED_ANNOTATION: ""})])
async def test_paused_objects_are_left_alone_even_while_deleting(cluster_paused: bool,
                                                                 annotations: dict[str, str]) -> None:
    rec = Recorder()
    ctx, kind, kube = setup(rec, paused_cluster=cluster_paused, annotations=annotations, finalizers=[FIN])
    assert await run(ctx, kind, "ns", "ms") is None
    p = cond.get(ms(kube), cond.PAUSED)
    assert p is not None and (p["status"], p["reason"]) == ("True", "Paused")
    kube.objects[("machinesets", "ns", "ms")]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    await run(ctx, kind, "ns", "ms")
    assert rec.calls == [] and ms(kube)["metadata"]["finalizers"] == [FIN]  # as upstream: pause before deletion


async def test_deletion_waits_for_cleanup_then_drops_the_finalizer() -> None:
    rec = Recorder(deleted=Outcome(status={"replicas": 0}, done=False, requeue_after=3))
    ctx, kind, kube = setup(rec, finalizers=[FIN, "other/finalizer"])
    kube.objects[("machinesets", "ns", "ms")]["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    res = await run(ctx, kind, "ns", "ms")
    assert res is not None and res.requeue_after == 3 and [c[0] for c in rec.calls] == ["delete"]
    assert ms(kube)["status"]["replicas"] == 0 and FIN in ms(kube)["metadata"]["finalizers"]
    rec._deleted = Outcome(done=True)
    assert await run(ctx, kind, "ns", "ms") is None
    assert ms(kube)["metadata"]["finalizers"] == ["other/finalizer"]
    await run(ctx, kind, "ns", "ms")  # our finalizer is gone: our cleanup is not run again
    assert [c[0] for c in rec.calls] == ["delete", "delete"]


async def test_owned_conditions_leave_the_others_alone() -> None:
    def c(t: str, s: str) -> dict[str, Any]:
        return {"type": t, "status": s, "reason": t, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    rec = Recorder(Outcome(status={"conditions": [c("Mine", "True"), c("Theirs", "False")]},
                           owned_conditions=["Mine"]))
    ctx, kind, kube = setup(rec)
    kube.objects[("machinesets", "ns", "ms")]["status"] = {"conditions": [c("Theirs", "True")]}
    await run(ctx, kind, "ns", "ms")
    got = {x["type"]: x["status"] for x in ms(kube)["status"]["conditions"]}
    assert got == {"Theirs": "True", "Mine": "True", "Paused": "False"}


async def test_a_second_controller_of_a_kind_reports_its_own_condition_when_paused() -> None:
    """The topology controller of Clusters: Paused is the first controller's; it says TopologyReconciled=False."""
    rec = Recorder()
    ctx, kind, kube = setup(rec, paused_cluster=True)

    def when_paused(sub: Subject) -> Outcome:
        st = {"conditions": cond.set_condition(None, "TopologyReconciled", False, "ReconcilePaused")}
        return Outcome(status=st, owned_conditions=["TopologyReconciled"])
    second = Kind(MACHINE_SET, reconcile=rec.reconcile, delete=rec.delete, reports_paused=False,
                  when_paused=when_paused)
    await run(ctx, second, "ns", "ms")
    got = {x["type"]: (x["status"], x["reason"]) for x in ms(kube)["status"]["conditions"]}
    assert got == {"TopologyReconciled": ("False", "ReconcilePaused")} and rec.calls == []
    kube.objects[("clusters", "ns", "c1")]["spec"]["paused"] = False
    rec._reconciled = Outcome(owned_conditions=())
    await run(ctx, second, "ns", "ms")
    assert "Paused" not in {x["type"] for x in ms(kube)["status"]["conditions"]}


async def test_nothing_is_done_or_written_until_the_kind_is_ready() -> None:
    """As upstream's "waiting for the Machine controller to set the OwnerRef": no finalizer (it would race the
    owner's adoption patch), no Paused condition, no call."""
    rec = Recorder(Outcome(status={"replicas": 1}))
    ctx, kind, kube = setup(rec)
    owned = {"yes": False}
    waiting = Kind(MACHINE_SET, reconcile=rec.reconcile, delete=rec.delete, finalizer=FIN,
                   ready=lambda sub: owned["yes"])
    rv = ms(kube)["metadata"]["resourceVersion"]
    assert await run(ctx, waiting, "ns", "ms") is None
    assert rec.calls == [] and ms(kube)["metadata"]["resourceVersion"] == rv
    owned["yes"] = True
    await run(ctx, waiting, "ns", "ms")
    assert [c[0] for c in rec.calls] == ["reconcile"] and ms(kube)["metadata"]["finalizers"] == [FIN]


async def test_no_write_for_not_paused_alone_but_unpausing_is_written() -> None:
    rec = Recorder(Outcome())  # the kind has nothing to say about status yet
    ctx, kind, kube = setup(rec)
    await run(ctx, kind, "ns", "ms")
    assert "status" not in ms(kube) or cond.get(ms(kube), cond.PAUSED) is None
    kube.objects[("clusters", "ns", "c1")]["spec"]["paused"] = True
    await run(ctx, kind, "ns", "ms")
    assert cond.is_true(ms(kube), cond.PAUSED)
    kube.objects[("clusters", "ns", "c1")]["spec"]["paused"] = False
    await run(ctx, kind, "ns", "ms")
    p = cond.get(ms(kube), cond.PAUSED)
    assert p is not None and p["status"] == "False"


async def test_a_kinds_own_status_write_keeps_paused_and_costs_one_write() -> None:
    """A kind writing status mid-reconcile (DockerMachine before it patches the Node) does not drop Paused for the
    skeleton to put back: one write, not two."""
    from capd_py.controllers import lifecycle
    rec = Recorder(Outcome(status={"replicas": 1}))
    ctx, kind, kube = setup(rec)
    await run(ctx, kind, "ns", "ms")  # first pass: status and Paused=False

    async def writes_itself(c: Ctx, sub: Subject) -> Outcome:
        obj = await lifecycle.write_status(c.kube, MACHINE_SET, sub.obj, {"replicas": 2})
        return Outcome(status={"replicas": 2}, obj=obj)
    own = Kind(MACHINE_SET, reconcile=writes_itself, delete=rec.delete, finalizer=FIN)
    before = int(ms(kube)["metadata"]["resourceVersion"])
    await run(ctx, own, "ns", "ms")
    got = ms(kube)
    assert int(got["metadata"]["resourceVersion"]) == before + 1
    assert got["status"]["replicas"] == 2 and cond.get(got, cond.PAUSED) is not None


async def test_an_object_that_is_gone_tells_the_kind_s_gone_hook_only() -> None:
    rec = Recorder()
    gone: list[tuple[str, str]] = []

    async def on_gone(ctx: Ctx, namespace: str, name: str) -> None:
        gone.append((namespace, name))
    ctx, kind, kube = setup(rec)
    kind = Kind(MACHINE_SET, reconcile=rec.reconcile, delete=rec.delete, finalizer=FIN, gone=on_gone)
    assert await run(ctx, kind, "ns", "nosuch") is None
    assert gone == [("ns", "nosuch")] and rec.calls == []
    await run(ctx, kind, "ns", "ms")  # an object that exists is reconciled, not told gone
    assert gone == [("ns", "nosuch")] and [c[0] for c in rec.calls] == ["reconcile"]


class Failing(Recorder):
    """A kind whose pass the API server or docker ends."""

    def __init__(self, error: BaseException):
        super().__init__()
        self.error = error

    async def reconcile(self, ctx: Ctx, sub: Subject) -> Outcome:
        self.calls.append(("reconcile", sub))
        raise self.error


def events_of(kube: FakeWorkloadKube) -> list[dict[str, Any]]:
    kube.sync()
    return [o for (resource, _, _), o in kube.objects.items() if resource == "events"]


async def test_a_failed_pass_is_one_warning_event_with_its_cause_counting_repeats_and_still_raises() -> None:
    rec = Failing(RuntimeError_("docker: 400 invalid reference format: 'a b'"))
    ctx, kind, kube = setup(rec)
    for _ in range(3):
        with pytest.raises(RuntimeError_):  # the queue still sees it: backoff and its one log line
            await run(ctx, kind, "ns", "ms")
    [ev] = events_of(kube)  # one object, not one per retry
    assert (ev["type"], ev["reason"], ev["count"]) == ("Warning", "ReconcileError", 3)
    assert ev["message"] == "RuntimeError_: docker: 400 invalid reference format: 'a b'"
    assert ev["involvedObject"]["kind"] == "MachineSet" and ev["metadata"]["namespace"] == "ns"
    rec.error = KubeError(422, "Invalid", "spec.replicas: Invalid value: -1")
    with pytest.raises(KubeError):
        await run(ctx, kind, "ns", "ms")
    assert sorted(e["reason"] + ":" + str(e["count"]) for e in events_of(kube)) == [
        "ReconcileError:1", "ReconcileError:3"]


async def test_a_conflict_or_a_bug_makes_no_event() -> None:
    rec = Failing(KubeError(409, "Conflict", "the object has been modified"))
    ctx, kind, kube = setup(rec)
    with pytest.raises(KubeError):
        await run(ctx, kind, "ns", "ms")
    rec.error = ValueError("a bug: the queue logs its traceback")
    with pytest.raises(ValueError):
        await run(ctx, kind, "ns", "ms")
    assert events_of(kube) == []
