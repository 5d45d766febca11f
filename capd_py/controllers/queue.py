"""A deduplicating, per-key serialised work queue (the controller-runtime model, in asyncio).

A key is (kind, namespace, name). Adding a key that is queued keeps the earliest due time; adding a
key that is being reconciled marks it dirty so it runs once more afterwards. Failures back off
exponentially per key; success resets the backoff.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from capd_py.kube.client import KubeError
from capd_py.runtime.protocol import RuntimeError_

Key = tuple[str, str, str]
log = logging.getLogger("capd_py.queue")
# what a reconcile may meet from the outside (the API server's refusals, a docker daemon's errors, the network):
# logged as one line with its cause (issue 42 item 5: "never a traceback"); any other exception is a bug and keeps its
# traceback. Both back off the same way.
# (OSError covers TimeoutError and the socket errors)
OPERATIONAL_ERRORS: tuple[type[BaseException], ...] = (KubeError, RuntimeError_, aiohttp.ClientError, OSError)
# How long `stop` waits for the workers in all, and how often it repeats the cancellation meanwhile.
STOP_SECONDS = 10.0
STOP_RECANCEL_SECONDS = 1.0


# how soon an event may run a key whose last reconcile reported a failure (its backoff applies without events)
EVENT_HOLD = 5.0


@dataclass
class Result:
    requeue_after: float | None = None
    # the reconcile ended on an error it reported (a condition) instead of raising: backed off exponentially, and
    # an event meanwhile (its own status write, objects it touched) runs it again no sooner than EVENT_HOLD
    failed: bool = False


class WorkQueue:
    def __init__(self, handler: Callable[[Key], Awaitable[Result | None]], workers: int = 16,
                 base_backoff: float = 1.0, max_backoff: float = 60.0):
        self._handler = handler
        self._workers = workers
        self._heap: list[tuple[float, int, Key]] = []
        self._due: dict[Key, float] = {}
        self._active: set[Key] = set()
        self._dirty: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._held: dict[Key, float] = {}  # a key that reported a failure: no event runs it before this (monotonic)
        self._seq = 0
        self._cond = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self._base, self._max = base_backoff, max_backoff
        self.processed = 0
        self._wake_pending = False

    def add(self, key: Key, after: float = 0.0) -> None:
        # a key whose reconcile reported a failure is held: an event (often its own last write's) brings it forward
        # to the end of the hold at the soonest
        due = max(time.monotonic() + max(0.0, after), self._held.get(key, 0.0))
        if key in self._active and after <= 0:
            self._dirty.add(key)
            return
        if key in self._due and self._due[key] <= due:
            return
        self._due[key] = due
        self._seq += 1
        heapq.heappush(self._heap, (due, self._seq, key))
        if not self._wake_pending:  # one wake-up task per burst of adds, not one per add
            self._wake_pending = True
            asyncio.get_running_loop().call_soon(self._notify)

    def _notify(self) -> None:
        async def _n() -> None:
            self._wake_pending = False
            async with self._cond:
                self._cond.notify_all()
        asyncio.ensure_future(_n())

    def __len__(self) -> int:
        return len(self._due)

    def start(self) -> None:
        for i in range(self._workers):
            self._tasks.append(asyncio.create_task(self._worker(), name=f"capd-py-worker-{i}"))

    async def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Cancel every worker and wait for them, at most `timeout` seconds. A worker whose reconcile
        swallowed its cancellation (library code catching CancelledError) is cancelled again each
        `STOP_RECANCEL_SECONDS`; one still running after `timeout` is logged with its stack and left."""
        tasks, self._tasks = self._tasks, []
        deadline = time.monotonic() + timeout
        pending = {t for t in tasks if not t.done()}
        while pending:
            for t in pending:
                t.cancel()
            left = deadline - time.monotonic()
            if left <= 0:
                for t in pending:
                    log.error("work queue worker %s did not stop within %.1f s; awaiting: %s", t.get_name(),
                              timeout, " <- ".join(reversed(awaiting(t))))
                return
            _, pending = await asyncio.wait(pending, timeout=min(STOP_RECANCEL_SECONDS, left))
        for t in tasks:  # retrieve the outcomes: no "exception was never retrieved" at collection
            if not t.cancelled() and t.exception() is not None:
                log.error("work queue worker %s ended with %r", t.get_name(), t.exception())

    async def _next(self) -> Key:
        while True:
            async with self._cond:
                now = time.monotonic()
                while self._heap:
                    due, _, key = self._heap[0]
                    if self._due.get(key) != due:  # superseded entry
                        heapq.heappop(self._heap)
                        continue
                    if key in self._active:  # finish the running one first; it is marked dirty
                        heapq.heappop(self._heap)
                        self._due.pop(key, None)
                        self._dirty.add(key)
                        continue
                    if due <= now:
                        heapq.heappop(self._heap)
                        self._due.pop(key, None)
                        self._active.add(key)
                        return key
                    break
                timeout = (self._heap[0][0] - now) if self._heap else None
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the inner result when the
                # inner wait finished just as this task was cancelled, swallowing the cancellation; a worker
                # woken by an add at the moment `stop` cancelled it then waited on forever, and so did stop.
                try:
                    async with asyncio.timeout(timeout):
                        await self._cond.wait()
                except TimeoutError:
                    pass

    async def _worker(self) -> None:
        while True:
            key = await self._next()
            requeue: float | None = None
            backoff: float | None = None
            try:
                res = await self._handler(key)
                if res is not None and res.failed:
                    backoff = self._backoff(key)
                    log.info("reconcile %s/%s/%s reported a failure (attempt %d, again in %.3gs)", *key,
                             self._failures[key], backoff)
                else:
                    self._failures.pop(key, None)
                    self._held.pop(key, None)
                    requeue = res.requeue_after if res else None
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - one key's failure must not stop the worker
                n = self._failures.get(key, 0) + 1
                self._failures[key] = n
                requeue = min(self._max, self._base * 2 ** (n - 1))
                if isinstance(e, OPERATIONAL_ERRORS):  # the API server or docker said no: the cause, not a traceback
                    log.error("reconcile %s/%s/%s failed (attempt %d, retry in %.3gs): %s: %s", *key, n, requeue,
                              type(e).__name__, e)
                else:  # anything else is capd-py's bug: where it happened matters
                    log.exception("reconcile %s/%s/%s failed (attempt %d, retry in %.3gs)", *key, n, requeue)
            finally:
                self.processed += 1
                self._active.discard(key)
            if backoff is not None:  # a reported failure: after its backoff, or after the hold if an event came
                dirty = key in self._dirty
                self._dirty.discard(key)
                self.add(key, after=0.0 if dirty else backoff)
            elif key in self._dirty:
                self._dirty.discard(key)
                self.add(key)
            elif requeue is not None:
                self.add(key, after=requeue)

    def _backoff(self, key: Key) -> float:
        n = self._failures.get(key, 0) + 1
        self._failures[key] = n
        wait = min(self._max, self._base * 2 ** (n - 1))
        # events may bring it back sooner than the backoff, but not sooner than EVENT_HOLD: a user's fix is seen
        # within seconds, a pass that triggers itself (its status write, its objects) runs once per EVENT_HOLD
        self._held[key] = time.monotonic() + min(wait, EVENT_HOLD)
        return wait


def awaiting(task: asyncio.Task[Any]) -> list[str]:
    """Where a suspended task is, outermost first: the chain of coroutines each awaits (a task's own
    `get_stack` shows only its outermost frame)."""
    out: list[str] = []
    coro: Any = task.get_coro()
    while coro is not None and len(out) < 30:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            out.append(f"{frame.f_code.co_qualname} ({frame.f_code.co_filename}:{frame.f_lineno})")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out
