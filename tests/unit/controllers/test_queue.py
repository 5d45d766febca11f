"""The work queue and the Manager's event path: dedup, per-key serialisation, backoff, resync, routing."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from capd_py.api.gvk import MACHINE, MACHINE_SET
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.mappers import Controller, ReconcileFn, owner_mapper
from capd_py.controllers.queue import Key, Result, WorkQueue
from capd_py.kube.cache import Store
from capd_py.kube.client import KubeError
from capd_py.kube.workload import WorkloadClients
from capd_py.runtime.protocol import RuntimeError_

pytestmark = pytest.mark.unit


async def settle(q: WorkQueue, seconds: float = 0.3) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await asyncio.sleep(0.01)


async def test_duplicate_adds_while_queued_run_once() -> None:
    seen: list[Key] = []

    async def handle(k: Key) -> None:
        seen.append(k)

    q = WorkQueue(handle, workers=4)
    for _ in range(5):
        q.add(("Machine", "ns", "a"), after=0.05)
    q.add(("Machine", "ns", "b"), after=0.05)
    q.start()
    await settle(q)
    await q.stop()
    assert sorted(seen) == [("Machine", "ns", "a"), ("Machine", "ns", "b")]


async def test_one_key_never_runs_twice_at_once_and_an_add_while_running_runs_again() -> None:
    running = 0
    peak = 0
    runs = 0
    gate = asyncio.Event()

    async def handle(k: Key) -> None:
        nonlocal running, peak, runs
        running += 1
        peak = max(peak, running)
        runs += 1
        if runs == 1:
            await gate.wait()
        running -= 1

    q = WorkQueue(handle, workers=8)
    q.start()
    key = ("Machine", "ns", "a")
    q.add(key)
    await asyncio.sleep(0.05)
    for _ in range(3):  # arrive while the first pass is still running: marked dirty, one more pass
        q.add(key)
    await asyncio.sleep(0.05)
    assert runs == 1 and peak == 1
    gate.set()
    await settle(q)
    await q.stop()
    assert runs == 2
    assert peak == 1


async def test_failures_back_off_exponentially_and_success_resets() -> None:
    times: list[float] = []

    async def handle(k: Key) -> Result | None:
        times.append(time.monotonic())
        if len(times) <= 3:
            raise RuntimeError("boom")
        return None

    q = WorkQueue(handle, workers=1, base_backoff=0.05, max_backoff=1.0)
    delays: list[float] = []
    add = q.add

    def spy(key: Key, after: float = 0.0) -> None:
        delays.append(after)
        add(key, after)

    q.add = spy  # type: ignore[method-assign]
    q.start()
    q.add(("Machine", "ns", "a"))
    await settle(q, 0.8)
    await q.stop()
    assert len(times) == 4
    # the waits the queue asked for double: 0.05, 0.1, 0.2 (the first add is the user's)
    assert delays == [0.0, 0.05, 0.1, 0.2]
    # and were honoured: a timer never fires early (late firing under load is fine)
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095 and gaps[2] >= 0.19
    assert ("Machine", "ns", "a") not in q._failures


async def test_an_api_or_docker_error_logs_its_cause_in_one_line_a_bug_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 42 item 5: what the API server or docker refused is said with its cause, never as a traceback; any
    other exception is capd-py's bug and keeps its traceback. Both back off."""
    errors: dict[str, Exception] = {
        "api": KubeError(403, "Forbidden", 'secrets "c1-kubeconfig" is forbidden: namespace t-1 is being terminated'),
        "docker": RuntimeError_("create network capd-py-x: Pool overlaps with other one on this address space"),
        "bug": KeyError("spec")}

    async def handle(k: Key) -> Result | None:
        raise errors[k[2]]

    q = WorkQueue(handle, workers=1, base_backoff=5.0, max_backoff=5.0)
    q.start()
    with caplog.at_level("ERROR", logger="capd_py.queue"):
        for name in errors:
            q.add(("Machine", "ns", name))
        await settle(q, 0.3)
    await q.stop()
    by = {r.getMessage().split("/")[2].split(" ")[0]: r for r in caplog.records}
    assert by["api"].exc_info is None and by["docker"].exc_info is None
    assert "KubeError: 403 Forbidden: secrets \"c1-kubeconfig\" is forbidden" in by["api"].getMessage()
    assert by["docker"].getMessage().endswith("RuntimeError_: create network capd-py-x: Pool overlaps with other one "
                                              "on this address space")
    assert by["bug"].exc_info is not None   # a bug: where it happened
    assert all(q._failures[("Machine", "ns", n)] == 1 for n in errors)   # each backs off


async def test_requeue_after_is_honoured() -> None:
    times: list[float] = []

    async def handle(k: Key) -> Result | None:
        times.append(time.monotonic())
        return Result(requeue_after=0.15) if len(times) == 1 else None

    q = WorkQueue(handle, workers=2)
    q.start()
    q.add(("Machine", "ns", "a"))
    await settle(q, 0.5)
    await q.stop()
    assert len(times) == 2 and times[1] - times[0] >= 0.14


async def test_a_reported_failure_backs_off_and_its_own_events_do_not_bring_it_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reconcile that reports a failure (Result.failed: an error in a condition) is backed off like a raise, and
    an event meanwhile (here: one it causes itself, as its status write would) runs it again only after the hold;
    a success ends the hold."""
    monkeypatch.setattr("capd_py.controllers.queue.EVENT_HOLD", 0.2)
    key: Key = ("Cluster", "ns", "c")
    times: list[float] = []
    q: WorkQueue

    async def handle(k: Key) -> Result | None:
        times.append(time.monotonic())
        if len(times) <= 3:
            q.add(k)  # its own write's event, while it runs
            return Result(failed=True)
        return None

    q = WorkQueue(handle, workers=1, base_backoff=0.1, max_backoff=1.0)
    q.start()
    q.add(key)
    await settle(q, 1.2)
    await q.stop()
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    # without the hold the self-caused event ran it again at once, hundreds of times in that second
    assert len(times) == 4, gaps
    assert gaps[0] >= 0.095 and gaps[1] >= 0.19 and gaps[2] >= 0.19, gaps  # 0.1, then 0.2 (held), 0.2 (held)
    assert key not in q._failures and key not in q._held


def _obj(name: str, rv: str, owner: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": rv, "uid": f"uid-{name}"}
    if owner:
        md["ownerReferences"] = [{"kind": "MachineSet", "name": owner, "uid": f"uid-{owner}", "controller": True}]
    return {"metadata": md}


async def test_manager_routes_events_through_the_store_and_resyncs_from_it() -> None:
    reconciled: list[tuple[str, str, str]] = []

    def rec(kind: str) -> ReconcileFn:
        async def r(ctx: Ctx, ns: str, name: str) -> None:
            reconciled.append((kind, ns, name))
        return r

    ms_ctrl = Controller(gvk=MACHINE_SET, reconcile=rec("MachineSet"), watches=[(MACHINE, owner_mapper("MachineSet"))])
    m_ctrl = Controller(gvk=MACHINE, reconcile=rec("Machine"))
    ctx = Ctx(kube=None, runtime=None, settings=Settings(workers=2),  # type: ignore[arg-type]
              workload=WorkloadClients(None))  # type: ignore[arg-type]
    mgr = Manager(ctx, [ms_ctrl, m_ctrl], store=Store())
    mgr.store.replace(MACHINE, [], "1")
    mgr.store.replace(MACHINE_SET, [], "1")
    mgr.start()
    mgr.dispatch(MACHINE, _obj("m1", "5", owner="ms1"))
    await asyncio.sleep(0.3)
    assert sorted(reconciled) == [("Machine", "ns", "m1"), ("MachineSet", "ns", "ms1")]
    assert mgr.store.get(MACHINE, "ns", "m1") is not None

    reconciled.clear()
    mgr.dispatch(MACHINE_SET, _obj("ms1", "6"))
    await mgr.resync_once()  # every object of every controller's kind, from the store, no API call
    await asyncio.sleep(0.3)
    assert sorted(set(reconciled)) == [("Machine", "ns", "m1"), ("MachineSet", "ns", "ms1")]

    reconciled.clear()
    mgr.dispatch(MACHINE, _obj("m1", "7", owner="ms1"), deleted=True)
    await asyncio.sleep(0.3)
    assert mgr.store.get(MACHINE, "ns", "m1") is None
    assert sorted(reconciled) == [("Machine", "ns", "m1"), ("MachineSet", "ns", "ms1")]
    await mgr.stop()


async def test_a_worker_cancelled_just_as_it_is_woken_still_stops() -> None:
    """The in-process operator's teardown hang: Python 3.11's `asyncio.wait_for` returns the inner result when
    the inner wait has finished at the moment the outer task is cancelled, swallowing the cancellation, so a
    worker woken by an add at the moment `stop` cancelled it looped on and `stop` waited forever. Here the
    race is forced: the worker's wait is woken and has finished when the cancellation arrives."""
    async def handle(k: Key) -> None:
        pass

    q = WorkQueue(handle, workers=1)
    q.add(("Machine", "ns", "later"), after=3600)  # a timed wait, as while requeues are pending
    q.start()
    await asyncio.sleep(0.05)  # the worker waits on the condition
    async with q._cond:
        q._cond.notify_all()
    await asyncio.sleep(0)  # the worker's wait finishes (re-acquires the lock); the worker has not resumed
    await asyncio.wait_for(q.stop(), timeout=5)
    assert not q._tasks


async def test_stop_cancels_again_a_reconcile_that_swallowed_its_cancellation_and_is_bounded(
        caplog: pytest.LogCaptureFixture) -> None:
    swallowed: list[Key] = []

    async def once(k: Key) -> None:  # swallows the first cancellation, honours the next
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            swallowed.append(k)
        await asyncio.sleep(3600)

    q = WorkQueue(once, workers=2)
    q.add(("Machine", "ns", "a"))
    q.start()
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await q.stop(timeout=5)
    assert swallowed == [("Machine", "ns", "a")] and time.monotonic() - started < 2.5

    stubborn = [True]

    async def never(k: Key) -> None:  # swallows every cancellation: stop gives up after its bound, loudly
        while stubborn[0]:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    q = WorkQueue(never, workers=1)
    q.add(("Machine", "ns", "b"))
    q.start()
    await asyncio.sleep(0.05)
    worker = next(t for t in asyncio.all_tasks() if t.get_name() == "capd-py-worker-0")
    started = time.monotonic()
    await q.stop(timeout=0.5)
    assert time.monotonic() - started < 1.5
    assert "did not stop within" in caplog.text and "never" in caplog.text, caplog.text
    stubborn[0] = False  # let the abandoned worker (a test artefact) end so the test's loop can close
    q._tasks = [worker]
    await q.stop(timeout=3)
    assert worker.done()
