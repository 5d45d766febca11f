"""IP family of a Cluster (upstream CAPD's GetClusterIPFamily) and what the Docker provider does with it."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.labels import CONTAINER_ROLE
from capd_py.reconcile import addresses, ipfamily
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.runtime.protocol import ContainerInfo, NetworkInfo

pytestmark = pytest.mark.unit


def _cluster(pods: list[str] | None = None, services: list[str] | None = None) -> dict[str, Any]:
    net: dict[str, Any] = {}
    if pods is not None:
        net["pods"] = {"cidrBlocks": pods}
    if services is not None:
        net["services"] = {"cidrBlocks": services}
    return {"spec": {"clusterNetwork": net}}


@pytest.mark.parametrize(("pods", "services", "want"), [
    (None, None, ipfamily.IPV4),
    (["192.168.0.0/16"], ["10.128.0.0/12"], ipfamily.IPV4),
    (["fd00:100:96::/48"], ["fd00:100:64::/108"], ipfamily.IPV6),
    (["fd00:100:96::/48"], None, ipfamily.IPV6),
    (None, ["fd00:100:64::/108"], ipfamily.IPV6),
    (["192.168.0.0/16", "fd00:100:96::/48"], ["10.128.0.0/12", "fd00:100:64::/108"], ipfamily.DUAL_STACK),
    (["fd00:100:96::/48", "192.168.0.0/16"], ["fd00:100:64::/108", "10.128.0.0/12"], ipfamily.DUAL_STACK),
    # upstream: dual-stack pods decide, whatever the services say
    (["192.168.0.0/16", "fd00:100:96::/48"], ["10.128.0.0/12"], ipfamily.DUAL_STACK),
])
def test_family_as_upstream(pods: list[str] | None, services: list[str] | None, want: str) -> None:
    assert ipfamily.cluster_ip_family(_cluster(pods, services)) == want


@pytest.mark.parametrize(("pods", "services", "message"), [
    (["192.168.0.0/16"], ["fd00:100:64::/108"], "pods and services IP family mismatch"),
    (["a", "b", "c"], None, "pods: too many CIDRs specified"),
    (["192.168.0.0/16"], ["nonsense"], "services: could not parse CIDR"),
])
def test_unusable_families_are_refused_with_upstreams_words(pods: list[str], services: list[str] | None,
                                                            message: str) -> None:
    with pytest.raises(ipfamily.IPFamilyError, match=message):
        ipfamily.cluster_ip_family(_cluster(pods, services))
    assert dcr.cluster_family(_cluster(pods, services)) == ipfamily.IPV4
    assert message in str(dcr.family_error(_cluster(pods, services)))
    assert dcr.family_error(_cluster(["fd00:100:96::/48"])) is None


NET = NetworkInfo(name="net", id="1", subnet="172.16.0.0/20", gateway="172.16.0.1", labels={},
                  ip_range="172.16.8.0/21", subnets=("172.16.0.0/20", "fd00:ca9d:7000::/64"))


def test_ipv6_addresses_pair_with_static_ipv4_ones() -> None:
    assert NET.subnet6 == "fd00:ca9d:7000::/64"
    assert addresses.paired_ipv6(NET, "172.16.0.2") == "fd00:ca9d:7000::2"
    assert addresses.paired_ipv6(NET, "172.16.1.4") == "fd00:ca9d:7000::104"
    assert addresses.paired_ipv4(NET, "fd00:ca9d:7000::104") == "172.16.1.4"
    assert addresses.paired_ipv6(NET, "10.0.0.1") == ""   # not on the network
    assert addresses.paired_ipv4(NET, "fd00:ca9d:7000::1:0:0") == ""   # beyond the IPv4 subnet
    v4only = NetworkInfo(name="n", id="2", subnet="172.16.0.0/20", gateway="", labels={}, subnets=("172.16.0.0/20",))
    assert v4only.subnet6 == "" and addresses.paired_ipv6(v4only, "172.16.0.2") == ""


def _c(name: str, v4: str, v6: str, role: str = dcr.ROLE_CONTROL_PLANE) -> ContainerInfo:
    return ContainerInfo(id=name, name=name, image="i", status="running",
                         labels={**dcr.cluster_labels("ns", "c"), CONTAINER_ROLE: role},
                         ipv4={"net": v4}, ipv6={"net": v6}, ports={})


def test_ipv6_cluster_load_balancer_endpoint_and_backends_are_ipv6() -> None:
    lb = _c("c-lb", "172.16.0.2", "fd00:ca9d:7000::2", dcr.ROLE_LB)
    cps = [_c("c-cp-1", "172.16.0.3", "fd00:ca9d:7000::3")]
    assert dcr.endpoint(lb, "net", ipfamily.IPV6) == {"host": "fd00:ca9d:7000::2", "port": 6443}
    assert dcr.endpoint(lb, "net", ipfamily.DUAL_STACK) == {"host": "172.16.0.2", "port": 6443}
    assert [b.address for b in dcr.backends(cps, "net", set(), ipfamily.IPV6)] == ["fd00:ca9d:7000::3"]
    assert [b.address for b in dcr.backends(cps, "net", set(), ipfamily.DUAL_STACK)] == ["172.16.0.3"]
    # a re-created load balancer asks for the IPv4 address paired with the IPv6 endpoint
    dc = {"spec": {"controlPlaneEndpoint": {"host": "fd00:ca9d:7000::2", "port": 6443}}}
    assert dcr.lb_spec("ns", "c", "img", "net", dc, NET).ipv4 == "172.16.0.2"
    assert dcr.lb_drift(lb, "net", dc, NET, ipfamily.IPV6) is None
    moved = _c("c-lb", "172.16.0.5", "fd00:ca9d:7000::5", dcr.ROLE_LB)
    assert "fd00:ca9d:7000::5" in str(dcr.lb_drift(moved, "net", dc, NET, ipfamily.IPV6))
    assert dcr.lb_repairable(NET, dc)


def test_a_network_without_ipv6_cannot_carry_an_ipv6_cluster() -> None:
    v4only = NetworkInfo(name="shared", id="2", subnet="172.16.0.0/20", gateway="", labels={},
                         subnets=("172.16.0.0/20",))
    six = _cluster(["fd00:100:96::/48"], ["fd00:100:64::/108"])
    assert "has no IPv6 subnet and the cluster is IPv6" in str(dcr.network_clash(v4only, six))
    assert dcr.network_clash(NET, six) is None
    assert dcr.network_clash(v4only, _cluster(["192.168.0.0/16"])) is None


def test_machines_report_the_addresses_of_the_cluster_family_and_nodes_get_ipv6_sysctls() -> None:
    c = _c("c-md-1", "172.16.0.4", "fd00:ca9d:7000::4", dcr.ROLE_WORKER)
    internal = {f: [a["address"] for a in dmr.addresses(c, "net", f) if a["type"] == "InternalIP"]
                for f in (ipfamily.IPV4, ipfamily.IPV6, ipfamily.DUAL_STACK)}
    assert internal[ipfamily.IPV6] == ["fd00:ca9d:7000::4"]
    assert internal[ipfamily.DUAL_STACK] == ["172.16.0.4", "fd00:ca9d:7000::4"]
    dm = {"status": {"addresses": [{"type": "InternalIP", "address": "fd00:ca9d:7000::4"}]}}
    assert dmr.address_change(dm, c, "net", False, ipfamily.IPV6) is None
    spec = dmr.node_spec("ns", "c", "m", {}, "img", "net", False, "restricted", ipfamily.DUAL_STACK)
    assert spec.sysctls == {"net.ipv6.conf.all.disable_ipv6": "0", "net.ipv6.conf.all.forwarding": "1"}
    assert dmr.node_spec("ns", "c", "m", {}, "img", "net", False, "restricted").sysctls == {}


def test_capd_initializes_external_cloud_provider_nodes_as_upstream() -> None:
    addrs = [{"type": "Hostname", "address": "n"}, {"type": "InternalIP", "address": "172.16.0.4"},
             {"type": "ExternalIP", "address": "172.16.0.4"}, {"type": "InternalIP", "address": "fd00::4"}]
    node: dict[str, Any]
    node = {"metadata": {"name": "n"},
            "spec": {"taints": [{"key": dmr.CLOUD_PROVIDER_TAINT, "effect": "NoSchedule", "value": "true"},
                                {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
            "status": {"addresses": [{"type": "Hostname", "address": "n"}]}}
    p = dmr.node_patch(node, "docker:////n", addrs)
    assert p.spec == {"providerID": "docker:////n",
                      "taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}
    assert p.status == {"addresses": [{"type": "Hostname", "address": "n"},
                                      {"type": "InternalIP", "address": "172.16.0.4"},
                                      {"type": "InternalIP", "address": "fd00::4"}]}
    tainted = {**node, "metadata": {"name": "c-n"}, "spec": {**node["spec"], "providerID": "docker:////c-n"}}
    assert dmr.machines_awaiting_provider_id("c", [{"metadata": {"name": "c-n"}}], tainted) == ["c-n"]
    # an initialized Node with its providerID needs nothing; a plain one only its providerID
    done = {"metadata": {"name": "n"}, "spec": {"providerID": "docker:////n"}, "status": {}}
    assert dmr.node_patch(done, "docker:////n", addrs) == dmr.NodePatch()
    plain = {"metadata": {"name": "n"}, "spec": {}, "status": {}}
    assert dmr.node_patch(plain, "docker:////n", addrs) == dmr.NodePatch({"providerID": "docker:////n"})
