"""Static container addresses (pure).

Docker gives a container a new address at every start unless it was created with one (`--ip`), and it
accepts `--ip` only on networks with a user-configured subnet. A node's address is baked into its
certificates, its etcd member and the load balancer's backends, so after a reboot (containers started in
any order) every container must come back with the address it had. capd-py therefore makes its networks
with an explicit subnet whose upper half is docker's dynamic `ip-range` (anything else attached to the
network, e.g. the in-cluster controllers' node, gets an address from there) and hands out the lower half
itself: the lowest address no container of the network was created with or currently holds.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from capd_py.api.containers import ContainerInfo, NetworkInfo


def dynamic_range(subnet: str) -> str:
    """The upper half of `subnet`: where docker assigns addresses of containers created without one."""
    net = ipaddress.ip_network(subnet, strict=False)
    if net.prefixlen >= net.max_prefixlen - 2:
        raise ValueError(f"subnet {subnet} is too small to split into static and dynamic halves")
    return str(list(net.subnets(prefixlen_diff=1))[1])


def first_host(subnet: str) -> str:
    """The gateway docker uses by default: the first host address of the subnet."""
    return str(next(ipaddress.ip_network(subnet, strict=False).hosts()))


def static_capable(net: NetworkInfo | None) -> bool:
    """A network capd-py made for static addresses: IPv4 subnet with a dynamic range inside it."""
    if net is None or not net.subnet or not net.ip_range or ":" in net.subnet:
        return False
    try:
        return ipaddress.ip_network(net.ip_range, strict=False).subnet_of(
            ipaddress.ip_network(net.subnet, strict=False))  # type: ignore[arg-type]
    except ValueError:
        return False


def in_static_range(net: NetworkInfo, address: str) -> bool:
    """`address` may be given to a container with `--ip`: inside the subnet, outside the dynamic range, not
    the network, broadcast or gateway address."""
    if not static_capable(net):
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    subnet = ipaddress.ip_network(net.subnet, strict=False)
    dyn = ipaddress.ip_network(net.ip_range, strict=False)
    # the first host address too, whatever the gateway: it is docker's default one
    reserved = {subnet.network_address, subnet.broadcast_address, ipaddress.ip_address(first_host(net.subnet))}
    if net.gateway:
        reserved.add(ipaddress.ip_address(net.gateway))
    return ip in subnet and ip not in dyn and ip not in reserved


def in_subnet(net: NetworkInfo | None, address: str) -> bool:
    try:
        return net is not None and bool(net.subnet) and \
            ipaddress.ip_address(address) in ipaddress.ip_network(net.subnet, strict=False)
    except ValueError:
        return False


def taken_addresses(containers: Iterable[ContainerInfo], network: str) -> set[str]:
    """Addresses on `network` that containers were created with (kept while they are stopped) or hold now."""
    out: set[str] = set()
    for c in containers:
        for ip in (c.static_ipv4.get(network), c.ipv4.get(network)):
            if ip:
                out.add(ip)
    return out


def pick_static(net: NetworkInfo, taken: Iterable[str]) -> str | None:
    """The lowest address of the static half of `net` that is not taken; None when the half is full or the
    network cannot have static addresses."""
    if not static_capable(net):
        return None
    used = set(taken)
    subnet = ipaddress.ip_network(net.subnet, strict=False)
    for ip in subnet.hosts():
        s = str(ip)
        if s not in used and in_static_range(net, s):
            return s
    return None


# IPv6 (IPv6 and dual-stack clusters): a network capd-py made for them has an IPv6 subnet besides the IPv4 one.
# A container's IPv6 address is not chosen separately: it sits at the same offset in the IPv6 subnet as its
# static IPv4 address in the IPv4 one, so it is as stable and never clashes with another container's (docker's
# dynamic IPv6 addresses come from the upper half of the IPv6 subnet, far above any offset of the IPv4 one).

def paired_ipv6(net: NetworkInfo | None, ipv4: str) -> str:
    """The IPv6 address that goes with static IPv4 address `ipv4` on `net` ("" when the network has no IPv6
    subnet or `ipv4` is not in its IPv4 subnet)."""
    if net is None or not net.subnet6 or not in_subnet(net, ipv4):
        return ""
    offset = int(ipaddress.ip_address(ipv4)) - int(ipaddress.ip_network(net.subnet, strict=False).network_address)
    return str(ipaddress.ip_network(net.subnet6, strict=False).network_address + offset)


def paired_ipv4(net: NetworkInfo | None, ipv6: str) -> str:
    """The static IPv4 address whose pair is `ipv6` ("" when `ipv6` is not at an IPv4 subnet's offset)."""
    if net is None or not net.subnet or not net.subnet6:
        return ""
    try:
        ip = ipaddress.ip_address(ipv6)
        six = ipaddress.ip_network(net.subnet6, strict=False)
    except ValueError:
        return ""
    four = ipaddress.ip_network(net.subnet, strict=False)
    if ip not in six:
        return ""
    offset = int(ip) - int(six.network_address)
    return str(four.network_address + offset) if offset < four.num_addresses else ""
