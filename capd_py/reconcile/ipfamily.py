"""A Cluster's IP family from its pod and service CIDRs (pure), as upstream CAPD decides it
(test/infrastructure/container GetClusterIPFamily): no CIDRs -> IPv4; both families among the pod CIDRs ->
dual-stack; otherwise the pods' and services' families must agree.

The family decides what the Docker provider does: IPv6 and dual-stack clusters get a docker network with an
IPv6 subnet too and nodes with IPv6 enabled; an IPv6 cluster's load balancer listens on IPv6, its endpoint
and backends are IPv6 addresses and its machines report IPv6 addresses only; dual-stack machines report
both, the endpoint stays IPv4 (as upstream's)."""

from __future__ import annotations

import ipaddress
from typing import Any

IPV4 = "IPv4"
IPV6 = "IPv6"
DUAL_STACK = "DualStack"


class IPFamilyError(ValueError):
    """The Cluster's CIDRs name no usable family; the message says why (upstream's words)."""


def _family(cidrs: list[str]) -> str:
    if len(cidrs) > 2:
        raise IPFamilyError("too many CIDRs specified")
    versions = set()
    for c in cidrs:
        try:
            versions.add(ipaddress.ip_network(str(c), strict=False).version)
        except ValueError as e:
            raise IPFamilyError(f"could not parse CIDR: {e}") from e
    if versions == {4, 6}:
        return DUAL_STACK
    return IPV6 if versions == {6} else IPV4


def _blocks(cluster: dict[str, Any] | None, key: str) -> list[str]:
    net = ((cluster or {}).get("spec") or {}).get("clusterNetwork") or {}
    return [str(c) for c in ((net.get(key) or {}).get("cidrBlocks") or [])]


def cluster_ip_family(cluster: dict[str, Any] | None) -> str:
    """IPV4, IPV6 or DUAL_STACK; IPFamilyError (prefixed `pods:`/`services:` as upstream) when unusable."""
    pods, services = _blocks(cluster, "pods"), _blocks(cluster, "services")
    if not pods and not services:
        return IPV4
    try:
        pod_family = _family(pods) if pods else None
    except IPFamilyError as e:
        raise IPFamilyError(f"pods: {e}") from e
    try:
        service_family = _family(services) if services else None
    except IPFamilyError as e:
        raise IPFamilyError(f"services: {e}") from e
    if pod_family is None:
        return str(service_family)
    if service_family is None or pod_family == DUAL_STACK:
        return pod_family
    if pod_family != service_family:
        raise IPFamilyError("pods and services IP family mismatch")
    return pod_family


def wants_ipv6(family: str) -> bool:
    """The cluster's network needs an IPv6 subnet and its nodes IPv6 enabled."""
    return family in (IPV6, DUAL_STACK)
