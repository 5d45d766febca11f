"""How capd_py.testing.upstream_managers runs upstream's managers: flags, roles, the missing-build message."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from capd_py.testing import upstream_managers as um

pytestmark = pytest.mark.unit


def test_five_roles_four_binaries() -> None:
    assert list(um.ROLES) == ["core", "kubeadm-bootstrap", "kubeadm-control-plane", "docker", "in-memory"]
    assert {r.binary for r in um.ROLES.values()} == {
        "cluster-api-manager", "kubeadm-bootstrap-manager", "kubeadm-control-plane-manager", "capd-manager"}
    # CAPD's manager watches the Dev* kinds whichever provider it plays, the ClusterClass controller ExtensionConfigs:
    # capd-py's own CRDs serve them all (issues 29, 30), so no role needs an upstream CRD beside capd-py's
    assert all(r.extra_crds == () for r in um.ROLES.values())


def test_argv_has_what_a_host_process_needs(tmp_path: Path) -> None:
    m = um.UpstreamManager("kubeadm-control-plane", tmp_path / "kubeconfig", version="v1.13.6",
                           gates={"MachinePool": False}, extra_args=["--namespace=x"])
    m.dir, m.health_port, m.metrics_port, m.webhook_port = tmp_path, 1001, 1002, 1003
    argv = m.argv()
    assert argv[0].endswith("/upstream/v1.13.6/bin/kubeadm-control-plane-manager")
    assert f"--kubeconfig={tmp_path / 'kubeconfig'}" in argv
    assert "--leader-elect=false" in argv
    assert "--health-addr=127.0.0.1:1001" in argv
    assert "--diagnostics-address=127.0.0.1:1002" in argv and "--insecure-diagnostics" in argv
    assert "--webhook-port=1003" in argv and f"--webhook-cert-dir={tmp_path / 'webhook-certs'}" in argv
    gates = next(a for a in argv if a.startswith("--feature-gates="))
    assert "ClusterTopology=true" in gates and "MachinePool=false" in gates  # capd-py's defaults + overrides
    assert argv[-1] == "--namespace=x"


def test_missing_build_names_the_make_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_CACHE", str(tmp_path))
    why = um.missing("v1.13.6")
    assert why is not None and "make upstream" in why and "capd-manager" in why
    with pytest.raises(um.UpstreamManagerError, match="make upstream"):
        um.UpstreamManager("core", tmp_path / "kubeconfig", version="v1.13.6").start()


def test_unknown_role() -> None:
    with pytest.raises(um.UpstreamManagerError, match="unknown role"):
        um.UpstreamManager("kubeadm", Path("/dev/null"))


def test_capd_managers_take_turns_on_the_debug_port_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CAPD binds its debug port whatever its role: a second test process waits for the first one's manager to stop
    instead of failing on the port, and gives up with a clear error after its timeout."""
    monkeypatch.setattr(um, "CAPD_PORT_LOCK", tmp_path / "capd.lock")
    held = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys, time\n"
        f"f = open({str(tmp_path / 'capd.lock')!r}, 'a'); fcntl.flock(f, fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(1.5)")], stdout=subprocess.PIPE)
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == b"held"
        with pytest.raises(um.UpstreamManagerError, match="held .* for 0s"):
            um._take_debug_port(0.3)
        start = time.monotonic()
        f = um._take_debug_port(10)  # the holder exits after 1.5 s: the lock is ours then
        assert 0.5 < time.monotonic() - start < 5
        f.close()
    finally:
        held.kill()
        held.wait()
