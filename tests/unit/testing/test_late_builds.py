"""capd_py/testing/late_builds.py and hack/late-build.sh: a build beside the tests, its status, and waiting for it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from capd_py.testing import late_builds

pytestmark = pytest.mark.unit

SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "late-build.sh"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CAPD_PY_CACHE", str(tmp_path))
    return tmp_path / "late-builds"


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=60,
                          env=os.environ.copy())


def test_none_started_is_ready_and_waits_for_nothing(cache: Path) -> None:
    assert late_builds.ready("thing")
    late_builds.wait("thing", timeout=1)


def test_a_running_build_is_not_ready_until_its_status_is_written(cache: Path) -> None:
    cache.mkdir()
    build = subprocess.Popen(["sleep", "60"])
    try:
        (cache / "thing.pid").write_text(str(build.pid))
        assert not late_builds.ready("thing")
        with pytest.raises(late_builds.LateBuildFailed, match="still running"):
            late_builds.wait("thing", timeout=0.3, poll=0.1)
        (cache / "thing.rc").write_text("0\n")
        assert late_builds.ready("thing")
        late_builds.wait("thing", timeout=1)
    finally:
        build.kill()
        build.wait()


def test_a_failed_build_fails_the_wait_with_its_log(cache: Path) -> None:
    cache.mkdir()
    (cache / "thing.pid").write_text("1")
    (cache / "thing.rc").write_text("2\n")
    (cache / "thing.log").write_text("compiling\nno space left on device\n")
    with pytest.raises(late_builds.LateBuildFailed, match=r"(?s)exit status 2.*no space left on device"):
        late_builds.wait("thing", timeout=1)


def test_a_build_gone_without_a_status_fails_the_wait(cache: Path) -> None:
    cache.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (cache / "thing.pid").write_text(str(gone.pid))
    assert late_builds.ready("thing")
    with pytest.raises(late_builds.LateBuildFailed, match="without an exit status"):
        late_builds.wait("thing", timeout=1)


def test_the_script_runs_a_build_in_the_background_and_reports_it(cache: Path) -> None:
    started = _script("start", "ok", "sh", "-c", "sleep 0.5; echo built")
    assert started.returncode == 0, started.stderr
    assert (cache / "ok.pid").is_file() and not late_builds.ready("ok")
    finished = _script("finish", "ok")
    assert finished.returncode == 0, finished.stderr
    assert "built" in finished.stderr
    assert (cache / "ok.rc").read_text().strip() == "0" and not (cache / "ok.pid").exists()
    late_builds.wait("ok", timeout=1)


def test_the_script_reports_a_failed_build(cache: Path) -> None:
    assert _script("start", "bad", "sh", "-c", "echo broken; exit 3").returncode == 0
    deadline = time.monotonic() + 10
    while not late_builds.ready("bad") and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(late_builds.LateBuildFailed, match=r"(?s)exit status 3.*broken"):
        late_builds.wait("bad", timeout=1)
    finished = _script("finish", "bad")
    assert finished.returncode == 1
    assert "broken" in finished.stderr and "status 3" in finished.stderr


def test_the_build_runs_in_a_session_of_its_own_at_the_lowest_weight(cache: Path) -> None:
    """Its own session (so its own autogroup where the kernel has them, niced to 19) and nice 19 inside it."""
    probe = 'echo "$(ps -o sid= -p $$) $(ps -o ni= -p $$)"; cat /proc/self/autogroup 2>/dev/null || true'
    assert _script("start", "probe", "sh", "-c", probe).returncode == 0
    assert _script("finish", "probe").returncode == 0
    sid, nice, *autogroup = (cache / "probe.log").read_text().split()
    assert int(sid) != os.getsid(0) and int(nice) == 19
    if autogroup:  # e.g. "/autogroup-123 nice 19"
        assert autogroup[-1] == "19", autogroup


def test_stop_ends_every_process_of_a_running_build_and_forgets_it(cache: Path) -> None:
    """`make test` stops the late builds when lint or the builds before pytest fail: the build's children go too."""
    child_file = cache.parent / "child.pid"
    started = _script("start", "long", "sh", "-c", f"sleep 300 & echo $! > {child_file}; wait")
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 10
    while not child_file.is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(child_file.read_text())
    assert not late_builds.ready("long")
    stopped = _script("stop", "long")
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stderr
    deadline = time.monotonic() + 10
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the build's child outlived stop"
    assert not any((cache / f"long.{ext}").exists() for ext in ("pid", "sid", "rc"))
    assert late_builds.ready("long")
    # nothing running: stop says nothing and succeeds
    again = _script("stop", "long")
    assert again.returncode == 0 and "stopped" not in again.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not yet reaped by its parent's parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
