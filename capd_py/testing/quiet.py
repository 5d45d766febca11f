"""Waiting for "nothing changes" without fixed sleeps: the controllers count their API writes and reconciles
(`Manager.writes`, `Manager.activity()`; `capd-py controllers` keeps them in the file `CAPD_PY_ACTIVITY_FILE`
names), and a test waits until no write happened for a window of seconds.

- `wait_quiet(source, window, timeout)` (async) / `wait_quiet_sync` (blocking, the e2e tier): returns once the
  source saw no write for `window` seconds; past `timeout` fails with the writes seen meanwhile.
- `quiet_window_sync`: `wait_quiet_sync` that returns the quiet window too (`Quiet`: when it began, how long,
  the resync passes begun in it).
- `wait_resyncs_sync(source, n, timeout)`: returns once `n` resync passes begun after the call are complete, writes
  or not: every object reconciled again since (a state that must hold through a reconcile, while other objects in
  the namespace still change).
- `quiet_versions(source, versions, window, timeout)` (async) / `quiet_versions_sync`: the same, and the
  snapshot `versions()` (resourceVersions, generations, ...) taken at the start of the quiet window and again
  at its end, for the test to compare: writes no counter sees (another client's) still show.

A source is a Manager (in-process), a `WriteCounter`, the path of an activity file, or a callable returning
an activity dict (`{"writes": n, "reconciles": n, "recent": [...], "by_namespace": {ns: n}, "resyncs_started": n,
"resyncs": n}`). With `namespace=`, only writes to objects of that namespace count: a test's own objects, not what
earlier tests left behind in the same API server (their namespaces terminating, say) and this process's controllers
still handle.

With `resyncs=N` the quiet window lasts, beyond its `window` seconds, until N of the Manager's resync passes that
began inside it are complete (`Manager.activity()`): every object of every controller reconciled N times,
level-triggered, with no write. That is what "wait two resync periods and see nothing change" stood for, without
sleeping through the periods. `resyncs_after=D`: only passes that began at least D seconds into the window count
(the reconciles must come after, say, a health check's timeout ran out; the activity file is rewritten each second,
so allow one second more).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from capd_py.controllers.manager import Manager
from capd_py.kube.client import WriteCounter

Source = Manager | WriteCounter | Path | Callable[[], dict[str, Any]]
T = TypeVar("T")


def activity(source: Source) -> dict[str, Any]:
    """What `source` counted so far: writes, reconciles (when known) and the newest writes."""
    if isinstance(source, Manager):
        return source.activity()
    if isinstance(source, WriteCounter):
        return {"writes": source.total, "recent": list(source.recent), "by_namespace": dict(source.by_namespace)}
    if isinstance(source, Path):
        try:
            return dict(json.loads(source.read_text()))
        except FileNotFoundError:  # the process has not reported yet: nothing counted
            return {"writes": 0, "recent": []}
    return source()


class _Watch:
    """The state of one wait: when the write count last moved, and how many writes were seen."""

    def __init__(self, source: Source, window: float, timeout: float, what: str, namespace: str | None = None,
                 resyncs: int = 0, resyncs_after: float = 0.0):
        self.source, self.window, self.timeout, self.what = source, window, timeout, what
        self.namespace, self.resyncs, self.resyncs_after = namespace, resyncs, resyncs_after
        self.t0 = self.changed = time.monotonic()
        a = activity(source)
        if resyncs and "resyncs_started" not in a:
            raise ValueError(f"resyncs={resyncs}: the source counts no resync passes ({sorted(a)})")
        self.start = self.count = self._writes(a)
        self.recent: list[str] = []
        # the passes started when the window (re)started: those after it count (None: not known yet, resyncs_after)
        self.mark: int | None = None
        self._mark(a, self.t0)
        self.done = int(a.get("resyncs", 0))
        self.started = self.started_at_change = int(a.get("resyncs_started", 0))

    def _mark(self, a: dict[str, Any], now: float) -> None:
        if self.mark is None and now - self.changed >= self.resyncs_after:
            self.mark = int(a.get("resyncs_started", 0))

    def _writes(self, a: dict[str, Any]) -> int:
        if self.namespace is None:
            return int(a["writes"])
        return int((a.get("by_namespace") or {}).get(self.namespace, 0))

    def poll(self) -> bool:
        """True once quiet for the window (a write seen restarts it); raises past the timeout."""
        a = activity(self.source)
        now = time.monotonic()
        n = self._writes(a)
        self.started = int(a.get("resyncs_started", 0))
        if n != self.count:
            self.count, self.changed, self.mark, self.started_at_change = n, now, None, self.started
            mine = f"/namespaces/{self.namespace}/"
            # "METHOD PATH BODY...": the namespace is the path's (a body may name others)
            self.recent = [w for w in a.get("recent") or []
                           if self.namespace is None or mine in (w.split(" ", 2) + [""])[1]]
        self._mark(a, now)
        self.done = int(a.get("resyncs", 0))
        if now - self.changed >= self.window and self.passes_left() == 0:
            return True
        if now - self.t0 > self.timeout:
            passes = f", {self.passes_left()} of {self.resyncs} resync passes to go" if self.resyncs else ""
            raise AssertionError(
                f"not quiet for {self.window:.0f}s within {self.timeout:.0f}s{': ' + self.what if self.what else ''}; "
                f"{self.count - self.start} writes meanwhile{passes}, the newest: {self.recent[-10:]}")
        return False

    def passes_left(self) -> int:
        """Resync passes of the current window still to complete."""
        if not self.resyncs:
            return 0
        if self.mark is None:
            return self.resyncs
        return max(0, self.mark + self.resyncs - self.done)

    def restarted(self, mark: int) -> bool:
        return self.count != mark


async def wait_quiet(source: Source, window: float = 20.0, timeout: float = 120.0, what: str = "",
                     interval: float = 0.2, namespace: str | None = None, resyncs: int = 0,
                     resyncs_after: float = 0.0) -> int:
    """Return (the writes seen meanwhile) once `source` saw no write for `window` seconds (and `resyncs` passes)."""
    w = _Watch(source, window, timeout, what, namespace, resyncs, resyncs_after)
    while not w.poll():
        await asyncio.sleep(interval)
    return w.count - w.start


def wait_quiet_sync(source: Source, window: float = 20.0, timeout: float = 300.0, what: str = "",
                    interval: float = 1.0, namespace: str | None = None, resyncs: int = 0,
                    resyncs_after: float = 0.0) -> int:
    """`wait_quiet` for blocking code (the e2e tier)."""
    return quiet_window_sync(source, window, timeout, what, interval, namespace, resyncs, resyncs_after).writes


@dataclass(frozen=True)
class Quiet:
    """What a wait for quiet saw: the writes before the quiet window, and the window itself."""
    writes: int       # seen meanwhile, before the window
    began: float      # time.monotonic() the window began (the poll that saw the last write, or the wait's start)
    seconds: float    # its length
    resyncs: int      # resync passes begun in it


def quiet_window_sync(source: Source, window: float = 20.0, timeout: float = 300.0, what: str = "",
                      interval: float = 1.0, namespace: str | None = None, resyncs: int = 0,
                      resyncs_after: float = 0.0) -> Quiet:
    """`wait_quiet_sync`, returning the quiet window too (to judge what happened in it: log lines, say)."""
    w = _Watch(source, window, timeout, what, namespace, resyncs, resyncs_after)
    while not w.poll():
        time.sleep(interval)
    return Quiet(w.count - w.start, w.changed, time.monotonic() - w.changed, w.started - w.started_at_change)


def wait_resyncs_sync(source: Source, n: int = 1, timeout: float = 300.0, what: str = "",
                      interval: float = 0.5) -> int:
    """Return (the passes completed meanwhile) once `n` resync passes begun after this call are complete."""
    a = activity(source)
    if "resyncs_started" not in a:
        raise ValueError(f"the source counts no resync passes ({sorted(a)})")
    t0, mark, done0 = time.monotonic(), int(a["resyncs_started"]), int(a["resyncs"])
    while (done := int(activity(source)["resyncs"])) < mark + n:
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"{mark + n - done} of {n} resync passes not complete within {timeout:.0f}s"
                                 f"{': ' + what if what else ''}")
        time.sleep(interval)
    return done - done0


async def quiet_versions(source: Source, versions: Callable[[], Awaitable[T]], window: float = 20.0,
                         timeout: float = 120.0, what: str = "", interval: float = 0.2,
                         namespace: str | None = None, resyncs: int = 0, resyncs_after: float = 0.0
                         ) -> tuple[T, T]:
    """(`versions()` at the start of a window of `window` seconds without writes, `versions()` at its end).
    A write restarts the window and the snapshot is taken again (after it: writes count once answered)."""
    w = _Watch(source, window, timeout, what, namespace, resyncs, resyncs_after)
    mark, before = w.count, await versions()
    while not w.poll():
        if w.restarted(mark):
            mark, before = w.count, await versions()
        await asyncio.sleep(interval)
    return before, await versions()


def quiet_versions_sync(source: Source, versions: Callable[[], T], window: float = 20.0, timeout: float = 300.0,
                        what: str = "", interval: float = 1.0, namespace: str | None = None, resyncs: int = 0,
                        resyncs_after: float = 0.0) -> tuple[T, T]:
    """`quiet_versions` for blocking code (the e2e tier)."""
    w = _Watch(source, window, timeout, what, namespace, resyncs, resyncs_after)
    mark, before = w.count, versions()
    while not w.poll():
        if w.restarted(mark):
            mark, before = w.count, versions()
        time.sleep(interval)
    return before, versions()
