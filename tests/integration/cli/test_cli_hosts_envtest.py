"""`capd-py host add|list|remove` against a real API server: the ConfigMap and TLS Secret it writes parse back as
the controllers read them, a host holding a DockerCluster is not removed without --force, an invalid ConfigMap is
reported. The ConfigMap is removed at the end (the session's other tests expect no hosts)."""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import CONFIG_MAP, DOCKER_CLUSTER, NAMESPACE, SECRET
from capd_py.cli.main import app
from capd_py.testing.envtest import EnvTest

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
runner = CliRunner()


def _run(env: EnvTest, *args: str) -> tuple[int, str]:
    r = runner.invoke(app, [*args, "--kubeconfig", str(env.kubeconfig_path)])
    return r.exit_code, r.output


async def _get(env: EnvTest, gvk, ns: str | None, name: str) -> dict | None:  # type: ignore[no-untyped-def]
    k = env.kube()
    try:
        return await k.get(gvk, ns, name)
    finally:
        k.close()


async def _do(env: EnvTest, fn):  # type: ignore[no-untyped-def]
    k = env.kube()
    try:
        return await fn(k)
    finally:
        k.close()


@pytest.fixture
def clean_hosts(envtest: EnvTest) -> Iterator[None]:
    async def drop(k) -> None:  # type: ignore[no-untyped-def]
        await k.delete(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP)
        await k.delete(SECRET, dh.NAMESPACE, "b-docker-tls")
    asyncio.run(_do(envtest, drop))
    yield
    asyncio.run(_do(envtest, drop))


def test_host_add_list_remove(envtest: EnvTest, clean_hosts: None, tmp_path: Path) -> None:
    code, out = _run(envtest, "host", "add", "two", "--endpoint", "unix:///run/capd-py-dockerd-2.sock",
                     "--address", "192.0.2.2", "-l", "zone=b", "--max-clusters", "2")
    assert code == 0, out
    assert "docker host two added" in out
    cm = asyncio.run(_get(envtest, CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP))
    assert cm is not None
    hosts = dh.parse_hosts(cm["data"])
    assert hosts["two"] == dh.DockerHost("two", "unix:///run/capd-py-dockerd-2.sock", "", {"zone": "b"}, 2, False,
                                         "192.0.2.2")

    for f, text in (("ca.pem", b"CA"), ("cert.pem", b"CERT"), ("key.pem", b"KEY")):
        (tmp_path / f).write_bytes(text)
    code, out = _run(envtest, "host", "add", "b", "--endpoint", "tcp://10.0.0.7:2376", "--tls-ca",
                     str(tmp_path / "ca.pem"), "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key",
                     str(tmp_path / "key.pem"))
    assert code == 0, out
    secret = asyncio.run(_get(envtest, SECRET, dh.NAMESPACE, "b-docker-tls"))
    assert secret is not None and base64.b64decode(secret["data"]["key.pem"]) == b"KEY"
    cm = asyncio.run(_get(envtest, CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP))
    assert dh.parse_hosts(cm["data"])["b"].tls_secret == "b-docker-tls"  # type: ignore[index]

    # a DockerCluster placed on `two`
    ns, name = f"h-{secrets.token_hex(3)}", "c1"

    async def place(k) -> None:  # type: ignore[no-untyped-def]
        await k.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await k.create(DOCKER_CLUSTER, {"apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster",
                                        "metadata": {"name": name, "namespace": ns,
                                                     "annotations": {dh.DOCKER_HOST_ANNOTATION: "two"}},
                                        "spec": {}})
    asyncio.run(_do(envtest, place))
    try:
        code, out = _run(envtest, "host", "list")
        assert code == 0, out
        rows = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}
        assert rows["two"][1:] == ["unix:///run/capd-py-dockerd-2.sock", "192.0.2.2", "zone=b", "2", "1"], out
        assert rows["b"][1:3] == ["tcp://10.0.0.7:2376", "10.0.0.7"], out
        assert "local" in rows

        code, out = _run(envtest, "host", "remove", "two")
        assert code == 1 and f"still holds cluster(s) {ns}/{name}" in out, out
        code, out = _run(envtest, "host", "remove", "b")
        assert code == 0, out
        assert asyncio.run(_get(envtest, SECRET, dh.NAMESPACE, "b-docker-tls")) is None
        code, out = _run(envtest, "host", "remove", "two", "--force")
        assert code == 0, out
        cm = asyncio.run(_get(envtest, CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP))
        assert (cm or {}).get("data") in (None, {}), cm
    finally:
        asyncio.run(_do(envtest, lambda k: k.delete(DOCKER_CLUSTER, ns, name)))


def test_invalid_configmap_is_reported(envtest: EnvTest, clean_hosts: None) -> None:
    async def bad(k) -> None:  # type: ignore[no-untyped-def]
        if await k.get(NAMESPACE, None, dh.NAMESPACE) is None:
            await k.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": dh.NAMESPACE}})
        await k.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                    "metadata": {"name": dh.CONFIGMAP, "namespace": dh.NAMESPACE},
                                    "data": {"x": "endpoint: ftp://x"}})
    asyncio.run(_do(envtest, bad))
    code, out = _run(envtest, "host", "list")
    assert code == 1 and "capd-py-system/capd-py-docker-hosts is invalid: docker host 'x'" in out, out
