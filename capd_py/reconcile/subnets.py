"""Which subnet a docker network of capd-py's gets, and which address ranges a cluster's own CIDRs clash
with (pure).

Left to itself docker hands out 172.17-31.x.0/16, then 192.168.x.0/20 once those are used up (laptops and CI
runners with many compose projects get there). 192.168.0.0/16 is also the pod CIDR of upstream's templates
and Calico's default: a node network inside the pod CIDR makes each node route the first pod addresses (the
load balancer's, the other nodes') into its pods, and the cluster never becomes Available. So capd-py picks
every network's subnet itself, from a pool (`CAPD_PY_NETWORK_POOL`), skipping whatever the subnet must not
overlap: the Cluster's pod and service CIDRs, the management cluster's, every docker network and the host's
routes. The pool is a list of `BASE/PREFIX:SIZE` ranges cut into subnets of prefix length SIZE, docker's
`default-address-pools` shape.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Outside docker's own default pools (172.17-31, 192.168) where it can be and outside the usual pod and
# service ranges (10.244/16 kind and flannel, 10.96/12 kubeadm, 10.128/12 upstream CAPD's e2e services,
# 192.168/16 Calico and upstream's templates): 172.16/16 stays free even when docker's pools are used up.
DEFAULT_POOL = "172.16.0.0/12:20,10.208.0.0/12:20,fd00:ca9d:7000::/40:64"
# kubeadm's service CIDR when a Cluster names none
DEFAULT_SERVICE_CIDR = "10.96.0.0/12"
# the management cluster `capd-py init` makes (the same ranges as kind's), unless CAPD_PY_MANAGEMENT_CIDRS says
MANAGEMENT_POD_CIDR = "10.244.0.0/16"
MANAGEMENT_SERVICE_CIDR = "10.96.0.0/12"
DEFAULT_MANAGEMENT_CIDRS = f"{MANAGEMENT_POD_CIDR},{MANAGEMENT_SERVICE_CIDR}"


@dataclass(frozen=True)
class PoolRange:
    base: IPNetwork
    size: int   # prefix length of the subnets cut from `base`

    def __str__(self) -> str:
        return f"{self.base}:{self.size}"

    def subnets(self) -> Iterator[IPNetwork]:
        return self.base.subnets(new_prefix=self.size)


@dataclass(frozen=True)
class Taken:
    """An address range a new network must not overlap, with what it is (for messages)."""
    cidr: str
    what: str

    @property
    def network(self) -> IPNetwork:
        return ipaddress.ip_network(self.cidr, strict=False)

    def __str__(self) -> str:
        return f"{self.what} {self.cidr}"


@dataclass(frozen=True)
class Choice:
    subnet: str | None
    # when no subnet is free: the ranges that ruled out the pool's subnets, most important first
    blocked_by: tuple[Taken, ...] = ()

    def message(self, pool: Sequence[PoolRange]) -> str:
        if self.subnet:
            return ""
        ranges = ", ".join(str(p) for p in pool) or "(empty)"
        why = "; ".join(str(t) for t in self.blocked_by[:6]) + (" ..." if len(self.blocked_by) > 6 else "")
        return (f"no subnet of the network pool ({ranges}) is free: each overlaps {why or 'something'}; "
                "set CAPD_PY_NETWORK_POOL to free ranges or change the Cluster's spec.clusterNetwork")


def parse_cidrs(text: str, what: str) -> tuple[str, ...]:
    """A comma-separated CIDR list (`CAPD_PY_MANAGEMENT_CIDRS`); ValueError names the bad item."""
    out = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        try:
            out.append(str(ipaddress.ip_network(item, strict=False)))
        except ValueError as e:
            raise ValueError(f"{what}: {item!r} is not a CIDR ({e})") from e
    return tuple(out)


def parse_pool(text: str) -> tuple[PoolRange, ...]:
    """`BASE/PREFIX[:SIZE],...` (SIZE defaults to 20 for IPv4, 64 for IPv6); ValueError names the bad item."""
    out = []
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        addr, _, rest = item.partition("/")
        prefix, _, size_s = rest.partition(":")
        try:
            base = ipaddress.ip_network(f"{addr}/{prefix}", strict=False)
        except ValueError as e:
            raise ValueError(f"CAPD_PY_NETWORK_POOL: {item!r} is not BASE/PREFIX[:SIZE] ({e})") from e
        limit = 30 if base.version == 4 else 126
        size = int(size_s) if size_s.isdigit() else (20 if base.version == 4 else 64) if not size_s else -1
        if not base.prefixlen <= size <= limit:
            raise ValueError(f"CAPD_PY_NETWORK_POOL: {item!r}: the subnet size must be a prefix length from "
                             f"{base.prefixlen} (the range's) to {limit}")
        out.append(PoolRange(base, size))
    if not out:
        raise ValueError("CAPD_PY_NETWORK_POOL names no address range")
    return tuple(out)


def _overlaps(a: IPNetwork, b: IPNetwork) -> bool:
    return a.version == b.version and a.overlaps(b)  # type: ignore[arg-type]


def overlapping(cidr: str, taken: Iterable[Taken]) -> list[Taken]:
    """The entries of `taken` that `cidr` overlaps (same address family only)."""
    net = ipaddress.ip_network(cidr, strict=False)
    return [t for t in taken if _overlaps(net, t.network)]


def start_of(key: str) -> int:
    """A stable number for `key` (a network's name): where choose() begins looking in each range (sha256, not
    Python's per-process hash, so every process and every run agrees)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") if key else 0


def choose(pool: Sequence[PoolRange], taken: Sequence[Taken], version: int = 4, start: int = 0) -> Choice:
    """The first subnet of the pool's ranges of IP `version` that overlaps nothing in `taken`, each range looked
    through from its subnet number `start` (modulo the range's count) to its end, then from its beginning.

    start 0 is first-fit (the management cluster's network). A workload cluster's network starts at its name's
    number (start_of): a cluster gets the same subnet each time it is made while that one is free, and a subnet a
    deleted cluster freed is not the next one every other cluster asks for: a snapshot's restore finds its
    addresses free, and two clusters made at once by different processes rarely race for one subnet.

    A taken range that covers a candidate skips every candidate inside it at once, so a wide pod CIDR or a
    /8 route costs one step, not one per subnet."""
    nets = sorted({(t.network, t) for t in taken if t.network.version == version},
                  key=lambda p: (p[0].network_address, p[0].prefixlen))
    blockers: dict[Taken, None] = {}
    for r in pool:
        if r.base.version != version:
            continue
        step = 1 << (r.base.max_prefixlen - r.size)
        first = int(r.base.network_address)
        count = 1 << (r.size - r.base.prefixlen)
        middle = first + (start % count) * step
        for addr, end in ((middle, int(r.base.broadcast_address)), (first, middle - 1)):
            while addr <= end:
                cand = ipaddress.ip_network((addr, r.size))
                hit = [(n, t) for n, t in nets if _overlaps(cand, n)]
                if not hit:
                    return Choice(str(cand))
                for _, t in hit:
                    blockers.setdefault(t, None)
                # jump past the furthest end among the ranges in the way (aligned to the subnet size)
                last = max(int(n.broadcast_address) for n, _ in hit)
                addr = max(addr + step, (last // step + 1) * step)
    return Choice(None, tuple(blockers))


def _cidr_blocks(cluster: dict[str, Any] | None, key: str) -> list[str]:
    net = ((cluster or {}).get("spec") or {}).get("clusterNetwork") or {}
    return [str(c) for c in ((net.get(key) or {}).get("cidrBlocks") or []) if c]


def cluster_cidrs(cluster: dict[str, Any] | None) -> list[Taken]:
    """The Cluster's pod and service CIDRs (kubeadm's default service CIDR when it names none). Unparseable
    blocks are left to admission (the CRD and kubeadm refuse them)."""
    pods = [Taken(c, "the Cluster's pod CIDR") for c in _cidr_blocks(cluster, "pods")]
    svcs = [Taken(c, "the Cluster's service CIDR")
            for c in (_cidr_blocks(cluster, "services") or [DEFAULT_SERVICE_CIDR])]
    return [t for t in pods + svcs if _valid(t.cidr)]


def management_cidrs(cidrs: Iterable[str]) -> list[Taken]:
    return [Taken(c, "the management cluster's pod/service CIDR") for c in cidrs if _valid(c)]


def _valid(cidr: str) -> bool:
    try:
        ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return False
    return True


def network_taken(name: str, subnets: Iterable[str]) -> list[Taken]:
    return [Taken(s, f"docker network {name}") for s in subnets if s and _valid(s)]


def routes_taken(routes: Iterable[str], networks: Iterable[Taken] = ()) -> list[Taken]:
    """Host routes as Taken; a route that is a docker network's subnet keeps that network's name."""
    named = {t.network: t for t in networks}
    return [named.get(ipaddress.ip_network(r, strict=False)) or Taken(r, "host route") for r in routes if _valid(r)]


@dataclass(frozen=True)
class Overlap:
    """Where the Cluster's own CIDRs clash with addresses its pods need to reach."""
    pairs: tuple[tuple[Taken, Taken], ...]   # (the Cluster's CIDR, what it overlaps)

    @property
    def any(self) -> bool:
        return bool(self.pairs)

    def message(self) -> str:
        parts = [f"{mine} overlaps {other}" for mine, other in self.pairs]
        return ("; ".join(parts[:6]) + (" ..." if len(parts) > 6 else "")
                + ": pods cannot reach those addresses (they are routed inside the cluster); choose other "
                "spec.clusterNetwork CIDRs") if parts else ""


def cluster_overlap(cluster: dict[str, Any] | None, others: Sequence[Taken]) -> Overlap:
    """The Cluster's pod/service CIDRs against `others` (the management cluster's network, host routes)."""
    pairs: dict[tuple[Taken, Taken], None] = {}
    for mine in cluster_cidrs(cluster):
        for other in overlapping(mine.cidr, others):
            pairs.setdefault((mine, other), None)
    return Overlap(tuple(pairs))
