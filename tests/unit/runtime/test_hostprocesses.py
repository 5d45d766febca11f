"""capd_py/runtime/hostprocesses.py: a process id is alive while it runs, not once it exited or is a zombie."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from capd_py.runtime.hostprocesses import pid_alive

pytestmark = pytest.mark.unit


def test_a_running_process_is_alive_and_a_reaped_one_is_not() -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        assert pid_alive(p.pid)
    finally:
        p.kill()
        p.wait()
    assert not pid_alive(p.pid)


def test_a_zombie_counts_as_gone() -> None:
    p = subprocess.Popen(["true"])
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and pid_alive(p.pid):  # exited, not reaped yet: a zombie
        time.sleep(0.05)
    assert not pid_alive(p.pid)
    p.wait()


def test_this_process_is_alive() -> None:
    assert pid_alive(os.getpid())
