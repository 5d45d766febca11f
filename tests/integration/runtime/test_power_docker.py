"""DockerRuntime stop / pause / unpause against the real dockerd (capd-py stop|pause cluster use them): each is
idempotent, a frozen container uses no CPU (cgroup v1 cpuacct) and keeps its static address and pinned port."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerSpec, PortMapping

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

IMAGE = "capd-py/haproxy:2.6"  # any local image with a shell; never pulled


@pytest.fixture
def rt(rt: DockerRuntime) -> DockerRuntime:
    """conftest's runtime, once IMAGE is there (never pulled: missing, the test fails)."""
    if not rt.image_exists(IMAGE):
        pytest.fail(f"{IMAGE} is missing: run `make images`", pytrace=False)
    return rt


def _cpu(container_id: str) -> int:
    return int(Path(f"/sys/fs/cgroup/cpuacct/docker/{container_id}/cpuacct.usage").read_text())


def test_stop_start_pause_unpause(rt: DockerRuntime) -> None:
    name = f"t-power-{secrets.token_hex(3)}"
    try:
        # a network of its own (docker's default bridge may not exist here), static addresses as capd-py's
        networks.ensure_network(rt, name, {CONTAINER_NAMESPACE: name})
        # a busy loop: CPU to measure
        info = rt.run_container(ContainerSpec(name=name, image=IMAGE, labels={CONTAINER_NAMESPACE: name}, network=name,
                                              entrypoint=("sh", "-c", "while :; do :; done"),
                                              ports=(PortMapping(6443),)))
        port = info.ports[6443]
        rt.pause_container(name)
        rt.pause_container(name)  # already paused: no-op
        assert rt.get_container(name).status == "paused"  # type: ignore[union-attr]
        before = _cpu(info.id)
        time.sleep(2)
        assert _cpu(info.id) == before, "a frozen container used CPU"
        rt.unpause_container(name)
        rt.unpause_container(name)
        assert rt.get_container(name).running  # type: ignore[union-attr]
        before = _cpu(info.id)
        time.sleep(1)
        assert _cpu(info.id) > before  # thawed: the loop runs again

        t0 = time.monotonic()
        rt.stop_container(name, timeout=1)  # sh ignores SIGTERM as PID 1: killed after 1 s
        assert time.monotonic() - t0 < 10
        rt.stop_container(name, timeout=1)  # already stopped: no-op
        assert rt.get_container(name).status == "exited"  # type: ignore[union-attr]
        rt.start_container(name)
        again = rt.get_container(name)
        assert again is not None and again.running and again.ports[6443] == port
    finally:
        rt.remove_container(name)
        rt.remove_network(name)
    assert rt.get_container(name) is None and rt.get_network(name) is None
