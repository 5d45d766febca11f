"""Which docker host a DockerCluster goes to (issue 32). Pure: the hosts, their load and which have the images
in; one host (or why none) out.

Rules, in order:
1. The DockerCluster's `capd-py.dev/docker-host` annotation wins; it must name a configured host.
2. A DockerCluster that was provisioned before it had the annotation (made before hosts existed) is where every
   cluster was then: on `local`. Never move a cluster by re-placing it.
3. Otherwise the scheduler: candidates are the hosts matching the `capd-py.dev/docker-host-selector` labels that
   are below their capacity; hosts that already have the images are preferred (nothing to copy); then, with
   `capd-py.dev/docker-host-spread: KEY`, the hosts whose KEY value carries the fewest clusters; then the least
   loaded (clusters / capacity, unlimited hosts by cluster count); then the name, so the choice is stable.
   A chosen host without the images gets them copied from one that has them (`copy_from`), never pulled.
The choice is written into the annotation once, so later passes (and DockerMachines) read it, not recompute it.

Failure domains (upstream's DockerCluster spec.failureDomains: name, controlPlane, attributes) may name a docker host
in the attribute `capd-py.dev/docker-host`. Only domains on the cluster's own host are offered to Cluster API: one
cluster's nodes need one network, and none spans hosts (docs/multihost.md says what was measured); the others are
refused in the DockerCluster's FailureDomainHosts condition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from capd_py.api import dockerhosts as dh

R_PLACED = "Placed"
R_UNKNOWN_HOST = "UnknownDockerHost"
R_NO_HOST = "NoDockerHostAvailable"
R_INVALID = "InvalidDockerHostConfiguration"
R_HOST_UNREACHABLE = "DockerHostUnreachable"  # the host's daemon does not answer


@dataclass(frozen=True)
class Placement:
    host: str | None
    reason: str
    message: str = ""
    copy_from: str = ""     # a host holding the images the chosen one lacks ("" when nothing to copy)
    new: bool = False       # chosen now by the scheduler (the annotation is to be written)


def _matches(host: dh.DockerHost, selector: Mapping[str, str]) -> bool:
    return all(host.labels.get(k) == v for k, v in selector.items())


def _load(host: dh.DockerHost, clusters: int) -> float:
    return clusters / host.max_clusters if host.max_clusters else float(clusters)


def place(hosts: Mapping[str, dh.DockerHost], annotations: Mapping[str, str], provisioned: bool,
          clusters: Mapping[str, int], has_images: Mapping[str, bool]) -> Placement:
    """`clusters`: DockerClusters already placed per host (this one excluded); `has_images`: per host, whether it
    holds every image this cluster needs (absent: not known, taken as no)."""
    named = annotations.get(dh.DOCKER_HOST_ANNOTATION, "")
    if named:
        if named not in hosts:
            return Placement(None, R_UNKNOWN_HOST, f"docker host {named!r} is not configured (known: "
                             f"{', '.join(sorted(hosts))}; `capd-py host list`)")
        return Placement(named, R_PLACED)
    if provisioned:
        return Placement(dh.LOCAL, R_PLACED, "provisioned before docker hosts were configured", new=True)
    try:
        selector = dh.parse_selector(annotations.get(dh.HOST_SELECTOR_ANNOTATION, ""))
    except dh.HostConfigError as e:
        return Placement(None, R_INVALID, str(e))
    spread = annotations.get(dh.SPREAD_ANNOTATION, "")
    matching = [h for h in hosts.values() if _matches(h, selector)]
    if not matching:
        return Placement(None, R_NO_HOST, f"no docker host has the labels {selector}")
    free = [h for h in matching if not h.max_clusters or clusters.get(h.name, 0) < h.max_clusters]
    if not free:
        return Placement(None, R_NO_HOST, "every matching docker host is at its capacity: "
                         + ", ".join(f"{h.name} {clusters.get(h.name, 0)}/{h.max_clusters}" for h in matching))
    per_value: dict[str, int] = {}
    if spread:
        for h in hosts.values():
            if spread in h.labels:
                per_value[h.labels[spread]] = per_value.get(h.labels[spread], 0) + clusters.get(h.name, 0)

    def score(h: dh.DockerHost) -> tuple[int, int, float, str]:
        spread_load = per_value.get(h.labels.get(spread, ""), 0) if spread else 0
        return (0 if has_images.get(h.name) else 1, spread_load, _load(h, clusters.get(h.name, 0)), h.name)

    best = min(free, key=score)
    copy_from = ""
    if not has_images.get(best.name):
        sources = sorted(n for n, ok in has_images.items() if ok and n in hosts)
        copy_from = sources[0] if sources else ""
    return Placement(best.name, R_PLACED, f"placed on {best.name} by the scheduler", copy_from=copy_from, new=True)


# --- failure domains -> docker hosts ----------------------------------------------------------------------------

# on a DockerCluster: whether its failure domains' hosts are usable (set only when a failure domain names a host)
FAILURE_DOMAIN_HOSTS = "FailureDomainHosts"
R_FD_ON_CLUSTER_HOST = "FailureDomainsOnClusterHost"
R_FD_OTHER_HOST = "FailureDomainOnOtherDockerHost"


@dataclass(frozen=True)
class DomainHosts:
    usable: list[dict[str, Any]]        # what status.failureDomains offers Cluster API (KCP / MachineDeployments)
    refused: dict[str, str]             # failure domain name -> why it is not offered
    named: bool                         # some failure domain names a docker host (else no condition is written)

    def message(self) -> str:
        return "; ".join(f"failure domain {n!r}: {m}" for n, m in sorted(self.refused.items()))


def domain_host(domain: Mapping[str, Any]) -> str:
    """The docker host a failure domain names (upstream v1beta2 FailureDomain: name, controlPlane, attributes;
    the host is the attribute `capd-py.dev/docker-host`), "" when none."""
    return str((domain.get("attributes") or {}).get(dh.FAILURE_DOMAIN_HOST_ATTRIBUTE) or "")


def _refusal(domain_host_name: str, cluster_host: str) -> str:
    return (f"names docker host {domain_host_name!r} but the cluster's network and load balancer are on "
            f"{cluster_host!r}: the nodes of one cluster need one network, and capd-py does not build a network "
            "spanning docker hosts (docs/multihost.md); not offered to Cluster API")


def domains_on_host(domains: list[dict[str, Any]] | None, cluster_host: str) -> DomainHosts:
    """Split a DockerCluster's spec.failureDomains by the docker host each names: a domain naming none, or the
    cluster's own host, is usable (its machines go where the cluster is, as without the attribute); a domain naming
    another host is refused and left out of status.failureDomains, so Cluster API never spreads machines there."""
    usable: list[dict[str, Any]] = []
    refused: dict[str, str] = {}
    named = False
    for d in domains or []:
        host = domain_host(d)
        named = named or bool(host)
        if host and host != cluster_host:
            refused[str(d.get("name"))] = _refusal(host, cluster_host)
        else:
            usable.append(d)
    return DomainHosts(usable, refused, named)


def machine_domain_refusal(domains: list[dict[str, Any]] | None, cluster_host: str, machine_domain: str) -> str:
    """Why a Machine whose spec.failureDomain is `machine_domain` gets no container ("" when it may): set by hand
    (Cluster API only picks offered domains) to a domain naming another docker host."""
    d = next((d for d in domains or [] if d.get("name") == machine_domain), None) if machine_domain else None
    host = domain_host(d) if d else ""
    if not host or host == cluster_host:
        return ""
    return f"the Machine's failure domain {machine_domain!r} " + _refusal(host, cluster_host).replace(
        "; not offered to Cluster API", "; set another failure domain or none")
