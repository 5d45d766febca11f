from __future__ import annotations

import ipaddress
from typing import Any

import pytest

from capd_py.reconcile import subnets
from capd_py.reconcile.subnets import Taken

pytestmark = pytest.mark.unit


def _cluster(pods: list[str] | None = None, services: list[str] | None = None) -> dict[str, Any]:
    net: dict[str, Any] = {}
    if pods is not None:
        net["pods"] = {"cidrBlocks": pods}
    if services is not None:
        net["services"] = {"cidrBlocks": services}
    return {"spec": {"clusterNetwork": net}}


def test_default_pool_parses_and_lies_outside_the_usual_pod_and_service_ranges() -> None:
    pool = subnets.parse_pool(subnets.DEFAULT_POOL)
    assert [str(p) for p in pool] == ["172.16.0.0/12:20", "10.208.0.0/12:20", "fd00:ca9d:7000::/40:64"]
    usual = ["192.168.0.0/16", "10.244.0.0/16", "10.96.0.0/12", "10.128.0.0/12", "100.64.0.0/10",
             "fd00:10:244::/56", "fd00:10:96::/112"]
    for r in pool:
        for u in usual:
            n = ipaddress.ip_network(u)
            assert not (n.version == r.base.version and r.base.overlaps(n)), (r, u)


@pytest.mark.parametrize("text,want", [
    ("10.1.0.0/16", ["10.1.0.0/16:20"]),
    ("10.1.0.0/16:24, 192.0.2.0/24:26", ["10.1.0.0/16:24", "192.0.2.0/24:26"]),
    ("fd00:1::/48", ["fd00:1::/48:64"]),
    ("fd00:1::/48:56", ["fd00:1::/48:56"]),
    ("10.1.2.3/16:24", ["10.1.0.0/16:24"]),   # host bits dropped, as docker does
])
def test_parse_pool(text: str, want: list[str]) -> None:
    assert [str(p) for p in subnets.parse_pool(text)] == want


@pytest.mark.parametrize("text,says", [
    ("", "names no address range"),
    ("10.1.0.0", "BASE/PREFIX"),
    ("10.1.0.0/16:12", "from 16"),
    ("10.1.0.0/16:31", "to 30"),
    ("10.1.0.0/16:x", "prefix length"),
    ("banana/8", "banana"),
])
def test_parse_pool_errors_name_the_item(text: str, says: str) -> None:
    with pytest.raises(ValueError, match="CAPD_PY_NETWORK_POOL") as e:
        subnets.parse_pool(text)
    assert says in str(e.value)


def test_parse_cidrs() -> None:
    assert subnets.parse_cidrs("10.244.0.0/16, 10.96.0.0/12,", "X") == ("10.244.0.0/16", "10.96.0.0/12")
    with pytest.raises(ValueError, match="X: 'nope'"):
        subnets.parse_cidrs("10.0.0.0/8,nope", "X")


def test_choose_first_free_subnet() -> None:
    pool = subnets.parse_pool("172.16.0.0/12:20")
    assert subnets.choose(pool, []).subnet == "172.16.0.0/20"
    taken = [Taken("172.16.0.0/20", "docker network a"), Taken("172.16.16.0/24", "host route")]
    assert subnets.choose(pool, taken).subnet == "172.16.32.0/20"


def test_choose_from_a_start_goes_to_the_range_end_then_wraps_to_its_beginning() -> None:
    pool = subnets.parse_pool("172.16.0.0/16:20")      # 16 subnets
    assert subnets.choose(pool, [], start=3).subnet == "172.16.48.0/20"
    assert subnets.choose(pool, [], start=3 + 16).subnet == "172.16.48.0/20"   # modulo the range's count
    taken = [Taken("172.16.48.0/20", "docker network a"), Taken("172.16.64.0/18", "host route")]
    assert subnets.choose(pool, taken, start=3).subnet == "172.16.128.0/20"   # past both, one jump over the /18
    late = [Taken("172.16.240.0/20", "docker network b")]
    assert subnets.choose(pool, late, start=15).subnet == "172.16.0.0/20"     # wrapped
    full = [Taken("172.16.0.0/16", "host route")]
    assert subnets.choose(pool, full, start=5).subnet is None
    assert subnets.choose(subnets.parse_pool("fd00:1::/48:64"), [], version=6, start=(1 << 16) + 2).subnet == \
        "fd00:1:0:2::/64"


def test_a_workload_network_starts_at_its_names_place_the_same_in_every_process() -> None:
    """A freed subnet is not every next cluster's first choice (a deleted cluster's snapshot restore needs its
    subnet again; found 2026-12-06: another test's cluster took it between the delete and the restore)."""
    assert subnets.start_of("") == 0
    a, b = subnets.start_of("capd-py-default-e2e-life"), subnets.start_of("capd-py-default-v1b1-1f2e")
    assert a == subnets.start_of("capd-py-default-e2e-life") and a != b
    pool = subnets.parse_pool(subnets.DEFAULT_POOL)
    assert subnets.choose(pool, [], start=a).subnet != subnets.choose(pool, [], start=b).subnet


def test_the_issue_case_docker_pool_in_192_168_and_pods_192_168_0_0_16() -> None:
    """docker's 192.168.x.0/20 pool (what it hands out once 172.17-31 are used) against upstream's pod CIDR."""
    pool = subnets.parse_pool("192.168.0.0/16:20,172.16.0.0/12:20")
    avoid = subnets.cluster_cidrs(_cluster(["192.168.0.0/16"], ["10.128.0.0/12"]))
    got = subnets.choose(pool, avoid).subnet
    assert got == "172.16.0.0/20"
    assert not subnets.overlapping(got, avoid)


def test_choose_skips_the_cluster_services_and_management_cidrs() -> None:
    pool = subnets.parse_pool("10.96.0.0/11:16")
    avoid = [*subnets.cluster_cidrs(_cluster(["10.96.0.0/16"])),            # default services 10.96.0.0/12
             *subnets.management_cidrs(["10.112.0.0/16"])]
    assert subnets.choose(pool, avoid).subnet == "10.113.0.0/16"


def test_choose_jumps_over_a_wide_range_in_one_step_and_reports_blockers() -> None:
    pool = subnets.parse_pool("10.0.0.0/8:28")        # 1 048 576 candidates
    wide = Taken("10.0.0.0/8", "host route")
    choice = subnets.choose(pool, [wide])
    assert choice.subnet is None and choice.blocked_by == (wide,)
    msg = choice.message(pool)
    assert "10.0.0.0/8:28" in msg and "host route 10.0.0.0/8" in msg and "CAPD_PY_NETWORK_POOL" in msg


def test_choose_is_per_address_family() -> None:
    pool = subnets.parse_pool("172.16.0.0/16:20,fd00:1::/48:64")
    taken = [Taken("fd00:1::/64", "docker network v6"), Taken("172.16.0.0/20", "docker network v4")]
    assert subnets.choose(pool, taken, version=4).subnet == "172.16.16.0/20"
    assert subnets.choose(pool, taken, version=6).subnet == "fd00:1:0:1::/64"
    assert subnets.choose(subnets.parse_pool("fd00:1::/48"), [], version=4).subnet is None


def test_cluster_cidrs_default_services_and_skip_garbage() -> None:
    got = subnets.cluster_cidrs(_cluster(["192.168.0.0/16", "not-a-cidr"]))
    assert [(t.cidr, t.what) for t in got] == [("192.168.0.0/16", "the Cluster's pod CIDR"),
                                               ("10.96.0.0/12", "the Cluster's service CIDR")]
    assert [t.cidr for t in subnets.cluster_cidrs(None)] == ["10.96.0.0/12"]
    assert [t.cidr for t in subnets.cluster_cidrs(_cluster(services=["10.128.0.0/12", "fd00:10:96::/112"]))] == \
        ["10.128.0.0/12", "fd00:10:96::/112"]


def test_routes_taken_names_docker_bridges() -> None:
    nets = subnets.network_taken("kind", ["172.18.0.0/16", "fc00:f853:ccd:e793::/64"])
    got = subnets.routes_taken(["172.18.0.0/16", "192.168.1.0/24"], nets)
    assert [str(t) for t in got] == ["docker network kind 172.18.0.0/16", "host route 192.168.1.0/24"]


def test_cluster_overlap_message() -> None:
    others = [Taken("192.168.1.0/24", "host route"), Taken("172.16.0.0/20", "the management cluster's network m")]
    ov = subnets.cluster_overlap(_cluster(["192.168.0.0/16"], ["172.16.0.0/24"]), others)
    assert ov.any
    assert ov.message().startswith("the Cluster's pod CIDR 192.168.0.0/16 overlaps host route 192.168.1.0/24; "
                                   "the Cluster's service CIDR 172.16.0.0/24 overlaps the management cluster's "
                                   "network m 172.16.0.0/20: pods cannot reach those addresses")
    none = subnets.cluster_overlap(_cluster(["10.244.0.0/16"]), others)
    assert not none.any and none.message() == ""
