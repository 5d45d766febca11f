from __future__ import annotations

import pytest

from capd_py.api.containers import ContainerInfo, NetworkInfo
from capd_py.reconcile import addresses

pytestmark = pytest.mark.unit

NET = NetworkInfo(name="n", id="i", subnet="172.19.0.0/16", gateway="172.19.0.1", labels={},
                  ip_range="172.19.128.0/17")


def _c(ip: str = "", static: str = "", status: str = "running") -> ContainerInfo:
    return ContainerInfo(id="x", name="x", image="i", status=status, labels={}, ipv4={"n": ip} if ip else {},
                         ipv6={}, ports={}, static_ipv4={"n": static} if static else {})


def test_dynamic_range_is_the_upper_half() -> None:
    assert addresses.dynamic_range("172.19.0.0/16") == "172.19.128.0/17"
    assert addresses.dynamic_range("192.168.48.0/20") == "192.168.56.0/21"
    with pytest.raises(ValueError):
        addresses.dynamic_range("10.0.0.0/31")


def test_static_capable_only_with_a_dynamic_range_inside_an_ipv4_subnet() -> None:
    assert addresses.static_capable(NET)
    assert not addresses.static_capable(None)
    assert not addresses.static_capable(NetworkInfo("n", "i", "172.19.0.0/16", "172.19.0.1", {}))  # docker's own
    assert not addresses.static_capable(NetworkInfo("n", "i", "172.19.0.0/16", "", {}, ip_range="10.0.0.0/17"))
    assert not addresses.static_capable(NetworkInfo("n", "i", "fc00::/64", "", {}, ip_range="fc00::/65"))


def test_static_range_excludes_gateway_network_broadcast_and_dynamic_half() -> None:
    assert addresses.in_static_range(NET, "172.19.0.2")
    assert addresses.in_static_range(NET, "172.19.127.254")
    for ip in ("172.19.0.0", "172.19.0.1", "172.19.128.0", "172.19.255.255", "10.0.0.2", "not-an-ip"):
        assert not addresses.in_static_range(NET, ip), ip


def test_pick_lowest_free_counting_stopped_containers_static_addresses() -> None:
    assert addresses.pick_static(NET, []) == "172.19.0.2"
    # a stopped container keeps its static address (docker frees it only while stopped: it must not be reused)
    taken = addresses.taken_addresses([_c("172.19.0.2", "172.19.0.2"), _c(static="172.19.0.3", status="exited"),
                                       _c("172.19.128.5")], "n")
    assert taken == {"172.19.0.2", "172.19.0.3", "172.19.128.5"}
    assert addresses.pick_static(NET, taken) == "172.19.0.4"
    assert addresses.pick_static(NetworkInfo("n", "i", "172.19.0.0/16", "172.19.0.1", {}), []) is None
    # no gateway recorded: the first host address is still not handed out (docker's default gateway)
    assert addresses.pick_static(NetworkInfo("n", "i", "172.19.0.0/16", "", {}, ip_range="172.19.128.0/17"),
                                 []) == "172.19.0.2"
    assert addresses.first_host("192.168.48.0/20") == "192.168.48.1"
    tiny = NetworkInfo("n", "i", "10.9.0.0/29", "10.9.0.1", {}, ip_range="10.9.0.4/30")
    assert addresses.pick_static(tiny, ["10.9.0.2"]) == "10.9.0.3"
    assert addresses.pick_static(tiny, ["10.9.0.2", "10.9.0.3"]) is None
