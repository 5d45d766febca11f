"""A `tcp://` docker host with TLS for real (issue 32): a second dockerd (hack/second-dockerd.sh) listening on
127.0.0.1 with `--tlsverify` and certificates made here, and capd-py's own path to it: the host parsed from its
ConfigMap entry, its runtime made by capd_py.runtime.endpoints from the TLS Secret's ca.pem / cert.pem / key.pem. A
container runs there, exec works (with stdin too, over the TLS socket), the listing by label sees it; a client whose
certificate another CA signed, or a CA that did not sign the daemon's certificate, is refused."""

from __future__ import annotations

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from capd_py.api import dockerhosts as dh
from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.cli import cleanup
from capd_py.reconcile.certs import new_client_cert
from capd_py.reconcile.dockercluster import cluster_labels
from capd_py.reconcile.servingcert import new_serving_cert, new_webhook_ca
from capd_py.runtime import endpoints, networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerSpec, RuntimeError_
from capd_py.testing.envtest import free_port

# a second dockerd: its own bridge and rules on this host (see tests/e2e/test_multihost.py)
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300), pytest.mark.host_exclusive]

IMAGE = "capd-py/haproxy:2.6"  # any local image with a shell; never pulled
SCRIPT = Path(__file__).resolve().parents[3] / "hack" / "second-dockerd.sh"


@pytest.fixture(scope="module")
def tls_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, bytes]]]:
    """(tcp endpoint, the TLS Secret's data) of a second dockerd that requires a client certificate of its CA."""
    tmp_path = tmp_path_factory.mktemp("tls")
    if not DockerRuntime().image_exists(IMAGE):
        pytest.fail(f"{IMAGE} is missing: run `make images`", pytrace=False)
    ca = new_webhook_ca()
    server = new_serving_cert(ca, ["127.0.0.1"])
    client = new_client_cert(ca, "capd-py", [])
    for name, data in (("ca.pem", ca.cert), ("server.pem", server.cert), ("server-key.pem", server.key)):
        (tmp_path / name).write_bytes(data)
    port = free_port()
    name = f"tls{secrets.token_hex(2)}"
    args = (f"--host tcp://127.0.0.1:{port} --tlsverify --tlscacert {tmp_path / 'ca.pem'} "
            f"--tlscert {tmp_path / 'server.pem'} --tlskey {tmp_path / 'server-key.pem'}")
    # started and stopped with the host to itself: the module is `host_exclusive` as a whole (tests/conftest.py)
    sock = subprocess.run(["bash", str(SCRIPT), "start", name], check=True, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "CAPD_PY_DOCKERD_ARGS": args}).stdout.strip()
    try:
        # the image, through the daemon's own socket by the docker CLI (copying 272 MB through the SDK over TLS takes
        # ~2 min; capd-py's image copy between hosts is tested in tests/e2e/test_multihost.py)
        subprocess.run(f"docker save {IMAGE} | docker -H {sock} load -q", shell=True, check=True,
                       capture_output=True, timeout=300)
        yield f"tcp://127.0.0.1:{port}", {"ca.pem": ca.cert, "cert.pem": client.cert, "key.pem": client.key}
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", name], check=False, capture_output=True, timeout=120)


def test_node_container_on_a_tls_host(tls_daemon: tuple[str, dict[str, bytes]]) -> None:
    endpoint, material = tls_daemon
    host = dh.parse_hosts({"secure": f"endpoint: {endpoint}\ntlsSecretName: secure-docker-tls\n"
                                     "address: 127.0.0.1"})["secure"]
    assert host.scheme == "tcp" and host.tls_secret == "secure-docker-tls"
    rt = endpoints.runtime_for(host, material)
    rt.ping()
    local = DockerRuntime()
    assert rt.image_exists(IMAGE)
    # another daemon, not the main one (both share /etc/docker, hence one engine ID: the data root tells)
    assert rt.client.info()["DockerRootDir"] != local.client.info()["DockerRootDir"]

    name = f"t-tls-{secrets.token_hex(3)}"
    labels = {CONTAINER_NAMESPACE: name}
    try:
        networks.ensure_network(rt, name, labels)
        info = rt.run_container(ContainerSpec(name=name, image=IMAGE, labels=labels, network=name,
                                              entrypoint=("sh", "-c", "sleep 600")))
        assert info.running
        res = rt.exec(name, ["sh", "-c", "echo out-$((6*7))"])
        assert (res.exit_code, res.output.strip()) == (0, "out-42")
        payload = secrets.token_bytes(50_000)
        t0 = time.monotonic()
        rt.write_file(name, "/tmp/capd/payload", payload, 0o600)
        # a TLS stream cannot be half-closed from Python: before the exec read exactly what was sent, the daemon
        # never saw the end of stdin and every write waited out the client's 120 s timeout
        assert time.monotonic() - t0 < 10
        assert rt.read_file(name, "/tmp/capd/payload") == payload
        t0 = time.monotonic()
        res = rt.exec(name, ["sh", "-c", "wc -c; exit 3"], stdin=b"x" * 70_000)
        assert (res.exit_code, res.output.split(), time.monotonic() - t0 < 10) == (3, ["70000"], True)
        assert [c.name for c in rt.list_containers(labels)] == [name]
        assert local.get_container(name) is None  # made on the TLS host only
    finally:
        rt.remove_container(name)
        rt.remove_network(name)
    assert rt.list_containers(labels) == []


def test_a_client_certificate_of_another_ca_is_refused(tls_daemon: tuple[str, dict[str, bytes]]) -> None:
    endpoint, material = tls_daemon
    host = dh.parse_hosts({"secure": f"endpoint: {endpoint}\ntlsSecretName: s\naddress: 127.0.0.1"})["secure"]
    other = new_webhook_ca()
    stranger = new_client_cert(other, "stranger", [])
    with pytest.raises(RuntimeError_, match="docker host secure"):
        endpoints.runtime_for(host, {**material, "cert.pem": stranger.cert, "key.pem": stranger.key})
    # and the daemon's certificate is checked against the Secret's CA: another CA does not trust it
    with pytest.raises(RuntimeError_, match="docker host secure"):
        endpoints.runtime_for(host, {**material, "ca.pem": other.cert})


def test_delete_all_takes_only_this_management_clusters_clusters_off_a_shared_host(
        tls_daemon: tuple[str, dict[str, bytes]]) -> None:
    """`capd-py delete all` on a remote host: the named clusters' containers, networks and volumes, found by the
    daemon's own label filters over TLS; another cluster of the same name in another namespace stays."""
    endpoint, material = tls_daemon
    host = dh.parse_hosts({"secure": f"endpoint: {endpoint}\ntlsSecretName: s\naddress: 127.0.0.1"})["secure"]
    rt = endpoints.runtime_for(host, material)
    tag = secrets.token_hex(3)
    made = []
    for ns in ("mine", "theirs"):
        labels = cluster_labels(ns, f"c{tag}")
        name = f"c{tag}-{ns}"
        networks.ensure_network(rt, name, labels)
        rt.run_container(ContainerSpec(name=name, image=IMAGE, labels=labels, network=name,
                                       entrypoint=("sh", "-c", "sleep 600")))
        rt.client.volumes.create(name, labels=labels)
        made.append(name)
    try:
        counts, left = cleanup.delete_remote([cleanup.Remote("secure", (f"mine/c{tag}",), rt)])
        assert (counts, left) == ({"containers": 1, "networks": 1, "volumes": 1}, [])
        assert rt.get_container(f"c{tag}-mine") is None and rt.get_network(f"c{tag}-mine") is None
        assert f"c{tag}-mine" not in rt.list_volumes({})
        assert rt.get_container(f"c{tag}-theirs") is not None and f"c{tag}-theirs" in rt.list_volumes({})
    finally:
        for name in made:
            rt.remove_container(name)
            rt.remove_network(name)
            rt.remove_volume(name)
