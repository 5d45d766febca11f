"""DockerMachine controller: one systemd node container per Machine, bootstrapped by running the
Machine's bootstrap data (cloud-config) inside it, then spec.providerID / status.addresses /
status.initialization.provisioned, and the workload Node's spec.providerID.

Restart safety: the container is found by name (and adopted when it carries our labels), creation is
never duplicated, and bootstrap runs as one detached script guarded by a lock directory and upstream's
success sentinel, so a restart at any point neither re-runs nor loses it. Decisions live in
capd_py.reconcile.dockermachine and capd_py.reconcile.cloudinit; the runtime side (create-or-adopt,
settle, load balancer sync) goes through the Docker infrastructure service `ctx.infra`.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE, INFRA_GROUP, MACHINE, NODE, SECRET
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTAINER_MACHINE,
    CONTAINER_NAMESPACE,
    CONTROL_PLANE,
    FINALIZER_DOCKER_MACHINE,
)
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.lifecycle import ensure_finalizer, remove_finalizer, write_status
from capd_py.controllers.manager import Controller
from capd_py.controllers.queue import Result
from capd_py.controllers.services.docker_infra import deleting_machines
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.reconcile import cloudinit, imageload
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile.coreutil import is_deleting, utcnow
from capd_py.reconcile.dockermachine import Observed, Phase
from capd_py.runtime.protocol import ContainerInfo, RuntimeError_

log = logging.getLogger("capd_py.dockermachine")


def _cluster_of(dm: dict[str, Any], machine: dict[str, Any] | None) -> str | None:
    c = ((machine or {}).get("spec") or {}).get("clusterName")
    return str(c) if c else ((dm.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME)


async def _docker_cluster(ctx: Ctx, namespace: str, cluster: dict[str, Any]) -> dict[str, Any] | None:
    r = contract.ref(cluster, "spec", "infrastructureRef")
    if r and r["kind"] == DOCKER_CLUSTER.kind:
        return await ctx.kube.get(DOCKER_CLUSTER, namespace, r["name"])
    return None


async def _sync_lb(ctx: Ctx, namespace: str, cluster: str, network: str, extra_deleting: set[str],
                   family: str) -> None:
    machines = await ctx.kube.list(MACHINE, namespace, selector=f"{CLUSTER_NAME}={cluster},{CONTROL_PLANE}")
    dms = await ctx.kube.list(DOCKER_MACHINE, namespace, labels={CLUSTER_NAME: cluster})
    await ctx.infra.sync_lb(namespace, cluster, network, deleting_machines(machines, dms) | extra_deleting, family)


async def _set(ctx: Ctx, dm: dict[str, Any], obs: Observed, paused: bool = False) -> dict[str, Any]:
    return await write_status(ctx.kube, DOCKER_MACHINE, dm, dmr.status(dm, obs, paused))


async def _fail(ctx: Ctx, dm: dict[str, Any], obs: Observed, reason: str) -> None:
    """A real failure: condition + one Event when it first appears."""
    prev = cond.get(dm, dmr.BOOTSTRAP_EXEC_SUCCEEDED if obs.phase.name.startswith(("BOOTSTRAP", "INVALID", "PRELOAD"))
                    else dmr.CONTAINER_PROVISIONED)
    if prev is None or prev.get("reason") != obs.phase.value:
        await events.record(ctx.kube, dm, reason, obs.message)
        log.warning("%s/%s: %s", dm["metadata"].get("namespace"), dm["metadata"]["name"], obs.message)
    await _set(ctx, dm, obs)


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    dm = await ctx.kube.get(DOCKER_MACHINE, namespace, name)
    if dm is None:
        return None
    owner = contract.controller_owner(dm, "Machine")
    machine = await ctx.kube.get(MACHINE, namespace, owner["name"]) if owner else None
    cluster_name = _cluster_of(dm, machine)
    cluster = await ctx.kube.get(CLUSTER, namespace, cluster_name) if cluster_name else None
    # paused first, a deletion included (as upstream): clusterctl move deletes a paused cluster's objects at the
    # source, and the container must stay for the target's controllers
    if await lifecycle.pause_if_needed(ctx.kube, DOCKER_MACHINE, dm, cluster):
        return None
    if is_deleting(dm):
        return await _delete(ctx, dm, owner["name"] if owner else None, machine, cluster_name)
    if owner is None or machine is None or not cluster_name:
        log.debug("%s/%s: waiting for the Machine owner reference", namespace, name)
        return None
    if cluster is None:
        return Result(requeue_after=ctx.settings.poll_seconds)
    dm = await ensure_finalizer(ctx.kube, DOCKER_MACHINE, dm, FINALIZER_DOCKER_MACHINE)

    mname = machine["metadata"]["name"]
    cname = dmr.container_name(cluster_name, mname)
    cp = dmr.is_control_plane(machine)
    dc = await _docker_cluster(ctx, namespace, cluster)
    network = dcr.network_name(namespace, cluster_name, dc)
    family = dcr.cluster_family(cluster)
    fd = (machine.get("spec") or {}).get("failureDomain")

    def obs(phase: Phase, msg: str = "", c: ContainerInfo | None = None) -> Observed:
        return Observed(phase, msg, c, network, fd, family=family)

    info = await ctx.infra.get_container(cname)
    if cp and info is not None and is_deleting(machine):
        # the Machine is going (its etcd member goes next, in the control plane's pre-terminate hook): no new API
        # connection may reach it from now on
        await _sync_lb(ctx, namespace, cluster_name, network, {mname}, family)
    if info is not None and not dcr.ours(info, namespace, cluster_name):
        await _fail(ctx, dm, obs(Phase.NAME_CONFLICT, f"a container named {cname} exists that capd-py did not "
                                 f"create for {namespace}/{cluster_name}; remove or rename it"),
                    "ContainerNameConflict")
        return Result(requeue_after=30)

    if info is None and (contract.infra_provisioned(dm) or contract.provider_id(dm)):
        # like upstream: a provisioned machine whose container vanished is not silently recreated (the
        # new node would lack its kubeadm state); it is reported so remediation can replace the Machine
        await _fail(ctx, dm, obs(Phase.CONTAINER_DELETED, f"container {cname} of this provisioned machine no longer "
                                 "exists; delete the Machine to replace it"), "ContainerDeleted")
        return None
    if info is None:
        infra_ready = bool(contract.dig(cluster, "status", "initialization", "infrastructureProvisioned")) \
            or contract.infra_provisioned(dc)
        if not infra_ready:
            await _set(ctx, dm, obs(Phase.WAITING_CLUSTER_INFRA, "waiting for the cluster infrastructure"))
            return Result(requeue_after=ctx.settings.poll_seconds)
        # Unlike upstream CAPD, the container is created and boots while the Machine still waits for its
        # bootstrap data (a worker waits for the control plane): the join then starts on a booted node.
        image = dmr.node_image(dm, machine, ctx.settings.node_image_repository)
        img = dmr.image_decision(dm, machine, image, image is not None and await ctx.infra.image_exists(image))
        if not img.ok or image is None:
            # not an admission error: any supported version is accepted, its node image may come later
            await _fail(ctx, dm, obs(Phase.IMAGE_NOT_FOUND, img.message), "ImageNotFound")
            return Result(requeue_after=img.requeue_after) if img.requeue_after else None
        spec = dmr.node_spec(namespace, cluster_name, mname, dm, image, network, cp, ctx.settings.privileged_mode,
                             family)
        try:
            info = await ctx.infra.create_container(spec)
        except RuntimeError_ as e:
            await _fail(ctx, dm, obs(Phase.CONTAINER_ERROR, f"creating container {cname}: {e}"), "ContainerError")
            return Result(requeue_after=10)
        log.info("%s/%s: created container %s (%s)", namespace, name, cname, image)
        if cp:
            _nudge_cluster(ctx, namespace, cluster_name, dc)
    elif not info.running:
        try:
            info = await ctx.infra.start_container(cname) or info
        except RuntimeError_ as e:
            await _fail(ctx, dm, obs(Phase.CONTAINER_ERROR, f"starting container {cname}: {e}"), "ContainerError")
            return Result(requeue_after=10)

    # bootstrapped before (the sentinel may be gone after a container restart). A providerID is set only once
    # provisioned, and it is all that remains after upstream clusterctl move, which creates objects without status
    # (as upstream CAPD: a DockerMachine with a providerID is provisioned)
    if contract.infra_provisioned(dm) or contract.provider_id(dm):
        moved = dmr.address_change(dm, info, network, cp, family)
        if moved:
            await _fail(ctx, dm, obs(Phase.ADDRESS_CHANGED, moved, info), "ContainerAddressChanged")
            return None
        return await _provisioned(ctx, dm, obs(Phase.PROVISIONED, c=info), cname, cluster)
    if not contract.dig(machine, "spec", "bootstrap", "dataSecretName"):
        if not cp and not contract.control_plane_initialized(cluster) \
                and not cond.is_true(cluster, "ControlPlaneInitialized"):
            await _set(ctx, dm, obs(Phase.WAITING_CONTROL_PLANE, "waiting for the control plane to initialize", info))
        else:
            quiet = dmr.bootstrap_data_wait(dm, cluster, utcnow())
            if quiet is not None:
                return Result(requeue_after=quiet)
            await _set(ctx, dm, obs(Phase.WAITING_BOOTSTRAP_DATA, "waiting for the bootstrap data secret", info))
        return None  # the Machine changes when its bootstrap data appears

    try:
        res = await ctx.infra.exec(cname, cloudinit.SYSTEMD_PROBE)
        if not cloudinit.systemd_ready(res.output):
            await _set(ctx, dm, obs(Phase.WAITING_SYSTEMD, "waiting for systemd to boot in the container", info))
            return Result(requeue_after=1)
        res = await ctx.infra.exec(cname, cloudinit.probe_command())
        state = cloudinit.parse_probe(res.output)
        if state.phase in ("none", "unknown"):
            waiting, dm = await _preload_images(ctx, dm, cluster, cname, obs, info)
            if waiting is not None:
                return waiting
            launched = await _start_bootstrap(ctx, dm, machine, cname, obs, info)
            if launched is not None:
                return launched
            res = await ctx.infra.exec(cname, cloudinit.probe_command())
            state = cloudinit.parse_probe(res.output)
    except RuntimeError_ as e:
        await _set(ctx, dm, obs(Phase.WAITING_SYSTEMD, f"container {cname} not reachable yet: {e}", info))
        return Result(requeue_after=2)

    if state.phase == "done":
        return await _provisioned(ctx, dm, obs(Phase.PROVISIONED, c=info), cname, cluster)
    if state.phase == "failed":
        msg = (f"bootstrap step {state.failed_step} failed with exit code {state.exit_code} "
               f"({state.step.split(' ', 1)[-1] if state.step else 'unknown step'}); full log in the container at "
               f"{cloudinit.BOOTSTRAP_LOG}; last lines:\n{dmr.last_lines(state.tail)}")
        await _fail(ctx, dm, obs(Phase.BOOTSTRAP_FAILED, msg, info), "BootstrapFailed")
        return None
    if state.phase == "died":
        msg = (f"the bootstrap script stopped without reporting a result (killed?) during step "
               f"{state.step or 'unknown'}; full log in the container at {cloudinit.BOOTSTRAP_LOG}; last lines:\n"
               f"{dmr.last_lines(state.tail)}")
        await _fail(ctx, dm, obs(Phase.BOOTSTRAP_FAILED, msg, info), "BootstrapFailed")
        return None
    timeout = dmr.bootstrap_timeout(dm)
    if state.elapsed > timeout:
        msg = (f"bootstrap still running after {int(state.elapsed)}s (bootstrapTimeout {int(timeout)}s), at step "
               f"{state.step}; last lines:\n{dmr.last_lines(state.tail)}")
        await _set(ctx, dm, obs(Phase.BOOTSTRAP_TIMEOUT, msg, info))
        return Result(requeue_after=10)
    await _set(ctx, dm, obs(Phase.BOOTSTRAPPING, dmr.probe_message(state.step), info))
    # the end of a bootstrap is on the critical path twice (control plane, then workers): look every second
    return Result(requeue_after=1)


async def _preload_images(ctx: Ctx, dm: dict[str, Any], cluster: dict[str, Any], cname: str, obs: Any,
                          info: ContainerInfo) -> tuple[Result | None, dict[str, Any]]:
    """Before the bootstrap (as upstream): the DockerMachine's spec.preLoadImages and the images `capd-py load
    image` recorded on the Cluster go from the local docker daemon into the node's containerd; those it has
    already (same ID) are skipped, so a repeat after a controller restart costs a few execs. Returns a Result
    while it cannot proceed (a spec.preLoadImages image missing locally, nothing is pulled; an import failure),
    and the DockerMachine as last written."""
    wanted = imageload.boot_images(dm, cluster)
    if not wanted:
        return None, dm
    decision = imageload.boot_decision(wanted, await ctx.infra.local_image_ids(list(wanted)))
    if decision.blocked:
        await _fail(ctx, dm, obs(Phase.PRELOAD_IMAGES_FAILED, decision.message, info), "PreLoadImagesFailed")
        return Result(requeue_after=decision.requeue_after), dm
    if decision.skipped:
        msg = (f"not pre-loading {', '.join(decision.skipped)} (loaded into this cluster with capd-py load image): "
               "no longer in the local docker daemon")
        await events.record(ctx.kube, dm, "PreLoadImageMissing", msg)
        log.warning("%s/%s: %s", dm["metadata"].get("namespace"), dm["metadata"]["name"], msg)
    if not decision.load:
        return None, dm
    loading = f"pre-loading {len(decision.load)} image(s) into the node: {', '.join(decision.load)}"
    dm = await _set(ctx, dm, obs(Phase.PRELOADING_IMAGES, loading, info))
    outcomes = await ctx.infra.load_images(cname, decision.load)
    if not all(o.ok for o in outcomes):
        msg = f"pre-loading images: {imageload.failed_message(outcomes)}"
        await _fail(ctx, dm, obs(Phase.PRELOAD_IMAGES_FAILED, msg, info), "PreLoadImagesFailed")
        return Result(requeue_after=imageload.PRELOAD_RECHECK_SECONDS), dm
    log.info("%s/%s: images in %s: %s", dm["metadata"].get("namespace"), dm["metadata"]["name"], cname,
             ", ".join(f"{o.ref} {o.result}" for o in outcomes))
    return None, dm


async def _start_bootstrap(ctx: Ctx, dm: dict[str, Any], machine: dict[str, Any], cname: str,
                           obs: Any, info: ContainerInfo) -> Result | None:
    """Write the bootstrap script and launch it detached. Returns a Result when it cannot."""
    ns = dm["metadata"].get("namespace") or ""
    sname = contract.dig(machine, "spec", "bootstrap", "dataSecretName")
    secret = await ctx.kube.get(SECRET, ns, sname) if sname else None
    data = (secret or {}).get("data") or {}
    if "value" not in data:
        await _set(ctx, dm, obs(Phase.WAITING_BOOTSTRAP_DATA, f"waiting for bootstrap data secret {sname}", info))
        return Result(requeue_after=ctx.settings.poll_seconds)
    fmt = base64.b64decode(data["format"]).decode() if data.get("format") else "cloud-config"
    if fmt not in ("cloud-config", ""):
        await _fail(ctx, dm, obs(Phase.INVALID_BOOTSTRAP_DATA, f"bootstrap data format {fmt!r} is not supported "
                                 "(only cloud-config)", info), "InvalidBootstrapData")
        return None
    try:
        steps = cloudinit.to_steps(base64.b64decode(data["value"]))
    except (cloudinit.CloudInitError, ValueError) as e:
        await _fail(ctx, dm, obs(Phase.INVALID_BOOTSTRAP_DATA, f"bootstrap data: {e}", info), "InvalidBootstrapData")
        return None
    for path, content in cloudinit.render_script(steps).items():
        await ctx.infra.write_file(cname, path, content, 0o700 if path == cloudinit.SCRIPT_PATH else 0o600)
    res = await ctx.infra.exec(cname, cloudinit.launch_command())
    if res.exit_code != 0:
        raise RuntimeError_(f"launching bootstrap: exit {res.exit_code}: {res.output.strip()}")
    log.info("%s/%s: bootstrap %s in %s (%d steps)", ns, dm["metadata"]["name"], res.output.strip(), cname,
             len(steps))
    return None


async def _provisioned(ctx: Ctx, dm: dict[str, Any], o: Observed, cname: str,
                       cluster: dict[str, Any]) -> Result | None:
    md = dm["metadata"]
    ns = md.get("namespace") or ""
    pid = dmr.provider_id(cname)
    if contract.provider_id(dm) != pid:
        dm = await ctx.kube.merge_patch(DOCKER_MACHINE, ns, md["name"], {
            "metadata": {"resourceVersion": md["resourceVersion"]}, "spec": {"providerID": pid}})
    dm = await _set(ctx, dm, o)
    cp_initialized = contract.control_plane_initialized(cluster) or cond.is_true(cluster, "ControlPlaneInitialized")
    return await _patch_node(ctx, ns, cluster["metadata"]["name"], cname, pid, cp_initialized,
                             contract.addresses(dm) or [])


async def _patch_node(ctx: Ctx, ns: str, cluster_name: str, node_name: str, pid: str,
                      cp_initialized: bool = True, machine_addresses: list[dict[str, str]] | None = None
                      ) -> Result | None:
    """kubelet in a container sets no providerID; the Machine controller matches Nodes by it. A Node of an
    external cloud provider is initialized as upstream CAPD does (dmr.node_patch).
    Before the control plane is initialized there is nothing to poll: the Cluster's status change
    (watched) brings us back."""
    try:
        wl = await ctx.workload.get(ns, cluster_name)
        if wl is None:
            return Result(requeue_after=ctx.settings.poll_seconds * 2) if cp_initialized else None
        watched = ctx.workload.nodes(ns, cluster_name)
        node = watched.get(node_name) if watched is not None else await wl.get(NODE, None, node_name)
        if node is None:
            # bootstrap just finished: the kubelet registers its Node within a second or two, and the Machine
            # (and so the Cluster's readiness) waits for the providerID set here; the Node watch, when in
            # sync, brings us back the moment it appears
            return Result(requeue_after=1 if watched is None else ctx.settings.node_watch_poll_seconds)
        if contract.provider_id(node) and contract.provider_id(node) != pid:
            log.warning("%s: node %s has providerID %s, expected %s", ns, node_name, contract.provider_id(node), pid)
            return None
        patch = dmr.node_patch(node, pid, machine_addresses or [])
        if patch.status:  # the addresses first: the taint's removal tells the cluster the Node is complete
            await wl.merge_patch(NODE, None, node_name, {"status": patch.status}, subresource="status")
            log.info("%s: set addresses of workload node %s", ns, node_name)
        if patch.spec:
            await wl.merge_patch(NODE, None, node_name, {"spec": patch.spec})
            log.info("%s: set %s of workload node %s", ns, " and ".join(
                {"providerID": "providerID", "taints": "no uninitialized taint"}[k] for k in patch.spec), node_name)
    except Exception as e:  # noqa: BLE001 - the workload API may not be up yet: waiting, not failing
        log.debug("%s: workload node %s not patched yet: %s", ns, node_name, e)
        return Result(requeue_after=2)
    return None


def _nudge_cluster(ctx: Ctx, ns: str, cluster_name: str, dc: dict[str, Any] | None) -> None:
    dc_name = (dc or {}).get("metadata", {}).get("name")
    if dc_name:
        ctx.enqueue(DOCKER_CLUSTER.kind, ns, dc_name)


async def _delete(ctx: Ctx, dm: dict[str, Any], machine_name: str | None, machine: dict[str, Any] | None,
                  cluster_name: str | None) -> Result | None:
    md = dm["metadata"]
    ns = md.get("namespace") or ""
    if FINALIZER_DOCKER_MACHINE not in (md.get("finalizers") or []):
        return None
    if machine_name and not cluster_name:  # Machine already gone: find the container by its labels
        for c in await ctx.infra.list_containers({CONTAINER_MACHINE: machine_name, CONTAINER_NAMESPACE: ns}):
            cluster_name = c.labels.get(dcr.CONTAINER_CLUSTER)
    if machine_name and cluster_name:
        cname = dmr.container_name(cluster_name, machine_name)
        dm = await _set(ctx, dm, Observed(Phase.DELETING, "deleting the node container"))
        cluster = await ctx.kube.get(CLUSTER, ns, cluster_name)
        dc = await _docker_cluster(ctx, ns, cluster) if cluster else None
        network = dcr.network_name(ns, cluster_name, dc)
        family = dcr.cluster_family(cluster)
        await ctx.infra.settle(cname)
        info = await ctx.infra.get_container(cname)
        cp = (info is not None and info.labels.get(dcr.CONTAINER_ROLE) == dcr.ROLE_CONTROL_PLANE) \
            or dmr.is_control_plane(machine)
        if info is not None and not dcr.ours(info, ns, cluster_name):
            info = None  # not ours: leave it alone
        if info is not None:
            if cp:  # drain the LB first: weight 0 for this machine
                await _sync_lb(ctx, ns, cluster_name, network, {machine_name}, family)
            if not await ctx.infra.remove_container(cname):
                return Result(requeue_after=2)
            log.info("%s/%s: removed container %s", ns, md["name"], cname)
        # a container removed behind our back (`docker rm -f`) leaves its /var volume: it goes with the machine
        await ctx.infra.remove_volumes({**dcr.cluster_labels(ns, cluster_name), CONTAINER_MACHINE: machine_name})
        if cp:
            await _sync_lb(ctx, ns, cluster_name, network, set(), family)
            _nudge_cluster(ctx, ns, cluster_name, dc)
    await remove_finalizer(ctx.kube, DOCKER_MACHINE, dm, FINALIZER_DOCKER_MACHINE)
    return None


# --- wiring ---------------------------------------------------------------------------------------

def _map_machine(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "infrastructureRef")
    if r and r["kind"] == DOCKER_MACHINE.kind and r["apiGroup"] in (INFRA_GROUP, ""):
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def _map_cluster_obj(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A Cluster / DockerCluster event reaches the cluster's DockerMachines: those labelled with the
    cluster name, and the infrastructureRefs of the cluster's Machines (a DockerMachine not labelled yet)."""
    md = obj.get("metadata") or {}
    ns = md.get("namespace") or ""
    cname = md["name"] if obj.get("kind") == CLUSTER.kind else (md.get("labels") or {}).get(CLUSTER_NAME)
    if not cname and obj.get("kind") == DOCKER_CLUSTER.kind:
        o = contract.controller_owner(obj, "Cluster")
        cname = o["name"] if o else None
    if not cname:
        return []
    out = {(ns, dm["metadata"]["name"]) for dm in cache.list(DOCKER_MACHINE, ns, labels={CLUSTER_NAME: cname})}
    for m in cache.list(MACHINE, ns, labels={CLUSTER_NAME: cname}):
        out.update(_map_machine(m, cache))
    return sorted(out)


def _map_node(namespace: str, cluster: str, node: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """A workload Node without its providerID brings back the DockerMachine whose container registered it."""
    machines = {m["metadata"]["name"]: m for m in cache.list(MACHINE, namespace, labels={CLUSTER_NAME: cluster})}
    out: list[tuple[str, str]] = []
    for n in dmr.machines_awaiting_provider_id(cluster, list(machines.values()), node):
        out.extend(_map_machine(machines[n], cache))
    return out


def controller() -> Controller:
    return Controller(gvk=DOCKER_MACHINE, reconcile=reconcile,
                      watches=[(MACHINE, _map_machine), (CLUSTER, _map_cluster_obj),
                               (DOCKER_CLUSTER, _map_cluster_obj)],
                      node_watches=[_map_node])
