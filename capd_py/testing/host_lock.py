"""One docker host, several test processes: a readers-writer lock across processes (`make test` runs the
suite in pytest-xdist workers).

Most tests only add objects of their own to the host (clusters, networks and containers named for them) and run side
by side under the shared side of the lock. A test that changes or depends on the host as a whole (uses up docker's
address pools, starts a second dockerd with its own bridges and DOCKER-USER rules) is marked `host_exclusive` and
takes the exclusive side: it starts once the running tests are done, and no test that uses docker starts beside it
(a `docker_free` test takes no side at all: tests/conftest.py). Writers are preferred (a turnstile that readers pass
through and a waiting writer holds), so a stream of short tests on other workers cannot starve an exclusive one.
`flock(2)` locks die with their process: a killed run leaves nothing held.

`once_per_run` runs a step (the sweep of an earlier run's e2e leftovers) in the first process of a run that asks, not
in the others: the second worker's management plane must not remove the first worker's live clusters.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

# pytest-xdist names the run in every worker's environment; a plain pytest run is its own process
RUN_ID_ENV = "PYTEST_XDIST_TESTRUNUID"


def lock_dir() -> Path:
    """Where the lock files live: one per host (tests of two checkouts share the docker host too)."""
    return Path(tempfile.gettempdir())


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[int]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, mode)
        yield fd
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def host_share(exclusive: bool, where: Path | None = None) -> Iterator[None]:
    """Hold the host lock for a test: shared (beside other tests) or exclusive (alone)."""
    d = where or lock_dir()
    turnstile, lock = d / "capd-py-tests-host.turnstile", d / "capd-py-tests-host.lock"
    if exclusive:
        with _flock(turnstile, fcntl.LOCK_EX), _flock(lock, fcntl.LOCK_EX):
            yield
        return
    with _flock(turnstile, fcntl.LOCK_EX):  # passed at once unless a writer waits in it
        pass
    with _flock(lock, fcntl.LOCK_SH):
        yield


def run_id() -> str:
    return os.environ.get(RUN_ID_ENV) or f"pid-{os.getpid()}"


def once_per_run(name: str, step: Callable[[], T], where: Path | None = None) -> T | None:
    """`step()` if no process of this run did it yet (its result), else None. The record is a file holding the
    run's id; a later run has another id, so it runs the step again."""
    record = (where or lock_dir()) / f"capd-py-tests-{name}.done"
    with _flock(record.with_suffix(".lock"), fcntl.LOCK_EX):
        me = run_id()
        if record.exists() and record.read_text() == me:
            return None
        result = step()
        record.write_text(me)
        return result
