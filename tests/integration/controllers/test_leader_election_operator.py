"""Two controllers processes with leader election against a real kube-apiserver (each operator in its own
thread with its own fake container runtime, so whoever acted is visible): only the leader reconciles; when
it stops, the other takes over; a leader whose Lease is taken stops at once and reports it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypedDict

import pytest

from capd_py.api.gvk import LEASE
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.controllers.operator import LeadershipLost, run
from capd_py.kube.client import Kube
from capd_py.kube.leader import Config
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import NoWorkloads, eventually, take_lease

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


class Timing(TypedDict):
    """Config's timing fields, so `Config(..., **FAST)` is checked field by field."""
    lease_duration: float
    renew_deadline: float
    retry_period: float


# client-go's ratios, 2.5x faster than its defaults (15/10/2 s). Faster still (3/2/0.4 s, one request allowed 1 s) was
# measured too tight for the shared envtest under the whole suite's load: in a warm `make test` (2026-12-08) two
# renewals of the leader timed out at 1 s each, it lost its lease as it should (no renewal within the deadline) and
# the test, which needs one leader throughout its first minute, failed.
FAST: Timing = {"lease_duration": 6.0, "renew_deadline": 4.0, "retry_period": 0.8}


class Replica:
    """One controllers process: its runtime, how many reconciles it ran, how it ended."""

    def __init__(self, name: str):
        self.name = name
        self.runtime = FakeRuntime()
        self.reconciles = 0
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None

    def count(self, m: Manager) -> None:
        handle = m._handle

        async def counted(key: Any) -> Any:
            self.reconciles += 1
            return await handle(key)
        m.queue._handler = counted

    def halt(self) -> None:
        if self.loop is not None and self.stop is not None and not self.done.is_set():
            try:
                self.loop.call_soon_threadsafe(self.stop.set)
            except RuntimeError:  # its loop closed in between: it has stopped already
                pass


@asynccontextmanager
async def replica(kubeconfig: str, kube: Kube, namespace: str, name: str) -> AsyncIterator[Replica]:
    r = Replica(name)
    cfg = Config(namespace=namespace, identity=name, **FAST)

    async def main() -> None:
        r.loop, r.stop = asyncio.get_running_loop(), asyncio.Event()
        await run(kubeconfig, runtime=r.runtime, stop=r.stop, workload=NoWorkloads(kube), on_manager=r.count,
                  leader_election=cfg)

    def thread_main() -> None:
        try:
            asyncio.run(main())
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            r.error = e
        finally:
            r.done.set()

    t = threading.Thread(target=thread_main, name=f"operator-{name}", daemon=True)
    t.start()
    try:
        yield r
    finally:
        r.halt()
        await asyncio.to_thread(t.join, 60)
        assert not t.is_alive(), f"replica {name} did not stop"


async def lease_holder(kube: Kube, namespace: str) -> str:
    lease = await kube.get(LEASE, namespace, "capd-py-controllers")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


async def test_only_the_leader_reconciles_and_the_other_takes_over(envtest: EnvTest, kube: Kube,
                                                                   namespace: str) -> None:
    kc = str(envtest.kubeconfig_path)
    async with replica(kc, kube, namespace, "a") as a:
        async def a_leads() -> bool:
            return await lease_holder(kube, namespace) == "a"
        await eventually(a_leads, 20, "replica a holds the lease")
        async with replica(kc, kube, namespace, "b") as b:
            docs = parse_documents(generate_cluster("le", namespace=namespace, control_plane_machine_count=1,
                                                    worker_machine_count=0, env={}))
            assert all(o.ok for o in await apply_objects(kube, docs))

            async def a_built() -> bool:
                return bool(a.runtime.networks) and any(n.endswith("-lb") for n in a.runtime.containers)
            await eventually(a_built, 60, "the leader made the cluster's network and load balancer")
            await asyncio.sleep(2 * FAST["lease_duration"])
            assert b.reconciles == 0 and not b.runtime.networks and not b.runtime.containers
            assert a.reconciles > 0

            a.halt()  # a clean stop releases the lease
            await asyncio.to_thread(a.done.wait, 30)
            assert a.error is None, a.error

            async def b_took_over() -> bool:
                return (await lease_holder(kube, namespace) == "b" and b.reconciles > 0
                        and any(n.endswith("-lb") for n in b.runtime.containers))
            await eventually(b_took_over, 20, "replica b leads and reconciles")


async def test_a_leader_that_loses_its_lease_stops(envtest: EnvTest, kube: Kube, namespace: str) -> None:
    async with replica(str(envtest.kubeconfig_path), kube, namespace, "a") as a:
        async def a_leads() -> bool:
            return await lease_holder(kube, namespace) == "a"
        await eventually(a_leads, 20, "replica a holds the lease")
        await asyncio.sleep(1)
        await take_lease(kube, namespace, "capd-py-controllers", "someone-else")
        assert await asyncio.to_thread(a.done.wait, 15), "the replica kept running without its lease"
        assert isinstance(a.error, LeadershipLost), a.error
        assert await lease_holder(kube, namespace) == "someone-else"  # not released: it was not ours
