"""DockerCluster controller: per-cluster docker network, the haproxy load balancer container `<cluster>-lb`
(6443 published on 127.0.0.1), spec.controlPlaneEndpoint, and the LB backends kept in step with the
cluster's control-plane containers.

Thin: it reads the API objects, takes its decisions from capd_py.reconcile.dockercluster and applies
them through the Docker infrastructure service `ctx.infra` (capd_py.controllers.services.docker_infra).

The same functions are a DevCluster's docker backend (capd_py/controllers/devcluster.py): what differs between
the two kinds is named by `infrakinds.kinds_of(obj)` (which machine kind follows the cluster) and read through
`infrakinds.docker_spec` (where the docker fields are), never a second copy of this logic.
"""

from __future__ import annotations

import logging
from typing import Any

from capd_py.api import contract, infrakinds
from capd_py.api import dockerhosts as dh
from capd_py.api.containers import ContainerInfo, NetworkInfo
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, GVK, INFRA_GROUP, MACHINE
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTAINER_MACHINE,
    CONTAINER_ROLE,
    CONTROL_PLANE,
    FINALIZER_DOCKER_CLUSTER,
)
from capd_py.controllers import dockerhost
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller, Mapper
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.reconcile import coreutil, ipfamily, subnets
from capd_py.reconcile import dockercluster as dcr
from capd_py.runtime.networks import NoFreeSubnet
from capd_py.runtime.protocol import DaemonUnreachable, RuntimeError_

log = logging.getLogger("capd_py.dockercluster")


def cluster_name_of(obj: dict[str, Any]) -> str | None:
    o = contract.controller_owner(obj, "Cluster")
    if o:
        return str(o["name"])
    return ((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME)


async def _sync_lb(ctx: Ctx, infra: DockerInfra, k: infrakinds.InfraKinds, namespace: str, cluster: str,
                   network: str,
                   family: str) -> dcr.LBState:
    machines = await ctx.kube.list(MACHINE, namespace, selector=f"{CLUSTER_NAME}={cluster},{CONTROL_PLANE}")
    dms = await ctx.kube.list(k.machine, namespace, labels={CLUSTER_NAME: cluster})
    return await infra.sync_lb(namespace, cluster, network, dcr.deleting_machines(machines, dms), family)


# --- reconcile ------------------------------------------------------------------------------------

async def reconcile_docker(ctx: Ctx, sub: Subject) -> Outcome:
    """A DockerCluster, or a DevCluster with the docker backend."""
    try:
        return await _reconcile_docker(ctx, sub)
    except DaemonUnreachable as e:
        # the host answered its placement check and stopped answering after it (seen: a dockerd halted while a
        # reconcile was under way reset its connection): reported as when it does not answer at all, no traceback
        return await _fail(ctx, sub.obj, dcr.LBState(False, dcr.R_HOST_UNREACHABLE,
                                                      f"docker host {dh.host_of(sub.obj) or dh.LOCAL}: {e}"),
                           requeue_after=15)


async def _reconcile_docker(ctx: Ctx, sub: Subject) -> Outcome:
    dc, cluster, namespace, name = sub.obj, sub.cluster, sub.namespace, sub.name
    kinds = infrakinds.kinds_of(dc)
    cluster_name = cluster_name_of(dc)
    if not cluster_name:
        log.debug("%s/%s: waiting for the Cluster owner reference", namespace, name)
        return Outcome()
    if cluster is None:
        log.debug("%s/%s: waiting for Cluster %s", namespace, name, cluster_name)
        return Outcome(requeue_after=ctx.settings.poll_seconds)

    try:
        where, dc = await dockerhost.place(ctx, dc, await dockerhost.wanted_images(ctx, dc, cluster))
    except dockerhost.NotPlaced as e:
        return await _fail(ctx, dc, dcr.LBState(False, e.reason, e.message), requeue_after=15)
    except RuntimeError_ as e:  # the host does not answer, or copying an image there failed
        return await _fail(ctx, dc, dcr.LBState(False, _reason(e), f"docker host {dh.host_of(dc) or dh.LOCAL}: {e}"),
                           requeue_after=15)
    infra, address = where.infra, where.host.address
    dc = await dockerhost.record_network(ctx, dc)
    network = dcr.network_name(namespace, cluster_name, dc)
    bad_family = dcr.family_error(cluster)
    if bad_family:  # the Cluster's change brings us back
        return await _fail(ctx, dc, dcr.LBState(False, dcr.R_INVALID_IP_FAMILY, bad_family))
    family = dcr.cluster_family(cluster)
    labels = ({dcr.CONTAINER_MANAGED: "true"} if dcr.network_is_shared(dc)
              else dcr.cluster_labels(namespace, cluster_name))
    # the load balancer's image is on the host (or soon will be): where the host's routes cannot be read from
    # here (in-cluster controllers, another machine) a short-lived container of it reads them
    routes_image = dcr.lb_image(dc, ctx.settings.haproxy_image)
    try:
        net = await infra.ensure_network(network, labels,
                                         dcr.network_avoid(cluster, ctx.settings.management_cidrs),
                                         ipv6=ipfamily.wants_ipv6(family), routes_image=routes_image)
        clash = dcr.network_clash(net, cluster)
        if clash is None:
            await infra.connect_controllers(network)  # in-cluster controllers must reach the cluster's API
        overlap = subnets.cluster_overlap(cluster, await infra.outside_ranges(ctx.settings.management_network,
                                                                              routes_image))
    except NoFreeSubnet as e:
        return await _fail(ctx, dc, dcr.LBState(False, dcr.R_NETWORK_OVERLAP, str(e)), requeue_after=30)
    except RuntimeError_ as e:
        return await _fail(ctx, dc, dcr.LBState(False, _reason(e), f"docker network {network}: {e}"),
                           requeue_after=10)
    if clash:
        return await _fail(ctx, dc, dcr.LBState(False, dcr.R_NETWORK_OVERLAP, clash), overlap=overlap,
                           requeue_after=30)
    news = dcr.overlap_news(dc, overlap)
    if news:
        await events.record(ctx.kube, dc, dcr.CLUSTER_NETWORK_OVERLAP, news)

    lb, failed = await _ensure_lb(ctx, infra, address, dc, cluster_name, network, net, family)
    if failed is not None:
        return failed

    state = await _sync_lb(ctx, infra, kinds, namespace, cluster_name, network, family)
    # a remote host's bridges are not routable from here: its published port at the host's address is the endpoint
    ep = dcr.published_endpoint(lb, address) if address else dcr.endpoint(lb, network, family)
    patch: dict[str, Any] = {}
    for p in (dcr.endpoint_patch(dc, ep), dcr.host_port_patch(dc, lb)):
        for k, v in (p or {}).items():
            patch.setdefault(k, {}).update(v)
    if patch:
        patch.setdefault("metadata", {})["resourceVersion"] = dc["metadata"]["resourceVersion"]
        dc = await ctx.kube.merge_patch(kinds.cluster, namespace, name, patch)
    has_ep = contract.control_plane_endpoint(dc) is not None
    return Outcome(status=dcr.status(dc, state, has_ep, overlap=overlap), obj=dc,
                   requeue_after=None if state.ok and has_ep else 2)


async def _ensure_lb(ctx: Ctx, infra: DockerInfra, address: str, dc: dict[str, Any], cluster_name: str,
                     network: str, net: NetworkInfo, family: str) -> tuple[ContainerInfo | None, Outcome | None]:
    """The load balancer container, created (re-created after drift) and running; or the Outcome that says why
    it cannot be."""
    namespace, name = dc["metadata"].get("namespace") or "", dc["metadata"]["name"]
    image = dcr.lb_image(dc, ctx.settings.haproxy_image)
    lb_name = dcr.lb_container_name(cluster_name)
    lb = await infra.get_container(lb_name)
    if lb is not None and not dcr.ours(lb, namespace, cluster_name):
        return None, await _fail(ctx, dc, dcr.LBState(False, dcr.R_NAME_CONFLICT,
                                                      f"a container named {lb_name} exists that capd-py did not "
                                                      f"create for {namespace}/{cluster_name}; remove or rename it"),
                                 requeue_after=30)
    try:
        drift = dcr.lb_drift(lb, network, dc, net, family)
        if drift:
            if not dcr.lb_repairable(net, dc):
                return None, await _fail(ctx, dc, dcr.LBState(False, dcr.R_ENDPOINT_CHANGED, (
                    f"{drift}; network {network} has no static addresses (made by an older capd-py or by someone "
                    "else), so this cannot be repaired in place: recreate the cluster")), requeue_after=30)
            log.warning("%s/%s: %s; re-creating the load balancer", namespace, name, drift)
            await events.record(ctx.kube, dc, "LoadBalancerRecreated", f"{drift}; re-created")
            await infra.remove_container(lb_name)
            lb = None
        if lb is None:
            if not await infra.image_exists(image):
                return None, await _fail(ctx, dc, dcr.LBState(
                    False, dcr.R_IMAGE_NOT_FOUND,
                    f"load balancer image {image} is not present locally; build it with `make images` "
                    "(capd-py never pulls images)"), event=False, requeue_after=15)
            await infra.create_container(dcr.lb_spec(namespace, cluster_name, image, network, dc, net,
                                                   publish_ip="0.0.0.0" if address else "127.0.0.1"))
            log.info("%s/%s: created load balancer container %s", namespace, name, lb_name)
        elif not lb.running:
            await infra.start_container(lb_name)
        return await infra.get_container(lb_name), None
    except RuntimeError_ as e:
        msg = f"load balancer container {lb_name}: {e}"
        return None, await _fail(ctx, dc, dcr.LBState(False, _reason(e), msg), requeue_after=10)


def _reason(e: RuntimeError_) -> str:
    return dcr.R_HOST_UNREACHABLE if dockerhost.unreachable(e) else dcr.R_RUNTIME_ERROR


async def _fail(ctx: Ctx, dc: dict[str, Any], state: dcr.LBState, event: bool = True,
                overlap: subnets.Overlap | None = None, requeue_after: float | None = None) -> Outcome:
    """A failure: one Event when the reason first appears, and the status that reports it."""
    prev = next((c for c in (dc.get("status") or {}).get("conditions") or []
                 if c.get("type") == dcr.LOAD_BALANCER_AVAILABLE), None)
    if event and (prev is None or prev.get("reason") != state.reason):
        await events.record(ctx.kube, dc, state.reason, state.message)
    log.warning("%s/%s: %s", dc["metadata"].get("namespace"), dc["metadata"]["name"], state.message)
    return Outcome(status=dcr.status(dc, state, contract.control_plane_endpoint(dc) is not None, overlap=overlap),
                   requeue_after=requeue_after)


async def delete_docker(ctx: Ctx, sub: Subject) -> Outcome:
    """A DockerCluster's, or a docker-backed DevCluster's, deletion. Its host left the configuration or does not
    answer: the deletion waits (the finalizer kept: removing it would leave the containers running unmanaged)."""
    try:
        return await _delete_docker(ctx, sub)
    except (dockerhost.NotPlaced, DaemonUnreachable) as e:
        why = dockerhost.why(e, sub.obj)
        return Outcome(status=dcr.deleting_status(sub.obj, f"cannot delete the cluster's containers: {why}"),
                       done=False, requeue_after=15)


async def _delete_docker(ctx: Ctx, sub: Subject) -> Outcome:
    dc = sub.obj
    ns, cluster_name = sub.namespace, cluster_name_of(dc)
    infra = (await dockerhost.where(ctx, dc, unplaced_local=True)).infra
    if cluster_name:
        # node containers still backed by a live Machine must go first (their controller removes them)
        nodes = [c for c in await infra.list_containers(dcr.cluster_labels(ns, cluster_name))
                 if c.labels.get(CONTAINER_ROLE) != dcr.ROLE_LB]
        waiting = []
        for c in nodes:
            mname = c.labels.get(CONTAINER_MACHINE)
            if mname and await ctx.kube.get(MACHINE, ns, mname) is not None:
                waiting.append(c.name)
            else:  # orphan: its Machine is gone, nobody else will remove it
                await infra.remove_container(c.name)
        if waiting:
            msg = f"waiting for machine containers to be deleted: {', '.join(sorted(waiting))}"
            return Outcome(status=dcr.deleting_status(dc, msg), done=False, requeue_after=2)
        await infra.remove_volumes(dcr.cluster_labels(ns, cluster_name))  # left by `docker rm -f`
        lb_name = dcr.lb_container_name(cluster_name)
        await infra.settle(lb_name)
        lb = await infra.get_container(lb_name)
        if lb is None or dcr.ours(lb, ns, cluster_name):
            await infra.remove_container(lb_name)
        if not dcr.network_is_shared(dc):
            network = dcr.network_name(ns, cluster_name, dc)
            try:
                await infra.remove_network_if_ours(network, dcr.cluster_labels(ns, cluster_name))
            except RuntimeError_ as e:
                msg = f"removing docker network {network}: {e}"
                return Outcome(status=dcr.deleting_status(dc, msg), done=False, requeue_after=5)
        infra.forget_cluster(ns, cluster_name)
    log.info("%s/%s: load balancer and network removed", ns, sub.name)
    return Outcome()


def has_owner_cluster(sub: Subject) -> bool:
    """As upstream CAPD (util.GetOwnerCluster): nothing until the Cluster controller has made its Cluster the owner."""
    return coreutil.is_deleting(sub.obj) or bool(contract.core_owner_name(sub.obj, "Cluster"))


KIND = Kind(gvk=DOCKER_CLUSTER, reconcile=reconcile_docker, delete=delete_docker, finalizer=FINALIZER_DOCKER_CLUSTER,
            cluster_name=lambda dc: cluster_name_of(dc) or "", ready=has_owner_cluster)
reconcile = reconciler(KIND)


# --- wiring ---------------------------------------------------------------------------------------

def _clusters_of(k: infrakinds.InfraKinds, ns: str, cname: str, cache: Reader) -> list[tuple[str, str]]:
    """The infrastructure cluster (of kind `k.cluster`) of cluster `cname`: the Cluster's infrastructureRef, or
    (Cluster not seen yet) the ones owned by / labelled for that cluster."""
    cluster = cache.get(CLUSTER, ns, cname)
    r = contract.ref(cluster, "spec", "infrastructureRef") if cluster else None
    if r:
        return [(ns, r["name"])] if _is_ref_to(k, r) else []
    return [(ns, dc["metadata"]["name"]) for dc in cache.list(k.cluster, ns) if cluster_name_of(dc) == cname]


def _is_ref_to(k: infrakinds.InfraKinds, r: dict[str, Any]) -> bool:
    return r["kind"] == k.cluster.kind and r["apiGroup"] in (INFRA_GROUP, "")


def watches(k: infrakinds.InfraKinds) -> list[tuple[GVK, Mapper]]:
    """What brings an infrastructure cluster of kind `k.cluster` back: its Cluster, its control-plane Machines
    (the load balancer's backends) and its machines."""

    def member(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        md = obj.get("metadata") or {}
        cname = (md.get("labels") or {}).get(CLUSTER_NAME) or ((obj.get("spec") or {}).get("clusterName"))
        return _clusters_of(k, md.get("namespace") or "", cname, cache) if cname else []

    def machine(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        if CONTROL_PLANE not in ((obj.get("metadata") or {}).get("labels") or {}):
            return []
        return member(obj, cache)

    def cluster(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        r = contract.ref(obj, "spec", "infrastructureRef")
        if r and _is_ref_to(k, r):
            return [(obj["metadata"].get("namespace") or "", r["name"])]
        return []

    return [(CLUSTER, cluster), (MACHINE, machine), (k.machine, member)]


def controller() -> Controller:
    return Controller(gvk=DOCKER_CLUSTER, reconcile=reconcile, watches=watches(infrakinds.DOCKER))
