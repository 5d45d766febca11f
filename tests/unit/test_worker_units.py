"""tests/worker_units.py with real pytest-xdist workers: a group's tests run in one worker, in their order, however
many there are; other tests spread over both workers; a `late_build` test waits in the queue for its build."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]

SUITE = '''
import os, time
from pathlib import Path
import pytest

def _record(name):
    with open(os.environ["RECORD"], "a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.xdist_group("shared")
@pytest.mark.parametrize("n", range(5))
def test_grouped(n):
    _record(f"g{n}")
    time.sleep(0.1)

@pytest.mark.parametrize("n", range(6))
def test_single(n):
    _record(f"s{n}")
    time.sleep(0.3)
'''


def _run(root: Path, workers: int, *paths: str) -> list[list[str]]:
    """pytest with `workers` xdist workers scheduled by worker_units on `paths` under `root`; the lines the suite's
    tests recorded, split."""
    record = root / "record"
    # the scheduler's default e2e workers (2), whatever the caller's CAPD_PY_E2E_WORKERS (worker_units.E2E_WORKERS_ENV)
    env = {**{k: v for k, v in os.environ.items() if k != "CAPD_PY_E2E_WORKERS"}, "RECORD": str(record),
           "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    p = subprocess.run([sys.executable, "-m", "pytest", "-p", "worker_units", "-p", "no:cacheprovider", "-n",
                        str(workers), "--dist", "loadgroup", "-q", "-c", os.devnull, "--rootdir", str(root),
                        *(paths or (str(root),))],
                       capture_output=True, text=True, env=env, timeout=120, cwd=root)
    assert p.returncode == 0, p.stdout + p.stderr
    return [line.split() for line in record.read_text().splitlines()]


def test_a_group_runs_whole_in_one_worker_and_the_rest_spreads(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    ran = _run(tmp_path, 2)
    grouped = [(name, worker) for name, worker in ran if name.startswith("g")]
    assert [name for name, _ in grouped] == [f"g{n}" for n in range(5)], ran
    assert len({worker for _, worker in grouped}) == 1, ran
    assert {worker for name, worker in ran if name.startswith("s")} == {"gw0", "gw1"}, ran


MODULE_SUITE = '''
import os, time
import pytest

def _record(name):
    with open(os.environ["RECORD"], "a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.fixture(scope="module")
def plane():
    _record("setup")
    yield

@pytest.mark.parametrize("n", range(6))
def test_uses_plane(plane, n):
    _record(f"p{n}")
    time.sleep(0.1)

@pytest.mark.parametrize("n", range(4))
def test_alone(n):
    _record(f"a{n}")
    time.sleep(0.8)  # long enough for the second worker to be up under load (0.3 s: one worker took all four once)
'''


def test_a_modules_tests_on_a_module_fixture_run_in_one_worker_and_make_it_once(tmp_path: Path) -> None:
    """Without the module as one unit both workers made the fixture (pytest ends it when a worker leaves the
    module)."""
    (tmp_path / "test_plane.py").write_text(MODULE_SUITE)
    ran = _run(tmp_path, 2)
    assert [name for name, _ in ran].count("setup") == 1, ran
    assert len({worker for name, worker in ran if name.startswith("p") or name == "setup"}) == 1, ran
    assert {worker for name, worker in ran if name.startswith("a")} == {"gw0", "gw1"}, ran


E2E_SUITE = '''
import os, time
import pytest

def _record(name):
    with open(os.environ["RECORD"], "a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']} {time.monotonic()}\\n")

@pytest.mark.parametrize("n", range(8))
def test_e2e(n):
    _record(f"e{n}")
    time.sleep(0.2)
'''


def test_e2e_tests_run_on_at_most_two_workers_in_queue_order(tmp_path: Path) -> None:
    """4 workers: the unit tests spread over all of them, the e2e tier's over two only, in their collection order."""
    (tmp_path / "tests" / "unit").mkdir(parents=True)
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "unit" / "test_u.py").write_text(SUITE.replace("test_grouped", "test_g"))
    (tmp_path / "tests" / "e2e" / "test_e.py").write_text(E2E_SUITE)
    ran = _run(tmp_path, 4, "tests/unit", "tests/e2e")
    e2e = sorted((float(t[0]), name, worker) for name, worker, *t in ran if name.startswith("e"))
    assert len({worker for _, _, worker in e2e}) <= 2, e2e
    # in queue order, up to the two running at once (which of a pair starts first is a race)
    assert all(abs(int(name[1:]) - pos) <= 1 for pos, (_, name, _) in enumerate(e2e)), e2e
    assert len({worker for name, worker, *_ in ran if name.startswith("s")}) >= 3, ran


LATE_SUITE = '''
import os, time
from pathlib import Path
import pytest

def _record(name):
    with open(os.environ["RECORD"], "a") as f:
        f.write(f"{name} {os.environ['PYTEST_XDIST_WORKER']}\\n")

@pytest.mark.late_build("thing")
def test_late():
    _record("late")

@pytest.mark.parametrize("n", range(6))
def test_other(n):
    _record(f"o{n}")
    time.sleep(0.2)
    if n == 1:  # the late build ends
        d = Path(os.environ["CAPD_PY_CACHE"]) / "late-builds"
        (d / "thing.rc").write_text("0")
'''


def test_a_late_build_test_waits_in_the_queue_until_its_build_is_done(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """First in the queue, but its build runs (a live process in thing.pid): the worker takes the others until the
    build's status appears (written by o1), then the late test next, not at the end."""
    late = tmp_path / "cache" / "late-builds"
    late.mkdir(parents=True)
    build = subprocess.Popen(["sleep", "60"])
    try:
        (late / "thing.pid").write_text(str(build.pid))
        monkeypatch.setenv("CAPD_PY_CACHE", str(tmp_path / "cache"))
        (tmp_path / "test_late.py").write_text(LATE_SUITE)
        order = [name for name, _ in _run(tmp_path, 1, "test_late.py")]
    finally:
        build.kill()
        build.wait()
    assert order[0] != "late" and order.index("late") > order.index("o1"), order
    assert order.index("late") <= order.index("o1") + 3 < len(order), order


def test_a_late_build_test_keeps_its_place_when_the_build_is_done(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "cache" / "late-builds").mkdir(parents=True)
    (tmp_path / "cache" / "late-builds" / "thing.rc").write_text("0")
    monkeypatch.setenv("CAPD_PY_CACHE", str(tmp_path / "cache"))
    (tmp_path / "test_late.py").write_text(LATE_SUITE.replace('(d / "thing.rc").write_text("0")', "pass"))
    order = [name for name, _ in _run(tmp_path, 1, "test_late.py")]
    assert order[0] == "late", order
