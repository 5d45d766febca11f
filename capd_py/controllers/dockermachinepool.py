"""DockerMachinePool controller (thin I/O around capd_py.reconcile.dockermachinepool): keeps one DockerMachine per
replica of the owning MachinePool, scales through the instances' Machines, replaces outdated instances one at a
time, and publishes providerIDList / replicas / readiness for the MachinePool controller. The node containers are
the DockerMachine controller's business (capd_py/controllers/dockermachine.py), as for any other Machine.
The same functions are a DevMachinePool's docker backend (DevMachines as instances; `infrakinds.kinds_of`)."""

from __future__ import annotations

import logging
from typing import Any

from capd_py.api import contract, infrakinds
from capd_py.api.gvk import CLUSTER, DOCKER_MACHINE_POOL, GVK, INFRA_GROUP, MACHINE, MACHINE_POOL
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_DOCKER_MACHINE_POOL, MACHINE_POOL_NAME
from capd_py.controllers import entropy
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import delete_obj
from capd_py.controllers.lifecycle import ensure_metadata
from capd_py.controllers.mappers import Controller, Mapper, any_owner_mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, cluster_name_of, reconciler
from capd_py.kube.cache import Reader
from capd_py.kube.client import KubeError
from capd_py.reconcile import coreutil
from capd_py.reconcile import dockermachinepool as rdmp
from capd_py.reconcile import machinepool as rmp

log = logging.getLogger("capd_py.dockermachinepool")


async def _machine_pool(ctx: Ctx, dmp: dict[str, Any]) -> dict[str, Any] | None:
    o = contract.controller_owner(dmp, "MachinePool")
    if o is None:
        return None
    mp = await ctx.kube.get(MACHINE_POOL, dmp["metadata"]["namespace"], o["name"])
    return mp if mp is not None and mp["metadata"].get("uid") == o.get("uid") else None


async def _instances(ctx: Ctx, dmp: dict[str, Any], mp: dict[str, Any]) -> list[rdmp.Instance]:
    ns = dmp["metadata"]["namespace"]
    sel = rmp.pool_labels(mp)
    dms = await ctx.kube.list(infrakinds.kinds_of(dmp).machine, ns, labels=sel)
    machines = await ctx.kube.list(MACHINE, ns, labels=sel)
    return rdmp.instances(dmp, mp, dms, machines)


async def _create(ctx: Ctx, dmp: dict[str, Any], mp: dict[str, Any]) -> str:
    for _ in range(3):  # a random name taken already: draw again
        obj = rdmp.new_docker_machine(dmp, mp, rdmp.instance_name(mp, entropy.random_suffix()))
        try:
            await ctx.kube.create(infrakinds.kinds_of(dmp).machine, obj)
            return str(obj["metadata"]["name"])
        except KubeError as e:
            if not e.conflict:
                raise
    raise RuntimeError(f"could not find a free {infrakinds.kinds_of(dmp).machine.kind} name")


async def _delete_instance(ctx: Ctx, inst: rdmp.Instance) -> None:
    """Through the Machine when there is one (drain, then the Machine deletes the DockerMachine and so the
    container), else the DockerMachine itself."""
    if inst.machine is not None:
        await delete_obj(ctx.kube, MACHINE, inst.machine)
    else:
        await delete_obj(ctx.kube, infrakinds.kinds_of(inst.dm).machine, inst.dm)


async def reconcile_docker(ctx: Ctx, sub: Subject) -> Outcome:
    """A DockerMachinePool, or a DevMachinePool with the docker backend."""
    kube, dmp, cluster = ctx.kube, sub.obj, sub.cluster
    namespace, name = sub.namespace, sub.name
    mp = await _machine_pool(ctx, dmp)
    if mp is None:
        log.debug("%s/%s: waiting for the MachinePool owner reference", namespace, name)
        return Outcome()  # the MachinePool controller sets it; that event brings us back
    if cluster is None:
        return Outcome(requeue_after=ctx.settings.poll_seconds)
    cn = str(contract.dig(mp, "spec", "clusterName") or cluster["metadata"]["name"])

    insts = await _instances(ctx, dmp, mp)
    for dm in rdmp.missing_pool_owner(dmp, insts):
        await ensure_metadata(kube, infrakinds.kinds_of(dmp).machine, dm,
                              owner=contract.owner_ref(dmp, controller=False))
    p = rdmp.plan(mp, insts)
    if coreutil.is_deleting(cluster):
        p.create = 0
    for _ in range(p.create):
        created = await _create(ctx, dmp, mp)
        log.info("%s/%s: created instance %s (%s)", namespace, name, created, p.message)
    for inst in p.delete:
        log.info("%s/%s: deleting instance %s (%s)", namespace, name, inst.name, p.message)
        await _delete_instance(ctx, inst)
    if p.create or p.delete:
        insts = await _instances(ctx, dmp, mp)

    sp = rdmp.spec_patch(dmp, cn, insts)
    if sp:
        sp["metadata"] = {"resourceVersion": dmp["metadata"]["resourceVersion"]}
        dmp = await kube.merge_patch(infrakinds.kinds_of(dmp).pool, namespace, name, sp)
    converged = not p.create and not p.delete and not p.rolling and len(insts) == coreutil.replicas_of(mp) \
        and all(i.provisioned and not i.deleting for i in insts)
    return Outcome(status=rdmp.compute_status(dmp, mp, insts), obj=dmp,
                   requeue_after=None if converged else ctx.settings.poll_seconds)


async def delete_docker(ctx: Ctx, sub: Subject) -> Outcome:
    kube, dmp = ctx.kube, sub.obj
    ns = sub.namespace
    dms = [d for d in await kube.list(infrakinds.kinds_of(dmp).machine, ns) if contract.has_owner(d, dmp)]
    machines = await kube.list(MACHINE, ns)
    for d in dms:
        if not coreutil.is_deleting(d):
            await _delete_instance(ctx, rdmp.Instance(d, rdmp.machine_of(d, machines), True))
    if dms:
        log.debug("%s/%s: waiting for %d instance(s) to be deleted", ns, sub.name, len(dms))
        return Outcome(done=False, requeue_after=ctx.settings.poll_seconds)
    return Outcome()


KIND = Kind(gvk=DOCKER_MACHINE_POOL, reconcile=reconcile_docker, delete=delete_docker,
            finalizer=FINALIZER_DOCKER_MACHINE_POOL,
            cluster_name=cluster_name_of)  # its cluster-name label, set by the MachinePool with its owner ref
reconcile = reconciler(KIND)


# --- wiring ---------------------------------------------------------------------------------------

def watches(k: infrakinds.InfraKinds) -> list[tuple[GVK, Mapper]]:
    """What brings a pool of kind `k.pool` back: its MachinePool, its instances (of `k.machine`), their Machines,
    its Cluster."""

    def pool_to_dmp(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        r = rmp.infra_ref(obj)
        if r and r["kind"] == k.pool.kind and r["apiGroup"] in (INFRA_GROUP, ""):
            return [(obj["metadata"].get("namespace") or "", r["name"])]
        return []

    def machine_to_dmp(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        """A pool Machine (labelled with the pool name) reaches its MachinePool's infrastructure pool."""
        labels = obj["metadata"].get("labels") or {}
        pool, cn = labels.get(MACHINE_POOL_NAME), labels.get(CLUSTER_NAME)
        if not pool or not cn:
            return []
        ns = obj["metadata"].get("namespace") or ""
        out: list[tuple[str, str]] = []
        for mp in cache.list(MACHINE_POOL, ns, labels={CLUSTER_NAME: cn}):
            if rmp.label_value(mp["metadata"]["name"]) == pool:
                out += pool_to_dmp(mp, cache)
        return out

    def cluster_to_dmps(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        ns = obj["metadata"].get("namespace") or ""
        out: list[tuple[str, str]] = []
        for mp in cache.list(MACHINE_POOL, ns, labels={CLUSTER_NAME: obj["metadata"]["name"]}):
            out += pool_to_dmp(mp, cache)
        return out

    return [(MACHINE_POOL, pool_to_dmp), (k.machine, any_owner_mapper(k.pool.kind)), (MACHINE, machine_to_dmp),
            (CLUSTER, cluster_to_dmps)]


def controller() -> Controller:
    return Controller(gvk=DOCKER_MACHINE_POOL, reconcile=reconcile, watches=watches(infrakinds.DOCKER))
