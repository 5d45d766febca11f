"""The whole controllers process, in-process, for integration tests: kopf watch events in, objects out.

The operator runs on an event loop of its own, in a thread, as in its own process: kopf cancels every task
created on its loop after it started, which would include the test's own teardown.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

from capd_py.api.gvk import LEASE
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.operator import run
from capd_py.controllers.queue import awaiting
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.crds import install_crds
from capd_py.kube.workload import WorkloadClients
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadEtcd, FakeWorkloads


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 60, what: str = "",
                     state: Callable[[], Awaitable[Any]] | None = None) -> None:
    """Poll `check` until it holds; past `timeout`, fail naming `what` (and `state()` when given)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {timeout:.0f}s: {what}; {await state() if state else ''}")
        await asyncio.sleep(0.3)


async def take_lease(kube: Kube, namespace: str, name: str, holder: str) -> None:
    """Another process takes a Lease the way a client does: read, change, write, and read again when the
    leader's renewal wrote in between (a renewal every fraction of a second races one read-modify-write)."""
    for _ in range(10):
        lease = await kube.get(LEASE, namespace, name)
        assert lease is not None, f"no Lease {namespace}/{name}"
        lease["spec"]["holderIdentity"] = holder
        try:
            await kube.replace(LEASE, lease)
            return
        except KubeError as e:
            if not e.conflict:
                raise
    raise AssertionError(f"Lease {namespace}/{name} not taken in 10 tries: every write raced a renewal")


def _stacks(loop: asyncio.AbstractEventLoop | None) -> str:
    """Every thread's stack and the operator loop's pending tasks: what a stop that hangs is waiting for
    (an intermittent teardown hang seen under load; this says where it is next time)."""
    names = {th.ident: th.name for th in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"--- thread {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame)[-8:])}")
    if loop is not None:
        try:
            tasks = list(asyncio.all_tasks(loop))
        except RuntimeError:  # the set changed while we looked
            tasks = []
        out += [f"--- task {task.get_name()}: {' <- '.join(reversed(awaiting(task))) or task!r}"
                for task in tasks[:60]]
    return "\n".join(out)


@asynccontextmanager
async def operator_in_thread(kubeconfig: str, runtime: Any, workload: WorkloadClients | None = None,
                             on_manager: Callable[[Manager], object] | None = None) -> AsyncIterator[Manager]:
    """Start the operator (runtime and workload clients as given; `on_manager` may swap services on the
    Manager's context before it starts), wait until its cache is primed, yield its Manager; stop it after."""
    holder: dict[str, Any] = {}
    started = threading.Event()

    def seen(m: Manager) -> None:
        if on_manager:
            on_manager(m)
        holder.setdefault("m", m)

    async def main() -> None:
        holder["loop"], holder["stop"] = asyncio.get_running_loop(), asyncio.Event()
        started.set()
        await run(kubeconfig, runtime=runtime, stop=holder["stop"], workload=workload, on_manager=seen)

    def thread_main() -> None:
        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - reported to the test below
            holder["error"] = e

    t = threading.Thread(target=thread_main, name="operator", daemon=True)
    t.start()
    try:
        started.wait(10)

        async def up() -> bool:
            if "error" in holder:
                raise holder["error"]
            m = holder.get("m")
            return m is not None and all(m.store.serves(g) for g in m.watched())
        await eventually(up, 30, "operator started and its cache primed")
        yield holder["m"]
    finally:
        if "loop" in holder:
            holder["loop"].call_soon_threadsafe(holder["stop"].set)
        await asyncio.to_thread(t.join, 60)
        assert not t.is_alive(), f"the operator did not stop within 60 s; where it is:\n{_stacks(holder.get('loop'))}"
        assert "error" not in holder, holder.get("error")


class NoWorkloads(WorkloadClients):
    """Workload clusters with no API server behind them (fake containers, a pretend provider's machines)."""

    async def get(self, namespace: str, cluster: str) -> Kube | None:
        return None


class SameAPIWorkloads(WorkloadClients):
    """Every Cluster's workload API server is `workload` (the envtest API server itself)."""

    def __init__(self, management: Kube, workload: Kube):
        super().__init__(management)
        self.wl = workload

    async def get(self, namespace: str, cluster: str) -> Kube | None:
        return self.wl


Workloads = Literal["fake", "none", "envtest", "real"]


@dataclass
class Operator:
    """A running in-process controllers process: its Manager (`manager.writes`, `manager.activity()`: what
    capd_py/testing/quiet.py waits on) and its fake container runtime."""

    manager: Manager
    runtime: FakeRuntime


@asynccontextmanager
async def in_process_operator(envtest: EnvTest, workloads: Workloads = "fake",
                              crds: list[dict[str, Any]] | None = None) -> AsyncIterator[Operator]:
    """The operator fixture of the integration tier: every controller in-process (`operator_in_thread`) against
    `envtest`, over a fresh FakeRuntime, once its cache is primed; stopped after. `crds` (a provider's) are
    installed first. The workload clusters:
    - "fake": fake workload clusters and their etcd over the runtime (a Node for every bootstrapped node
      container, capd_py/testing/fake_workload.py);
    - "none": no API server behind any Cluster (`NoWorkloads`);
    - "envtest": the envtest API server is every Cluster's workload cluster (`SameAPIWorkloads`);
    - "real": what `capd-py controllers` runs (`WorkloadClients`: a kubeconfig's API server, or the in-memory
      workload cluster of a DevCluster with the inMemory backend)."""
    runtime = FakeRuntime()
    kube, wl = envtest.kube(), envtest.kube()
    try:
        if crds:
            await install_crds(kube, crds=crds)
        workload: WorkloadClients | None = {"none": NoWorkloads(kube), "envtest": SameAPIWorkloads(kube, wl),
                                            "fake": None, "real": None}[workloads]

        def on_manager(m: Manager) -> None:
            if workloads == "fake":
                fakes = FakeWorkloads(m.ctx.kube, runtime)
                m.ctx.workload = fakes
                m.ctx.etcd = FakeWorkloadEtcd(fakes)
        async with operator_in_thread(str(envtest.kubeconfig_path), runtime, workload=workload,
                                      on_manager=on_manager) as m:
            yield Operator(m, runtime)
    finally:
        wl.close()
        kube.close()


def direct_ctx(kube: Kube) -> Ctx:
    """A context for driving reconcile functions directly against a real API server: the fake container runtime,
    the API server as every workload cluster (WorkloadClients over `kube`), short polls."""
    s = Settings()
    s.poll_seconds = 0.1
    return Ctx(kube=kube, runtime=FakeRuntime(), settings=s, workload=WorkloadClients(kube))
