from __future__ import annotations

import pytest

from capd_py.reconcile import subnets
from capd_py.runtime import networks
from capd_py.runtime.protocol import ContainerInfo, ContainerSpec, NetworkGone, NetworkInfo, SubnetTaken
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


def test_network_subnet_avoids_cluster_cidrs_networks_and_routes() -> None:
    rt = FakeRuntime()
    rt.routes = ["172.16.16.0/20"]
    networks.ensure_network(rt, "other", {}, subnets.parse_pool("172.16.0.0/20:24"))   # 172.16.0.0/24
    pool = subnets.parse_pool("192.168.0.0/16:20,172.16.0.0/16:20")
    avoid = subnets.cluster_cidrs({"spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}}}})
    net = networks.ensure_network(rt, "capd-py-ns-c1", {"a": "b"}, pool, avoid)
    assert net.subnet == "172.16.32.0/20" and net.ip_range == "172.16.40.0/21" and net.gateway == "172.16.32.1"
    assert net.labels == {"a": "b"}
    # an existing network is used as it is
    assert networks.ensure_network(rt, "capd-py-ns-c1", {}, subnets.parse_pool("10.0.0.0/8")) == net


def test_no_free_subnet_names_what_is_in_the_way() -> None:
    rt = FakeRuntime()
    avoid = subnets.cluster_cidrs({"spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}}}})
    with pytest.raises(networks.NoFreeSubnet, match=r"docker network n: no subnet of the network pool "
                                                     r"\(192.168.0.0/17:20\) is free: each overlaps the "
                                                     r"Cluster's pod CIDR 192.168.0.0/16"):
        networks.ensure_network(rt, "n", {}, subnets.parse_pool("192.168.0.0/17:20"), avoid)
    assert rt.networks == {}


def test_a_subnet_taken_between_choice_and_create_is_chosen_again() -> None:
    """Another process made a network with the chosen subnet in between: docker refuses, the next is chosen."""
    rt = FakeRuntime()
    real_create = rt.create_network
    calls: list[str] = []

    def racing_create(name: str, labels: dict[str, str], subnet: str, subnet6: str = "") -> NetworkInfo:
        calls.append(subnet)
        if len(calls) == 1:
            real_create("someone-else", {}, subnet)
        return real_create(name, labels, subnet)

    rt.create_network = racing_create  # type: ignore[method-assign]
    net = networks.ensure_network(rt, "mine", {}, subnets.parse_pool("172.16.0.0/16:24"))
    assert calls == ["172.16.0.0/24", "172.16.1.0/24"] and net.subnet == "172.16.1.0/24"


def test_a_subnet_docker_refuses_though_no_network_lists_it_is_not_chosen_again() -> None:
    """A network being removed still holds its pool in docker's IPAM but is no longer listed: docker refuses its
    subnet, and the next attempt takes another one instead of the same one five times."""
    rt = FakeRuntime()
    real_create = rt.create_network
    calls: list[str] = []

    def held_by_a_network_going_away(name: str, labels: dict[str, str], subnet: str,
                                     subnet6: str = "") -> NetworkInfo:
        calls.append(subnet)
        if subnet == "172.16.0.0/24":
            raise SubnetTaken("Pool overlaps with other one on this address space")
        return real_create(name, labels, subnet)

    rt.create_network = held_by_a_network_going_away  # type: ignore[method-assign]
    net = networks.ensure_network(rt, "mine", {}, subnets.parse_pool("172.16.0.0/16:24"))
    assert calls == ["172.16.0.0/24", "172.16.1.0/24"] and net.subnet == "172.16.1.0/24"


def test_an_ipv6_cluster_network_gets_an_ipv6_subnet_too_avoiding_its_cidrs() -> None:
    rt = FakeRuntime()
    rt.create_network("other", {}, "172.16.0.0/24", "fd00:0:0:1::/64")
    pool = subnets.parse_pool("172.16.0.0/16:24,fd00::/48:64")
    avoid = [subnets.Taken("fd00::/64", "the Cluster's pod CIDR")]
    net = networks.ensure_network(rt, "mine", {}, pool, avoid, ipv6=True)
    assert net.subnet == "172.16.1.0/24" and net.subnet6 == "fd00:0:0:2::/64"
    assert networks.ensure_network(rt, "v4", {}, pool).subnet6 == ""


def test_gives_up_after_repeated_races() -> None:
    rt = FakeRuntime()

    def always_taken(name: str, labels: dict[str, str], subnet: str, subnet6: str = "") -> NetworkInfo:
        raise SubnetTaken("Pool overlaps with other one on this address space")

    rt.create_network = always_taken  # type: ignore[method-assign]
    with pytest.raises(SubnetTaken):
        networks.ensure_network(rt, "mine", {})


def test_outside_ranges_are_the_management_network_and_host_routes_that_are_not_docker_networks() -> None:
    """Other docker networks are isolated from a cluster's by docker and come and go with other clusters and
    tools: neither a route that is a listed network's subnet nor one of a docker bridge device (a network since
    removed, its route read before) is an outside range."""
    rt = FakeRuntime()
    mgmt = networks.ensure_network(rt, "capd-py", {}, subnets.parse_pool("172.16.0.0/16:24"))
    other = networks.ensure_network(rt, "kind", {}, subnets.parse_pool("192.168.48.0/20:20"))
    rt.routes = [mgmt.subnet, other.subnet, "192.168.1.0/24"]
    rt.bridge_routes = ["192.168.64.0/20"]
    got = [str(t) for t in networks.outside_ranges(rt, "capd-py")]
    assert got == ["the management cluster's network capd-py 172.16.0.0/24", "host route 192.168.1.0/24"]
    assert [str(t) for t in networks.outside_ranges(rt, "absent")] == ["host route 192.168.1.0/24"]
    # choosing a subnet still avoids all of them
    assert {str(t) for t in networks.neighbours(rt)} >= {"docker network kind 192.168.48.0/20",
                                                         "host route 192.168.64.0/20"}


def test_a_workload_network_is_made_from_its_names_place_and_again_there_after_its_deletion() -> None:
    rt = FakeRuntime()
    pool = subnets.parse_pool("172.16.0.0/12:20")
    name = "capd-py-default-e2e-life"
    want = subnets.choose(pool, [], start=subnets.start_of(name)).subnet
    assert want != "172.16.0.0/20"   # not the first-fit choice every other network would make
    first = networks.ensure_network(rt, name, {}, pool, start_at_name=True)
    assert first.subnet == want
    rt.remove_network(name)
    other = networks.ensure_network(rt, "capd-py-default-another", {}, pool, start_at_name=True)
    assert other.subnet != want      # the freed subnet is not the next network's
    assert networks.ensure_network(rt, name, {}, pool, start_at_name=True).subnet == want
    assert networks.ensure_network(rt, "capd-py", {}, pool).subnet == "172.16.0.0/20"   # first-fit without it


def test_a_shared_network_removed_before_the_container_starts_is_made_again() -> None:
    """`capd-py init` beside the deletion of another management cluster (found in a cold run, 2026-12-07): the shared
    network went between ensure_network and the node's start; it is made again and the node runs on it."""
    rt = FakeRuntime()
    real_run = rt.run_container
    runs: list[str] = []

    def racing_run(spec: ContainerSpec) -> ContainerInfo:
        runs.append(spec.network)
        if len(runs) == 1:
            rt.remove_network(spec.network)  # the other process's cleanup, just now
        return real_run(spec)

    rt.run_container = racing_run  # type: ignore[method-assign]
    pool = subnets.parse_pool("172.16.0.0/16:24")

    def spec_for(net: NetworkInfo) -> ContainerSpec:
        return ContainerSpec(name="node", image="img", network=net.name)
    info = networks.run_joined(rt, lambda: networks.ensure_network(rt, "shared", {}, pool), spec_for)
    assert runs == ["shared", "shared"]
    assert info.ipv4["shared"] and rt.get_network("shared") is not None


def test_a_network_that_keeps_going_away_is_an_error_after_a_few_attempts() -> None:
    rt = FakeRuntime()
    pool = subnets.parse_pool("172.16.0.0/16:24")

    def gone(net: NetworkInfo) -> ContainerSpec:
        rt.remove_network(net.name)
        return ContainerSpec(name="node", image="img", network=net.name)
    with pytest.raises(NetworkGone, match="network shared not found"):
        networks.run_joined(rt, lambda: networks.ensure_network(rt, "shared", {}, pool), gone)
    assert rt.get_container("node") is None
