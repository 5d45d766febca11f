"""The one reconcile skeleton every kind runs: get -> cluster -> pause -> delete or reconcile -> status.

Upstream's reconcilers all have this shape (fetch, `paused.EnsurePausedCondition` before the deletion check,
`reconcileDelete` / `reconcileNormal`, the patch helper in a defer); here it is written once, and a kind supplies
only what differs (`Kind`): where its cluster is, its finalizer and the metadata it wants with it, and the two
functions that do its work. Finalizers and the `Paused` condition are handled here and nowhere else; the status a
kind returns is written through the one status writer (`lifecycle.write_status`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, GVK
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.queue import OPERATIONAL_ERRORS, Result
from capd_py.kube import events
from capd_py.kube.client import KubeError
from capd_py.reconcile import coreutil

Obj = dict[str, Any]


@dataclass
class Subject:
    """What a kind's functions get: the object (newest copy: after the skeleton's metadata patch) and its
    Cluster (None when it names none or the Cluster does not exist)."""

    obj: Obj
    cluster: Obj | None

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace") or "")

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


@dataclass
class Outcome:
    """What a kind's reconcile or delete decided to leave behind.
    - status: the status it wants (None: it has nothing to say about status this time);
    - obj: the newest copy it holds, when it wrote the object itself (the status diff is taken against it);
    - done: for a delete, whether cleanup is finished (the finalizer goes);
    - requeue_after: when to look again although nothing happens;
    - failed: it ended on an error it reports in the status (the queue backs off instead of requeue_after)."""

    status: Obj | None = None
    obj: Obj | None = None
    done: bool = True
    requeue_after: float | None = None
    owned_conditions: Iterable[str] | None = None
    failed: bool = False  # an error reported in the status: the queue backs off (Result.failed)

    @property
    def result(self) -> Result | None:
        if self.failed:
            return Result(failed=True)
        return Result(requeue_after=self.requeue_after) if self.requeue_after else None


KindFn = Callable[[Ctx, Subject], Awaitable[Outcome]]


def cluster_name_of(obj: Obj) -> str:
    """`spec.clusterName` (core kinds) or the `cluster.x-k8s.io/cluster-name` label (providers' kinds)."""
    return str(contract.dig(obj, "spec", "clusterName") or
               ((obj.get("metadata") or {}).get("labels") or {}).get(CLUSTER_NAME) or "")


@dataclass(frozen=True)
class Kind:
    gvk: GVK
    reconcile: KindFn
    delete: KindFn
    finalizer: str | None = None
    # the name of the object's Cluster; None for kinds that belong to no one Cluster (ClusterClass, ...)
    cluster_name: Callable[[Obj], str] | None = cluster_name_of
    # more metadata the object should carry (ensure_metadata's keywords: owner, labels, annotations, also=spec
    # defaults): sent in the same patch as the finalizer, one write where there would be two
    metadata: Callable[[Obj, Obj | None], dict[str, Any]] | None = None
    # False for a kind that is never paused and has no Paused condition (upstream's DockerMachineTemplate and
    # ClusterResourceSetBinding reconcilers have no paused handling)
    pausable: bool = True
    # False for a second controller of a kind (the topology controller of Clusters): the first one reports Paused
    reports_paused: bool = True
    # what a paused object's status says besides Paused=True (the topology controller's TopologyReconciled=False)
    when_paused: Callable[[Subject], Outcome] | None = None
    # False while upstream's reconciler of the kind would stop at its owner lookup ("waiting for the Machine
    # controller to set the OwnerRef"): nothing is done or written, not even the finalizer (the owner's patch
    # brings the object back); a finalizer added meanwhile would race the owner's adoption patch
    ready: Callable[[Subject], bool] | None = None
    # told (namespace, name) when the object no longer exists: it went without this process running its deletion
    # (a move takes it away paused, its finalizers removed by the mover), so what the process keeps for it in
    # memory goes now (an in-memory DevCluster's workload cluster and its port)
    gone: Callable[[Ctx, str, str], Awaitable[None]] | None = None


def not_paused(obj: Obj, status: Obj) -> Obj:
    """`status` with `Paused=False` (the side of the condition every running reconcile reports)."""
    out = dict(status)
    out["conditions"] = cond.set_condition(out.get("conditions"), cond.PAUSED, False, lifecycle.R_NOT_PAUSED,
                                           observed_generation=(obj.get("metadata") or {}).get("generation"))
    return out


async def run(ctx: Ctx, kind: Kind, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    obj = await kube.get(kind.gvk, namespace or None, name)
    if obj is None:
        if kind.gone is not None:
            await kind.gone(ctx, namespace, name)
        return None
    cluster = None
    if kind.cluster_name is not None:
        cn = kind.cluster_name(obj)
        cluster = await kube.get(CLUSTER, namespace, cn) if cn else None
    if kind.ready is not None and not kind.ready(Subject(obj, cluster)):
        return None
    if kind.pausable and coreutil.is_paused(obj, cluster):
        if kind.reports_paused:
            obj = await lifecycle.pause(kube, kind.gvk, obj)
        if kind.when_paused:
            await _write(ctx, kind, obj, kind.when_paused(Subject(obj, cluster)), paused=True)
        return None

    if coreutil.is_deleting(obj):
        if kind.finalizer and not lifecycle.has_finalizer(obj, kind.finalizer):
            return None  # our cleanup is done; someone else's finalizer holds the object
        out = await _reported(ctx, obj, kind.delete(ctx, Subject(obj, cluster)))
        latest = out.obj or obj
        if out.done:
            if kind.finalizer:
                await lifecycle.remove_finalizer(kube, kind.gvk, latest, kind.finalizer)
            return None
        await _write(ctx, kind, latest, out)
        return out.result

    extra = kind.metadata(obj, cluster) if kind.metadata else {}
    # always: besides the finalizer and `extra`, owner references to our kinds are brought to the served version
    obj = await lifecycle.ensure_metadata(kube, kind.gvk, obj, finalizer=kind.finalizer, **extra)
    out = await _reported(ctx, obj, kind.reconcile(ctx, Subject(obj, cluster)))
    await _write(ctx, kind, out.obj or obj, out)
    return out.result


RECONCILE_ERROR = "ReconcileError"


async def _reported(ctx: Ctx, obj: Obj, step: Awaitable[Outcome]) -> Outcome:
    """The kind's pass; one the API server, docker or the network ends is a Warning Event on the object with the
    cause (issue 42 item 5), one Event whose count grows while it repeats, and still raises (the queue backs the pass
    off and logs one line). A conflict is not reported: the pass runs again at once on the newer object."""
    try:
        return await step
    except OPERATIONAL_ERRORS as e:
        if not (isinstance(e, KubeError) and e.conflict):
            await events.record(ctx.kube, obj, RECONCILE_ERROR, f"{type(e).__name__}: {e}")
        raise


async def _write(ctx: Ctx, kind: Kind, obj: Obj, out: Outcome, paused: bool = False) -> None:
    if out.status is None and not _was_paused(obj):
        return  # the kind has nothing to say yet: no write for Paused=False alone (it comes with the first status)
    status = out.status if out.status is not None else dict(obj.get("status") or {})
    owned = out.owned_conditions
    if kind.pausable and kind.reports_paused and not paused:
        status = not_paused(obj, status)
        owned = None if owned is None else {*owned, cond.PAUSED}
    await lifecycle.write_status(ctx.kube, kind.gvk, obj, status, owned)


def _was_paused(obj: Obj) -> bool:
    """The object says Paused=True: unpaused now, that must be written even when the kind says nothing else."""
    c = cond.get(obj, cond.PAUSED)
    return bool(c and c.get("status") != cond.FALSE)


def reconciler(kind: Kind) -> Callable[[Ctx, str, str], Awaitable[Result | None]]:
    """The Manager's reconcile function for `kind`."""
    async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
        return await run(ctx, kind, namespace, name)
    reconcile.__qualname__ = f"reconcile[{kind.gvk.kind}]"
    return reconcile
