"""`capd-py init` / `capd-py delete management` create and remove a real management cluster: a node
container running kubeadm, the CRDs, the controllers as a host process, a kubeconfig on the host."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import yaml

from capd_py.api.gvk import GVK, NODE
from capd_py.cli import management as mgmt
from capd_py.kube.client import Kube
from capd_py.kube.crds import load_crds

pytestmark = pytest.mark.e2e

IMAGE = mgmt.DEFAULT_NODE_IMAGE


def cli(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "capd_py.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.fixture
def setting(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    client = docker.from_env()
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        pytest.fail(f"node image {IMAGE} missing: build it with images/build.sh", pytrace=False)
    name = f"e2e-{secrets.token_hex(3)}"
    env = {**os.environ, "CAPD_PY_HOME": str(tmp_path / "home"), "CAPD_PY_PLAIN": "1"}
    try:
        yield name, env
    finally:  # never leave a node behind, whatever failed
        cli("delete", "management", "--name", name, env=env, timeout=120)
        for c in client.containers.list(all=True, filters={"label": f"{mgmt.MANAGEMENT_LABEL}={name}"}):
            c.remove(force=True, v=True)
        client.close()


def test_init_and_delete_management(setting: tuple[str, dict[str, str]]) -> None:
    name, env = setting
    home = Path(env["CAPD_PY_HOME"])
    r = cli("init", "--name", name, env=env)
    assert r.returncode == 0, r.stderr
    kc = Path(r.stdout.strip().splitlines()[-1])
    assert kc == home / f"{name}.kubeconfig" and kc.exists()
    assert (kc.stat().st_mode & 0o077) == 0
    assert " ✓ Starting control-plane 🕹️" in r.stderr and " ✓ Installing capd-py CRDs 📜" in r.stderr

    server = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
    client = docker.from_env()
    node = client.containers.get(f"{name}-control-plane")
    port = node.attrs["NetworkSettings"]["Ports"]["6443/tcp"][0]
    assert server == f"https://127.0.0.1:{port['HostPort']}" and port["HostIp"] == "127.0.0.1"
    assert node.labels[mgmt.MANAGEMENT_LABEL] == name

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

    pid = int((home / f"{name}-controllers.pid").read_text())
    assert mgmt._pid_alive(pid)
    assert "controllers started" in (home / f"{name}-controllers.log").read_text()

    # init again: reuses the cluster, does not start a second controllers process
    r2 = cli("init", "--name", name, env=env)
    assert r2.returncode == 0, r2.stderr
    assert "already exists" in r2.stderr
    assert int((home / f"{name}-controllers.pid").read_text()) == pid

    r = cli("delete", "management", "--name", name, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not client.containers.list(all=True, filters={"label": f"{mgmt.MANAGEMENT_LABEL}={name}"})
    assert not client.volumes.list(filters={"label": f"{mgmt.MANAGEMENT_LABEL}={name}"})
    assert not kc.exists()
    assert not mgmt._pid_alive(pid) or not mgmt._is_our_controllers(pid)
    client.close()
