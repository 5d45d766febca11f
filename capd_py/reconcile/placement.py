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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from capd_py.api import dockerhosts as dh

R_PLACED = "Placed"
R_UNKNOWN_HOST = "UnknownDockerHost"
R_NO_HOST = "NoDockerHostAvailable"
R_INVALID = "InvalidDockerHostConfiguration"


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
