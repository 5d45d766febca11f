from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.labels import (
    CONTAINER_CLUSTER,
    CONTAINER_MACHINE,
    CONTAINER_NAMESPACE,
    CONTAINER_ROLE,
    LB_HOST_PORT_ANNOTATION,
    NETWORK_ANNOTATION,
)
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import subnets
from capd_py.runtime.protocol import ContainerInfo, NetworkInfo

pytestmark = pytest.mark.unit


def _c(name: str, role: str, ip: str | None, machine: str = "", status: str = "running",
       ns: str = "ns", cluster: str = "c1", ports: dict[int, int] | None = None) -> ContainerInfo:
    labels = {**dcr.cluster_labels(ns, cluster), CONTAINER_ROLE: role}
    if machine:
        labels[CONTAINER_MACHINE] = machine
    return ContainerInfo(id=name, name=name, image="img", status=status, labels=labels,
                         ipv4={"net": ip} if ip else {}, ipv6={}, ports=ports or {})


def _dc(**kw: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c1", "namespace": "ns", "generation": 1, **kw.pop("md", {})},
            "spec": kw.pop("spec", {}), "status": kw.pop("status", {})}


def test_names_and_labels() -> None:
    assert dcr.lb_container_name("c1") == "c1-lb"
    assert dcr.network_name("ns", "c1") == "capd-py-ns-c1"
    assert dcr.network_name("ns", "c1", _dc(md={"annotations": {NETWORK_ANNOTATION: "kind"}})) == "kind"
    assert dcr.network_is_shared(_dc(md={"annotations": {NETWORK_ANNOTATION: "kind"}}))
    lab = dcr.lb_labels("ns", "c1")
    assert lab[CONTAINER_CLUSTER] == "c1" and lab[CONTAINER_NAMESPACE] == "ns"
    assert lab[CONTAINER_ROLE] == "load-balancer"


def test_the_controllers_default_network_is_recorded_on_new_clusters_only() -> None:
    """Upstream CAPD's DOCKER_NETWORK: new clusters join it; a cluster that names a network keeps it, and one that
    already has its load balancer (or is provisioned) keeps its own network whatever the setting becomes."""
    assert dcr.network_to_record(_dc(), "kind") == "kind"
    assert dcr.network_to_record(_dc(), "") is None
    assert dcr.network_to_record(_dc(md={"annotations": {NETWORK_ANNOTATION: "mine"}}), "kind") is None
    assert dcr.network_to_record(_dc(md={"annotations": {dcr.LB_HOST_PORT_ANNOTATION: "32768"}}), "kind") is None
    assert dcr.network_to_record(_dc(status={"initialization": {"provisioned": True}}), "kind") is None


def test_lb_spec_publishes_6443_on_loopback() -> None:
    s = dcr.lb_spec("ns", "c1", "capd-py/haproxy:2.6", "net")
    assert s.name == "c1-lb" and not s.node and s.network == "net"
    assert [(p.container_port, p.host_ip, p.host_port) for p in s.ports] == [(6443, "127.0.0.1", 0)]


@pytest.mark.parametrize(("lb", "want"), [
    # nothing named: the configured default (CAPD_PY_HAPROXY_IMAGE), upstream's name unless set
    ({}, "kindest/haproxy:v20230606-42a2262b"),
    # upstream's e2e ClusterClass: lbImageRepository defaults to "kindest" (issue 26: was "kindest:2.6")
    ({"imageRepository": "kindest"}, "kindest/haproxy:v20230606-42a2262b"),
    ({"imageTag": "v2"}, "kindest/haproxy:v2"),
    ({"imageRepository": "registry.example.com/lb/"}, "registry.example.com/lb/haproxy:v20230606-42a2262b"),
    ({"imageRepository": "my", "imageTag": "2.8"}, "my/haproxy:2.8"),
])
def test_lb_image_is_named_as_upstream_capd(lb: dict[str, str], want: str) -> None:
    assert dcr.lb_image(_dc(spec={"loadBalancer": lb})) == want


def test_lb_image_default_is_the_setting_only_when_the_spec_names_nothing() -> None:
    assert dcr.lb_image(_dc(), "capd-py/haproxy:2.6") == "capd-py/haproxy:2.6"
    assert dcr.lb_image(_dc(spec={"loadBalancer": {"imageTag": "x"}}), "capd-py/haproxy:2.6") == "kindest/haproxy:x"


def test_ours_requires_matching_labels() -> None:
    assert dcr.ours(_c("c1-lb", "load-balancer", "1.1.1.1"), "ns", "c1")
    assert not dcr.ours(_c("c1-lb", "load-balancer", "1.1.1.1", ns="other"), "ns", "c1")
    assert not dcr.ours(None, "ns", "c1")


def test_backends_only_control_plane_with_address_and_weight_zero_for_deleting() -> None:
    cs = [_c("c1-cp-a", "control-plane", "10.0.0.2", "cp-a"), _c("c1-cp-b", "control-plane", "10.0.0.3", "cp-b"),
          _c("c1-w", "worker", "10.0.0.4", "w"), _c("c1-cp-c", "control-plane", None, "cp-c"),
          _c("c1-lb", "load-balancer", "10.0.0.5")]
    got = {b.name: (b.address, b.weight) for b in dcr.backends(cs, "net", {"cp-b"})}
    assert got == {"c1-cp-a": ("10.0.0.2", 100), "c1-cp-b": ("10.0.0.3", 0)}


def test_endpoint_set_once_and_host_port_annotation() -> None:
    lb = _c("c1-lb", "load-balancer", "10.0.0.5", ports={6443: 32768})
    ep = dcr.endpoint(lb, "net")
    assert ep == {"host": "10.0.0.5", "port": 6443}
    assert dcr.endpoint(_c("c1-lb", "load-balancer", "10.0.0.5", status="exited"), "net") is None
    assert dcr.endpoint_patch(_dc(), ep) == {"spec": {"controlPlaneEndpoint": ep}}
    assert dcr.endpoint_patch(_dc(spec={"controlPlaneEndpoint": {"host": "x", "port": 1}}), ep) is None
    assert dcr.host_port_patch(_dc(), lb) == {"metadata": {"annotations": {LB_HOST_PORT_ANNOTATION: "32768"}}}
    assert dcr.host_port_patch(_dc(md={"annotations": {LB_HOST_PORT_ANNOTATION: "32768"}}), lb) is None
    # recorded once, never rewritten: a load balancer publishing another port is drift (re-created)
    assert dcr.host_port_patch(_dc(md={"annotations": {LB_HOST_PORT_ANNOTATION: "40000"}}), lb) is None


def test_lb_spec_reuses_the_recorded_endpoint_address_and_host_port() -> None:
    dc = _dc(md={"annotations": {LB_HOST_PORT_ANNOTATION: "40000"}},
             spec={"controlPlaneEndpoint": {"host": "172.19.0.2", "port": 6443}})
    s = dcr.lb_spec("ns", "c1", "capd-py/haproxy:2.6", "net", dc)
    assert s.ipv4 == "172.19.0.2" and [(p.host_ip, p.host_port) for p in s.ports] == [("127.0.0.1", 40000)]
    assert dcr.recorded_host_port(_dc(md={"annotations": {LB_HOST_PORT_ANNOTATION: "junk"}})) == 0


def test_lb_drift_and_whether_it_can_be_repaired_in_place() -> None:
    dc = _dc(md={"annotations": {LB_HOST_PORT_ANNOTATION: "40000"}},
             spec={"controlPlaneEndpoint": {"host": "172.19.0.2", "port": 6443}})
    net = NetworkInfo("net", "i", "172.19.0.0/16", "172.19.0.1", {}, ip_range="172.19.128.0/17")
    assert dcr.lb_drift(_c("c1-lb", "load-balancer", "172.19.0.2", ports={6443: 40000}), "net", dc, net) is None
    # an endpoint the user gave (outside the network) is not the load balancer's address: no drift
    user = _dc(spec={"controlPlaneEndpoint": {"host": "api.example.test", "port": 6443}})
    assert dcr.lb_drift(_c("c1-lb", "load-balancer", "172.19.0.7"), "net", user, net) is None
    assert dcr.lb_drift(_c("c1-lb", "load-balancer", "172.19.0.2", ports={6443: 40000}, status="exited"),
                        "net", dc, net) is None
    moved = dcr.lb_drift(_c("c1-lb", "load-balancer", "172.19.0.7", ports={6443: 40000}), "net", dc, net)
    assert moved and "172.19.0.7" in moved and "172.19.0.2" in moved
    port = dcr.lb_drift(_c("c1-lb", "load-balancer", "172.19.0.2", ports={6443: 33333}), "net", dc, net)
    assert port and "33333" in port and "40000" in port
    static = NetworkInfo("net", "i", "172.19.0.0/16", "172.19.0.1", {}, ip_range="172.19.128.0/17")
    assert dcr.lb_repairable(static, dc)
    assert not dcr.lb_repairable(NetworkInfo("net", "i", "172.19.0.0/16", "172.19.0.1", {}), dc)
    outside = _dc(spec={"controlPlaneEndpoint": {"host": "172.19.200.9", "port": 6443}})
    assert not dcr.lb_repairable(static, outside) and dcr.lb_repairable(static, _dc())


def test_status_provisioned_conditions_and_failure_domains() -> None:
    dc = _dc(spec={"failureDomains": [{"name": "fd1", "controlPlane": True}]})
    st = dcr.status(dc, dcr.LBState(True, dcr.R_AVAILABLE), has_endpoint=True)
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["Ready"]["status"] == "True" and conds["LoadBalancerAvailable"]["status"] == "True"
    # Paused=False is the reconcile skeleton's now (controllers/skeleton.py), asserted on the reconciled DockerCluster
    # in tests/integration/test_docker_provider.py::test_dockercluster_network_lb_endpoint_and_delete
    assert "Paused" not in conds
    assert st["initialization"] == {"provisioned": True}
    assert st["failureDomains"] == [{"name": "fd1", "controlPlane": True}]
    # a stable object: same inputs, identical status (no write)
    dc2 = {**dc, "status": st}
    assert dcr.status(dc2, dcr.LBState(True, dcr.R_AVAILABLE), has_endpoint=True) == st
    # provisioned never flips back
    st3 = dcr.status(dc2, dcr.LBState(False, dcr.R_IMAGE_NOT_FOUND, "no image"), has_endpoint=True)
    assert st3["initialization"]["provisioned"] is True
    c3 = {c["type"]: c for c in st3["conditions"]}
    assert c3["LoadBalancerAvailable"]["reason"] == "ImageNotFound" and c3["Ready"]["status"] == "False"


def test_status_not_provisioned_without_endpoint() -> None:
    st = dcr.status(_dc(), dcr.LBState(True, dcr.R_AVAILABLE), has_endpoint=False)
    assert "initialization" not in st
    st = dcr.deleting_status(_dc(), "bye")
    reasons = {c["type"]: c["reason"] for c in st["conditions"]}
    assert reasons == {"LoadBalancerAvailable": "Deleting", "Ready": "Deleting"}


def _net(name: str, *cidrs: str) -> NetworkInfo:
    return NetworkInfo(name, "id", next((c for c in cidrs if ":" not in c), ""), "", {}, subnets=tuple(cidrs))


def _cluster_with(pods: list[str]) -> dict[str, Any]:
    return {"spec": {"clusterNetwork": {"pods": {"cidrBlocks": pods}}}}


def test_network_avoid_is_the_cluster_cidrs_and_the_management_cidrs() -> None:
    got = dcr.network_avoid(_cluster_with(["192.168.0.0/16"]), ["10.244.0.0/16"])
    assert [str(t) for t in got] == ["the Cluster's pod CIDR 192.168.0.0/16", "the Cluster's service CIDR 10.96.0.0/12",
                                     "the management cluster's pod/service CIDR 10.244.0.0/16"]


def test_network_clash_of_an_existing_network_with_the_cluster_cidrs() -> None:
    """The issue's case: a shared (or older) network inside the pod CIDR cannot carry the cluster."""
    msg = dcr.network_clash(_net("kind", "192.168.0.0/20"), _cluster_with(["192.168.0.0/16"]))
    assert msg is not None
    assert msg.startswith("docker network kind: its subnet 192.168.0.0/20 overlaps the Cluster's pod CIDR "
                          "192.168.0.0/16: nodes and the load balancer would be routed into pods")
    assert dcr.network_clash(_net("kind", "172.18.0.0/16", "fc00::/64"), _cluster_with(["192.168.0.0/16"])) is None


def test_status_carries_the_overlap_condition_without_touching_ready() -> None:
    ok = dcr.LBState(True, dcr.R_AVAILABLE)
    overlap = subnets.cluster_overlap(_cluster_with(["192.168.0.0/16"]),
                                      [subnets.Taken("192.168.1.0/24", "host route")])
    st = dcr.status(_dc(), ok, True, overlap=overlap)
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds[dcr.CLUSTER_NETWORK_OVERLAP]["status"] == "True"
    assert conds[dcr.CLUSTER_NETWORK_OVERLAP]["reason"] == dcr.R_OVERLAP
    assert "192.168.1.0/24" in conds[dcr.CLUSTER_NETWORK_OVERLAP]["message"]
    assert conds["Ready"]["status"] == "True"
    clean = dcr.status(_dc(status=st), ok, True, overlap=subnets.Overlap(()))
    c2 = {c["type"]: c for c in clean["conditions"]}[dcr.CLUSTER_NETWORK_OVERLAP]
    assert (c2["status"], c2["reason"], c2.get("message", "")) == ("False", dcr.R_NO_OVERLAP, "")
    # not looked at in this pass: left as it was
    again = dcr.status(_dc(status=st), dcr.LBState(False, dcr.R_RUNTIME_ERROR, "x"), True)
    assert {c["type"]: c for c in again["conditions"]}[dcr.CLUSTER_NETWORK_OVERLAP]["status"] == "True"


def test_overlap_news_only_when_new_or_changed() -> None:
    overlap = subnets.cluster_overlap(_cluster_with(["192.168.0.0/16"]),
                                      [subnets.Taken("192.168.1.0/24", "host route")])
    assert dcr.overlap_news(_dc(), overlap) == overlap.message()
    seen = _dc(status=dcr.status(_dc(), dcr.LBState(True, dcr.R_AVAILABLE), True, overlap=overlap))
    assert dcr.overlap_news(seen, overlap) is None
    other = subnets.cluster_overlap(_cluster_with(["192.168.0.0/16"]), [subnets.Taken("192.168.2.0/24", "host route")])
    assert dcr.overlap_news(seen, other) == other.message()
    assert dcr.overlap_news(_dc(), subnets.Overlap(())) is None


def test_status_offers_only_the_failure_domains_on_the_clusters_docker_host() -> None:
    """docs/multihost.md: a failure domain naming another docker host (attribute capd-py.dev/docker-host) is left
    out of status.failureDomains (so KCP / MachineDeployments never put machines there) and said in the
    FailureDomainHosts condition; without such attributes no condition is written at all."""
    fds = [{"name": "fd-a", "controlPlane": True, "attributes": {"capd-py.dev/docker-host": "two"}},
           {"name": "fd-b", "controlPlane": True, "attributes": {"capd-py.dev/docker-host": "local"}}]
    dc = _dc(spec={"failureDomains": fds})
    dc["metadata"]["annotations"] = {"capd-py.dev/docker-host": "two"}
    st = dcr.status(dc, dcr.LBState(True, dcr.R_AVAILABLE), has_endpoint=True)
    assert [d["name"] for d in st["failureDomains"]] == ["fd-a"]
    c = next(c for c in st["conditions"] if c["type"] == "FailureDomainHosts")
    assert (c["status"], c["reason"]) == ("False", "FailureDomainOnOtherDockerHost")
    assert "failure domain 'fd-b': names docker host 'local'" in c["message"]
    assert next(c for c in st["conditions"] if c["type"] == "Ready")["status"] == "True"  # usable as it is
    # the spec fixed: the condition turns True, and stays written (it was there)
    dc2 = {**dc, "spec": {"failureDomains": fds[:1]}, "status": st}
    c2 = next(c for c in dcr.status(dc2, dcr.LBState(True, dcr.R_AVAILABLE), True)["conditions"]
              if c["type"] == "FailureDomainHosts")
    assert (c2["status"], c2["reason"], c2.get("message", "")) == ("True", "FailureDomainsOnClusterHost", "")
    plain = dcr.status(_dc(spec={"failureDomains": [{"name": "x"}]}), dcr.LBState(True, dcr.R_AVAILABLE), True)
    assert "FailureDomainHosts" not in {c["type"] for c in plain["conditions"]}
