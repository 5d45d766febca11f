"""The test tiers (tests/unit, tests/integration, tests/e2e): which tier a test is in, and what each tier cost.

- `mark_tiers`: gives every collected item under tests/ the marker of its tier folder (`unit`, `integration`,
  `e2e`), so `-m unit` selects every unit test even when a file forgets its `pytestmark`; a test outside the tier
  folders, or one marked with another tier's marker, is a problem to report (tests/conftest.py makes it a usage
  error).
- `order_by_tier`: tiers cheapest first; within a tier the units of work (`group_of`, or one test) longest
  first by the times recorded in earlier runs, for the pytest-xdist workers `make test` runs.
- `TierReport`: a pytest plugin (registered by tests/conftest.py, in the reporting process only) that records each
  test's phases and, at the end, prints per tier the number of tests, its wall-clock time (first setup start to
  last teardown end; with workers the tiers overlap where one worker is still in the tier before) and the
  summed durations, then the slowest tests (setup + call + teardown). With `--tier-report` it prints them; with env
  `CAPD_PY_TIER_REPORT=FILE` it also writes them to FILE as JSON; each passed test's time goes to the durations
  file the next run orders by. `aggregate` is the pure part. pytest finalizes the session-scoped fixtures (the
  envtest, the e2e management plane) in the teardown of a process's last test, whatever its tier: that phase is
  counted on its own (`session teardown`, one per worker), in no tier and no test.

No pytest import here: capd_py declares no dependency on it (hack/check_deps.py); the hooks take pytest's objects
as they come.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

TIERS = ("unit", "integration", "e2e")
PRINTED_CHARS = 4000  # the end of what an e2e test printed, kept in the JSON report ("printed")
OTHER = "other"  # a test run outside the tier folders (pytest on another path)
SLOWEST = 20
SESSION_TEARDOWN = "session teardown"  # the `when` of the last test's teardown, which ends every session fixture
DEFAULT_SECONDS = 1.0  # a test without a recorded time (new): ordered among the short ones
EXCLUSIVE = "host_exclusive"  # a test that runs alone on the host (capd_py/testing/host_lock.py)
EXCLUSIVE_GROUP = "host-exclusive"  # the one unit of every `host_exclusive` test
DOCKER_FREE = "docker_free"  # a test that touches no docker host: it runs beside `host_exclusive` ones


def tier_of(path: Path, tests_root: Path) -> str | None:
    """The tier of a test file by its folder: tests/<tier>/..., None outside them."""
    try:
        parts = path.relative_to(tests_root).parts
    except ValueError:
        return None
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def mark_tiers(items: Iterable[Any], tests_root: Path) -> list[str]:
    """Add to each pytest item under `tests_root` its tier's marker (an explicit one of the same tier stays as it
    is); items elsewhere are left alone. Returns the problems: an item under `tests_root` outside the tier folders,
    an item marked with another tier's marker."""
    problems = []
    for item in items:
        path = Path(item.path)
        if not path.is_relative_to(tests_root):
            continue
        tier = tier_of(path, tests_root)
        if tier is None:
            problems.append(f"{item.nodeid}: a test outside {', '.join(f'tests/{t}' for t in TIERS)}")
            continue
        others = [t for t in TIERS if t != tier and item.get_closest_marker(t) is not None]
        if others:
            problems.append(f"{item.nodeid}: in tests/{tier} but marked {', '.join(others)}")
        if item.get_closest_marker(tier) is None:
            item.add_marker(tier)
    return problems


# the fixture scopes a worker makes once per visit to the module (package) and ends when it moves on
MODULE_SCOPES = ("module", "package")


def group_of(item: Any) -> str | None:
    """The tests that must run in one worker, in order: every `host_exclusive` test (EXCLUSIVE_GROUP: one worker runs
    them one after the other, instead of a second worker waiting for the first's to end); the item's `xdist_group` name
    (its tests share a session fixture: one cluster); without one, its module when it uses a module-scoped fixture
    (an API server with webhooks, a management plane); None otherwise. pytest ends a module's fixtures when a worker
    moves to another module, so a module spread over workers and interleaved with others made its fixture again and
    again (measured 2026-12-06: upstream admission's 123 tests, 2.7 min alone, summed 15 min under four workers)."""
    if item.get_closest_marker(EXCLUSIVE) is not None:
        return EXCLUSIVE_GROUP
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    info = getattr(item, "_fixtureinfo", None)
    for defs in (getattr(info, "name2fixturedefs", None) or {}).values():
        if any(str(getattr(d, "scope", "")) in MODULE_SCOPES for d in defs):
            return f"module:{str(item.nodeid).split('::', 1)[0]}"
    return None


def unit_of(item: Any) -> str:
    """The unit of work one worker gets whole (tests/worker_units.py): the item's group, in its tests' own order,
    else the item alone."""
    group = group_of(item)
    return str(item.nodeid) if group is None else f"@{group}"


def order_by_tier(items: list[Any], tests_root: Path, durations: dict[str, float] | None = None) -> None:
    """Sort `items` in place: the `host_exclusive` unit first of all, then by tier, cheapest first (unit,
    integration, e2e; items outside the tiers last): a unit failure shows in a minute instead of after the e2e
    tier, and the e2e management plane (a session fixture) starts late, so it does not idle through the other tiers.

    The exclusive tests (a second dockerd, docker's address pools used up) hold the docker host alone for minutes:
    at the start they run beside the unit tier and the `docker_free` integration tests, which do not wait for the
    host, where later they held back the other e2e worker (measured 2026-12-06: 6 of the e2e tier's 26 minutes).
    So within the integration tier the `docker_free` units come before the ones that use docker.

    Within a tier, the units (`unit_of`) longest first by `durations` (node id -> seconds, a unit's the sum of its
    tests'; a test never timed counts as DEFAULT_SECONDS), each unit's tests together in their own order: two
    workers fed longest first end within about one short test of each other, where file order left one worker
    idle through the tier's last long test. Ties (and no durations) keep the collection order. A unit's tier is
    its first test's."""
    rank = {t: n for n, t in enumerate(TIERS)}
    durations = durations or {}
    unit = {id(item): unit_of(item) for item in items}  # group_of walks the fixtures: once per item
    first: dict[str, int] = {}
    total: dict[str, float] = {}
    tier: dict[str, int] = {}
    uses_docker: dict[str, bool] = {}
    for n, item in enumerate(items):
        u = unit[id(item)]
        first.setdefault(u, n)
        tier.setdefault(u, rank.get(tier_of(Path(item.path), tests_root) or "", len(TIERS)))
        total[u] = total.get(u, 0.0) + durations.get(base_nodeid(item.nodeid), DEFAULT_SECONDS)
        uses_docker[u] = uses_docker.get(u, False) or item.get_closest_marker(DOCKER_FREE) is None
    alone = f"@{EXCLUSIVE_GROUP}"
    position = {id(item): n for n, item in enumerate(items)}
    items.sort(key=lambda i: (unit[id(i)] != alone, tier[unit[id(i)]], uses_docker[unit[id(i)]],
                              -round(total[unit[id(i)]], 1), first[unit[id(i)]], position[id(i)]))


def base_nodeid(nodeid: str) -> str:
    """A node id without the `@group` pytest-xdist appends under --dist loadgroup."""
    head, sep, tail = nodeid.rpartition("@")
    return head if sep and "]" not in tail and "::" in head else nodeid


def merged_durations(old: dict[str, float], phases: Iterable[Phase]) -> dict[str, float]:
    """`old` updated with this run's time of each test that passed its three phases (setup + call + teardown; a
    worker's session teardown is not the test's)."""
    seconds: dict[str, float] = {}
    failed: set[str] = set()
    for p in phases:
        if p.when == SESSION_TEARDOWN:
            continue
        seconds[p.nodeid] = seconds.get(p.nodeid, 0.0) + p.duration
        if not p.passed:
            failed.add(p.nodeid)
    return {**old, **{base_nodeid(k): round(v, 2) for k, v in seconds.items() if k not in failed}}


@dataclass(frozen=True)
class Phase:
    """One phase (setup, call, teardown or SESSION_TEARDOWN) of one test, as pytest reported it; start/stop are
    epoch seconds."""
    nodeid: str
    tier: str
    when: str
    start: float
    stop: float
    duration: float
    worker: str = ""     # the pytest-xdist worker that ran it ("" in a run without workers)
    passed: bool = True


def aggregate(phases: Iterable[Phase], slowest: int = SLOWEST) -> dict[str, Any]:
    """Per tier (in the order the tiers started): tests, wall_s (first start to last stop of its phases), sum_s
    (their durations), start/stop; `all` the same over every test; `slowest` the `slowest` tests by the sum of
    their phases, slowest first (ties by node id); `timeline` every test's worker, start and stop, in the order they
    started (which lanes waited, and for what). A SESSION_TEARDOWN phase counts in `all` and as `session_teardown`
    only."""
    tests: dict[str, dict[str, Any]] = {}
    ends = []
    for p in phases:
        if p.when == SESSION_TEARDOWN:
            ends.append(p)
            continue
        t = tests.setdefault(p.nodeid, {"nodeid": p.nodeid, "tier": p.tier, "seconds": 0.0, "start": p.start,
                                        "stop": p.stop, "worker": p.worker})
        t["seconds"] += p.duration
        t[p.when] = t.get(p.when, 0.0) + p.duration
        t["start"], t["stop"] = min(t["start"], p.start), max(t["stop"], p.stop)

    def summary(group: Sequence[dict[str, Any]]) -> dict[str, Any]:
        start, stop = min(t["start"] for t in group), max(t["stop"] for t in group)
        return {"tests": len(group), "wall_s": round(stop - start, 3),
                "sum_s": round(sum(t["seconds"] for t in group), 3), "start": start, "stop": stop}

    by_tier: dict[str, list[dict[str, Any]]] = {}
    for t in tests.values():
        by_tier.setdefault(t["tier"], []).append(t)
    tiers = sorted(({"tier": tier, **summary(group)} for tier, group in by_tier.items()), key=lambda s: s["start"])
    ranked = sorted(tests.values(), key=lambda t: (-t["seconds"], t["nodeid"]))[:slowest]
    everything = [*tests.values(), *({"seconds": p.duration, "start": p.start, "stop": p.stop} for p in ends)]
    return {
        "tiers": tiers,
        "all": {**summary(everything), "tests": len(tests)} if everything else {"tests": 0, "wall_s": 0.0,
                                                                                "sum_s": 0.0},
        "session_teardown": [{"after": p.nodeid, "seconds": round(p.duration, 3), "start": p.start, "stop": p.stop}
                             for p in ends],
        "slowest": [{"nodeid": t["nodeid"], "tier": t["tier"], "seconds": round(t["seconds"], 3),
                     **{w: round(t.get(w, 0.0), 3) for w in ("setup", "call", "teardown")}} for t in ranked],
        "timeline": [{"nodeid": t["nodeid"], "tier": t["tier"], "worker": t["worker"], "start": t["start"],
                      "stop": t["stop"]} for t in sorted(tests.values(), key=lambda t: (t["start"], t["nodeid"]))],
    }


def _clock(seconds: float) -> str:
    m, s = divmod(seconds, 60)
    return f"{int(m)}m{s:04.1f}s" if m else f"{s:.1f}s" if s >= 10 else f"{s:.2f}s"


def format_report(report: dict[str, Any]) -> tuple[list[str], list[str]]:
    """The lines of the two sections: tier times, slowest tests."""
    rows: list[tuple[str, int | str, float, float]] = [
        (t["tier"], t["tests"], t["wall_s"], t["sum_s"]) for t in report["tiers"]]
    rows += [(SESSION_TEARDOWN, "", e["seconds"], e["seconds"]) for e in report["session_teardown"]]
    rows.append(("all", report["all"]["tests"], report["all"]["wall_s"], report["all"]["sum_s"]))
    tiers = [f"{'tier':<16} {'tests':>6} {'wall clock':>11} {'sum of durations':>17}"]
    tiers += [f"{name:<16} {n:>6} {_clock(wall):>11} {_clock(total):>17}" for name, n, wall, total in rows]
    slow = [f"{_clock(t['seconds']):>9}  {t['tier']:<11}  {t['nodeid']}" for t in report["slowest"]]
    return tiers, slow


def session_teardowns(phases: list[Phase], last: str | None) -> list[Phase]:
    """`phases` with the session teardown named: the teardown of the run's `last` test, or without workers' order
    known (pytest-xdist: each worker ends its own session fixtures), each worker's last teardown."""
    if last is not None:
        return [replace(p, when=SESSION_TEARDOWN) if p.when == "teardown" and p.nodeid == last else p
                for p in phases]
    ends: dict[str, Phase] = {}
    for p in phases:
        if p.when == "teardown" and p.worker and (p.worker not in ends or p.stop >= ends[p.worker].stop):
            ends[p.worker] = p
    ended = {id(p) for p in ends.values()}
    return [replace(p, when=SESSION_TEARDOWN) if id(p) in ended else p for p in phases]


class TierReport:
    """The plugin (in the process that reports: pytest's, or pytest-xdist's controller, never in a worker):
    `pytest_runtest_logreport` records the phases (the tier from the test's path), `pytest_terminal_summary` prints
    and writes the report, and each passed test's time to `durations_path` (the order of the next run,
    `order_by_tier`)."""

    def __init__(self, *, print_summary: bool, json_path: str | None, tests_root: Path, rootpath: Path,
                 durations_path: Path | None = None, slowest: int = SLOWEST) -> None:
        self.print_summary = print_summary
        self.json_path = json_path
        self.tests_root = tests_root
        self.rootpath = rootpath
        self.durations_path = durations_path
        self.slowest = slowest
        self.phases: list[Phase] = []
        self.last: str | None = None
        # what each passing e2e test printed (its step timings: "3 CP + 1 worker: Available after 95s", ...), so the
        # report says where an e2e test's time went without running it again
        self.printed: dict[str, str] = {}

    def pytest_collection_finish(self, session: Any) -> None:
        # without workers this process runs the items in this order; with them it collects none
        self.last = session.items[-1].nodeid if session.items else None

    def tier(self, nodeid: str) -> str:
        return tier_of(self.rootpath / nodeid.split("::", 1)[0], self.tests_root) or OTHER

    def pytest_runtest_logreport(self, report: Any) -> None:
        tier = self.tier(report.nodeid)
        self.phases.append(Phase(base_nodeid(report.nodeid), tier, report.when, report.start,
                                 report.stop, report.duration, str(getattr(report, "worker_id", "") or ""),
                                 not report.failed))
        out = str(getattr(report, "capstdout", "") or "")
        if tier == "e2e" and report.when == "call" and out.strip():
            self.printed[base_nodeid(report.nodeid)] = out[-PRINTED_CHARS:]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.phases:
            return
        phases = session_teardowns(self.phases, self.last)
        if self.durations_path is not None:
            write_durations(self.durations_path, merged_durations(read_durations(self.durations_path), phases))
        if not (self.print_summary or self.json_path):
            return
        report = {**aggregate(phases, self.slowest), "printed": dict(sorted(self.printed.items()))}
        if self.json_path:
            Path(self.json_path).write_text(json.dumps(report, indent=2) + "\n")
        if self.print_summary:
            tiers, slow = format_report(report)
            terminalreporter.write_sep("=", "tier times")
            for line in tiers:
                terminalreporter.write_line(line)
            terminalreporter.write_sep("=", f"{len(slow)} slowest tests (setup + call + teardown)")
            for line in slow:
                terminalreporter.write_line(line)
            if self.json_path:
                terminalreporter.write_line(f"(as JSON in {self.json_path})")


def read_durations(path: Path) -> dict[str, float]:
    """The recorded test times (node id -> seconds); {} when there are none or the file is unreadable (the order
    is then the collection order: only the time depends on it)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) \
        else {}


def write_durations(path: Path, durations: dict[str, float]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dict(sorted(durations.items())), indent=0) + "\n")
    tmp.replace(path)
