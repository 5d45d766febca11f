"""How `make test`'s pytest-xdist workers get their tests: whole units, one test ahead, in the collection order.

Our own scheduler (`--dist loadgroup` selects it), for two reasons measured on 2026-12-06:
- xdist's loadgroup names a test's group by appending `@group` to the node id inside the worker; pytest 9.2 made
  the node id a read-only view (`Node._id`), so the suffix is lost without a word and the tests of one group spread
  over both workers: both made their own `e2e-quick` cluster (one name, two management planes, one docker host) and
  four of its users failed on the other's certificates.
- xdist keeps up to three tests queued on a worker, so one worker could hold the tier's last long tests while the
  other went idle.

A test marked `late_build` (capd_py/testing/late_builds.py: it needs a build `make test` runs beside the tests) is
passed over while that build runs: a free worker gets the first unit in the queue whose late builds are ready, so the
test runs once its build is done, at its own place in the queue when the build was cached.

Workers write each collected test's group (capd_py.testing.tiers.group_of: its `xdist_group` marker, which
tests/conftest.py gives the users of a shared cluster, or its module when it uses a module-scoped fixture) to a file
of the run; the controller reads it once collection is complete. A group is one unit,
sent to one worker whole, in its collection order; a worker gets its next unit when it has one test left besides
the one it runs (xdist starts a test once the next is known). The queue keeps the collection order, which
tests/conftest.py made cheapest tier first and, within a tier, longest unit first. `make test` runs 4 workers for
the waiting-bound unit and integration tiers and lets 2 of them (CAPD_PY_E2E_WORKERS) go on into the e2e tier.

Tried and measured (2026-12-06, warm whole runs on this 2-core machine): two workers taking the e2e tier from the start
of the run, beside the other tiers, instead of after them. The run took 37.6 min instead of 36.2: the e2e tier's
summed durations grew from 61 to 68 min and the integration tier's from 28 to 35, and two integration tests with
time bounds failed. The run is CPU-bound: overlapping the tiers only slows both, so they keep this order and the
suite gets faster only by doing less work.

Tried too (2026-12-07): three workers in the e2e tier (CAPD_PY_E2E_WORKERS=3) once the other tiers are done. The e2e
phase's CPU went from ~82 % to 95-99 % busy, but each test ran ~40 % longer (the tier's summed durations 87.7 min
against 61.9): the run took 35.5 min against 36.6, and a snapshot restore missed its 35 s target (issue 31). Two
stay.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler.loadscope import LoadScopeScheduling

from capd_py.testing import late_builds
from capd_py.testing.host_lock import lock_dir
from capd_py.testing.tiers import group_of, tier_of

# e2e tests at a time: two real clusters' nodes keep 2 cores busy (measured: two workers left the CPU 0-30 % idle in
# the e2e tier and 60-70 % idle in the integration tier, which more workers speed up)
E2E_WORKERS_ENV = "CAPD_PY_E2E_WORKERS"


def groups_file(run: str) -> Path:
    return lock_dir() / f"capd-py-tests-groups-{run}.json"


class UnitScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with our units (`@group` or the test itself), one test queued ahead, and e2e tests on
    at most E2E_WORKERS workers: once the queue reaches the e2e tier, a worker beyond those is shut down (it ends
    the test it has and exits) instead of taking e2e tests, so they run in the queue's order (longest first)."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        self._groups: dict[str, str] | None = None
        self._late: dict[str, list[str]] = {}  # node id -> the late builds it needs
        self._built: set[str] = set()  # late builds seen ready (they stay so)
        self._e2e_workers: set[Any] = set()
        self._e2e_max = int(os.environ.get(E2E_WORKERS_ENV, "2"))
        self._tests_root = config.rootpath / "tests"

    def _is_e2e(self, nodeid: str) -> bool:
        return tier_of(self.config.rootpath / nodeid.split("::", 1)[0], self._tests_root) == "e2e"

    def _read_groups(self) -> dict[str, str]:
        runs = {n.workerinput["testrunuid"] for n in self.registered_collections}
        groups: dict[str, str] = {}
        for run in runs:
            try:
                written = json.loads(groups_file(run).read_text())
                groups.update(written["groups"])
                self._late.update(written["late"])
            except (OSError, ValueError, KeyError, TypeError) as e:  # written before the worker said it collected
                raise RuntimeError(f"the workers' test groups are unreadable: {e}") from e
            groups_file(run).unlink(missing_ok=True)
        return groups

    def _ready(self, scope: str) -> bool:
        """Whether every late build the unit's tests need is done (or none was started)."""
        for nodeid in self.workqueue[scope]:
            for name in self._late.get(nodeid, ()):
                if name not in self._built:
                    if not late_builds.ready(name):
                        return False
                    self._built.add(name)
        return True

    def _next_scope(self) -> str:
        """The first unit in the queue whose late builds are ready; the first of all when none is (its test then
        waits for its build: nothing else is left to run)."""
        return next((scope for scope in self.workqueue if self._ready(scope)), next(iter(self.workqueue)))

    def _assign_work_unit(self, node: Any) -> None:
        self.workqueue.move_to_end(self._next_scope(), last=False)
        super()._assign_work_unit(node)

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            self._groups = self._read_groups()
        group = self._groups.get(nodeid)
        return f"@{group}" if group else nodeid

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        head = self.workqueue[self._next_scope()]  # the next unit (the host-exclusive one spans tiers)
        if any(self._is_e2e(nodeid) for nodeid in head) and node not in self._e2e_workers:
            if len(self._e2e_workers) >= self._e2e_max:
                node.shutdown()
                return
            self._e2e_workers.add(node)
        self._assign_work_unit(node)


# the plugin's hooks (tests/conftest.py registers this module; `-p worker_units` does too): the scheduler in the
# controller, the groups file in workers


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    if config.getvalue("dist") != "loadgroup":
        return None
    # the queue keeps the collection order; xdist would put the units with the most tests first (the quick cluster's
    # seven users ahead of the unit tier)
    config.option.loadscopereorder = False
    return UnitScheduling(config, log)


@pytest.hookimpl(trylast=True)  # after the markers are given and `-m` deselected
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    groups = {item.nodeid: g for item in items if (g := group_of(item)) is not None}
    late = {item.nodeid: [str(a) for m in item.iter_markers(late_builds.MARKER) for a in m.args] for item in items
            if item.get_closest_marker(late_builds.MARKER) is not None}
    path = groups_file(workerinput["testrunuid"])
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps({"groups": groups, "late": late}))
    tmp.replace(path)
