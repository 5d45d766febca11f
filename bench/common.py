"""Helpers shared by the benchmarks: the machine description, memory readings, a plain table."""

from __future__ import annotations

import asyncio
import os
import platform
import resource
import time
from collections.abc import Callable
from pathlib import Path


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = int(line.split()[1]) / 1024 / 1024
                break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs ({model or platform.processor() or 'unknown CPU'}), "
            f"{mem_gib:.1f} GiB memory, {platform.system()} {platform.release()}, Python {platform.python_version()}")


def peak_rss_mib(pid: int | None = None) -> float:
    """Peak resident set size (VmHWM) of a process; this process by default."""
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process (this one by default), children not included."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


async def wait_until(what: str, probe: Callable[[], object], timeout: float, interval: float = 0.5) -> None:
    """Call the blocking `probe` (in a thread) every `interval` s until it is truthy; RuntimeError after
    `timeout`."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if await asyncio.to_thread(probe):
            return
        await asyncio.sleep(interval)
    raise RuntimeError(f"{what}: not reached after {timeout:.0f}s")


def table(rows: list[tuple[str, str]], title: str) -> str:
    w = max(len(k) for k, _ in rows)
    out = [title, "-" * len(title)]
    out += [f"{k.ljust(w)}  {v}" for k, v in rows]
    return "\n".join(out)
