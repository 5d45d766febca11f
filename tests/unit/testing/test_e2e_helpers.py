"""Small helpers of the e2e tier (capd_py/testing/e2e.py) that need no cluster."""

from __future__ import annotations

import os
import time

import pytest

from capd_py.testing.e2e import cpu_seconds

pytestmark = pytest.mark.unit


def test_cpu_seconds_reads_a_process_s_cpu_and_is_zero_for_none_or_a_gone_process() -> None:
    before = cpu_seconds(os.getpid())
    t = time.process_time()
    while time.process_time() - t < 0.1:  # burn 0.1 s of CPU
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.05
    assert cpu_seconds(None) == 0.0
    assert cpu_seconds(2 ** 22 + 1) == 0.0  # above the kernel's pid_max ceiling: never a process
