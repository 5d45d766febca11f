"""The write/reconcile counter (Kube.counter, Manager.writes / activity) and the waits for quiet on it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from capd_py.api.gvk import MACHINE
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.mappers import Controller
from capd_py.kube.client import Kube, WriteCounter
from capd_py.kube.workload import WorkloadClients
from capd_py.testing.quiet import activity, quiet_versions, wait_quiet, wait_quiet_sync

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
    assert k.counter.recent[0].endswith("/namespaces/ns/machines/m")


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
        assert got["recent"] == [f"PATCH {MACHINE.path('ns', 'm', 'status')}"]
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
