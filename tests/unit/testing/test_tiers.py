"""capd_py/testing/tiers.py: the tier of a test by its folder, and the tier report `make test` prints."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from capd_py.testing.tiers import (
    OTHER,
    SESSION_TEARDOWN,
    Phase,
    TierReport,
    aggregate,
    base_nodeid,
    format_report,
    group_of,
    merged_durations,
    order_by_tier,
    read_durations,
    tier_of,
    write_durations,
)

pytestmark = pytest.mark.unit

ROOT = Path("/r/tests")


@pytest.mark.parametrize(("path", "tier"), [
    ("unit/test_a.py", "unit"), ("unit/reconcile/kcp/test_b.py", "unit"), ("integration/test_c.py", "integration"),
    ("e2e/test_d.py", "e2e"), ("test_top.py", None), ("fixtures/test_e.py", None), ("unit", None),
    ("/elsewhere/unit/test_f.py", None), ("unitx/test_g.py", None),
])
def test_tier_of_is_the_first_folder_under_tests(path: str, tier: str | None) -> None:
    assert tier_of(ROOT / path, ROOT) == tier


def _phases(nodeid: str, tier: str, start: float, setup: float, call: float, teardown: float) -> list[Phase]:
    out, t = [], start
    for when, d in (("setup", setup), ("call", call), ("teardown", teardown)):
        out.append(Phase(nodeid, tier, when, t, t + d, d))
        t += d
    return out


def test_aggregate_times_each_tier_from_first_start_to_last_stop_and_sums_durations() -> None:
    phases = [*_phases("e/a", "e2e", 100.0, 30.0, 10.0, 5.0),      # 100 -> 145
              *_phases("e/b", "e2e", 150.0, 0.0, 20.0, 0.0),       # 150 -> 170: a gap (collection, a fixture) counts
              *_phases("i/c", "integration", 170.0, 1.0, 2.0, 0.5),  # 170 -> 173.5
              *_phases("u/d", "unit", 173.5, 0.0, 0.25, 0.0),
              *_phases("u/e", "unit", 173.75, 0.0, 0.25, 0.0)]       # -> 174
    r = aggregate(phases)
    assert [(t["tier"], t["tests"], t["wall_s"], t["sum_s"]) for t in r["tiers"]] == [
        ("e2e", 2, 70.0, 65.0), ("integration", 1, 3.5, 3.5), ("unit", 2, 0.5, 0.5)]
    assert (r["all"]["tests"], r["all"]["wall_s"], r["all"]["sum_s"]) == (5, 74.0, 69.0)
    assert [(s["nodeid"], s["seconds"]) for s in r["slowest"]] == [
        ("e/a", 45.0), ("e/b", 20.0), ("i/c", 3.5), ("u/d", 0.25), ("u/e", 0.25)]
    assert r["slowest"][0] == {"nodeid": "e/a", "tier": "e2e", "seconds": 45.0, "setup": 30.0, "call": 10.0,
                                     "teardown": 5.0}


def test_aggregate_orders_tiers_by_when_they_started_and_keeps_the_n_slowest() -> None:
    phases = [p for i in range(30) for p in _phases(f"u/{i:02}", "unit", 10.0 + i, 0.0, i / 10, 0.0)]
    phases = _phases("i/x", "integration", 0.0, 0.0, 1.0, 0.0) + phases
    r = aggregate(phases, slowest=3)
    assert [t["tier"] for t in r["tiers"]] == ["integration", "unit"]
    assert [s["nodeid"] for s in r["slowest"]] == ["u/29", "u/28", "u/27"]
    assert len(aggregate(phases)["slowest"]) == 20


def test_a_test_skipped_at_setup_counts_with_its_one_phase() -> None:
    r = aggregate([Phase("u/s", "unit", "setup", 5.0, 5.0, 0.0), *_phases("u/t", "unit", 5.0, 0.0, 1.0, 0.0)])
    assert (r["tiers"][0]["tests"], r["tiers"][0]["wall_s"]) == (2, 1.0)
    assert r["slowest"][1] == {"nodeid": "u/s", "tier": "unit", "seconds": 0.0, "setup": 0.0, "call": 0.0,
                               "teardown": 0.0}


def test_nothing_run_is_an_empty_report() -> None:
    assert aggregate([]) == {"tiers": [], "all": {"tests": 0, "wall_s": 0.0, "sum_s": 0.0}, "session_teardown": [],
                             "slowest": [], "timeline": []}


def test_the_timeline_says_which_worker_ran_each_test_when_in_the_order_they_started() -> None:
    phases = [*_phases("e/a", "e2e", 3.0, 5.0, 5.0, 0.0), *_phases("u/b", "unit", 1.0, 0.0, 1.0, 0.0)]
    phases = [replace(p, worker="gw1" if p.nodeid == "e/a" else "gw0") for p in phases]
    assert aggregate(phases)["timeline"] == [
        {"nodeid": "u/b", "tier": "unit", "worker": "gw0", "start": 1.0, "stop": 2.0},
        {"nodeid": "e/a", "tier": "e2e", "worker": "gw1", "start": 3.0, "stop": 13.0}]


def test_the_session_teardown_counts_in_all_but_in_no_tier_and_no_test() -> None:
    """pytest ends the session fixtures (the e2e management plane, the envtest) in the last test's teardown: 40 s
    that are neither that unit test's nor its tier's."""
    phases = [*_phases("e/a", "e2e", 0.0, 5.0, 5.0, 0.0), *_phases("u/b", "unit", 10.0, 0.0, 1.0, 0.0)]
    phases.append(Phase("u/b", "unit", SESSION_TEARDOWN, 11.0, 51.0, 40.0))
    r = aggregate(phases)
    assert [(t["tier"], t["tests"], t["wall_s"], t["sum_s"]) for t in r["tiers"]] == [
        ("e2e", 1, 10.0, 10.0), ("unit", 1, 1.0, 1.0)]
    assert (r["all"]["tests"], r["all"]["wall_s"], r["all"]["sum_s"]) == (2, 51.0, 51.0)
    assert r["session_teardown"] == [{"after": "u/b", "seconds": 40.0, "start": 11.0, "stop": 51.0}]
    assert [(s["nodeid"], s["seconds"], s["teardown"]) for s in r["slowest"]] == [("e/a", 10.0, 0.0),
                                                                                 ("u/b", 1.0, 0.0)]
    assert format_report(r)[0][-2:] == ["session teardown              40.0s             40.0s",
                                        "all                   2       51.0s             51.0s"]


def test_format_report_lines() -> None:
    tiers, slow = format_report(aggregate(_phases("tests/e2e/test_x.py::test_y", "e2e", 0.0, 60.0, 65.5, 0.0)))
    assert tiers == ["tier              tests  wall clock  sum of durations",
                     "e2e                   1     2m05.5s           2m05.5s",
                     "all                   1     2m05.5s           2m05.5s"]
    assert slow == ["  2m05.5s  e2e          tests/e2e/test_x.py::test_y"]


@dataclass
class _Item:
    nodeid: str


@dataclass
class _Report:
    nodeid: str
    when: str
    start: float
    stop: float
    worker_id: str = ""
    failed: bool = False
    capstdout: str = ""

    @property
    def duration(self) -> float:
        return self.stop - self.start


@dataclass
class _Terminal:
    lines: list[str] = field(default_factory=list)

    def write_sep(self, sep: str, title: str) -> None:
        self.lines.append(f"== {title}")

    def write_line(self, line: str) -> None:
        self.lines.append(line)


A, B, C = "tests/integration/test_a.py::a", "tests/unit/test_b.py::b", "elsewhere/test_c.py::c"


class _Session:
    items = [_Item(A), _Item(B), _Item(C)]


def _plugin(tmp_path: Path, *, print_summary: bool, json_path: str | None) -> TierReport:
    return TierReport(print_summary=print_summary, json_path=json_path, tests_root=Path("/r/tests"),
                      rootpath=Path("/r"), durations_path=tmp_path / "durations.json")


def _run(plugin: TierReport, terminal: _Terminal) -> None:
    plugin.pytest_collection_finish(_Session())
    for r in [_Report(A, "setup", 0.0, 1.0), _Report(A, "call", 1.0, 3.0), _Report(A, "teardown", 3.0, 3.0),
              _Report(B, "setup", 3.0, 3.0), _Report(B, "call", 3.0, 3.5), _Report(C, "call", 3.5, 4.0),
              _Report(C, "teardown", 4.0, 9.0)]:
        plugin.pytest_runtest_logreport(r)
    plugin.pytest_terminal_summary(terminal)


def test_the_plugin_prints_and_writes_json_with_the_tier_from_the_tests_path(tmp_path: Path) -> None:
    out = tmp_path / "tiers.json"
    terminal = _Terminal()
    _run(_plugin(tmp_path, print_summary=True, json_path=str(out)), terminal)
    report: dict[str, Any] = json.loads(out.read_text())
    assert [(t["tier"], t["tests"], t["wall_s"]) for t in report["tiers"]] == [
        ("integration", 1, 3.0), ("unit", 1, 0.5), (OTHER, 1, 0.5)]
    assert [s["nodeid"] for s in report["slowest"]] == [A, C, B]  # ties by node id
    assert report["session_teardown"] == [{"after": C, "seconds": 5.0, "start": 4.0, "stop": 9.0}]
    assert report["all"] | {"start": 0, "stop": 0} == {"tests": 3, "wall_s": 9.0, "sum_s": 9.0, "start": 0, "stop": 0}
    assert terminal.lines[0] == "== tier times" and "== 3 slowest tests (setup + call + teardown)" in terminal.lines
    assert terminal.lines[-1] == f"(as JSON in {out})"
    # each test's time is kept for the next run's order; the session teardown is not the last test's
    assert read_durations(tmp_path / "durations.json") == {A: 3.0, B: 0.5, C: 0.5}


def test_the_plugin_is_quiet_unless_asked(tmp_path: Path) -> None:
    terminal = _Terminal()
    _run(_plugin(tmp_path, print_summary=False, json_path=None), terminal)
    assert terminal.lines == []
    _run(_plugin(tmp_path, print_summary=False, json_path=str(tmp_path / "r.json")), terminal)
    assert terminal.lines == [] and (tmp_path / "r.json").exists()


def test_with_workers_each_workers_last_teardown_is_its_session_teardown(tmp_path: Path) -> None:
    """pytest-xdist's controller collects nothing (no order known): each worker ends its own session fixtures in
    its last test's teardown. Group suffixes (`@group`) are not part of a test's name."""
    plugin = _plugin(tmp_path, print_summary=False, json_path=str(tmp_path / "r.json"))
    plugin.pytest_collection_finish(type("S", (), {"items": []})())
    e1, e2 = "tests/e2e/test_x.py::one@e2e-quick", "tests/e2e/test_x.py::two"
    for r in [_Report(A, "call", 0.0, 2.0, "gw0"), _Report(A, "teardown", 2.0, 2.5, "gw0"),
              _Report(e1, "call", 0.0, 4.0, "gw1"), _Report(e1, "teardown", 4.0, 14.0, "gw1"),
              _Report(e2, "call", 2.5, 3.0, "gw0", failed=True), _Report(e2, "teardown", 3.0, 9.0, "gw0")]:
        plugin.pytest_runtest_logreport(r)
    plugin.pytest_terminal_summary(_Terminal())
    report = json.loads((tmp_path / "r.json").read_text())
    assert sorted((e["after"], e["seconds"]) for e in report["session_teardown"]) == [
        ("tests/e2e/test_x.py::one", 10.0), ("tests/e2e/test_x.py::two", 6.0)]
    assert [(t["tier"], t["tests"]) for t in report["tiers"]] == [("integration", 1), ("e2e", 2)]
    # a failed test's time is not recorded (a failure's time says little about the next run's)
    assert read_durations(tmp_path / "durations.json") == {A: 2.5, "tests/e2e/test_x.py::one": 4.0}


@pytest.mark.parametrize(("nodeid", "base"), [
    ("tests/e2e/t.py::x@e2e-quick", "tests/e2e/t.py::x"), ("tests/e2e/t.py::x[a@b]", "tests/e2e/t.py::x[a@b]"),
    ("tests/e2e/t.py::x[a@b]@g", "tests/e2e/t.py::x[a@b]"), ("tests/e2e/t.py::x", "tests/e2e/t.py::x"),
])
def test_base_nodeid_drops_the_group_xdist_appends(nodeid: str, base: str) -> None:
    assert base_nodeid(nodeid) == base


def test_durations_merge_and_a_bad_file_reads_as_none(tmp_path: Path) -> None:
    p = tmp_path / "d.json"
    assert read_durations(p) == {}
    p.write_text("{not json")
    assert read_durations(p) == {}
    write_durations(p, merged_durations({"old": 1.0, "x": 9.0}, _phases("x", "unit", 0.0, 0.5, 1.0, 0.25)))
    assert read_durations(p) == {"old": 1.0, "x": 1.75}


@dataclass
class _OrderItem:
    path: Path
    name: str = ""
    group: str | None = None
    exclusive: bool = False
    docker_free: bool = False

    @property
    def nodeid(self) -> str:
        return f"{self.path.relative_to(Path('/r'))}::{self.name}" if self.name else str(self.path)

    def get_closest_marker(self, name: str) -> Any:
        if name == "host_exclusive" and self.exclusive:
            return pytest.mark.host_exclusive.mark
        if name == "docker_free" and self.docker_free:
            return pytest.mark.docker_free.mark
        return pytest.mark.xdist_group(self.group).mark if name == "xdist_group" and self.group else None


def test_order_by_tier_runs_the_cheap_tiers_first_and_keeps_each_tiers_order() -> None:
    root = Path("/r/tests")
    names = ["e2e/test_b.py", "unit/test_z.py", "integration/test_i.py", "e2e/test_a.py", "unit/test_a.py"]
    items: list[Any] = [_OrderItem(root / n) for n in names]
    items.append(_OrderItem(Path("/elsewhere/test_x.py")))
    order_by_tier(items, root)
    assert [str(i.path) for i in items] == [
        "/r/tests/unit/test_z.py", "/r/tests/unit/test_a.py", "/r/tests/integration/test_i.py",
        "/r/tests/e2e/test_b.py", "/r/tests/e2e/test_a.py", "/elsewhere/test_x.py"]


def test_order_by_tier_puts_each_tiers_longest_units_first_and_keeps_a_group_together_in_its_order() -> None:
    """Two workers fed longest first end together; a group (tests sharing a cluster) is one unit, its time the sum
    of its tests', its tests in their collection order; a test never timed counts as short."""
    root = Path("/r/tests")
    e2e, unit = root / "e2e" / "test_e.py", root / "unit" / "test_u.py"
    items: list[Any] = [_OrderItem(e2e, "short"), _OrderItem(e2e, "q1", "quick"), _OrderItem(unit, "u1"),
                        _OrderItem(e2e, "long"), _OrderItem(e2e, "new"), _OrderItem(e2e, "q2", "quick"),
                        _OrderItem(unit, "u2")]
    durations = {f"tests/e2e/test_e.py::{n}": s for n, s in (("short", 30.0), ("q1", 100.0), ("long", 200.0),
                                                             ("q2", 150.0))}
    durations["tests/unit/test_u.py::u2"] = 0.5
    order_by_tier(items, root, durations)
    assert [i.name for i in items] == ["u1", "u2", "q1", "q2", "long", "short", "new"]


def test_order_by_tier_puts_the_host_exclusive_tests_first_of_all_as_one_unit() -> None:
    """The exclusive tests run first, one after the other in one worker, beside the unit tier and the docker-free
    integration tests (which do not wait for the host); the integration tests that use docker come after those."""
    root = Path("/r/tests")
    e2e, integration, unit = root / "e2e" / "test_e.py", root / "integration" / "test_i.py", root / "unit" / "test_u.py"
    items: list[Any] = [_OrderItem(e2e, "long"), _OrderItem(e2e, "alone", exclusive=True),
                        _OrderItem(integration, "docker"), _OrderItem(integration, "free", docker_free=True),
                        _OrderItem(e2e, "short"), _OrderItem(integration, "alone-too", exclusive=True),
                        _OrderItem(unit, "u")]
    order_by_tier(items, root, {"tests/e2e/test_e.py::long": 300.0, "tests/e2e/test_e.py::alone": 60.0,
                                "tests/integration/test_i.py::docker": 100.0})
    assert [i.name for i in items] == ["alone", "alone-too", "u", "free", "docker", "long", "short"]
    assert {group_of(i) for i in items[:2]} == {"host-exclusive"}


@dataclass
class _FixtureDef:
    scope: str


@dataclass
class _FixtureInfo:
    name2fixturedefs: dict[str, list[_FixtureDef]]


@dataclass
class _FixtureItem(_OrderItem):
    fixtures: dict[str, str] = field(default_factory=dict)

    @property
    def _fixtureinfo(self) -> _FixtureInfo:
        return _FixtureInfo({n: [_FixtureDef(s)] for n, s in self.fixtures.items()})


def test_group_of_keeps_a_modules_users_of_a_module_fixture_together() -> None:
    root = Path("/r/tests")
    mod = root / "integration" / "test_m.py"
    assert group_of(_FixtureItem(mod, "t[1]", fixtures={"envtest": "module", "kube": "session"})) \
        == "module:tests/integration/test_m.py"
    assert group_of(_FixtureItem(mod, "t", fixtures={"kube": "session", "tmp_path": "function"})) is None
    # an xdist_group (a shared cluster) wins
    assert group_of(_FixtureItem(mod, "t", group="quick", fixtures={"envtest": "module"})) == "quick"


def test_the_json_keeps_what_each_e2e_test_printed(tmp_path: Path) -> None:
    """The e2e tests print their steps' times; the report keeps them (the end of each), so a run says where an e2e
    test's time went. Other tiers' output and setup/teardown output are not kept."""
    out = tmp_path / "tiers.json"
    plugin = _plugin(tmp_path, print_summary=False, json_path=str(out))
    plugin.pytest_collection_finish(_Session())
    e2e = "tests/e2e/test_x.py::x"
    for r in [_Report(e2e, "setup", 0.0, 1.0, capstdout="setup noise"),
              _Report(e2e, "call", 1.0, 9.0, capstdout="x" * 5000 + "\nAvailable after 95s\n"),
              _Report(A, "call", 9.0, 10.0, capstdout="an integration test's print")]:
        plugin.pytest_runtest_logreport(r)
    plugin.pytest_terminal_summary(_Terminal())
    printed = json.loads(out.read_text())["printed"]
    assert list(printed) == [e2e]
    assert printed[e2e].endswith("Available after 95s\n") and len(printed[e2e]) == 4000
