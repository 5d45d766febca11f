"""Which docker host a DockerCluster (and its DockerMachines) live on, and that host's DockerInfra (issue 32); and
which docker network, when the controllers are given a default one (`record_network`).

Observe here (the hosts ConfigMap, every DockerCluster's placement, which host has the images), decide in
capd_py.reconcile.placement, and write the choice into the DockerCluster's annotation once. Missing images are
copied from a host that has them (`docker save` | `docker load`), never pulled.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from capd_py.api import contract
from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import DOCKER_CLUSTER, KUBEADM_CONTROL_PLANE
from capd_py.controllers.context import Ctx
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile import placement
from capd_py.runtime import images
from capd_py.runtime.protocol import DaemonUnreachable, RuntimeError_

log = logging.getLogger("capd_py.dockerhost")


@dataclass(frozen=True)
class Where:
    host: dh.DockerHost
    infra: DockerInfra


class NotPlaced(Exception):
    """No host for this DockerCluster (yet): `reason` and `message` go into its condition."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


def unreachable(e: Exception) -> bool:
    """Whether a runtime failure is the docker host not answering (reported as DockerHostUnreachable, not as a
    container error)."""
    return isinstance(e, DaemonUnreachable)


def why(e: Exception, docker_cluster: dict[str, Any] | None) -> str:
    """What a NotPlaced or DaemonUnreachable says, naming the host for the latter."""
    if isinstance(e, NotPlaced):
        return e.message
    return f"docker host {dh.host_of(docker_cluster) or dh.LOCAL}: {e}"


def _single_local(hosts: dict[str, dh.DockerHost]) -> bool:
    return list(hosts) == [dh.LOCAL] and not hosts[dh.LOCAL].endpoint


async def hosts_config(ctx: Ctx) -> dict[str, dh.DockerHost]:
    try:
        return await ctx.hosts.read_config(ctx.kube)
    except dh.HostConfigError as e:
        raise NotPlaced(placement.R_INVALID, f"{dh.NAMESPACE}/{dh.CONFIGMAP}: {e}") from e


async def where(ctx: Ctx, docker_cluster: dict[str, Any] | None, unplaced_local: bool = False) -> Where:
    """The placed host of a DockerCluster (None, or not placed while only `local` exists: local). NotPlaced when it
    names an unknown host, or is not placed yet while several hosts exist (its DockerMachines wait).
    `unplaced_local` (deletion): an unplaced DockerCluster is on `local`, where clusters made before docker hosts
    were configured live (a newer unplaced one has created nothing anywhere yet)."""
    hosts = await hosts_config(ctx)
    name = dh.host_of(docker_cluster)
    if not name:
        if _single_local(hosts) or docker_cluster is None or unplaced_local:
            return Where(hosts[dh.LOCAL], ctx.infra)
        raise NotPlaced(placement.R_NO_HOST, "the DockerCluster is not placed on a docker host yet")
    if name not in hosts:
        raise NotPlaced(placement.R_UNKNOWN_HOST, f"docker host {name!r} is not configured (known: "
                        f"{', '.join(sorted(hosts))})")
    return await _infra(ctx, hosts[name])


async def _infra(ctx: Ctx, host: dh.DockerHost) -> Where:
    try:
        return Where(host, await ctx.hosts.infra(ctx.kube, host))
    except RuntimeError_ as e:  # its TLS Secret is missing, or the client could not be made (a daemon away)
        raise NotPlaced(placement.R_HOST_UNREACHABLE if unreachable(e) else placement.R_UNKNOWN_HOST, str(e)) from e


async def place(ctx: Ctx, dc: dict[str, Any], wanted_images: list[str]) -> tuple[Where, dict[str, Any]]:
    """The DockerCluster's host, chosen now (and recorded in its annotation) when it has none; the images it needs
    copied there from a host that has them. Returns the host and the (possibly patched) DockerCluster."""
    hosts = await hosts_config(ctx)
    annotations = dh.annotations_of(dc)
    if _single_local(hosts) and not annotations.get(dh.DOCKER_HOST_ANNOTATION):
        return Where(hosts[dh.LOCAL], ctx.infra), dc  # exactly as before hosts existed: nothing written
    # made by capd-py before hosts were configured: it has a load balancer (its host port recorded) or was
    # provisioned; a user-given spec.controlPlaneEndpoint alone does not count (upstream lets users set it)
    provisioned = bool(dcr.recorded_host_port(dc) or contract.dig(dc, "status", "initialization", "provisioned"))
    counts: dict[str, int] = {}
    uid = dc["metadata"].get("uid")
    for other in await ctx.kube.list(DOCKER_CLUSTER):
        if other["metadata"].get("uid") != uid:
            h = dh.host_of(other) or dh.LOCAL
            counts[h] = counts.get(h, 0) + 1
    has: dict[str, bool] = {}
    candidates = dict(hosts)
    if not annotations.get(dh.DOCKER_HOST_ANNOTATION) and not provisioned:
        for name, host in hosts.items():
            try:
                w = await _infra(ctx, host)
                await w.infra.call(w.infra.runtime.ping)
                has[name] = all((await w.infra.local_image_ids(wanted_images)).values())
            except (NotPlaced, RuntimeError_) as e:  # a host that does not answer takes no new cluster
                log.info("docker host %s not considered for %s: %s", name, dc["metadata"]["name"], e)
                candidates.pop(name)
    p = placement.place(candidates, annotations, provisioned, counts, has)
    if p.host is None:
        raise NotPlaced(p.reason, p.message)
    got = await _infra(ctx, hosts[p.host])
    if p.new:
        dc = await _annotate(ctx, dc, dh.DOCKER_HOST_ANNOTATION, p.host)
        log.info("%s/%s: %s", dc["metadata"].get("namespace"), dc["metadata"]["name"], p.message)
    await _bring_images(ctx, hosts, got, wanted_images, p.copy_from)
    return got, dc


async def record_network(ctx: Ctx, dc: dict[str, Any]) -> dict[str, Any]:
    """A new DockerCluster joins the controllers' default docker network (upstream CAPD's DOCKER_NETWORK), written
    into its network annotation once, as a user would name a shared network (reconcile.dockercluster
    network_to_record); the DockerCluster as it is now."""
    network = dcr.network_to_record(dc, ctx.settings.docker_network)
    if network is None:
        return dc
    log.info("%s/%s: joins the docker network %s (DOCKER_NETWORK)", dc["metadata"].get("namespace"),
             dc["metadata"]["name"], network)
    return await _annotate(ctx, dc, dcr.NETWORK_ANNOTATION, network)


async def _annotate(ctx: Ctx, dc: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """Record a choice on the DockerCluster once: the patch names the resourceVersion the choice was made from, so a
    concurrent change (another choice) makes it fail rather than be overwritten."""
    return await ctx.kube.merge_patch(DOCKER_CLUSTER, dc["metadata"].get("namespace") or "", dc["metadata"]["name"],
                                      {"metadata": {"resourceVersion": dc["metadata"]["resourceVersion"],
                                                    "annotations": {key: value}}})


async def bring_images(ctx: Ctx, target: Where, refs: list[str]) -> None:
    """Copy the images `target` lacks from another configured host that has them (a machine's own image: a
    `customImage`, a MachineDeployment at another version than the control plane's). Nothing to do with one host."""
    await _bring_images(ctx, await hosts_config(ctx), target, refs, "")


async def _bring_images(ctx: Ctx, hosts: dict[str, dh.DockerHost], target: Where, refs: list[str],
                        preferred: str) -> None:
    """Copy the images `target` lacks from a host that has them all (the scheduler's pick first, then `local`, then
    by name); when none has them, nothing is copied and the load balancer / machines report ImageNotFound."""
    missing = [r for r, i in (await target.infra.local_image_ids(refs)).items() if i is None]
    if not missing:
        return
    order = [n for n in dict.fromkeys([preferred, dh.LOCAL, *sorted(hosts)]) if n and n in hosts
             and n != target.host.name]
    for name in order:
        try:
            src = await _infra(ctx, hosts[name])
            if all((await src.infra.local_image_ids(missing)).values()):
                await copy_images(ctx, hosts, name, target, missing)
                return
        except (NotPlaced, RuntimeError_) as e:  # that host does not answer: try the next
            log.info("docker host %s cannot provide %s: %s", name, ", ".join(missing), e)


async def copy_images(ctx: Ctx, hosts: dict[str, dh.DockerHost], source: str, target: Where,
                      refs: list[str]) -> list[str]:
    """Copy the images `target` lacks from host `source` (`docker save` there, `docker load` here). Returns the
    references copied."""
    src = await _infra(ctx, hosts[source])
    present = await target.infra.local_image_ids(refs)
    todo = [r for r, i in present.items() if i is None]
    for ref in todo:
        log.info("copying image %s from docker host %s to %s", ref, source, target.host.name)
        await target.infra.call(images.copy_image, src.infra.runtime, target.infra.runtime, ref)
    return todo


async def wanted_images(ctx: Ctx, dc: dict[str, Any], cluster: dict[str, Any]) -> list[str]:
    """The images a docker host needs for this cluster: its load balancer's and the node image of its Kubernetes
    version (the topology's, else a KubeadmControlPlane's), when known."""
    out = [dcr.lb_image(dc, ctx.settings.haproxy_image)]
    version = ((cluster.get("spec") or {}).get("topology") or {}).get("version")
    ref = contract.ref(cluster, "spec", "controlPlaneRef")
    if not version and ref and ref["kind"] == KUBEADM_CONTROL_PLANE.kind:
        kcp = await ctx.kube.get(KUBEADM_CONTROL_PLANE, dc["metadata"].get("namespace") or "", ref["name"])
        version = ((kcp or {}).get("spec") or {}).get("version")
    image = dmr.node_image({}, {"spec": {"version": version}}, ctx.settings.node_image_repository)
    return out + ([image] if image else [])
