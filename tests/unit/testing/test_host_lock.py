"""capd_py/testing/host_lock.py: shared tests run side by side, an exclusive one alone and before later shared
ones, and a once-per-run step runs once per run id (threads here: each open file is its own flock holder)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from capd_py.testing.host_lock import RUN_ID_ENV, host_share, once_per_run

pytestmark = pytest.mark.unit


def _in_thread(events: list[str], name: str, exclusive: bool, where: Path, hold: float) -> threading.Thread:
    def body() -> None:
        with host_share(exclusive, where):
            events.append(f"{name} in")
            time.sleep(hold)
            events.append(f"{name} out")
    t = threading.Thread(target=body)
    t.start()
    return t


def test_shared_holders_overlap(tmp_path: Path) -> None:
    events: list[str] = []
    a = _in_thread(events, "a", False, tmp_path, 0.3)
    time.sleep(0.05)
    b = _in_thread(events, "b", False, tmp_path, 0.0)
    a.join()
    b.join()
    assert events == ["a in", "b in", "b out", "a out"]


def test_an_exclusive_holder_waits_for_the_shared_ones_and_goes_before_later_ones(tmp_path: Path) -> None:
    events: list[str] = []
    a = _in_thread(events, "a", False, tmp_path, 0.4)
    time.sleep(0.05)
    x = _in_thread(events, "x", True, tmp_path, 0.2)   # waits for a, holds the turnstile meanwhile
    time.sleep(0.05)
    b = _in_thread(events, "b", False, tmp_path, 0.0)  # comes after x, though a still shares
    for t in (a, x, b):
        t.join()
    assert events == ["a in", "a out", "x in", "x out", "b in", "b out"]


def test_once_per_run_runs_a_step_once_per_run_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []

    def step() -> str:
        calls.append(1)
        return "swept"

    monkeypatch.setenv(RUN_ID_ENV, "run-1")
    assert once_per_run("sweep", step, tmp_path) == "swept"
    assert once_per_run("sweep", step, tmp_path) is None     # the other worker of the same run
    monkeypatch.setenv(RUN_ID_ENV, "run-2")
    assert once_per_run("sweep", step, tmp_path) == "swept"  # the next run
    assert len(calls) == 2

