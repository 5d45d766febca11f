"""DockerCluster controller: per-cluster docker network, the haproxy load balancer container `<cluster>-lb`
(6443 published on 127.0.0.1), spec.controlPlaneEndpoint, and the LB backends kept in step with the
cluster's control-plane containers. Decisions live in capd_py.reconcile.dockercluster.

Also hosts the small helpers both Docker controllers share (finalizers, paused, in-flight container
creation, LB sync), so dockermachine imports them from here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE, INFRA_GROUP, MACHINE
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTAINER_MACHINE,
    CONTAINER_ROLE,
    CONTROL_PLANE,
    FINALIZER_DOCKER_CLUSTER,
)
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.lifecycle import ensure_finalizer, remove_finalizer, write_status
from capd_py.controllers.manager import Controller
from capd_py.controllers.queue import Result
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import haproxy
from capd_py.runtime.protocol import ContainerInfo, ContainerSpec, RuntimeError_

log = logging.getLogger("capd_py.dockercluster")
T = TypeVar("T")

# (namespace, cluster) -> DockerCluster name, learnt while reconciling; lets watch mappers (which must
# not do I/O) route DockerMachine/Machine events to the DockerCluster of their cluster.
_DC_BY_CLUSTER: dict[tuple[str, str], str] = {}
_LB_LOCKS: dict[tuple[str, str], asyncio.Lock] = {}
_INFLIGHT: dict[str, asyncio.Future[ContainerInfo]] = {}


# --- shared helpers -------------------------------------------------------------------------------

async def rt(fn: Callable[..., T], *args: Any) -> T:
    """Run a blocking runtime call off the event loop."""
    return await asyncio.to_thread(fn, *args)


def is_deleting(obj: dict[str, Any] | None) -> bool:
    return bool(((obj or {}).get("metadata") or {}).get("deletionTimestamp"))


async def create_container(ctx: Ctx, spec: ContainerSpec) -> ContainerInfo:
    """Create+start once per name even if the calling reconcile is cancelled midway: the docker call
    runs in a task of its own that deletion waits for (`settle`) before removing the container."""
    fut = _INFLIGHT.get(spec.name)
    if fut is None:
        fut = asyncio.ensure_future(rt(_create_or_adopt, ctx.runtime, spec))
        _INFLIGHT[spec.name] = fut
        name = spec.name

        def _done(_f: asyncio.Future[ContainerInfo]) -> None:
            if _INFLIGHT.get(name) is _f:
                _INFLIGHT.pop(name, None)
            if not _f.cancelled():
                _f.exception()  # retrieved: a failure is reported to whoever awaited it
        fut.add_done_callback(_done)
    return await asyncio.shield(fut)


def _create_or_adopt(runtime: Any, spec: ContainerSpec) -> ContainerInfo:
    try:
        return runtime.run_container(spec)  # type: ignore[no-any-return]
    except RuntimeError_ as e:
        # another process (a previous controller instance) may have created it in between: adopt ours.
        # docker reserves the name before the container can be inspected, so look for a little while.
        got = runtime.get_container(spec.name)
        conflict = "already in use" in str(e) or "Conflict" in str(e)
        for _ in range(100 if conflict else 0):
            if got is not None:
                break
            time.sleep(0.1)
            got = runtime.get_container(spec.name)
        if got is not None and all(got.labels.get(k) == v for k, v in spec.labels.items()):
            if not got.running:
                runtime.start_container(spec.name)
                got = runtime.get_container(spec.name) or got
            return got  # type: ignore[no-any-return]
        raise


async def settle(name: str) -> None:
    """Wait for an in-flight creation of `name` (started by a cancelled reconcile) to finish."""
    fut = _INFLIGHT.get(name)
    if fut is not None:
        try:
            await asyncio.shield(fut)
        except Exception:  # noqa: BLE001 - its failure is the creator's business; we only wait
            pass


def cluster_name_of(obj: dict[str, Any]) -> str | None:
    o = contract.controller_owner(obj, "Cluster")
    if o:
        return str(o["name"])
    return ((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME)


async def deleting_cp_machines(kube: Kube, namespace: str, cluster: str) -> set[str]:
    """Machine names of control-plane machines on their way out (Machine or its DockerMachine deleting)."""
    out: set[str] = set()
    for m in await kube.list(MACHINE, namespace, selector=f"{CLUSTER_NAME}={cluster},{CONTROL_PLANE}"):
        if is_deleting(m):
            out.add(m["metadata"]["name"])
    for dm in await kube.list(DOCKER_MACHINE, namespace, labels={CLUSTER_NAME: cluster}):
        o = contract.controller_owner(dm, "Machine")
        if o and is_deleting(dm):
            out.add(o["name"])
    return out


async def sync_lb(ctx: Ctx, namespace: str, cluster: str, network: str,
                  extra_deleting: set[str] | None = None) -> dcr.LBState:
    """Regenerate the haproxy backends from the cluster's control-plane containers; write, read back,
    SIGHUP. Serialised per cluster inside this process; identical config -> nothing done."""
    lock = _LB_LOCKS.setdefault((namespace, cluster), asyncio.Lock())
    async with lock:
        name = dcr.lb_container_name(cluster)
        lb = await rt(ctx.runtime.get_container, name)
        if lb is None or not lb.running:
            return dcr.LBState(False, dcr.R_NOT_AVAILABLE, f"load balancer container {name} is not running")
        deleting = await deleting_cp_machines(ctx.kube, namespace, cluster) | set(extra_deleting or ())
        cps = await rt(ctx.runtime.list_containers,
                       {**dcr.cluster_labels(namespace, cluster), CONTAINER_ROLE: dcr.ROLE_CONTROL_PLANE})
        cfg = haproxy.render(dcr.backends(cps, network, deleting)).encode()
        try:
            cur = await rt(ctx.runtime.read_file, name, haproxy.CONFIG_PATH)
            if cur != cfg:
                await rt(ctx.runtime.write_file, name, haproxy.CONFIG_PATH, cfg, 0o644)
                back = await rt(ctx.runtime.read_file, name, haproxy.CONFIG_PATH)
                if back != cfg:
                    return dcr.LBState(False, dcr.R_NOT_AVAILABLE, "load balancer configuration did not stick")
                await rt(ctx.runtime.kill, name, "SIGHUP")
                log.info("%s/%s: load balancer reloaded with %d backend(s)", namespace, cluster,
                         cfg.count(b"\n  server "))
        except RuntimeError_ as e:
            return dcr.LBState(False, dcr.R_RUNTIME_ERROR, f"updating load balancer configuration: {e}")
        return dcr.LBState(True, dcr.R_AVAILABLE)


# --- reconcile ------------------------------------------------------------------------------------

async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    dc = await ctx.kube.get(DOCKER_CLUSTER, namespace, name)
    if dc is None:
        return None
    cluster_name = cluster_name_of(dc)
    if cluster_name:
        _DC_BY_CLUSTER[(namespace, cluster_name)] = name
    if is_deleting(dc):
        return await _delete(ctx, dc, cluster_name)
    if not cluster_name:
        log.debug("%s/%s: waiting for the Cluster owner reference", namespace, name)
        return None
    cluster = await ctx.kube.get(CLUSTER, namespace, cluster_name)
    if cluster is None:
        log.debug("%s/%s: waiting for Cluster %s", namespace, name, cluster_name)
        return Result(requeue_after=ctx.settings.poll_seconds)
    if await lifecycle.pause_if_needed(ctx.kube, DOCKER_CLUSTER, dc, cluster):
        return None
    dc = await ensure_finalizer(ctx.kube, DOCKER_CLUSTER, dc, FINALIZER_DOCKER_CLUSTER)

    network = dcr.network_name(namespace, cluster_name, dc)
    labels = ({dcr.CONTAINER_MANAGED: "true"} if dcr.network_is_shared(dc)
              else dcr.cluster_labels(namespace, cluster_name))
    try:
        await rt(ctx.runtime.ensure_network, network, labels)
    except RuntimeError_ as e:
        await _fail(ctx, dc, dcr.LBState(False, dcr.R_RUNTIME_ERROR, f"docker network {network}: {e}"))
        return Result(requeue_after=10)

    image = dcr.lb_image(dc, ctx.settings.haproxy_image)
    lb_name = dcr.lb_container_name(cluster_name)
    lb = await rt(ctx.runtime.get_container, lb_name)
    if lb is not None and not dcr.ours(lb, namespace, cluster_name):
        await _fail(ctx, dc, dcr.LBState(False, dcr.R_NAME_CONFLICT,
                                         f"a container named {lb_name} exists that capd-py did not create for "
                                         f"{namespace}/{cluster_name}; remove or rename it"))
        return Result(requeue_after=30)
    try:
        if lb is None:
            if not await rt(ctx.runtime.image_exists, image):
                await _fail(ctx, dc, dcr.LBState(
                    False, dcr.R_IMAGE_NOT_FOUND,
                    f"load balancer image {image} is not present locally; build it with `make images` "
                    "(capd-py never pulls images)"), event=False)
                return Result(requeue_after=15)
            await create_container(ctx, dcr.lb_spec(namespace, cluster_name, image, network))
            log.info("%s/%s: created load balancer container %s", namespace, name, lb_name)
        elif not lb.running:
            await rt(ctx.runtime.start_container, lb_name)
        lb = await rt(ctx.runtime.get_container, lb_name)
    except RuntimeError_ as e:
        await _fail(ctx, dc, dcr.LBState(False, dcr.R_RUNTIME_ERROR, f"load balancer container {lb_name}: {e}"))
        return Result(requeue_after=10)

    state = await sync_lb(ctx, namespace, cluster_name, network)
    ep = dcr.endpoint(lb, network)
    patch: dict[str, Any] = {}
    for p in (dcr.endpoint_patch(dc, ep), dcr.host_port_patch(dc, lb)):
        for k, v in (p or {}).items():
            patch.setdefault(k, {}).update(v)
    if patch:
        patch.setdefault("metadata", {})["resourceVersion"] = dc["metadata"]["resourceVersion"]
        dc = await ctx.kube.merge_patch(DOCKER_CLUSTER, namespace, name, patch)
    has_ep = contract.control_plane_endpoint(dc) is not None
    await write_status(ctx.kube, DOCKER_CLUSTER, dc, dcr.status(dc, state, has_ep))
    if not state.ok or not has_ep:
        return Result(requeue_after=2)
    return None


async def _fail(ctx: Ctx, dc: dict[str, Any], state: dcr.LBState, event: bool = True) -> None:
    prev = next((c for c in (dc.get("status") or {}).get("conditions") or []
                 if c.get("type") == dcr.LOAD_BALANCER_AVAILABLE), None)
    if event and (prev is None or prev.get("reason") != state.reason):
        await events.record(ctx.kube, dc, state.reason, state.message)
    log.warning("%s/%s: %s", dc["metadata"].get("namespace"), dc["metadata"]["name"], state.message)
    await write_status(ctx.kube, DOCKER_CLUSTER, dc,
                       dcr.status(dc, state, contract.control_plane_endpoint(dc) is not None))


async def _delete(ctx: Ctx, dc: dict[str, Any], cluster_name: str | None) -> Result | None:
    md = dc["metadata"]
    ns = md.get("namespace") or ""
    if FINALIZER_DOCKER_CLUSTER not in (md.get("finalizers") or []):
        return None
    if cluster_name:
        # node containers still backed by a live Machine must go first (their controller removes them)
        nodes = [c for c in await rt(ctx.runtime.list_containers, dcr.cluster_labels(ns, cluster_name))
                 if c.labels.get(CONTAINER_ROLE) != dcr.ROLE_LB]
        waiting = []
        for c in nodes:
            mname = c.labels.get(CONTAINER_MACHINE)
            if mname and await ctx.kube.get(MACHINE, ns, mname) is not None:
                waiting.append(c.name)
            else:  # orphan: its Machine is gone, nobody else will remove it
                await settle(c.name)
                await rt(ctx.runtime.remove_container, c.name)
        if waiting:
            msg = f"waiting for machine containers to be deleted: {', '.join(sorted(waiting))}"
            await write_status(ctx.kube, DOCKER_CLUSTER, dc, dcr.deleting_status(dc, msg))
            return Result(requeue_after=2)
        lb_name = dcr.lb_container_name(cluster_name)
        lb = await rt(ctx.runtime.get_container, lb_name)
        await settle(lb_name)
        if lb is None or dcr.ours(lb, ns, cluster_name):
            await rt(ctx.runtime.remove_container, lb_name)
        if not dcr.network_is_shared(dc):
            network = dcr.network_name(ns, cluster_name, dc)
            net = await rt(ctx.runtime.get_network, network)
            if net is not None and all(net.labels.get(k) == v for k, v in dcr.cluster_labels(ns, cluster_name).items()):
                try:
                    await rt(ctx.runtime.remove_network, network)
                except RuntimeError_ as e:
                    msg = f"removing docker network {network}: {e}"
                    await write_status(ctx.kube, DOCKER_CLUSTER, dc, dcr.deleting_status(dc, msg))
                    return Result(requeue_after=5)
        _DC_BY_CLUSTER.pop((ns, cluster_name), None)
        _LB_LOCKS.pop((ns, cluster_name), None)
    await remove_finalizer(ctx.kube, DOCKER_CLUSTER, dc, FINALIZER_DOCKER_CLUSTER)
    log.info("%s/%s: load balancer and network removed", ns, md["name"])
    return None


# --- wiring ---------------------------------------------------------------------------------------

def _dc_of_cluster_obj(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    md = obj.get("metadata") or {}
    ns = md.get("namespace") or ""
    cname = (md.get("labels") or {}).get(CLUSTER_NAME) or ((obj.get("spec") or {}).get("clusterName"))
    if not cname:
        return []
    dc = _DC_BY_CLUSTER.get((ns, cname))
    return [(ns, dc)] if dc else []


def _map_machine(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    if CONTROL_PLANE not in ((obj.get("metadata") or {}).get("labels") or {}):
        return []
    return _dc_of_cluster_obj(obj, cache)


def _map_cluster(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "infrastructureRef")
    if r and r["kind"] == DOCKER_CLUSTER.kind and r["apiGroup"] in (INFRA_GROUP, ""):
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def controller() -> Controller:
    return Controller(gvk=DOCKER_CLUSTER, reconcile=reconcile,
                      watches=[(CLUSTER, _map_cluster), (MACHINE, _map_machine), (DOCKER_MACHINE, _dc_of_cluster_obj)])
