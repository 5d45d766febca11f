"""Static node addresses against the real dockerd: nodes created at once, in overlapping waves (a
MachineDeployment scaled up while earlier creations end), each get an address of their own; a container
that cannot start (its address taken) is not left behind, so the next attempt is made afresh."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Iterator

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerInfo, ContainerSpec, RuntimeError_

pytestmark = pytest.mark.integration


@pytest.fixture
def net() -> Iterator[tuple[DockerRuntime, str, dict[str, str], str]]:
    rt = DockerRuntime()
    bases = rt.list_images("capd-py/base")
    if not bases:
        pytest.fail("no capd-py/base image; build it with `make images`", pytrace=False)
    tag = secrets.token_hex(3)
    labels = {CONTAINER_NAMESPACE: f"t-addr-{tag}"}
    name = f"capd-py-t-addr-{tag}"
    networks.ensure_network(rt, name, labels)
    try:
        yield rt, name, labels, bases[-1]
    finally:
        for c in rt.list_containers(labels):
            rt.remove_container(c.name)
        rt.api.remove_network(name)


class SlowListing(DockerRuntime):
    """docker's answer to a listing arrives 0.3 s late (a busy daemon): creations end in between."""

    def list_containers(self, labels: dict[str, str] | None = None,
                        network: str | None = None) -> list[ContainerInfo]:
        out = super().list_containers(labels, network)
        time.sleep(0.3)
        return out


def _spec(name: str, image: str, network: str, labels: dict[str, str], ipv4: str = "") -> ContainerSpec:
    return ContainerSpec(name=name, image=image, network=network, labels=labels, node=False, ipv4=ipv4,
                         privileged_mode="restricted", entrypoint=("sleep", "infinity"))


async def test_overlapping_creations_get_distinct_addresses(
        net: tuple[DockerRuntime, str, dict[str, str], str]) -> None:
    _, network, labels, image = net
    infra = DockerInfra(SlowListing(), "")
    names = [f"{labels[CONTAINER_NAMESPACE]}-{i}" for i in range(12)]
    waves: list[asyncio.Future[ContainerInfo]] = []
    for i in range(0, 12, 3):  # each wave picks while the previous one's creations end
        waves += [asyncio.ensure_future(infra.create_container(_spec(n, image, network, labels)))
                  for n in names[i:i + 3]]
        await asyncio.sleep(0.25)
    made = await asyncio.gather(*waves, return_exceptions=True)
    assert not [e for e in made if isinstance(e, BaseException)], made
    addrs = [c.ipv4[network] for c in made if isinstance(c, ContainerInfo)]
    assert len(set(addrs)) == 12, addrs


def test_a_container_that_cannot_start_is_removed(net: tuple[DockerRuntime, str, dict[str, str], str]) -> None:
    rt, network, labels, image = net
    a = rt.run_container(_spec(f"{labels[CONTAINER_NAMESPACE]}-a", image, network, labels))
    taken = a.ipv4[network]
    b = f"{labels[CONTAINER_NAMESPACE]}-b"
    with pytest.raises(RuntimeError_, match="in use"):
        rt.run_container(_spec(b, image, network, labels, ipv4=taken))
    assert rt.get_container(b) is None  # not left in Created with the taken address, to fail again forever
