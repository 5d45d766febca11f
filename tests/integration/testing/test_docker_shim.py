"""capd_py/testing/docker_shim.py against the real dockerd, driven by the docker CLI (a Go Docker client, as upstream
CAPD's): a `--privileged` container starts through the shim in the restricted mode (on this host --privileged alone
is refused), a `--privileged` `docker exec` with stdin (a
hijacked connection) works, and other calls pass through unchanged."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
from pathlib import Path

import pytest

from capd_py.testing import docker_shim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

IMAGE = "kindest/haproxy:v20230606-42a2262b"  # small, always built by `make images`


def _docker(sock: Path, *args: str, input_: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], input=input_, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DOCKER_HOST": f"unix://{sock}"})


def test_privileged_containers_start_restricted_and_exec_works(tmp_path: Path) -> None:
    name = f"capd-py-shim-{secrets.token_hex(3)}"
    sock = tmp_path / "shim.sock"
    with docker_shim.running(sock) as shim:
        try:
            made = _docker(sock, "run", "-d", "--name", name, "--privileged", "--entrypoint", "sleep", IMAGE, "300")
            assert made.returncode == 0, made.stderr
            assert shim.rewritten == 1
            hc = json.loads(_docker(sock, "inspect", name).stdout)[0]["HostConfig"]
            assert not hc["Privileged"] and hc["CapAdd"] == ["ALL"] and hc["CapDrop"] == ["SYS_RESOURCE"]
            assert any(m.get("Target") == "/sys/fs/cgroup" for m in hc.get("Mounts") or [])
            out = _docker(sock, "exec", "--privileged", "-i", name, "sh", "-c",
                          "cat; echo; grep CapEff /proc/self/status", input_="through the hijacked connection")
            assert out.returncode == 0, out.stderr
            assert out.stdout.startswith("through the hijacked connection\nCapEff:"), out.stdout
            assert shim.exec_rewritten == 1
            # an unprivileged creation passes unchanged
            plain = _docker(sock, "create", "--name", name + "-plain", IMAGE)
            assert plain.returncode == 0 and shim.rewritten == 1, plain.stderr
            assert not json.loads(_docker(sock, "inspect", name + "-plain").stdout)[0]["HostConfig"]["CapAdd"]
        finally:
            subprocess.run(["docker", "rm", "-f", name, name + "-plain"], capture_output=True, check=False)
