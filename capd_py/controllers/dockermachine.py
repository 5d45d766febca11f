"""DockerMachine controller: one systemd node container per Machine, bootstrapped by running the
Machine's bootstrap data (cloud-config) inside it, then spec.providerID / status.addresses /
status.initialization.provisioned, and the workload Node's spec.providerID.

Restart safety: the container is found by name (and adopted when it carries our labels), creation is
never duplicated, and bootstrap runs as one detached script guarded by a lock directory and upstream's
success sentinel, so a restart at any point neither re-runs nor loses it. Decisions live in
capd_py.reconcile.dockermachine and capd_py.reconcile.cloudinit; the runtime side (create-or-adopt,
settle, load balancer sync) goes through the Docker infrastructure service `ctx.infra`. The state machine
is capd_py.reconcile.dockermachine_decide.decide; this module observes, asks it, and applies its answers.

The same functions are a DevMachine's docker backend (capd_py/controllers/devmachine.py): the kinds written and
followed come from `infrakinds.kinds_of(obj)`, the docker fields are read through `infrakinds.docker_spec`.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from capd_py.api import contract, infrakinds
from capd_py.api.gvk import CLUSTER, DOCKER_MACHINE, MACHINE, SECRET
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTAINER_MACHINE,
    CONTAINER_NAMESPACE,
    CONTROL_PLANE,
    FINALIZER_DOCKER_MACHINE,
)
from capd_py.controllers import dockerhost, lifecycle
from capd_py.controllers import dockermachine_watches as w
from capd_py.controllers.context import Ctx
from capd_py.controllers.dockermachine_node import patch_node
from capd_py.controllers.mappers import Controller
from capd_py.controllers.services.docker_infra import DockerInfra
from capd_py.controllers.skeleton import Kind, Outcome, Subject, not_paused, reconciler
from capd_py.kube import events
from capd_py.reconcile import cloudinit, coreutil, placement
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile import dockermachine_decide as dd
from capd_py.reconcile.coreutil import utcnow
from capd_py.reconcile.dockermachine import Phase
from capd_py.runtime.protocol import DaemonUnreachable, RuntimeError_

log = logging.getLogger("capd_py.dockermachine")


async def _docker_cluster(ctx: Ctx, k: infrakinds.InfraKinds, namespace: str,
                          cluster: dict[str, Any]) -> dict[str, Any] | None:
    """The machine's infrastructure cluster (a DockerCluster for a DockerMachine, a DevCluster for a DevMachine)."""
    r = contract.ref(cluster, "spec", "infrastructureRef")
    if r and r["kind"] == k.cluster.kind:
        return await ctx.kube.get(k.cluster, namespace, r["name"])
    return None


async def _sync_lb(ctx: Ctx, infra: DockerInfra, k: infrakinds.InfraKinds, namespace: str, cluster: str,
                   network: str, extra_deleting: set[str], family: str) -> None:
    machines = await ctx.kube.list(MACHINE, namespace, selector=f"{CLUSTER_NAME}={cluster},{CONTROL_PLANE}")
    dms = await ctx.kube.list(k.machine, namespace, labels={CLUSTER_NAME: cluster})
    await infra.sync_lb(namespace, cluster, network, dcr.deleting_machines(machines, dms) | extra_deleting, family)


# --- reconcile: observe, decide (capd_py.reconcile.dockermachine_decide), apply -----------------------------------

async def _observe(ctx: Ctx, sub: Subject) -> tuple[dd.Observed, DockerInfra]:
    """What the decision reads, and the DockerInfra of the docker host the machine's DockerCluster is on.
    dockerhost.NotPlaced while that host is not known."""
    dm, cluster, ns = sub.obj, sub.cluster, sub.namespace
    owner = contract.controller_owner(dm, "Machine")
    machine = await ctx.kube.get(MACHINE, ns, owner["name"]) if owner else None
    obs = dd.Observed(dm, machine, cluster, now=utcnow(), node_image_repository=ctx.settings.node_image_repository,
                      privileged_mode=ctx.settings.privileged_mode, poll_seconds=ctx.settings.poll_seconds)
    if machine is None or cluster is None or not obs.cluster_name:
        return obs, ctx.infra
    dc = await _docker_cluster(ctx, infrakinds.kinds_of(dm), ns, cluster)
    infra = (await dockerhost.where(ctx, dc)).infra
    return replace(obs, docker_cluster=dc, container=await infra.get_container(obs.container_name)), infra


async def reconcile_docker(ctx: Ctx, sub: Subject) -> Outcome:
    """A DockerMachine, or a DevMachine with the docker backend."""
    try:
        obs, infra = await _observe(ctx, sub)
    except dockerhost.NotPlaced as e:
        if e.reason == placement.R_NO_HOST:  # the DockerCluster's placement comes first
            log.info("%s/%s: waiting for the docker host: %s", sub.namespace, sub.name, e.message)
            return Outcome(requeue_after=ctx.settings.poll_seconds)
        return _host_failure(sub, e.message, Phase.HOST_UNREACHABLE if e.reason == placement.R_HOST_UNREACHABLE
                             else Phase.CONTAINER_ERROR)
    except RuntimeError_ as e:  # its docker host does not answer: say so (provisioned and addresses are kept)
        return _host_failure(sub, f"docker host: {e}",
                             Phase.HOST_UNREACHABLE if dockerhost.unreachable(e) else Phase.CONTAINER_ERROR)
    return await _steps(ctx, sub, infra, obs)


async def _steps(ctx: Ctx, sub: Subject, infra: DockerInfra, obs: dd.Observed) -> Outcome:
    """Decide, apply, look again, until a decision ends the reconcile."""
    try:
        for _ in range(dd.MAX_STEPS):
            action = dd.decide(obs)
            if isinstance(action, dd.ENDS):
                return await _end(ctx, obs, action)
            try:
                obs = await _apply(ctx, infra, obs, action)
            except DaemonUnreachable:
                raise
            except RuntimeError_ as e:
                after = dd.after_error(obs, action, str(e))
                if after is None:
                    raise
                obs = after
    except DaemonUnreachable as e:  # it answered when observed and stopped answering since (a dockerd halted)
        return _host_failure(sub, f"docker host: {e}", Phase.HOST_UNREACHABLE)
    raise AssertionError(f"DockerMachine {sub.namespace}/{sub.name}: no decision after {dd.MAX_STEPS} steps")


def _host_failure(sub: Subject, message: str, phase: Phase = Phase.CONTAINER_ERROR) -> Outcome:
    log.warning("%s/%s: %s", sub.namespace, sub.name, message)
    return Outcome(status=dmr.status(sub.obj, dmr.Observed(phase, message)), obj=sub.obj,
                   requeue_after=15)


async def _apply(ctx: Ctx, infra: DockerInfra, o: dd.Observed, a: dd.Action) -> dd.Observed:
    """Look at what the decision needs, or apply a step; the Observed with what it learnt or changed."""
    cname, ns = o.container_name, o.namespace
    if isinstance(a, dd.LookImage):
        present = await infra.image_exists(a.image)
        if not present and o.docker_cluster is not None:  # another docker host may have it: copied, never pulled
            try:
                await dockerhost.bring_images(ctx, await dockerhost.where(ctx, o.docker_cluster), [a.image])
                present = await infra.image_exists(a.image)
            except dockerhost.NotPlaced:
                pass  # the image stays missing: ImageNotFound says so
        return replace(o, image_present=present)
    if isinstance(a, dd.ProbeSystemd):
        res = await infra.exec(cname, cloudinit.SYSTEMD_PROBE)
        return replace(o, systemd_ready=cloudinit.systemd_ready(res.output))
    if isinstance(a, dd.ProbeBootstrap):
        res = await infra.exec(cname, cloudinit.probe_command())
        return replace(o, bootstrap=cloudinit.parse_probe(res.output))
    if isinstance(a, dd.LookLocalImages):
        return replace(o, local_image_ids=await infra.local_image_ids(list(a.refs)))
    if isinstance(a, dd.ReadBootstrapData):
        secret = await ctx.kube.get(SECRET, ns, a.secret)
        return replace(o, bootstrap_data=(secret or {}).get("data") or {})
    done = o.done | {type(a)}
    if isinstance(a, dd.SyncLoadBalancer):
        await _sync_lb(ctx, infra, infrakinds.kinds_of(o.dm), ns, o.cluster_name, o.network, {a.without}, o.family)
        return replace(o, done=done)
    if isinstance(a, dd.CreateContainer):
        info = await infra.create_container(a.spec)
        log.info("%s/%s: created container %s (%s)", ns, o.dm["metadata"]["name"], cname, a.spec.image)
        if o.control_plane:
            _nudge_cluster(ctx, ns, o.docker_cluster)
        return replace(o, container=info, done=done)
    if isinstance(a, dd.StartContainer):
        return replace(o, container=await infra.start_container(cname) or o.container, done=done)
    if isinstance(a, dd.PreloadImages):
        return await _preload(ctx, infra, o, a)
    if isinstance(a, dd.Bootstrap):
        for path, content in a.files.items():
            await infra.write_file(cname, path, content, 0o700 if path == cloudinit.SCRIPT_PATH else 0o600)
        res = await infra.exec(cname, cloudinit.launch_command())
        if res.exit_code != 0:
            raise RuntimeError_(f"launching bootstrap: exit {res.exit_code}: {res.output.strip()}")
        log.info("%s/%s: bootstrap %s in %s (%d steps)", ns, o.dm["metadata"]["name"], res.output.strip(), cname,
                 a.steps)
        return replace(o, bootstrap=None, done=done)  # probed again
    raise AssertionError(f"not a look or a step: {a!r}")


async def _preload(ctx: Ctx, infra: DockerInfra, o: dd.Observed, a: dd.PreloadImages) -> dd.Observed:
    dm, name = o.dm, o.dm["metadata"]["name"]
    if a.skipped:
        msg = (f"not pre-loading {', '.join(a.skipped)} (loaded into this cluster with capd-py load image): "
               "no longer in the local docker daemon")
        await events.record(ctx.kube, dm, "PreLoadImageMissing", msg)
        log.warning("%s/%s: %s", o.namespace, name, msg)
    if not a.load:
        return replace(o, preloaded=())
    # a load takes a while: say so first
    loading = f"pre-loading {len(a.load)} image(s) into the node: {', '.join(a.load)}"
    dm = await _write_status(ctx, dm, dd.status(o, Phase.PRELOADING_IMAGES, loading, o.container))
    outcomes = await infra.load_images(o.container_name, dict(a.load))
    if all(x.ok for x in outcomes):
        log.info("%s/%s: images in %s: %s", o.namespace, name, o.container_name,
                 ", ".join(f"{x.ref} {x.result}" for x in outcomes))
    return replace(o, dm=dm, preloaded=tuple(outcomes))


async def _write_status(ctx: Ctx, dm: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
    """A status written mid-pass (before a long step, or before the Node is patched): with the skeleton's
    Paused=False, so the skeleton's own write at the end of the pass finds nothing left to change."""
    return await lifecycle.write_status(ctx.kube, infrakinds.kinds_of(dm).machine, dm, not_paused(dm, status))


async def _end(ctx: Ctx, o: dd.Observed, a: dd.End) -> Outcome:
    ns, name = o.namespace, o.dm["metadata"]["name"]
    if isinstance(a, dd.WaitFor):
        log.debug("%s/%s: waiting for %s", ns, name, a.reason)
        return Outcome(obj=o.dm, requeue_after=a.requeue_after)
    if isinstance(a, dd.SetProviderID):
        return await _provisioned(ctx, o, a)
    if isinstance(a, dd.Fail) and dd.is_news(o.dm, a.phase):
        await events.record(ctx.kube, o.dm, a.event, a.message)
        log.warning("%s/%s: %s", ns, name, a.message)
    return Outcome(status=dd.status(o, a.phase, a.message, a.container), obj=o.dm, requeue_after=a.requeue_after)


async def _provisioned(ctx: Ctx, o: dd.Observed, a: dd.SetProviderID) -> Outcome:
    dm, md = o.dm, o.dm["metadata"]
    if contract.provider_id(dm) != a.provider_id:
        dm = await ctx.kube.merge_patch(infrakinds.kinds_of(dm).machine, o.namespace, md["name"], {
            "metadata": {"resourceVersion": md["resourceVersion"]}, "spec": {"providerID": a.provider_id}})
    # the addresses are the DockerMachine's before the Node gets its providerID (the Machine takes both)
    status = dd.status(replace(o, dm=dm), Phase.PROVISIONED, container=a.container)
    dm = await _write_status(ctx, dm, status)
    requeue = await patch_node(ctx, o.namespace, o.cluster_name, o.container_name, a.provider_id,
                                dd.cp_initialized(o.cluster), contract.addresses(dm) or [])
    return Outcome(status=status, obj=dm, requeue_after=requeue)


def _nudge_cluster(ctx: Ctx, ns: str, dc: dict[str, Any] | None) -> None:
    if dc is not None:  # its load balancer's backends follow the control plane containers
        ctx.enqueue(infrakinds.kinds_of(dc).cluster.kind, ns, dc["metadata"]["name"])


# --- delete -------------------------------------------------------------------------------------------------------

async def delete_docker(ctx: Ctx, sub: Subject) -> Outcome:
    """A DockerMachine's, or a docker-backed DevMachine's, deletion."""
    dm, ns = sub.obj, sub.namespace
    k = infrakinds.kinds_of(dm)
    owner = contract.controller_owner(dm, "Machine")
    machine_name = owner["name"] if owner else None
    machine = await ctx.kube.get(MACHINE, ns, machine_name) if machine_name else None
    cluster_name = dd.cluster_name_of(dm, machine)
    cluster = await ctx.kube.get(CLUSTER, ns, cluster_name) if cluster_name else None
    dc = await _docker_cluster(ctx, k, ns, cluster) if cluster else None
    try:
        return await _delete_container(ctx, sub, machine_name, machine, cluster_name, cluster, dc)
    except (dockerhost.NotPlaced, DaemonUnreachable) as e:  # host gone from the configuration or away: waits
        msg = f"cannot delete the node container: {dockerhost.why(e, dc)}"
        return Outcome(status=dmr.status(dm, dmr.Observed(Phase.DELETING, msg)), done=False, requeue_after=15)


async def _delete_container(ctx: Ctx, sub: Subject, machine_name: str | None, machine: dict[str, Any] | None,
                            cluster_name: str | None, cluster: dict[str, Any] | None,
                            dc: dict[str, Any] | None) -> Outcome:
    dm, ns, k = sub.obj, sub.namespace, infrakinds.kinds_of(sub.obj)
    infra = (await dockerhost.where(ctx, dc, unplaced_local=True)).infra
    if machine_name and not cluster_name:  # Machine already gone: find the container by its labels
        for c in await infra.list_containers({CONTAINER_MACHINE: machine_name, CONTAINER_NAMESPACE: ns}):
            cluster_name = c.labels.get(dcr.CONTAINER_CLUSTER) or ""
    if not (machine_name and cluster_name):
        return Outcome()
    cname = dmr.container_name(cluster_name, machine_name)
    if cluster is None:
        cluster = await ctx.kube.get(CLUSTER, ns, cluster_name)
    network, family = dcr.network_name(ns, cluster_name, dc), dcr.cluster_family(cluster)
    await infra.settle(cname)
    info = await infra.get_container(cname)
    # written once the host answered (a host away keeps the "cannot delete" status: no flip-flop of writes)
    dm = await _write_status(ctx, dm,
                            dmr.status(dm, dmr.Observed(Phase.DELETING, "deleting the node container")))
    cp = (info is not None and info.labels.get(dcr.CONTAINER_ROLE) == dcr.ROLE_CONTROL_PLANE) \
        or dmr.is_control_plane(machine)
    if info is not None and dcr.ours(info, ns, cluster_name):  # not ours: left alone
        if cp:  # drain the LB first: weight 0 for this machine
            await _sync_lb(ctx, infra, k, ns, cluster_name, network, {machine_name}, family)
        if not await infra.remove_container(cname):
            return Outcome(obj=dm, done=False, requeue_after=2)
        log.info("%s/%s: removed container %s", ns, sub.name, cname)
    # a container removed behind our back (`docker rm -f`) leaves its /var volume: it goes with the machine
    await infra.remove_volumes({**dcr.cluster_labels(ns, cluster_name), CONTAINER_MACHINE: machine_name})
    if cp:
        await _sync_lb(ctx, infra, k, ns, cluster_name, network, set(), family)
        _nudge_cluster(ctx, ns, dc)
    return Outcome(obj=dm)


def has_owner_machine(sub: Subject) -> bool:
    """As upstream CAPD: nothing until the Machine controller has made its Machine the owner."""
    return coreutil.is_deleting(sub.obj) or bool(contract.core_owner_name(sub.obj, "Machine"))


KIND = Kind(gvk=DOCKER_MACHINE, reconcile=reconcile_docker, delete=delete_docker,
            finalizer=FINALIZER_DOCKER_MACHINE, ready=has_owner_machine)
reconcile = reconciler(KIND)


# --- wiring ---------------------------------------------------------------------------------------

def controller() -> Controller:
    k = infrakinds.DOCKER
    return Controller(gvk=DOCKER_MACHINE, reconcile=reconcile, watches=w.watches(k),
                      node_watches=[w.node_mapper(k)])
