"""An `ssh://` docker host for real (issue 32): a throwaway SSH server (ssh_server.py beside this file) on 127.0.0.1
runs the `docker system dial-stdio` the docker SDK's system-ssh transport asks for, and capd-py's own path builds the
runtime: the host parsed from its ConfigMap entry, the docker hosts service (capd_py.controllers.services.docker_hosts)
making its DockerInfra through capd_py.runtime.endpoints. Everything the controllers do to a node container is done
over it: a network, a container from a local image, exec (with and without stdin: write_file is how haproxy.cfg and
the bootstrap data get in), the list by label, the removal. Then the server goes away: calls fail promptly with
DaemonUnreachable (what the controllers turn into `DockerHostUnreachable`), and work again when it is back."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator

import pytest
from ssh_server import SshDockerHost, patched_environ

from capd_py.api import dockerhosts as dh
from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.controllers.services.docker_hosts import DockerHosts
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.runtime import endpoints, networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerSpec, DaemonUnreachable

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
