from __future__ import annotations

import pytest

from capd_py.runtime import hostroutes

pytestmark = pytest.mark.unit

# a host with a default route, docker0, a LAN, a down route, a link-local and a /32 (VPN peer)
ROUTE = """\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
docker0\t000011AC\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0
wlan0\t0001A8C0\t00000000\t0001\t0\t0\t600\t00FFFFFF\t0\t0\t0
tun0\t0000000A\t00000000\t0000\t0\t0\t0\t000000FF\t0\t0\t0
eth0\t0000FEA9\t00000000\t0001\t0\t0\t1000\t0000FFFF\t0\t0\t0
tun0\t0100640A\t00000000\t0005\t0\t0\t0\tFFFFFFFF\t0\t0\t0
"""

IPV6_ROUTE = "".join(f"{line}\n" for line in [
    "fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "00000100 00000001 00000000 00000001 eth0",
    "fe800000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "00000100 00000002 00000000 00000001 eth0",
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fd000000000000000000000000000001 "
    "00000400 00000002 00000000 00000003 eth0",
    "00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "00000000 00000002 00000000 80200001 lo",
    "fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "00000000 00000003 00000000 80200001 lo",
    "ff000000000000000000000000000000 08 00000000000000000000000000000000 00 00000000000000000000000000000000 "
    "00000100 00000004 00000000 00000001 eth0",
])


def test_ipv4_routes_up_without_default_and_link_local() -> None:
    assert hostroutes.parse_ipv4(ROUTE) == [("172.17.0.0/16", "docker0"), ("192.168.1.0/24", "wlan0"),
                                            ("10.100.0.1/32", "tun0")]


def test_ipv6_routes_without_default_link_local_multicast_and_own_addresses() -> None:
    assert hostroutes.parse_ipv6(IPV6_ROUTE) == [("fd00::/64", "eth0")]


def test_docker_bridges_routes_are_left_out_when_asked() -> None:
    """docker0 and a user-defined bridge network's device (br- and 12 hex digits of its ID) are docker's; a
    device that only looks alike is not."""
    routes = [hostroutes.Route("172.17.0.0/16", "docker0"), hostroutes.Route("172.18.0.0/16", "br-0123456789ab"),
              hostroutes.Route("192.168.1.0/24", "wlan0"), hostroutes.Route("10.9.0.0/16", "br-lan"),
              hostroutes.Route("192.168.1.0/24", "eth1")]
    assert hostroutes.cidrs(routes) == ["172.17.0.0/16", "172.18.0.0/16", "192.168.1.0/24", "10.9.0.0/16"]
    assert hostroutes.cidrs(routes, docker_bridges=False) == ["192.168.1.0/24", "10.9.0.0/16"]


def test_garbage_lines_are_skipped() -> None:
    assert hostroutes.parse_ipv4("header\nshort line\neth0\tZZ\t0\t1\t0\t0\t0\t00\n") == []
    assert hostroutes.parse_ipv6("nothing here\n") == []
