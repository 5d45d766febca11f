"""`capd-py init`, `stop|start management` and `delete management` on one real management cluster: a node container
running kubeadm, the CRDs, the controllers as a host process, a kubeconfig on the host.

The cluster is made once for the module (`management_cluster`; a `capd-py init` costs ~40 s on 2 cores) and its
tests run in order on it: init (and init again) -> stop / start (issue 31; it was test_lifecycle.py's own cluster
until issue 40) -> delete, the last, which the fixture repeats (forced) whatever failed."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest
import yaml

from capd_py.api.gvk import GVK, NODE
from capd_py.api.labels import MANAGEMENT_LABEL
from capd_py.cli import management as mgmt
from capd_py.kube.client import Kube
from capd_py.kube.crds import load_crds
from capd_py.runtime.hostprocesses import pid_alive
from capd_py.testing.e2e import CAPD, cli, kubectl_bin, remove_management, run, wait_for

pytestmark = pytest.mark.e2e

IMAGE = mgmt.DEFAULT_NODE_IMAGE


@dataclass
class Made:
    """A management cluster of `capd-py init` in a home of its own, and what its first init said."""
    name: str
    env: dict[str, str]
    init: subprocess.CompletedProcess[str]
    init_seconds: float

    @property
    def home(self) -> Path:
        return Path(self.env["CAPD_PY_HOME"])

    @property
    def kubeconfig(self) -> Path:
        return self.home / f"{self.name}.kubeconfig"

    def pid(self) -> int:
        return int((self.home / f"{self.name}-controllers.pid").read_text())


@pytest.fixture(scope="module")
def management_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    client = docker.from_env()
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"node image {IMAGE} missing: build it with images/build.sh", pytrace=False)
    name = f"e2e-{secrets.token_hex(3)}"
    env = {**os.environ, "CAPD_PY_HOME": str(tmp_path_factory.mktemp("management") / "home"), "CAPD_PY_PLAIN": "1"}
    try:
        t0 = time.monotonic()
        r = cli("init", "--name", name, env=env)
        made = Made(name, env, r, time.monotonic() - t0)
        print(f"\n$ capd-py init --name {name} ({made.init_seconds:.1f}s)")
        yield made
    finally:
        client.close()
        remove_management(name, env)


def test_init_makes_a_management_cluster_and_init_again_reuses_it(management_cluster: Made) -> None:
    m, r = management_cluster, management_cluster.init
    name, env, home = m.name, m.env, m.home
    assert r.returncode == 0, r.stderr
    kc = Path(r.stdout.strip().splitlines()[-1])
    assert kc == m.kubeconfig and kc.exists()
    assert (kc.stat().st_mode & 0o077) == 0
    assert " ✓ Starting control-plane 🕹️" in r.stderr and " ✓ Installing capd-py CRDs 📜" in r.stderr

    server = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
    client = docker.from_env()
    node = client.containers.get(f"{name}-control-plane")
    port = node.attrs["NetworkSettings"]["Ports"]["6443/tcp"][0]
    assert server == f"https://127.0.0.1:{port['HostPort']}" and port["HostIp"] == "127.0.0.1"
    assert node.labels[MANAGEMENT_LABEL] == name
    client.close()

    crd = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False)

    async def check() -> None:
        kube = Kube.from_kubeconfig(str(kc))
        try:
            nodes = await kube.list(NODE)
            assert [n["metadata"]["name"] for n in nodes] == [f"{name}-control-plane"]
            ready = {c["type"]: c["status"] for c in nodes[0]["status"]["conditions"]}
            assert ready["Ready"] == "True"
            assert not [t for t in nodes[0]["spec"].get("taints") or [] if "control-plane" in t["key"]]
            have = {c["metadata"]["name"] for c in await kube.list(crd)}
            assert {c["metadata"]["name"] for c in load_crds()} <= have
        finally:
            kube.close()
    asyncio.run(check())

    pid = m.pid()
    assert pid_alive(pid)
    assert "controllers started" in (home / f"{name}-controllers.log").read_text()

    # init again: reuses the cluster, does not start a second controllers process
    r2 = cli("init", "--name", name, env=env)
    assert r2.returncode == 0, r2.stderr
    assert "already exists" in r2.stderr
    assert m.pid() == pid


def test_stop_start_management(management_cluster: Made) -> None:
    """Issue 31 (moved here from test_lifecycle.py, which made a management cluster of its own for it)."""
    m = management_cluster
    name, env, home, kc = m.name, m.env, m.home, m.kubeconfig
    assert m.init.returncode == 0, m.init.stderr
    pid_file = home / f"{name}-controllers.pid"
    pid0 = int(pid_file.read_text())
    node = mgmt.node_name(name)

    t0 = time.monotonic()
    r = run([*CAPD, "stop", "management", "--name", name], env=env)
    stop_s = time.monotonic() - t0
    print(f"\n$ capd-py stop management ({stop_s:.1f}s)\n{r.stderr}")
    assert run(["docker", "inspect", "-f", "{{.State.Status}}", node]).stdout.strip() == "exited"
    assert not Path(f"/proc/{pid0}").exists() or "capd_py" not in Path(f"/proc/{pid0}/cmdline").read_text()
    assert (home / f"{name}.power").read_text() == "state=stopped\ncontrollers=host\n"

    t0 = time.monotonic()
    r = run([*CAPD, "start", "management", "--name", name], env=env)
    start_s = time.monotonic() - t0
    print(f"$ capd-py start management ({start_s:.1f}s)\n{r.stderr}")
    assert not (home / f"{name}.power").exists()
    assert run([kubectl_bin(), "--kubeconfig", str(kc), "get", "--raw", "/readyz"]).stdout.strip() == "ok"
    pid1 = int(pid_file.read_text())
    assert pid1 != pid0 and "controllers" in Path(f"/proc/{pid1}/cmdline").read_text()
    # the controllers serve again: a CRD write goes through their webhook
    wait_for(lambda: run([kubectl_bin(), "--kubeconfig", str(kc), "get", "clusters", "-A"], check=False)
             .returncode == 0, 60, "the management API serving Clusters")
    print(f"management stop {stop_s:.1f}s, start (API ready, controllers started) {start_s:.1f}s")


def test_delete_management(management_cluster: Made) -> None:
    """The module's last test: `delete management` leaves no container, volume, kubeconfig or controllers."""
    m = management_cluster
    assert m.init.returncode == 0, m.init.stderr
    pid = m.pid()
    r = cli("delete", "management", "--name", m.name, env=m.env, timeout=120)
    assert r.returncode == 0, r.stderr
    client = docker.from_env()
    try:
        assert not client.containers.list(all=True, filters={"label": f"{MANAGEMENT_LABEL}={m.name}"})
        assert not client.volumes.list(filters={"label": f"{MANAGEMENT_LABEL}={m.name}"})
    finally:
        client.close()
    assert not m.kubeconfig.exists()
    assert not pid_alive(pid) or not mgmt._is_our_controllers(pid)
