"""A cluster whose pod CIDR is 192.168.0.0/16 (upstream's templates, Calico's default) on a docker host whose
default address pools are used up, so that docker itself hands out 192.168.x.0/20 subnets: the state of the
machine where `make test` failed (issue 24: the cluster's network landed at 192.168.0.0/20, inside the pod
CIDR, and the cluster never became Available). The host state is made here, deterministically: networks are
created without a subnet until docker's next pick lies in 192.168.0.0/16, and removed afterwards."""

from __future__ import annotations

import ipaddress
import json
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from capd_py.testing.e2e import Mgmt, create_cluster, run, wait_for, workload_kubectl

# docker's address pools used up: a network another test made meanwhile would take the state apart
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200), pytest.mark.host_exclusive]

PODS = ipaddress.ip_network("192.168.0.0/16")
# docker's default pools are 15 /16s (172.17-31) and 192.168.0.0/16 in /20s: a few more than 15 fills them
MAX_DUMMIES = 40


def _subnets(name: str) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    out = json.loads(run(["docker", "network", "inspect", name]).stdout)[0]
    return [ipaddress.ip_network(c["Subnet"]) for c in (out.get("IPAM") or {}).get("Config") or []]


def _docker_picks_inside_the_pod_cidr(prefix: str) -> bool:
    """Whether docker's next network, left to docker, gets a subnet inside 192.168.0.0/16 (made and removed)."""
    probe = f"{prefix}-probe"
    run(["docker", "network", "create", probe])
    try:
        return any(s.version == 4 and s.subnet_of(PODS) for s in _subnets(probe))  # type: ignore[arg-type]
    finally:
        run(["docker", "network", "rm", probe])


@pytest.fixture
def docker_pools_used_up() -> Iterator[list[str]]:
    """Networks left to docker until one of them gets a 192.168.x.0/20 (docker's 172.17-31 pool is used up);
    docker's next pick is then inside 192.168.0.0/16 too, the state the failing machine was in. Removed after."""
    prefix = f"capd-e2e-pool-{secrets.token_hex(3)}"
    made: list[str] = []
    try:
        while not made or not any(s.version == 4 and s.subnet_of(PODS)  # type: ignore[arg-type]
                                  for s in _subnets(made[-1])):
            if len(made) >= MAX_DUMMIES:
                pytest.fail(f"docker still picks outside {PODS} after {MAX_DUMMIES} networks: its "
                            "default-address-pools are not docker's defaults here", pytrace=False)
            name = f"{prefix}-{len(made)}"
            p = run(["docker", "network", "create", name], check=False)
            if p.returncode != 0:  # pools exhausted before reaching 192.168: the state cannot be made
                pytest.fail(f"docker refused network {len(made) + 1}: {p.stderr.strip()}", pytrace=False)
            made.append(name)
        assert _docker_picks_inside_the_pod_cidr(prefix), "docker's next pick should lie in 192.168.0.0/16"
        yield made
    finally:
        for name in made:
            run(["docker", "network", "rm", name], check=False)


def test_pod_cidr_192_168_becomes_available_when_docker_pools_are_used_up(
        mgmt: Mgmt, cluster_cleanup: list[str], docker_pools_used_up: list[str], tmp_path: Path) -> None:
    name = "e2e-netpool"
    cluster_cleanup.append(name)
    c = create_cluster(mgmt, name, 1, 1, tmp_path, timeout=600, generate_args=("--pod-cidr", str(PODS)))
    print(f"\n1 CP + 1 worker with pod CIDR {PODS}, {len(docker_pools_used_up)} docker networks made first: "
          f"Available after {c.available_seconds:.0f}s")

    net = f"capd-py-default-{name}"
    subnets = _subnets(net)
    assert subnets and not any(s.version == 4 and s.overlaps(PODS) for s in subnets), subnets
    # the pods do use the pod CIDR: the CNI gave CoreDNS addresses from it. Available needs Ready nodes, not
    # CoreDNS scheduled: a CI run read both pods still without an address 20 s in, so wait for the addresses.
    def coredns_ips() -> list[str] | None:
        pods = json.loads(workload_kubectl(c.kubeconfig, "get", "pods", "-n", "kube-system", "-l",
                                           "k8s-app=kube-dns", "-o", "json"))["items"]
        ips = [p["status"].get("podIP") for p in pods]
        return ips if ips and all(ips) else None

    ips = wait_for(coredns_ips, 180, "CoreDNS pods with an address")
    assert all(ipaddress.ip_address(ip) in PODS for ip in ips), ips
    # the dummies' 192.168.x subnets lie inside the pod CIDR, but they are docker networks, isolated by docker from
    # the cluster's: the pods lose nothing, so no overlap is said (a condition that followed other networks
    # would change a stable cluster's status as they come and go: docs/docker-provider.md)
    dc = mgmt.get("dockercluster", name)
    overlap = next(x for x in dc["status"]["conditions"] if x["type"] == "ClusterNetworkOverlap")
    assert overlap["status"] == "False" and overlap["reason"] == "NoOverlap", overlap
