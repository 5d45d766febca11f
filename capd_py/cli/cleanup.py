"""`capd-py delete all`: every container, network and volume capd-py made on this host, found by label
(any `io.x-k8s.capd-py.*` label), plus the host controllers process. Goes through the runtime Protocol.

Clusters the local management clusters placed on other docker hosts (docs/multihost.md) go first, while those
management clusters still answer (their host configuration lives in them): on such a host only those clusters'
containers, networks and volumes are removed, never every capd-py object there, since a shared host also carries
other management clusters' clusters. A host that does not answer is said, with what stays on it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capd_py.api import dockerhosts as dh
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_MANAGED, CONTAINER_NAMESPACE, MANAGEMENT_LABEL
from capd_py.cli import hosts
from capd_py.cli import management as mgmt
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_

# a management cluster that does not answer within this is skipped (it is deleted below anyway)
MANAGEMENT_TIMEOUT = 20.0

LABEL_PREFIX = "io.x-k8s.capd-py."
LABEL_KEYS = (CONTAINER_MANAGED, CONTAINER_CLUSTER, MANAGEMENT_LABEL)


def ours(labels: dict[str, str] | None) -> bool:
    return any(k.startswith(LABEL_PREFIX) for k in (labels or {}))


@dataclass(frozen=True)
class Remote:
    """Clusters (`ns/name`) placed on another docker host, and that host's runtime (None, with why, when it does
    not answer or is misconfigured)."""
    host: str
    clusters: tuple[str, ...]
    runtime: ContainerRuntime | None
    error: str = ""


async def remote_clusters(kube: Any) -> list[Remote]:
    """What one management cluster placed on docker hosts other than `local`."""
    out: list[Remote] = []
    for host, clusters in sorted((await hosts.placed_clusters(kube)).items()):
        if host == dh.LOCAL:
            continue
        try:
            out.append(Remote(host, tuple(sorted(clusters)), await hosts.runtime_of(kube, host)))
        except (hosts.HostError, RuntimeError_) as e:
            out.append(Remote(host, tuple(sorted(clusters)), None, str(e)))
    return out


def management_kubeconfigs(rt: ContainerRuntime) -> list[Path]:
    """The kubeconfigs of the management clusters running on the local daemon (`capd-py init` wrote them)."""
    names = {c.labels.get(MANAGEMENT_LABEL, "") for c in rt.list_containers({MANAGEMENT_LABEL: ""})
             if c.running}
    return [p for p in (mgmt.kubeconfig_path(n) for n in sorted(names) if n) if p.exists()]


async def _remotes_of(kubeconfig: Path) -> list[Remote]:
    from capd_py.kube.client import Kube
    kube = Kube.from_kubeconfig(str(kubeconfig))
    try:
        return await asyncio.wait_for(remote_clusters(kube), MANAGEMENT_TIMEOUT)
    finally:
        kube.close()


def find_remotes(rt: ContainerRuntime) -> tuple[list[Remote], list[str]]:
    """Remote placements of every local management cluster, and why a management cluster could not be read."""
    remotes: list[Remote] = []
    problems: list[str] = []
    for kc in management_kubeconfigs(rt):
        try:
            remotes += asyncio.run(_remotes_of(kc))
        except Exception as e:  # noqa: BLE001 - API server down/slow, bad kubeconfig: say it, go on with the rest
            problems.append(f"management cluster {kc.stem}: cannot read its docker hosts ({type(e).__name__}: {e})")
    return remotes, problems


def _remove(rt: ContainerRuntime, containers: Iterable[str] = (), networks: Iterable[str] = (),
            volumes: Iterable[str] = ()) -> dict[str, int]:
    """Remove what is still there of these containers, networks and volumes (in that order); how many of each went.
    A volume still in use by a container that is not ours stays. Callers list networks and volumes only once the
    containers are gone (a node container's volume goes with it)."""
    counts = {"containers": 0, "networks": 0, "volumes": 0}
    for name in containers:
        if rt.get_container(name) is not None:
            rt.remove_container(name)
            counts["containers"] += 1
    for name in networks:
        if rt.get_network(name) is not None:
            rt.remove_network(name)
            counts["networks"] += 1
    for name in volumes:
        try:
            rt.remove_volume(name)
            counts["volumes"] += 1
        except RuntimeError_:
            pass
    return counts


def _add(total: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        total[k] += v


def delete_clusters_on(rt: ContainerRuntime, clusters: Iterable[str]) -> dict[str, int]:
    """Remove the containers, networks and volumes of `clusters` (`ns/name`) on one docker host, by their labels."""
    counts = {"containers": 0, "networks": 0, "volumes": 0}
    for key in clusters:
        namespace, _, name = key.partition("/")
        labels = {CONTAINER_CLUSTER: name, CONTAINER_NAMESPACE: namespace}
        _add(counts, _remove(rt, containers=[c.name for c in rt.list_containers(labels)]))
        _add(counts, _remove(rt, networks=[n.name for n in rt.list_networks(labels)],
                             volumes=rt.list_volumes(labels)))
    return counts


def delete_remote(remotes: Iterable[Remote]) -> tuple[dict[str, int], list[str]]:
    """Delete each remote placement; (counts, what was left and why)."""
    counts = {"containers": 0, "networks": 0, "volumes": 0}
    left: list[str] = []
    for r in remotes:
        if r.runtime is None:
            left.append(f"left on docker host {r.host}: {', '.join(r.clusters)} ({r.error})")
            continue
        try:
            _add(counts, delete_clusters_on(r.runtime, r.clusters))
        except RuntimeError_ as e:
            left.append(f"left on docker host {r.host}: {', '.join(r.clusters)} ({e})")
    return counts, left


def delete_everything(runtime: ContainerRuntime | None = None) -> dict[str, int]:
    """Every capd-py object on the local daemon (the management clusters' remote placements are deleted before,
    by the caller: `find_remotes` + `delete_remote`, while the management clusters still answer)."""
    rt = runtime or mgmt.default_runtime()
    for home in sorted(mgmt.home().glob("*controllers.pid")):
        name = home.name.removesuffix("controllers.pid").removesuffix("-") or mgmt.DEFAULT_NAME
        mgmt.stop_controllers(name)
    containers: dict[str, str] = {}  # id -> name: a container carries several of the keys
    for key in LABEL_KEYS:  # a key with any value
        containers.update((c.id, c.name) for c in rt.list_containers({key: ""}) if c.id not in containers)
    counts = _remove(rt, containers=containers.values())
    _add(counts, _remove(rt, networks=[n.name for n in rt.list_networks() if ours(n.labels)],
                         volumes=sorted({v for key in LABEL_KEYS for v in rt.list_volumes({key: ""})})))
    for kc in mgmt.home().glob("*.kubeconfig"):
        kc.unlink(missing_ok=True)
    return counts
