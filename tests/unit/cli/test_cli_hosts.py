"""`capd-py host add|list|remove` logic over an in-memory API (no I/O), and the command line's usage errors."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from typer.testing import CliRunner

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import GVK
from capd_py.cli import hosts as hc
from capd_py.cli.main import app
from capd_py.runtime import endpoints
from capd_py.runtime.protocol import RuntimeError_
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit
runner = CliRunner()


class MemKube:
    def __init__(self) -> None:
        self.objs: dict[tuple[str, str | None, str], dict[str, Any]] = {}

    async def get(self, g: GVK, ns: str | None, name: str) -> dict[str, Any] | None:
        return self.objs.get((g.kind, ns, name))

    async def list(self, g: GVK, ns: str | None = None) -> list[dict[str, Any]]:
        return [o for (k, _n, _), o in self.objs.items() if k == g.kind]

    async def create(self, g: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        key = (g.kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        assert key not in self.objs, f"{key} exists"
        self.objs[key] = obj
        return obj

    async def merge_patch(self, g: GVK, ns: str | None, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        obj = self.objs[(g.kind, ns, name)]
        for k, v in patch["data"].items():
            if v is None:
                obj["data"].pop(k, None)
            else:
                obj["data"][k] = v
        return obj

    async def delete(self, g: GVK, ns: str | None, name: str) -> None:
        del self.objs[(g.kind, ns, name)]


def _dc(name: str, host: str = "") -> dict[str, Any]:
    return {"kind": "DockerCluster", "metadata": {"namespace": "default", "name": name,
                                                  "annotations": {dh.DOCKER_HOST_ANNOTATION: host} if host else {}}}


async def test_add_list_remove_round_trip() -> None:
    kube = MemKube()
    two = dh.DockerHost("two", "unix:///run/capd-py-dockerd-2.sock", labels={"zone": "b"}, max_clusters=2,
                        address="192.0.2.2")
    assert await hc.add(kube, two) is False
    assert ("Namespace", None, dh.NAMESPACE) in kube.objs  # made when missing
    assert await hc.add(kube, dh.DockerHost("three", "ssh://ci@three", address="three")) is False
    assert await hc.add(kube, two) is True  # replaced
    kube.objs[("DockerCluster", "default", "c1")] = _dc("c1", "two")
    kube.objs[("DockerCluster", "default", "c0")] = _dc("c0")
    rows = {r.host.name: r for r in await hc.listing(kube)}
    assert sorted(rows) == ["local", "three", "two"]
    assert rows["two"].host == two and rows["two"].clusters == ["default/c1"]
    assert rows["local"].clusters == ["default/c0"]
    with pytest.raises(hc.HostError, match=r"still holds cluster\(s\) default/c1"):
        await hc.remove(kube, "two")
    await hc.remove(kube, "three")
    with pytest.raises(hc.HostError, match="'three' is not in capd-py-system/capd-py-docker-hosts"):
        await hc.remove(kube, "three")
    await hc.remove(kube, "two", force=True)
    assert kube.objs[("ConfigMap", dh.NAMESPACE, dh.CONFIGMAP)]["data"] == {}


async def test_tls_material_goes_into_a_secret_removed_with_the_host() -> None:
    kube = MemKube()
    host = dh.DockerHost("b", "tcp://10.0.0.7:2376", hc.tls_secret_name("b"), address="10.0.0.7")
    await hc.add(kube, host, {"ca.pem": b"CA", "cert.pem": b"C", "key.pem": b"K"})
    secret = kube.objs[("Secret", dh.NAMESPACE, "b-docker-tls")]
    assert base64.b64decode(secret["data"]["ca.pem"]) == b"CA"
    assert "tlsSecretName: b-docker-tls" in kube.objs[("ConfigMap", dh.NAMESPACE, dh.CONFIGMAP)]["data"]["b"]
    await hc.remove(kube, "b")
    assert ("Secret", dh.NAMESPACE, "b-docker-tls") not in kube.objs


async def test_ssh_material_goes_into_an_ssh_auth_secret_removed_with_the_host() -> None:
    kube = MemKube()
    host = dh.DockerHost("c", "ssh://ci@builder", address="builder", ssh_secret=hc.ssh_secret_name("c"))
    await hc.add(kube, host, {"ssh-privatekey": b"KEY", "known_hosts": b"builder ssh-ed25519 AAA"})
    secret = kube.objs[("Secret", dh.NAMESPACE, "c-docker-ssh")]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert {k: base64.b64decode(v) for k, v in secret["data"].items()} == {
        "ssh-privatekey": b"KEY", "known_hosts": b"builder ssh-ed25519 AAA"}
    assert "sshSecretName: c-docker-ssh" in kube.objs[("ConfigMap", dh.NAMESPACE, dh.CONFIGMAP)]["data"]["c"]
    await hc.remove(kube, "c")
    assert ("Secret", dh.NAMESPACE, "c-docker-ssh") not in kube.objs


async def test_cluster_host_and_an_invalid_configmap(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = MemKube()
    kube.objs[("Cluster", "default", "c1")] = {"spec": {"infrastructureRef": {"kind": "DockerCluster", "name": "c1"}}}
    kube.objs[("DockerCluster", "default", "c1")] = _dc("c1", "two")
    assert await hc.cluster_host(kube, "default", "c1") == "two"
    assert await hc.cluster_host(kube, "default", "missing") == "local"
    with pytest.raises(hc.HostError, match="docker host 'two' is not configured"):
        await hc.cluster_runtime(kube, "default", "c1")  # placed on a host the configuration lost: said, not local
    await hc.add(kube, dh.DockerHost("two", "unix:///run/capd-py-dockerd-two.sock"))
    made: list[str] = []

    def runtime_for(host: dh.DockerHost, tls: Any = None) -> FakeRuntime:
        made.append(host.endpoint)
        if down:
            raise RuntimeError_("docker daemon not reachable")
        return FakeRuntime()
    monkeypatch.setattr(endpoints, "runtime_for", runtime_for)
    down = False
    host, rt = await hc.cluster_runtime(kube, "default", "c1")
    assert host == "two" and isinstance(rt, FakeRuntime) and made == ["unix:///run/capd-py-dockerd-two.sock"]
    down = True
    with pytest.raises(hc.HostError, match="cluster default/c1 is on docker host two: docker daemon not reachable"):
        await hc.cluster_runtime(kube, "default", "c1")
    kube.objs[("ConfigMap", dh.NAMESPACE, dh.CONFIGMAP)] = {"data": {"x": "endpoint: ftp://x"}}
    with pytest.raises(hc.HostError, match="is invalid: docker host 'x'"):
        await hc.listing(kube)
    with pytest.raises(hc.HostError, match="is invalid"):
        await hc.runtime_of(kube, "x")


@pytest.mark.parametrize(("args", "message"), [
    (["host", "add", "b", "--endpoint", "tcp://10.0.0.7:2376"], "needs `tlsSecretName`"),
    (["host", "add", "b", "--endpoint", "unix://rel"], "unix:///absolute/path"),
    (["host", "add", "b", "--endpoint", "ssh://b", "--label", "zone"], "KEY=VALUE"),
    (["host", "add", "b", "--endpoint", "tcp://b:2376", "--tls-ca", "/etc/hostname"], "go together"),
    (["host", "add", "b", "--endpoint", "ssh://b", "--ssh-key", "/etc/hostname"], "--ssh-key and --ssh-known-hosts"),
    (["host", "add", "b", "--endpoint", "tcp://b:2376", "--insecure", "--ssh-key", "/etc/hostname",
      "--ssh-known-hosts", "/etc/hostname"], "`sshSecretName` applies to ssh:// endpoints only"),
    (["load", "image", "x:1"], "give --cluster"),
    (["load", "image", "x:1", "--cluster", "c", "--host", "h"], "give --cluster"),
])
def test_usage_errors_exit_2_before_any_api_call(args: list[str], message: str) -> None:
    r = runner.invoke(app, [*args, "--kubeconfig", "/nonexistent/kubeconfig"])
    assert r.exit_code == 2, r.output
    assert message in r.output
