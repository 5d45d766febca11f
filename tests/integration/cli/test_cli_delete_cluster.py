"""`capd-py delete cluster` removes the kubeconfig `quickstart` wrote for that cluster (admin credentials) from
CAPD_PY_HOME, as kind removes its context, and never a file that only shares the name (issue 26 item 8)."""

from __future__ import annotations

import asyncio
import base64
import secrets
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capd_py.api.gvk import CLUSTER, SECRET
from capd_py.cli.main import app
from capd_py.testing.envtest import EnvTest

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

runner = CliRunner()


def _kubeconfig(name: str, ca: bytes, server: str) -> str:
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": f"{name}-admin@{name}",
        "clusters": [{"name": name, "cluster": {"server": server,
                                                 "certificate-authority-data": base64.b64encode(ca).decode()}}],
        "contexts": [{"name": f"{name}-admin@{name}", "context": {"cluster": name, "user": f"{name}-admin"}}],
        "users": [{"name": f"{name}-admin", "user": {"client-certificate-data": "Y2VydA==",
                                                     "client-key-data": "a2V5"}}]})


async def _cluster_with_secret(env: EnvTest, name: str, ca: bytes) -> None:
    k = env.kube()
    try:
        await k.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                 "metadata": {"name": name, "namespace": "default"},
                                 "spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                                "kind": "DockerCluster", "name": name}}})
        value = _kubeconfig(name, ca, "https://172.16.0.2:6443").encode()  # the secret names the LB's address
        await k.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
                                "metadata": {"name": f"{name}-kubeconfig", "namespace": "default"},
                                "data": {"value": base64.b64encode(value).decode()}})
    finally:
        k.close()


def test_delete_cluster_removes_its_quickstart_kubeconfig_only(envtest: EnvTest, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CAPD_PY_HOME", str(home))
    mine, other = f"q-{secrets.token_hex(3)}", f"m-{secrets.token_hex(3)}"
    asyncio.run(_cluster_with_secret(envtest, mine, b"CA of " + mine.encode()))
    asyncio.run(_cluster_with_secret(envtest, other, b"CA of " + other.encode()))
    # what quickstart writes: the same credentials pointed at the host port
    written = home / f"{mine}.kubeconfig"
    written.write_text(_kubeconfig(mine, b"CA of " + mine.encode(), "https://127.0.0.1:40001"))
    # a file that only shares the other cluster's name: e.g. a management cluster's kubeconfig of that name
    unrelated = home / f"{other}.kubeconfig"
    unrelated.write_text(_kubeconfig(other, b"another cluster's CA", "https://127.0.0.1:40002"))

    kc = str(envtest.kubeconfig_path)
    r = runner.invoke(app, ["delete", "cluster", mine, "--kubeconfig", kc, "--wait", "30s"])
    assert r.exit_code == 0, r.stderr
    assert not written.exists() and f"removed {written}" in r.stderr

    r = runner.invoke(app, ["delete", "cluster", other, "--kubeconfig", kc, "--no-wait"])
    assert r.exit_code == 0, r.stderr
    assert unrelated.exists() and "removed" not in r.stderr

    # a cluster that is not there: an error, and the file stays
    again = home / f"{mine}.kubeconfig"
    again.write_text(_kubeconfig(mine, b"CA of " + mine.encode(), "https://127.0.0.1:40001"))
    r = runner.invoke(app, ["delete", "cluster", mine, "--kubeconfig", kc, "--no-wait"])
    assert r.exit_code == 1 and "not found" in r.stderr and again.exists()
