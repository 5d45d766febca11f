"""A docker network of capd-py's, made with a subnet capd-py chooses (blocking; async callers use
asyncio.to_thread). The decision is capd_py.reconcile.subnets.choose; this only gathers what it needs from the
runtime (every network's subnets, the host's routes) and retries when another process took the subnet between
the choice and the creation."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from capd_py.reconcile import subnets
from capd_py.runtime.protocol import (
    ContainerInfo,
    ContainerRuntime,
    ContainerSpec,
    NetworkGone,
    NetworkInfo,
    RuntimeError_,
    SubnetTaken,
)

DEFAULT_POOL = subnets.parse_pool(subnets.DEFAULT_POOL)
# how often a subnet is chosen again after another network took it first (processes racing for one range)
CHOICE_ATTEMPTS = 5
# a shared network made again and the container run again on it, when another process removed the network between
# the two (each time a whole `capd-py delete` of that network's last user would have to fit in between)
JOIN_ATTEMPTS = 3


class NoFreeSubnet(RuntimeError_):
    """No subnet of the pool is free of the ranges it must not overlap; the message names them."""


def _docker_networks(rt: ContainerRuntime) -> list[subnets.Taken]:
    """Every docker network's subnets, each named after its network."""
    return [t for n in rt.list_networks() for t in subnets.network_taken(n.name, n.subnets or (n.subnet,))]


def neighbours(rt: ContainerRuntime, routes_image: str = "") -> list[subnets.Taken]:
    """Every docker network's subnets and the host's routes (a route of a docker bridge named after it);
    `routes_image` reads the routes when this process cannot (ContainerRuntime.host_routes)."""
    nets = _docker_networks(rt)
    return nets + [t for t in subnets.routes_taken(rt.host_routes(routes_image), nets) if t not in nets]


def outside_ranges(rt: ContainerRuntime, management_network: str, routes_image: str = "") -> list[subnets.Taken]:
    """The management cluster's docker network and the host's routes that are not docker networks: what a
    workload cluster's pods need to reach outside it. Other docker networks are left out: docker isolates bridge
    networks from each other, so the pods could not reach them anyway, and other clusters' and tools' networks
    come and go (a status that followed them would change on a stable cluster: upstream's quick-start spec,
    "resourceVersions never became stable", 2026-12-07). A docker bridge is known by its device (a route read
    before its network was removed) and by its network's subnet (a bridge docker was told to name)."""
    nets = _docker_networks(rt)
    mgmt = rt.get_network(management_network)
    own = [replace(t, what=f"the management cluster's network {management_network}")
           for t in subnets.network_taken(management_network, (mgmt.subnets or (mgmt.subnet,)) if mgmt else ())]
    routes = subnets.routes_taken(rt.host_routes(routes_image, docker_bridges=False), nets)
    return own + [t for t in routes if t not in nets]


def ensure_network(rt: ContainerRuntime, name: str, labels: dict[str, str],
                   pool: Sequence[subnets.PoolRange] = DEFAULT_POOL,
                   avoid: Sequence[subnets.Taken] = (), ipv6: bool = False,
                   routes_image: str = "", start_at_name: bool = False) -> NetworkInfo:
    """The network `name` as it is, or made with the pool's first IPv4 subnet (and with `ipv6`, its first IPv6
    one too) that overlaps neither `avoid` (the cluster's own CIDRs) nor any docker network or host route
    (`routes_image`: neighbours); with `start_at_name`, first from the name's place in each range
    (subnets.choose, start_of: a workload cluster's network). NoFreeSubnet when there is none."""
    got = rt.get_network(name)
    if got is not None:
        return got
    start = subnets.start_of(name) if start_at_name else 0
    # subnets docker refused although no network listed them (one being removed still holds its pool in docker's
    # IPAM; another process's network made since the listing): not chosen again by this call (found 2026-12-06:
    # five attempts all chose 172.16.0.0/20 while a network of a test that had just ended was going away)
    refused: list[subnets.Taken] = []
    for attempt in Retrying(retry=retry_if_exception_type(SubnetTaken), stop=stop_after_attempt(CHOICE_ATTEMPTS),
                            reraise=True):
        with attempt:
            taken = [*avoid, *refused, *neighbours(rt, routes_image)]
            choice = subnets.choose(pool, taken, version=4, start=start)
            if choice.subnet is None:
                raise NoFreeSubnet(f"docker network {name}: {choice.message(pool)}")
            choice6 = subnets.choose(pool, taken, version=6, start=start) if ipv6 else None
            if choice6 is not None and choice6.subnet is None:
                raise NoFreeSubnet(f"docker network {name} (IPv6): {choice6.message(pool)}")
            try:
                return rt.create_network(name, labels, choice.subnet, choice6.subnet or "" if choice6 else "")
            except SubnetTaken:
                refused.append(subnets.Taken(choice.subnet, "a subnet docker refused as taken"))
                if choice6 is not None and choice6.subnet:
                    refused.append(subnets.Taken(choice6.subnet, "a subnet docker refused as taken"))
                raise
    raise AssertionError("unreachable: tenacity reraises the last SubnetTaken")


def run_joined(rt: ContainerRuntime, network: Callable[[], NetworkInfo],
               spec_for: Callable[[NetworkInfo], ContainerSpec]) -> ContainerInfo:
    """Run the container `spec_for` describes on the network `network()` makes sure of; both again when the network
    was removed between the two (NetworkGone: a shared network goes with its last user, which another process may
    be deleting meanwhile; found 2026-12-07: `capd-py init` failed with "network capd-py not found" while a test's
    management cluster was being deleted)."""
    for attempt in range(JOIN_ATTEMPTS):
        net = network()
        try:
            return rt.run_container(spec_for(net))
        except NetworkGone:
            if attempt == JOIN_ATTEMPTS - 1:
                raise
    raise AssertionError("unreachable: the last attempt returns or raises")
