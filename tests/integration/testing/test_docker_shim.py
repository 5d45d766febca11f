"""capd_py/testing/docker_shim.py against the real dockerd, driven by the docker CLI (a Go Docker client, as upstream
CAPD's): a `--privileged` container starts through the shim in the restricted mode (on this host --privileged alone
is refused), a `--privileged` `docker exec` with stdin (a
hijacked connection) works, and other calls pass through unchanged."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from capd_py.reconcile import haproxy
from capd_py.testing import docker_shim

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

IMAGE = "kindest/haproxy:v20230606-42a2262b"  # small, always built by `make images`


def _docker(sock: Path, *args: str, input_: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], input=input_, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DOCKER_HOST": f"unix://{sock}"})


def _takes_reloads(sock: Path, name: str) -> bool:
    got = _docker(sock, "exec", name, "cat", haproxy.MASTER_STATUS_PATH)
    return got.returncode == 0 and haproxy.reloads_on_sighup(got.stdout.encode())  # unreadable yet: not ready


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


# kind's load balancer config as upstream CAPD writes it (test/infrastructure/docker/internal/loadbalancer/config.go,
# trimmed to what matters here): maxconn 100000 asks for 200030 fds, more than a container may have on this host
KIND_LB_CONFIG = """global
  log /dev/log local0
  maxconn 100000
defaults
  mode tcp
  timeout connect 5000
  timeout client 50000
  timeout server 50000
frontend stats
  mode http
  bind *:8404
  stats enable
  stats uri /stats
"""


def test_load_balancer_as_capd_runs_it_reloads_kinds_config(tmp_path: Path) -> None:
    """Upstream CAPD starts the load balancer image with its own entrypoint (kind's `haproxy -W -db -f
    haproxy.cfg`, not the image's), privileged, then writes kind's config and sends SIGHUP. Through the shim the
    container is restricted (no CAP_SYS_RESOURCE), so haproxy cannot raise its fd limit to what maxconn 100000
    needs; the image's `haproxy` wrapper adds `no strict-limits` to any command line, so the reload still loads
    the new config (before it: "Loading failure!" on every reload, and the balancer kept its placeholder without a
    backend, which failed kubeadm init's first call through it)."""
    name = f"capd-py-shim-lb-{secrets.token_hex(3)}"
    sock = tmp_path / "shim.sock"
    with docker_shim.running(sock) as shim:
        try:
            # this host's default bridge may be unusable; a network of the test's own
            assert _docker(sock, "network", "create", name).returncode == 0
            made = _docker(sock, "run", "-d", "--name", name, "--network", name, "--privileged",
                           "--entrypoint", "haproxy", IMAGE, "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg")
            assert made.returncode == 0, made.stderr
            assert shim.rewritten == 1
            # upstream CAPD writes the configuration when a control plane machine comes, long after the balancer
            # started; a SIGHUP before haproxy's master handles it is dropped (measured under load: one load only)
            started = time.monotonic() + 30
            while not _takes_reloads(sock, name) and time.monotonic() < started:
                time.sleep(0.2)
            wrote = _docker(sock, "exec", "--privileged", "-i", name, "sh", "-c",
                            "cat > /usr/local/etc/haproxy/haproxy.cfg", input_=KIND_LB_CONFIG)
            assert wrote.returncode == 0, wrote.stderr
            assert _docker(sock, "kill", "-s", "SIGHUP", name).returncode == 0
            deadline = time.monotonic() + 30
            while True:
                logs = _docker(sock, "logs", name)
                out = logs.stdout + logs.stderr
                # the first load (the image's placeholder) and the reload of kind's config
                if out.count("Loading success") >= 2 or "Loading failure" in out or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert "Loading failure" not in out and out.count("Loading success") == 2, out
            assert "Cannot raise FD limit" in out, out  # the limit this host imposes, reported and tolerated
            # the new config is the one served: its stats frontend answers
            stats = _docker(sock, "exec", name, "bash", "-c",
                            "exec 3<>/dev/tcp/127.0.0.1/8404 && printf 'GET /stats;csv HTTP/1.0\\r\\n\\r\\n' >&3 "
                            "&& cat <&3")
            assert stats.returncode == 0 and "200 OK" in stats.stdout, (stats.stdout, stats.stderr)
        finally:
            subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)
            subprocess.run(["docker", "network", "rm", name], capture_output=True, check=False)
