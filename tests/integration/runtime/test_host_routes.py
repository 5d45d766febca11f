"""The docker host's routes, read where the controllers run: on the host itself, and from a network namespace of
their own (in-cluster controllers run in a pod) where only a helper container on the host's network sees them.

A subnet chosen without them can shadow a route the host has (another daemon's bridge, a VPN): traffic to the
cluster from outside its network then goes to that route's device (measured 2026-12-05: the in-cluster e2e's
probe failed with "Connect call failed" after a second dockerd's bridge had been left on 172.16.0.0/20)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.reconcile.dockercluster import DEFAULT_LB_IMAGE
from capd_py.runtime.docker_runtime import DockerRuntime

pytestmark = pytest.mark.integration

# documentation-free private ranges no other test network uses (10.208/12 is in capd-py's default pool; these are
# not), one pair per case: the two cases may run at once in two workers, and with one pair the second's network
# found both subnets taken (the first's route and the first's network; measured under `make test`, 2026-12-06)
RANGES = {False: ("10.222.5.0/24", "10.222.6.0/24"), True: ("10.222.7.0/24", "10.222.8.0/24")}

_PROBE = """
import json, sys
from capd_py.runtime import networks
from capd_py.reconcile import subnets
from capd_py.runtime.docker_runtime import DockerRuntime
rt = DockerRuntime()
name, ns, image, first, second = sys.argv[1:6]
routes = rt.host_routes(image)
net = networks.ensure_network(rt, name, {"io.x-k8s.capd-py.namespace": ns},
                              subnets.parse_pool(f"{first}:24,{second}:24"), routes_image=image)
rt._routes_cache = (0.0, None)  # read again now that the new network's bridge has its route
after = rt.host_routes(image)
print(json.dumps({"own_netns_is_host": rt._shares_host_netns(), "routes": routes, "subnet": net.subnet,
                  "after": after, "after_without_docker_bridges": rt.host_routes(image, docker_bridges=False)}))
"""


@pytest.fixture(params=[False, True], ids=["on-the-host", "own-network-namespace"])
def own_netns(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


@pytest.fixture
def dummy_route(own_netns: bool) -> Iterator[str]:
    """A host route on the case's first range (a bridge with no members: another daemon's network left behind; a
    VPN makes one too)."""
    link = f"cpr{secrets.token_hex(3)}"
    subprocess.run(["ip", "link", "add", link, "type", "bridge"], check=True)
    try:
        subprocess.run(["ip", "addr", "add", RANGES[own_netns][0].replace(".0/24", ".1/24"), "dev", link], check=True)
        subprocess.run(["ip", "link", "set", link, "up"], check=True)
        yield link
    finally:
        subprocess.run(["ip", "link", "del", link], check=False)


def _probe(rt: DockerRuntime, own_netns: bool) -> dict:
    if not rt.image_exists(DEFAULT_LB_IMAGE):
        pytest.fail(f"no {DEFAULT_LB_IMAGE} image; build it with `make images`", pytrace=False)
    tag = secrets.token_hex(3)
    name, ns = f"capd-py-t-routes-{tag}", f"t-routes-{tag}"
    # unshare --net: a namespace with no routes of the host (a pod's); the docker socket still answers there
    cmd = [*(["unshare", "--net"] if own_netns else []), sys.executable, "-c", _PROBE, name, ns, DEFAULT_LB_IMAGE,
           *RANGES[own_netns]]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr[-3000:]
        return dict(json.loads(p.stdout))
    finally:
        for n in rt.list_networks({CONTAINER_NAMESPACE: ns}):
            rt.remove_network(n.name)


def test_a_new_network_never_shadows_a_host_route(rt: DockerRuntime, dummy_route: str, own_netns: bool) -> None:
    first, second = RANGES[own_netns]
    got = _probe(rt, own_netns)
    assert got["own_netns_is_host"] is (not own_netns), got
    assert first in got["routes"], got
    assert got["subnet"] == second, got
    # the new network's route is its docker bridge's (br-<id>): left out on request, the other bridge's kept
    assert second in got["after"] and first in got["after"], got
    assert second not in got["after_without_docker_bridges"] and first in got["after_without_docker_bridges"], got
    # the helper container is gone
    assert not rt.list_containers({"io.x-k8s.capd-py.helper": "routes"}), "helper container left behind"
