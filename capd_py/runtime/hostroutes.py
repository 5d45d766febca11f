"""The host's routes from the kernel's text tables (/proc/net/route, /proc/net/ipv6_route): parsing only.

A network's subnet must not shadow a route the host already has (a VPN, the LAN, another bridge): docker
checks that itself when it picks a subnet, but not for one given explicitly, so capd-py reads them.
Default routes, loopback, link-local and multicast ranges are left out: they overlap everything or nothing
that matters. Each route keeps its device: a docker bridge's route is another docker network, which docker
isolates from every other bridge network (what a cluster's pods can reach is decided without them).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import struct
from collections.abc import Iterable
from typing import NamedTuple

_RTF_UP = 0x1
_SKIP = [ipaddress.ip_network(n) for n in ("127.0.0.0/8", "169.254.0.0/16", "224.0.0.0/4",
                                             "::1/128", "fe80::/10", "ff00::/8")]


def _kept(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    return net.prefixlen > 0 and not any(net.version == s.version and net.subnet_of(s)  # type: ignore[arg-type]
                                         for s in _SKIP)


# docker's bridge devices: the default network's and a user-defined bridge network's (br- and the first 12 hex
# digits of its ID); a bridge named by com.docker.network.bridge.name is known by its network's subnet instead
_DOCKER_BRIDGE = re.compile(r"docker0|br-[0-9a-f]{12}")


class Route(NamedTuple):
    cidr: str
    device: str


def is_docker_bridge(device: str) -> bool:
    return bool(_DOCKER_BRIDGE.fullmatch(device))


def cidrs(routes: Iterable[Route], docker_bridges: bool = True) -> list[str]:
    """The routes' CIDRs, once each; without `docker_bridges`, those of docker's bridge devices left out."""
    out: list[str] = []
    for r in routes:
        if (docker_bridges or not is_docker_bridge(r.device)) and r.cidr not in out:
            out.append(r.cidr)
    return out


def parse_ipv4(text: str) -> list[Route]:
    """Routes of /proc/net/route (destination and mask in host byte order, hex), up routes only."""
    out: list[Route] = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 8:
            continue
        try:
            dest = socket.inet_ntoa(struct.pack("=I", int(f[1], 16)))
            mask = socket.inet_ntoa(struct.pack("=I", int(f[7], 16)))
            flags = int(f[3], 16)
            net = ipaddress.ip_network(f"{dest}/{mask}", strict=False)
        except (ValueError, struct.error):
            continue
        if flags & _RTF_UP and _kept(net) and Route(str(net), f[0]) not in out:
            out.append(Route(str(net), f[0]))
    return out


def parse_ipv6(text: str) -> list[Route]:
    """Routes of /proc/net/ipv6_route (32 hex digits of destination, hex prefix length, ..., device last);
    the loopback device's entries (the host's own addresses) are left out."""
    out: list[Route] = []
    for line in text.splitlines():
        f = line.split()
        if len(f) < 10 or f[-1] == "lo":
            continue
        try:
            dest = ipaddress.IPv6Address(bytes.fromhex(f[0]))
            net = ipaddress.ip_network(f"{dest}/{int(f[1], 16)}", strict=False)
        except ValueError:
            continue
        if _kept(net) and Route(str(net), f[-1]) not in out:
            out.append(Route(str(net), f[-1]))
    return out
