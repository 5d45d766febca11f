"""An `ssh://` docker host for real (issue 32): a throwaway SSH server (ssh_server.py beside this file) on 127.0.0.1
runs the `docker system dial-stdio` the docker SDK's system-ssh transport asks for, and capd-py's own path builds the
runtime: the host parsed from its ConfigMap entry, the docker hosts service (capd_py.controllers.services.docker_hosts)
making its DockerInfra through capd_py.runtime.endpoints. Everything the controllers do to a node container is done
over it: a network, a container from a local image, exec (with and without stdin: write_file is how haproxy.cfg and
the bootstrap data get in), the list by label, the removal. Then the server goes away: calls fail promptly with
DaemonUnreachable (what the controllers turn into `DockerHostUnreachable`), and work again when it is back."""

from __future__ import annotations

import base64
import os
import secrets
import stat
import time
from collections.abc import Iterator
from typing import Any

import asyncssh
import pytest
from ssh_server import SshDockerHost, patched_environ

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import GVK
from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.controllers.services.docker_hosts import DockerHosts
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.runtime import endpoints, networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerSpec, DaemonUnreachable, RuntimeError_

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

IMAGE = "capd-py/haproxy:2.6"  # any local image with a shell; never pulled
DIAL = "docker system dial-stdio"


@pytest.fixture
def sshd() -> Iterator[SshDockerHost]:
    if not DockerRuntime().image_exists(IMAGE):
        pytest.fail(f"{IMAGE} is missing: run `make images`", pytrace=False)
    with SshDockerHost() as server, patched_environ(server.client_env()):
        yield server


async def _infra(sshd: SshDockerHost) -> tuple[DockerHosts, dh.DockerHost, DockerInfra]:
    """The host as the ConfigMap says it, and its DockerInfra as the controllers get it (`ctx.hosts.infra`)."""
    host = dh.parse_hosts({"far": f"endpoint: {sshd.endpoint}\naddress: 127.0.0.1"})["far"]
    assert host.scheme == "ssh"
    hosts = DockerHosts(DockerInfra(DockerRuntime()), DockerInfra)
    return hosts, host, await hosts.infra(None, host)  # no TLS Secret for ssh: the API is not read


async def test_node_container_lifecycle_over_ssh(sshd: SshDockerHost) -> None:
    hosts, host, infra = await _infra(sshd)
    rt = infra.runtime
    await infra.call(rt.ping)
    assert sshd.commands and set(sshd.commands) == {DIAL}, sshd.commands  # it went through our sshd
    assert await hosts.infra(None, host) is infra  # an unchanged entry keeps its infra

    name = f"t-ssh-{secrets.token_hex(3)}"
    labels = {CONTAINER_NAMESPACE: name}
    before = len(sshd.commands)
    try:
        await infra.call(networks.ensure_network, rt, name, labels)
        info = await infra.call(rt.run_container, ContainerSpec(
            name=name, image=IMAGE, labels=labels, network=name, entrypoint=("sh", "-c", "sleep 600")))
        assert info.running

        # repeated: the stream ends with the exec, and the SDK's close of an ssh that has exited raced with it
        # (BrokenPipeError -> "daemon not reachable" on some of them; capd_py.runtime.endpoints)
        for _ in range(15):
            res = await infra.call(rt.exec, name, ["sh", "-c", "echo out-$((6*7)); echo err >&2; exit 3"])
            # stdout and stderr are two pipes in the container: their order in the output is not kept
            assert (res.exit_code, sorted(res.output.split())) == (3, ["err", "out-42"])
        # exec with stdin (the write side half-closed), as write_file does for haproxy.cfg and bootstrap data
        payload = secrets.token_bytes(200_000)
        await infra.call(rt.write_file, name, "/tmp/capd/payload", payload, 0o600)
        assert await infra.call(rt.read_file, name, "/tmp/capd/payload") == payload
        res = await infra.call(rt.exec, name, ["stat", "-c", "%a %s", "/tmp/capd/payload"])
        assert res.output.split() == ["600", "200000"]

        listed = await infra.call(rt.list_containers, labels)
        assert [c.name for c in listed] == [name]
        # the local daemon is the same one here (the server runs `docker` against it): what ssh made is there
        assert DockerRuntime().get_container(name) is not None
    finally:
        await infra.call(rt.remove_container, name)
        await infra.call(rt.remove_network, name)
    assert await infra.call(rt.list_containers, labels) == []
    assert await infra.call(rt.get_network, name) is None
    assert len(sshd.commands) > before and set(sshd.commands) == {DIAL}


async def test_ssh_server_down_is_daemon_unreachable_then_back(sshd: SshDockerHost) -> None:
    _hosts, host, infra = await _infra(sshd)
    await infra.call(infra.runtime.ping)

    sshd.stop()
    t0 = time.monotonic()
    with pytest.raises(DaemonUnreachable, match="docker daemon not reachable"):
        await infra.call(infra.runtime.ping)
    with pytest.raises(DaemonUnreachable, match="docker daemon not reachable"):
        await infra.call(infra.runtime.list_containers, {CONTAINER_NAMESPACE: "none"})
    # a client made while the host is away (controllers restarted meanwhile): the SDK's version question fails
    with pytest.raises(DaemonUnreachable, match=f"docker host far \\({host.endpoint}\\)"):
        endpoints.runtime_for(host)
    assert time.monotonic() - t0 < 10, "an ssh host that is away must be said promptly"

    sshd.start()  # the host is back: the same infra answers again, nothing to rebuild
    await infra.call(infra.runtime.ping)
    assert await infra.call(infra.runtime.list_containers, {CONTAINER_NAMESPACE: "none"}) == []


# --- a host with its own credentials (`sshSecretName`): no ssh configuration of this machine is used -----------

class SecretKube:
    """The one read the docker hosts service makes: the host's Secret in capd-py-system."""

    def __init__(self, data: dict[str, bytes]) -> None:
        self.secret = {"data": {k: base64.b64encode(v).decode() for k, v in data.items()}}

    async def get(self, g: GVK, ns: str | None, name: str) -> dict[str, Any] | None:
        return self.secret if (g.kind, ns, name) == ("Secret", dh.NAMESPACE, "far-docker-ssh") else None


@pytest.fixture
def bare_sshd() -> Iterator[SshDockerHost]:
    """The server alone: PATH and ~/.ssh as they are (nothing on this machine knows its key)."""
    if not DockerRuntime().image_exists(IMAGE):
        pytest.fail(f"{IMAGE} is missing: run `make images`", pytrace=False)
    with SshDockerHost() as server:
        yield server


def _managed(sshd: SshDockerHost) -> dh.DockerHost:
    return dh.parse_hosts({"far": f"endpoint: {sshd.endpoint}\nsshSecretName: far-docker-ssh\n"
                                  "address: 127.0.0.1"})["far"]


async def test_a_host_with_its_ssh_secret_shares_one_connection(bare_sshd: SshDockerHost) -> None:
    host = _managed(bare_sshd)
    assert host.secret == "far-docker-ssh" and host.secret_keys == dh.SSH_KEYS
    hosts = DockerHosts(DockerInfra(DockerRuntime()), DockerInfra)
    kube = SecretKube(bare_sshd.material())
    infra = await hosts.infra(kube, host)
    rt = infra.runtime
    assert isinstance(rt, DockerRuntime)
    name = f"t-ssh-{secrets.token_hex(3)}"
    labels = {CONTAINER_NAMESPACE: name}
    try:
        await infra.call(networks.ensure_network, rt, name, labels)
        await infra.call(rt.run_container, ContainerSpec(name=name, image=IMAGE, labels=labels, network=name,
                                                         entrypoint=("sh", "-c", "sleep 600")))
        for _ in range(10):
            res = await infra.call(rt.exec, name, ["sh", "-c", "echo out-$((6*7))"])
            assert (res.exit_code, res.output.strip()) == (0, "out-42")
        payload = secrets.token_bytes(100_000)
        await infra.call(rt.write_file, name, "/tmp/capd/payload", payload, 0o600)
        assert await infra.call(rt.read_file, name, "/tmp/capd/payload") == payload
    finally:
        await infra.call(rt.remove_container, name)
        await infra.call(rt.remove_network, name)
    assert set(bare_sshd.commands) == {DIAL} and len(bare_sshd.commands) > 20
    # every call a channel of one shared connection (ControlMaster), not a connection of its own
    assert bare_sshd.connections == 1, (bare_sshd.connections, len(bare_sshd.commands))
    # the Secret's files are private to this process's user
    folders = [o.split("=", 1)[1].rsplit("/", 1)[0] for o in rt.client.api._custom_adapter.options
               if o.startswith("UserKnownHostsFile=")]
    assert len(folders) == 1 and stat.S_IMODE(os.stat(folders[0]).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(os.path.join(folders[0], f)).st_mode) == 0o600
               for f in ("ssh-privatekey", "known_hosts"))

    # the host away and back: the shared connection is gone, the next call makes a new one
    bare_sshd.stop()
    with pytest.raises(DaemonUnreachable, match="docker daemon not reachable"):
        await infra.call(rt.ping)
    bare_sshd.start()
    await infra.call(rt.ping)
    assert bare_sshd.connections == 2


async def test_a_host_key_not_in_the_secrets_known_hosts_is_refused(bare_sshd: SshDockerHost) -> None:
    host = _managed(bare_sshd)
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    material = {**bare_sshd.material(), "known_hosts": f"[127.0.0.1]:{bare_sshd.port} {other}\n".encode()}
    with pytest.raises(RuntimeError_, match="docker host far"):
        endpoints.runtime_for(host, material)
    with pytest.raises(RuntimeError_, match="lacks known_hosts"):
        endpoints.runtime_for(host, {"ssh-privatekey": material["ssh-privatekey"]})
    assert bare_sshd.commands == []  # refused before any command ran
