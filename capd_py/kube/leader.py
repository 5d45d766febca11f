"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's `leaderelection` package does it
(what controller-runtime's managers use): one replica of the controllers reconciles, the others wait.

- A candidate acquires the Lease when it does not exist, names nobody, or its holder has not renewed it for
  `leaseDurationSeconds` as measured on the candidate's own clock since it last saw the record change
  (never by comparing timestamps written by another machine: clocks may be skewed).
- The leader renews every `retry_period`; when no renewal succeeds within `renew_deadline` it has lost the
  lease and must stop at once (the lease may be taken `lease_duration` after its last renewal, and
  `renew_deadline` < `lease_duration` leaves the margin).
- A leader that stops cleanly releases the Lease (holder "", duration 1 s) so another takes over at once.

Writes are optimistic (`resourceVersion`): of two candidates writing the same expired record, one gets a
409 and stays a follower. The decision part (`Observation`, `next_spec`) is pure; `LeaderElector` does the
I/O.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capd_py.api.gvk import LEASE
from capd_py.kube.client import Kube, KubeError

log = logging.getLogger("capd_py.leader")

# client-go / controller-runtime defaults
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER = 1.2   # client-go's JitterFactor: followers retry after retry_period * [1, 1 + JITTER)
DEFAULT_LEASE_NAME = "capd-py-controllers"


@dataclass(frozen=True)
class Config:
    namespace: str
    identity: str
    name: str = DEFAULT_LEASE_NAME
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period * JITTER > 0:
            raise ValueError("leader election needs lease_duration > renew_deadline > retry_period * 1.2 > 0")


@dataclass(frozen=True)
class Record:
    """A Lease's spec (coordination.k8s.io/v1 field names)."""
    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def of(cls, lease: dict[str, Any]) -> Record:
        s = lease.get("spec") or {}
        return cls(holder=s.get("holderIdentity") or "", lease_duration_seconds=int(s.get("leaseDurationSeconds") or 0),
                   acquire_time=s.get("acquireTime"), renew_time=s.get("renewTime"),
                   transitions=int(s.get("leaseTransitions") or 0))

    def spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.transitions}


@dataclass(frozen=True)
class Observation:
    """The last record seen and when (monotonic seconds, this process's clock) it was first seen."""
    record: Record
    at: float

    def update(self, record: Record, now: float) -> Observation:
        return self if record == self.record else Observation(record, now)

    def held_by_other(self, identity: str, now: float) -> bool:
        """Someone else holds a lease that has not expired by our clock."""
        r = self.record
        return bool(r.holder) and r.holder != identity and now < self.at + r.lease_duration_seconds


def micro_time(t: dt.datetime) -> str:
    """A metav1.MicroTime."""
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def next_spec(current: Record | None, obs: Observation | None, cfg: Config, now: float,
              wall: dt.datetime) -> Record | None:
    """The record to write for `cfg.identity` to hold (acquire or renew) the lease, or None while another
    holder's lease is valid. `current`: the Lease's record (None: no Lease yet)."""
    duration = max(1, round(cfg.lease_duration))
    stamp = micro_time(wall)
    if current is None:
        return Record(cfg.identity, duration, stamp, stamp, 0)
    if obs is not None and obs.held_by_other(cfg.identity, now):
        return None
    if current.holder == cfg.identity:
        return Record(cfg.identity, duration, current.acquire_time or stamp, stamp, current.transitions)
    return Record(cfg.identity, duration, stamp, stamp, current.transitions + 1)


def released(current: Record, wall: dt.datetime) -> Record:
    """What a leader writes when it stops cleanly (client-go's ReleaseOnCancel)."""
    stamp = micro_time(wall)
    return Record("", 1, stamp, stamp, current.transitions)


class LeaderElector:
    """Campaign for the Lease; `leading` is set while this process holds it, `lost` once it lost it.

    `run()` returns only when leadership is lost (after calling `on_lost`) or when cancelled; a follower
    keeps trying forever."""

    def __init__(self, kube: Kube, cfg: Config, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)):
        self.kube = kube
        self.cfg = cfg
        self._clock = clock
        self._wall = wall
        self._obs: Observation | None = None
        self._lease: dict[str, Any] | None = None   # the Lease as last read or written
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()

    @property
    def holder(self) -> str:
        return self._obs.record.holder if self._obs else ""

    async def try_acquire_or_renew(self) -> bool:
        cfg = self.cfg
        timeout = max(1.0, cfg.renew_deadline / 2)  # one hung request must not eat the whole renew deadline
        lease = await self._get(timeout)
        now = self._clock()
        current = Record.of(lease) if lease is not None else None
        if current is not None:
            self._obs = self._obs.update(current, now) if self._obs else Observation(current, now)
        want = next_spec(current, self._obs, cfg, now, self._wall())
        if want is None:
            return False
        try:
            if lease is None:
                body = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                        "metadata": {"name": cfg.name, "namespace": cfg.namespace}, "spec": want.spec()}
                written = await self.kube.acall("POST", LEASE.path(cfg.namespace), body, timeout=timeout)
            else:
                body = {**lease, "spec": want.spec()}
                written = await self.kube.acall("PUT", LEASE.path(cfg.namespace, cfg.name), body, timeout=timeout)
        except KubeError as e:
            if e.conflict:
                return False  # another candidate wrote first
            raise
        self._lease = written
        self._obs = Observation(want, self._clock())
        return True

    async def _get(self, timeout: float) -> dict[str, Any] | None:
        try:
            return dict(await self.kube.acall("GET", LEASE.path(self.cfg.namespace, self.cfg.name), timeout=timeout))
        except KubeError as e:
            if e.not_found:
                return None
            raise

    async def _attempt(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except Exception as e:  # noqa: BLE001 - API errors and timeouts are retried until a deadline
            log.warning("leader election: lease %s/%s: %s: %s", self.cfg.namespace, self.cfg.name,
                        e.__class__.__name__, e)
            return False

    async def acquire(self) -> None:
        """Return once this process holds the lease."""
        cfg = self.cfg
        logged = False
        while not await self._attempt():
            if not logged and self.holder:
                log.info("leader election: %s waits; lease %s/%s is held by %s", cfg.identity, cfg.namespace,
                         cfg.name, self.holder)
                logged = True
            await asyncio.sleep(cfg.retry_period * (1 + random.random() * (JITTER - 1)))
        log.info("leader election: %s acquired lease %s/%s", cfg.identity, cfg.namespace, cfg.name)
        self.leading.set()

    async def renew_until_lost(self) -> None:
        """Renew every retry period; return when no renewal succeeded within the renew deadline."""
        cfg = self.cfg
        last_ok = self._clock()
        while True:
            await asyncio.sleep(cfg.retry_period)
            if await self._attempt():
                last_ok = self._clock()
            elif self._clock() - last_ok >= cfg.renew_deadline or (self.holder and self.holder != cfg.identity):
                break
        self.leading.clear()
        self.lost.set()
        log.error("leader election: %s lost lease %s/%s (holder now %r)", cfg.identity, cfg.namespace, cfg.name,
                  self.holder)

    async def run(self) -> None:
        await self.acquire()
        await self.renew_until_lost()

    async def release(self) -> None:
        """Give the lease up (only if we still hold it), so another replica takes over without waiting."""
        if not self.leading.is_set() or self._lease is None:
            return
        self.leading.clear()
        try:
            lease = await self._get(5.0)
            if lease is None or Record.of(lease).holder != self.cfg.identity:
                return
            body = {**lease, "spec": released(Record.of(lease), self._wall()).spec()}
            await self.kube.acall("PUT", LEASE.path(self.cfg.namespace, self.cfg.name), body, timeout=5.0)
            log.info("leader election: %s released lease %s/%s", self.cfg.identity, self.cfg.namespace, self.cfg.name)
        except Exception as e:  # noqa: BLE001 - best effort: the lease expires by itself
            log.warning("leader election: releasing lease %s/%s: %s", self.cfg.namespace, self.cfg.name, e)
