"""Node containers started with the docker CLI alone (no capd-py runtime), the way capd-py starts them: for
tests that check the node image on its own."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

from capd_py.api.containers import restricted_flags

T = TypeVar("T")
TEST_LABEL = "io.x-k8s.capd-py.test=node-image"


def sh(*args: str, input_: str | None = None, check: bool = True, timeout: float = 300) -> str:
    p = subprocess.run(args, input=input_, capture_output=True, text=True, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.stdout


def privilege_flags() -> list[str]:
    mode = os.environ.get("CAPD_PY_PRIVILEGED_MODE") or sh("bash", "hack/privilege-mode.sh").strip()
    if mode == "privileged":
        return ["--privileged"]
    return restricted_flags()


def wait_for(fn: Callable[[], T], timeout: float, what: str, interval: float = 1.0) -> T:
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last  # type: ignore[return-value]
        except AssertionError as e:  # keep the last error for the message
            last = e
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last}")


def run_node(name: str, image: str) -> str:
    """docker run a node container with capd-py's mounts and privilege mode; returns its container id."""
    return sh("docker", "run", "-d", "-t", "--name", name, "--hostname", name, *privilege_flags(),
              "--tmpfs", "/tmp", "--tmpfs", "/run", "-v", "/var", "-v", "/lib/modules:/lib/modules:ro",
              "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw", "--label", TEST_LABEL, image).strip()


def systemd_up(name: str) -> bool:
    state = sh("docker", "exec", name, "systemctl", "is-system-running", check=False).strip()
    return state in ("running", "degraded")
