"""DockerRuntime's parts of a recreating snapshot restore against the real dockerd: container_spec reads back the
spec of a running container (pinned host port, static address, volume), create_container makes it again without
starting it, its storage (writable layer and volume) is reachable before the first start, and what is written
there is what the container sees when it starts (docker's copy of the image into a new volume does not overwrite
it)."""

from __future__ import annotations

import secrets
from dataclasses import replace
from pathlib import Path

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.reconcile import addresses
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerSpec, Mount, PortMapping

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

IMAGE = "capd-py/haproxy:2.6"  # any local image with a shell; never pulled


@pytest.fixture
def rt(rt: DockerRuntime) -> DockerRuntime:
    """conftest's runtime, once IMAGE is there (never pulled: missing, the test fails)."""
    if not rt.image_exists(IMAGE):
        pytest.fail(f"{IMAGE} is missing: run `make images`", pytrace=False)
    return rt


def test_spec_read_back_create_stopped_fill_storage_start(rt: DockerRuntime) -> None:
    name = f"t-snap-{secrets.token_hex(3)}"
    try:
        net = networks.ensure_network(rt, name, {CONTAINER_NAMESPACE: name})
        ip = addresses.first_host(net.subnet).rsplit(".", 1)[0] + ".7"
        rt.run_container(ContainerSpec(name=name, image=IMAGE, hostname=name, labels={CONTAINER_NAMESPACE: name},
                                       network=name, entrypoint=("sh", "-c", "sleep 3600"), node=False, ipv4=ip,
                                       ports=(PortMapping(6443),), mounts=(Mount("", "/data", kind="volume"),)))
        spec = rt.container_spec(name)
        assert spec is not None
        port = spec.ports[0].host_port
        assert port > 0 and spec.ipv4 == ip and spec.network == name and not spec.node
        # Config.Labels holds the image's own labels too (capd-py's images carry an inputs label): the same again
        assert Mount("", "/data", kind="volume") in spec.mounts and spec.labels[CONTAINER_NAMESPACE] == name
        rt.remove_container(name)

        # the image's entrypoint/command are the image's: the test's sleep goes with the spec it was given
        again = rt.create_container(replace(spec, entrypoint=("sh", "-c", "sleep 3600")))
        assert again.status == "created"
        paths = rt.storage_paths(name)
        assert set(paths) == {"/", "/data"}
        (Path(paths["/"]) / "restored-root").write_text("root")
        (Path(paths["/data"]) / "restored-vol").write_text("vol")
        rt.start_container(name)
        info = rt.get_container(name)
        assert info is not None and info.running and info.ports[6443] == port and info.ipv4[name] == ip
        out = rt.exec(name, ["sh", "-c", "cat /restored-root /data/restored-vol"]).output
        assert out == "rootvol", out
    finally:
        rt.remove_container(name)
        rt.remove_network(name)
