"""The write/reconcile counter (Kube.counter, Manager.writes / activity) and the waits for quiet on it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from capd_py.api.gvk import MACHINE
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.mappers import Controller
from capd_py.kube.client import Kube, WriteCounter
from capd_py.kube.workload import WorkloadClients
from capd_py.testing.quiet import (
    activity,
    quiet_versions,
    quiet_window_sync,
    wait_quiet,
    wait_quiet_sync,
    wait_resyncs_sync,
)

pytestmark = pytest.mark.unit


class Api(Kube):
    """An in-memory API: every call answers with an empty object."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]

    def call(self, method: str, path: str, body: Any = None, query: Any = (), content_type: str | None = None,
             timeout: float = 30) -> Any:
        return {"kind": "Machine", "metadata": {"name": "m", "namespace": "ns", "resourceVersion": "1"}}


async def test_a_kube_counts_its_writes_not_its_reads_once_it_has_a_counter() -> None:
    k = Api()
    await k.create(MACHINE, {"metadata": {"name": "m", "namespace": "ns"}})  # no counter: nothing counted
    k.counter = WriteCounter()
    await k.get(MACHINE, "ns", "m")
    await k.list(MACHINE, "ns")
    await k.merge_patch(MACHINE, "ns", "m", {"metadata": {"labels": {"a": "b"}}})
    await k.delete(MACHINE, "ns", "m")
    assert k.counter.total == 2
    assert [r.split()[0] for r in k.counter.recent] == ["PATCH", "DELETE"]
    # each with the start of its body, so a write a test did not expect says what it was
    method, path, body = k.counter.recent[0].split(" ", 2)
    assert path.endswith("/namespaces/ns/machines/m") and body == '{"metadata": {"labels": {"a": "b"}}}'
    assert k.counter.recent[1].split(" ", 2)[2].startswith('{"propagationPolicy"')


async def test_the_manager_counts_its_controllers_writes_and_reconciles() -> None:
    kube = Api()

    async def rec(ctx: Ctx, ns: str, name: str) -> None:
        await ctx.kube.merge_patch(MACHINE, ns, name, {"status": {"phase": "Running"}}, subresource="status")

    ctx = Ctx(kube=kube, runtime=None, settings=Settings(workers=2),  # type: ignore[arg-type]
              workload=WorkloadClients(None))  # type: ignore[arg-type]
    mgr = Manager(ctx, [Controller(gvk=MACHINE, reconcile=rec)])
    assert kube.counter is mgr.writes
    mgr.start()
    try:
        mgr.enqueue("Machine", "ns", "m")
        await wait_quiet(mgr, window=0.3, timeout=5)
        got = activity(mgr)
        assert (got["writes"], got["reconciles"]) == (1, 1)
        assert got["recent"] == [f"PATCH {MACHINE.path('ns', 'm', 'status')} " '{"status": {"phase": "Running"}}']
    finally:
        await mgr.stop()


async def test_wait_quiet_returns_after_a_window_without_writes_and_names_the_writes_when_never_quiet() -> None:
    c = WriteCounter()
    assert await wait_quiet(c, window=0.1, timeout=1) == 0

    async def busy() -> None:
        for i in range(100):
            c.record("PUT", f"/x/{i}")
            await asyncio.sleep(0.02)
    task = asyncio.create_task(busy())
    with pytest.raises(AssertionError, match=r"not quiet for 0s within 0s: the pool; \d+ writes meanwhile.*PUT /x/"):
        await wait_quiet(c, window=0.3, timeout=0.4, what="the pool")
    await task
    assert await wait_quiet(c, window=0.1, timeout=1) == 0


async def test_quiet_versions_takes_the_snapshot_again_after_each_write() -> None:
    c = WriteCounter()
    state = {"rv": 1}

    async def versions() -> int:
        return state["rv"]

    async def converge() -> None:
        for _ in range(3):
            await asyncio.sleep(0.05)
            state["rv"] += 1
            c.record("PUT", "/x")
    task = asyncio.create_task(converge())
    before, after = await quiet_versions(c, versions, window=0.3, timeout=3)
    await task
    assert before == after == 4


def test_a_missing_activity_file_counts_as_nothing_yet(tmp_path: Any) -> None:
    path = tmp_path / "activity.json"
    assert wait_quiet_sync(path, window=0, timeout=1) == 0
    path.write_text('{"writes": 3, "reconciles": 7, "recent": ["PUT /x"]}')
    assert activity(path)["writes"] == 3


async def test_a_namespace_scoped_wait_ignores_other_namespaces() -> None:
    """What earlier tests left behind (and the controllers still handle) does not keep a test from being quiet."""
    from capd_py.kube.client import namespace_and_resource as where
    assert where("/apis/cluster.x-k8s.io/v1beta2/namespaces/t-1/machines/m/status") == ("t-1", "machines")
    assert where("/api/v1/namespaces/t-1") == ("t-1", "namespaces")  # the Namespace itself counts as its own
    assert where("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/x") == ("", "customresourcedefinitions")
    assert where("/api/v1/nodes/n?dryRun=All") == ("", "nodes")
    c = WriteCounter()

    async def elsewhere() -> None:
        for _ in range(10):
            c.record("PATCH", "/apis/cluster.x-k8s.io/v1beta2/namespaces/old/machines/m/status")
            await asyncio.sleep(0.05)
    busy = asyncio.create_task(elsewhere())
    assert await wait_quiet(c, window=0.2, timeout=2, namespace="mine") == 0
    await busy
    with pytest.raises(AssertionError, match="not quiet"):
        await wait_quiet(c, window=0.3, timeout=0.2)  # unscoped it would have waited for them


def _manager(rec: Any, relist_every: int = 10) -> Manager:
    ctx = Ctx(kube=Api(), runtime=None, settings=Settings(workers=4, relist_every=relist_every),  # type: ignore[arg-type]
              workload=WorkloadClients(None))  # type: ignore[arg-type]
    return Manager(ctx, [Controller(gvk=MACHINE, reconcile=rec)])


def _machine(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": "1"}}


async def _until(cond: Any, timeout: float = 2.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_resync_pass_is_complete_once_every_key_was_reconciled_after_it_began() -> None:
    """`resyncs` counts passes whose every key a reconcile that began after the pass queued it has run for: one
    under way when the pass began does not count (its rerun does), and passes complete in order."""
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}
    runs: list[str] = []

    async def rec(ctx: Ctx, ns: str, name: str) -> None:
        runs.append(name)
        await gates[name].wait()

    mgr = _manager(rec)
    mgr.store.replace(MACHINE, [_machine("a"), _machine("b")], "1")
    mgr.start()
    try:
        assert {k: activity(mgr)[k] for k in ("resyncs_started", "resyncs", "relists")} == \
            {"resyncs_started": 0, "resyncs": 0, "relists": 0}
        mgr.enqueue("Machine", "ns", "a")
        await _until(lambda: runs == ["a"])  # a's reconcile is under way (began before the pass)
        await mgr.resync_once()
        await _until(lambda: runs == ["a", "b"])
        gates["b"].set()
        await _until(lambda: mgr.reconciles == 1)  # b done
        a = activity(mgr)
        assert (a["resyncs_started"], a["resyncs"]) == (1, 0)  # a's reconcile of before the pass does not count
        await mgr.resync_once()  # pass 2: b is queued again, a is marked to run once more
        gates["a"].set()  # a's first run ends; its rerun (after both passes began) serves both
        await _until(lambda: mgr.reconciles == 4)
        assert sorted(runs) == ["a", "a", "b", "b"]
        assert (activity(mgr)["resyncs_started"], activity(mgr)["resyncs"]) == (2, 2)
    finally:
        await mgr.stop()


async def test_passes_complete_in_order_and_a_pass_without_objects_at_once() -> None:
    gate = asyncio.Event()

    async def rec(ctx: Ctx, ns: str, name: str) -> None:
        if name == "slow":
            await gate.wait()

    mgr = _manager(rec, relist_every=2)
    mgr.store.replace(MACHINE, [], "1")
    mgr.start()
    try:
        await mgr.resync_once()  # no Machines: complete at once
        assert (mgr.resyncs_started, mgr.resyncs_done) == (1, 1)
        mgr.store.replace(MACHINE, [_machine("slow")], "1")
        mgr.ctx.kube.list_with_version = lambda g, *a, **k: _listed()  # type: ignore[method-assign,assignment]
        await mgr.resync_once()  # pass 2 relists (every 2nd): the API answers with "slow" and "fast"
        assert mgr.relists_done == 1
        await _until(lambda: mgr.reconciles == 1)  # "fast" done, "slow" under way
        mgr.store.replace(MACHINE, [_machine("fast")], "2")
        await mgr.resync_once()  # pass 3: only "fast", done soon; it waits for pass 2's "slow"
        await _until(lambda: mgr.reconciles >= 2)
        assert (mgr.resyncs_started, mgr.resyncs_done) == (3, 1)
        gate.set()
        await _until(lambda: mgr.resyncs_done == 3)
    finally:
        await mgr.stop()


async def _listed() -> tuple[list[dict[str, Any]], str]:
    return [_machine("slow"), _machine("fast")], "2"


async def test_a_failed_reconcile_still_serves_its_pass() -> None:
    async def rec(ctx: Ctx, ns: str, name: str) -> None:
        raise RuntimeError("boom")

    mgr = _manager(rec)
    mgr.store.replace(MACHINE, [_machine("a")], "1")
    mgr.start()
    try:
        await mgr.resync_once()
        await _until(lambda: mgr.resyncs_done == 1)
    finally:
        await mgr.stop()


async def test_a_quiet_wait_with_resyncs_waits_for_passes_begun_in_its_window() -> None:
    """Quiet means no write for the window and `resyncs` passes, begun after the last write, complete; a write
    restarts both; `resyncs_after` counts only passes begun that long into the window."""
    state = {"writes": 0, "resyncs_started": 3, "resyncs": 3}
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match="2 of 2 resync passes to go"):
        wait_quiet_sync(lambda: dict(state), window=0, timeout=0.2, interval=0.05, resyncs=2)

    async def passes() -> None:
        for _ in range(2):
            await asyncio.sleep(0.1)
            state["resyncs_started"] += 1
            await asyncio.sleep(0.05)
            state["resyncs"] += 1
        state["writes"] += 1  # a write: the window starts again, so do the passes it needs
        for _ in range(2):
            await asyncio.sleep(0.1)
            state["resyncs_started"] += 1
            state["resyncs"] += 1
    task = asyncio.create_task(passes())
    t0 = time.monotonic()
    assert await wait_quiet(lambda: dict(state), window=0, timeout=3, interval=0.01, resyncs=2) == 1
    assert state["resyncs"] == 7 and time.monotonic() - t0 >= 0.5
    await task

    state = {"writes": 0, "resyncs_started": 0, "resyncs": 0}

    async def more() -> None:
        for _ in range(4):
            await asyncio.sleep(0.1)
            state["resyncs_started"] += 1
            state["resyncs"] += 1
    task = asyncio.create_task(more())
    await wait_quiet(lambda: dict(state), window=0, timeout=3, interval=0.01, resyncs=1, resyncs_after=0.25)
    assert state["resyncs"] >= 3  # passes 1 and 2 began before 0.25 s
    await task
    with pytest.raises(ValueError, match="counts no resync passes"):
        wait_quiet_sync(WriteCounter(), resyncs=1)


def test_the_activity_file_carries_the_resync_counts(tmp_path: Any) -> None:
    async def rec(ctx: Ctx, ns: str, name: str) -> None:
        return None

    async def main() -> None:
        mgr = _manager(rec)
        mgr.store.replace(MACHINE, [], "1")
        await mgr.resync_once()
        path = tmp_path / "activity.json"
        task = asyncio.create_task(mgr.report_forever(path, every=0.01))
        await asyncio.sleep(0.05)
        task.cancel()
        got = activity(path)
        assert (got["resyncs_started"], got["resyncs"], got["relists"]) == (1, 1, 0)
    asyncio.run(main())


def test_quiet_window_sync_says_when_the_window_began_and_the_passes_begun_in_it() -> None:
    state = {"writes": 0, "resyncs_started": 5, "resyncs": 5}
    polls = {"n": 0}

    def source() -> dict[str, Any]:
        polls["n"] += 1
        if polls["n"] == 3:  # a write, and a pass begun before it: neither belongs to the window
            state["writes"] += 1
            state["resyncs_started"] += 1
        if polls["n"] == 6:  # a pass begun and done in the window
            state["resyncs_started"] += 1
            state["resyncs"] += 2
        return dict(state)

    t0 = time.monotonic()
    q = quiet_window_sync(source, window=0.2, timeout=3, interval=0.02, resyncs=1)
    assert q.writes == 1 and q.resyncs == 1
    assert t0 < q.began < time.monotonic() - 0.2 and q.seconds >= 0.2


def test_wait_resyncs_counts_only_passes_begun_after_it_and_ignores_writes() -> None:
    state = {"writes": 0, "resyncs_started": 2, "resyncs": 1}

    def source() -> dict[str, Any]:
        state["writes"] += 1  # writes all along: not what this wait is about
        if state["writes"] == 3:
            state["resyncs"] = 2  # pass 2, begun before the wait, completes: not enough
        if state["writes"] == 5:
            state["resyncs_started"] = state["resyncs"] = 3
        return dict(state)

    assert wait_resyncs_sync(source, 1, timeout=3, interval=0.01) == 2
    assert state["writes"] == 5
    with pytest.raises(AssertionError, match="1 of 1 resync passes not complete within 0s: the drain"):
        wait_resyncs_sync(lambda: {"writes": 0, "resyncs_started": 0, "resyncs": 0}, 1, timeout=0.05,
                          interval=0.01, what="the drain")
    with pytest.raises(ValueError, match="counts no resync passes"):
        wait_resyncs_sync(WriteCounter())


def test_writes_are_counted_by_namespace_and_resource() -> None:
    c = WriteCounter()
    c.record("PATCH", "/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/mine/kubeadmcontrolplanes/k")
    c.record("PATCH", "/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/old/kubeadmcontrolplanes/k/status")
    c.record("DELETE", "/apis/controlplane.cluster.x-k8s.io/v1beta2/namespaces/mine/kubeadmcontrolplanes/k")
    assert c.by_namespace_resource[("mine", "PATCH", "kubeadmcontrolplanes")] == 1
    assert c.by_namespace_resource[("old", "PATCH", "kubeadmcontrolplanes")] == 1
    assert c.by_resource[("PATCH", "kubeadmcontrolplanes")] == 2
