"""Builds that `make test` runs beside lint, the other builds and pytest instead of before pytest, and the tests
that wait for them.

cert-manager (~300 CPU-s cold) is needed by one test only, upstream's quick-start spec; upstream's e2e suite with
clusterctl v1.14 in its module (~310 CPU-s cold) by that spec and the three tests that render upstream v1.14's
templates. Built before pytest they lengthened a cold run by their whole time (the builds are CPU-bound), while the
e2e tier leaves 20-45 % of the two cores idle (measured 2026-12-07, vmstat over warm and cold runs); built beside
pytest at the lowest CPU weight (a session of its own whose autogroup is niced to 19: hack/late-build.sh says why
plain `nice` was not enough) they take that idle time instead of the tests' (docs/ENVIRONMENT.md "Session 28",
"Session 30"). They start with `make test` itself, before lint and the CPU-bound builds, where they get little but
the idle seconds of downloads and disk waits, and so are done sooner in the tests (docs/ENVIRONMENT.md "Session 31").
A warm run finds them cached within seconds.

A test that needs one is marked `@pytest.mark.late_build("<name>")`. tests/worker_units.py gives the next free worker
the first unit in the queue whose late builds are `ready`, so such a test runs as soon as its build is done and a
worker is free (at its place in the queue when the build is cached), and the `wait` fixture holds it only when
nothing else is left. The files, in `$CAPD_PY_CACHE/late-builds/`: `<name>.pid` (the build's process, written before
pytest starts), `<name>.log`, and `<name>.rc` (its exit status, written when it ends).
"""

from __future__ import annotations

import time
from pathlib import Path

from capd_py.runtime.hostprocesses import pid_alive
from capd_py.testing.envtest import cache_dir

MARKER = "late_build"
LOG_TAIL = 4000


class LateBuildFailed(Exception):
    """A late build ended with an error, or its process went away without a status: says which and its log's tail."""


def late_dir() -> Path:
    return cache_dir() / "late-builds"


def _pid(name: str) -> int | None:
    try:
        return int((late_dir() / f"{name}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def ready(name: str) -> bool:
    """True once `name` has nothing left to run: its build ended (any status: a failure is the test's to report) or
    none was started (pytest run by hand; the test then finds what the cache holds)."""
    if (late_dir() / f"{name}.rc").is_file():
        return True
    pid = _pid(name)
    return pid is None or not pid_alive(pid)


def _tail(name: str) -> str:
    try:
        return (late_dir() / f"{name}.log").read_text(errors="replace")[-LOG_TAIL:]
    except OSError:
        return "(no log)"


def wait(name: str, timeout: float, poll: float = 2.0) -> None:
    """Block until `name`'s build has ended; raise LateBuildFailed if it failed, vanished or outlived `timeout`."""
    deadline = time.monotonic() + timeout
    while not ready(name):
        if time.monotonic() > deadline:
            raise LateBuildFailed(f"the late build {name} is still running after {timeout:.0f} s "
                                  f"({late_dir() / f'{name}.log'}):\n{_tail(name)}")
        time.sleep(poll)
    rc_file = late_dir() / f"{name}.rc"
    if not rc_file.is_file():
        if _pid(name) is None:
            return  # none started here
        raise LateBuildFailed(f"the late build {name} (pid {_pid(name)}) ended without an exit status:\n{_tail(name)}")
    rc = rc_file.read_text().strip()
    if rc != "0":
        raise LateBuildFailed(f"the late build {name} failed (exit status {rc}):\n{_tail(name)}")
