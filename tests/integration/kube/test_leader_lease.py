"""Leader election against a real kube-apiserver: two electors, one leads, the other takes over when the
first stops renewing (or at once when it releases the Lease)."""

from __future__ import annotations

import asyncio
import time

import pytest

from capd_py.api.gvk import LEASE
from capd_py.kube.client import Kube
from capd_py.kube.leader import Config, LeaderElector, Record
from capd_py.testing.inprocess import take_lease

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

# short durations keep the test quick; the ratios are controller-runtime's (15 / 10 / 2)
FAST = {"lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.4}


def cfg(namespace: str, identity: str) -> Config:
    return Config(namespace=namespace, identity=identity, name="test-lease", **FAST)


async def holder(kube: Kube, namespace: str) -> Record:
    lease = await kube.get(LEASE, namespace, "test-lease")
    assert lease is not None
    return Record.of(lease)


async def within(event: asyncio.Event, timeout: float) -> float:
    t0 = time.monotonic()
    await asyncio.wait_for(event.wait(), timeout)
    return time.monotonic() - t0


async def test_one_leads_the_other_takes_over_when_it_stops_renewing(kube: Kube, namespace: str) -> None:
    a, b = LeaderElector(kube, cfg(namespace, "a")), LeaderElector(kube, cfg(namespace, "b"))
    ta = asyncio.create_task(a.run())
    await within(a.leading, 5)
    tb = asyncio.create_task(b.run())
    try:
        await asyncio.sleep(2 * FAST["lease_duration"])  # a renews all along: b never gets it
        assert a.leading.is_set() and not b.leading.is_set() and not a.lost.is_set()
        rec = await holder(kube, namespace)
        assert rec.holder == "a" and rec.transitions == 0 and rec.lease_duration_seconds == 3

        ta.cancel()  # a dies without releasing
        took = await within(b.leading, 10)
        # b waits for the lease to expire on its own clock (3 s after a's last renewal it saw), not longer
        # than that plus a retry period or two
        assert FAST["lease_duration"] - 1.0 <= took <= FAST["lease_duration"] + 3 * FAST["retry_period"] + 1.0, took
        rec = await holder(kube, namespace)
        assert rec.holder == "b" and rec.transitions == 1
    finally:
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)


async def test_release_hands_over_at_once(kube: Kube, namespace: str) -> None:
    a, b = LeaderElector(kube, cfg(namespace, "a")), LeaderElector(kube, cfg(namespace, "b"))
    await a.acquire()
    tb = asyncio.create_task(b.acquire())
    try:
        await asyncio.sleep(1.0)
        assert not b.leading.is_set()
        await a.release()
        took = await within(b.leading, 5)
        assert took < 2 * FAST["retry_period"] + 1.5, took
        assert (await holder(kube, namespace)).holder == "b"
    finally:
        tb.cancel()
        await asyncio.gather(tb, return_exceptions=True)


async def test_a_leader_whose_lease_was_taken_stops_at_once(kube: Kube, namespace: str) -> None:
    a = LeaderElector(kube, cfg(namespace, "a"))
    ta = asyncio.create_task(a.run())
    try:
        await within(a.leading, 5)
        await take_lease(kube, namespace, "test-lease", "intruder")
        await within(a.lost, 3 * FAST["retry_period"] + 1.0)  # its next renewal sees someone else's lease
        assert not a.leading.is_set()
        await asyncio.wait_for(ta, 1)  # run() returns
        await a.release()  # not ours any more: left alone
        assert (await holder(kube, namespace)).holder == "intruder"
    finally:
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
