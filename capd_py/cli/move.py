"""`capd-py move`: hand a namespace's clusters to another management cluster (clusterctl move).

The rules that keep two management clusters from ever reconciling the same cluster at once:

1. discover the objects (`reconcile/movegraph.py` decides what moves and in which order) and refuse while a
   cluster is still provisioning or already paused by someone else;
2. pause the tenants at the source (Cluster `spec.paused`, the paused annotation on ClusterClasses and
   ClusterResourceSets), wait until the source's Cluster controller says `Paused`, then list again (an object
   a controller created just before the pause moves too);
3. create every object at the target, owners first, with owner references pointing at the owners' new UIDs;
   the tenants arrive paused (they are copied paused), so the target's controllers only mark them Paused;
   then write each object's status through the status subresource: our controllers recompute most of it,
   but e.g. DockerMachine `status.initialization.provisioned`, KubeadmConfig `status.dataSecretName` and KCP
   `status.initialization` are facts they cannot recompute (without them the target would bootstrap again or
   report ContainerDeleted);
4. delete from the source, dependents first, each with its finalizers removed first, so the source's
   controllers never run their deletion (which would remove the containers);
5. resume the tenants at the target.

Clusters placed on a docker host other than `local` (docs/multihost.md) keep their `capd-py.dev/docker-host`
annotation; the host's entry of `capd-py-system/capd-py-docker-hosts` (and its TLS or ssh Secret) is written at the
target before step 3, or the move is refused before step 2 when the two sides disagree (capd_py/reconcile/hostmove.py).

The containers are not touched: they carry the cluster's namespace and name, not object UIDs, so the
target's controllers adopt them.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions
from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import ALL_CAPI, CLUSTER, CONFIG_MAP, CRD, GVK, SECRET, of_object
from capd_py.api.labels import PAUSED_ANNOTATION
from capd_py.cli.steps import Steps
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import hostmove, movegraph
from capd_py.reconcile.movegraph import Graph, Node

MOVE_KINDS: tuple[GVK, ...] = (*ALL_CAPI, SECRET, CONFIG_MAP)
NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
NO_STATUS = (SECRET, CONFIG_MAP)  # kinds whose status is not a subresource (they have none)
RETRIES = 5


class MoveError(Exception):
    pass


@dataclass
class Outcome:
    graph: Graph
    moved: int = 0
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)


async def discover(kube: Kube, namespace: str) -> Graph:
    objs: list[dict[str, Any]] = []
    for g in MOVE_KINDS:
        objs += await kube.list(g, namespace)
    return Graph(objs)


def _gvk(n: Node) -> GVK:
    g = of_object(n.obj)
    if g is None:  # discovery lists only kinds we know
        raise MoveError(f"unknown kind {n.identity.api_version} {n.kind}")
    return g


async def check_target(target: Kube, source_graph: Graph) -> None:
    for g in ALL_CAPI:
        if await target.get(CRD, None, f"{g.plural}.{g.group}") is None:
            raise MoveError(f"the target has no CRD {g.plural}.{g.group}: run `capd-py init --kubeconfig "
                            f"TARGET` first")
    for c in source_graph.of_kind("Cluster"):
        if await target.get(CLUSTER, c.identity.namespace, c.name) is not None:
            raise MoveError(f"Cluster {c.identity.namespace}/{c.name} already exists at the target")


async def host_plan(source: Kube, target: Kube | None, graph: Graph) -> hostmove.HostCopy:
    """Which docker host entries the moved clusters need at the target (capd_py/reconcile/hostmove.py)."""
    placed = hostmove.placed_hosts(n.obj for n in graph.move_nodes())
    if not placed:
        return hostmove.HostCopy()
    src = await source.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP)
    tgt = await target.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP) if target is not None else None
    return hostmove.plan(placed, (src or {}).get("data"), (tgt or {}).get("data"))


async def _copy_hosts(source: Kube, target: Kube, plan: hostmove.HostCopy, made: list[tuple[GVK, str]]) -> None:
    """Write the plan's entries (and the TLS or ssh Secrets they name, when the target lacks them) at the target before
    any cluster object arrives there, so its controllers find the host at their first reconcile. `made` records
    what was created, for a rollback."""
    if not plan.add:
        return
    await _ensure_namespace(target, dh.NAMESPACE, set())
    for name in plan.secrets:
        if await target.get(SECRET, dh.NAMESPACE, name) is not None:
            continue
        secret = await source.get(SECRET, dh.NAMESPACE, name)
        if secret is None:
            raise MoveError(f"the Secret {dh.NAMESPACE}/{name} of a moved cluster's docker host is missing at "
                            "the source")
        await target.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "type": secret.get("type", "Opaque"),
                                     "metadata": {"namespace": dh.NAMESPACE, "name": name},
                                     "data": secret.get("data") or {}})
        made.append((SECRET, name))
    if await target.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP) is None:
        await target.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"namespace": dh.NAMESPACE, "name": dh.CONFIGMAP},
                                         "data": dict(plan.add)})
    else:
        await target.merge_patch(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP, {"data": dict(plan.add)})
    made.append((CONFIG_MAP, ""))


async def _uncopy_hosts(target: Kube, plan: hostmove.HostCopy, made: list[tuple[GVK, str]]) -> None:
    """Undo _copy_hosts (a rollback): the entries it added, the Secrets it created."""
    for g, name in reversed(made):
        if g == CONFIG_MAP:
            await target.merge_patch(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP, {"data": {n: None for n in plan.add}})
        else:
            await target.delete(g, dh.NAMESPACE, name)


async def _set_paused(kube: Kube, nodes: list[Node], value: bool) -> None:
    for n in nodes:
        await kube.merge_patch(_gvk(n), n.identity.namespace, n.name, movegraph.pause_patch(n.kind, value))


async def _wait_paused(kube: Kube, clusters: list[Node], timeout: float) -> list[str]:
    """Wait until the source's Cluster controller reports each Cluster Paused for its current generation (it
    then starts no new work for it); names those that did not within `timeout` (controllers not running).
    A Cluster without a Paused condition was never reconciled by our controllers: nothing to wait for."""
    deadline = time.monotonic() + timeout
    left = [n for n in clusters if conditions.get(n.obj, conditions.PAUSED) is not None]
    while left:
        still: list[Node] = []
        for n in left:
            c = await kube.get(CLUSTER, n.identity.namespace, n.name)
            if c is None:
                continue
            cond = conditions.get(c, conditions.PAUSED) or {}
            if not (cond.get("status") == "True"
                    and cond.get("observedGeneration") == c["metadata"].get("generation")):
                still.append(n)
        left = still
        if not left or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.5)
    return [f"{n.identity.namespace}/{n.name}" for n in left]


async def _ensure_namespace(target: Kube, namespace: str, known: set[str]) -> None:
    if not namespace or namespace in known:
        return
    if await target.get(NAMESPACE, None, namespace) is None:
        try:
            await target.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        except KubeError as e:
            if not e.conflict:
                raise
    known.add(namespace)


async def _create(target: Kube, n: Node, new_uids: dict[str, str]) -> None:
    g = _gvk(n)
    ns = n.identity.namespace or None
    body = movegraph.target_object(n.obj, movegraph.owner_references(n, new_uids))
    try:
        created = await target.create(g, body)
    except KubeError as e:
        if not e.conflict:
            raise
        # left by an interrupted move (clusterctl updates it too): take the source's version
        existing = await target.get(g, ns, n.name)
        if existing is None:
            raise
        body["metadata"].update(uid=existing["metadata"]["uid"],
                                resourceVersion=existing["metadata"]["resourceVersion"])
        created = await target.replace(g, body)
    new_uids[n.uid] = created["metadata"]["uid"]
    status = n.obj.get("status")
    if not status or g in NO_STATUS:
        return
    for _ in range(RETRIES):  # the target's controllers may write a Paused condition meanwhile
        try:
            await target.replace(g, {**created, "status": status}, subresource="status")
            return
        except KubeError as e:
            if e.not_found and await target.get(g, ns, n.name) is not None:
                return  # a kind without a status subresource: the create kept nothing to restore
            if not e.conflict:
                raise
        fresh = await target.get(g, ns, n.name)
        if fresh is None:
            raise MoveError(f"{n.kind} {n.identity.namespace}/{n.name} vanished at the target")
        created = fresh
    raise MoveError(f"{n.kind} {n.identity.namespace}/{n.name}: status kept conflicting at the target")


async def copy_object(target: Kube, n: Node, new_uids: dict[str, str]) -> None:
    """Create `n` at `target` (an existing namesake is replaced: an interrupted run), owner references pointing
    at the owners' new UIDs, its status written back; records its new UID. `snapshot restore` uses it too."""
    await _create(target, n, new_uids)


async def ensure_namespace(target: Kube, namespace: str, known: set[str]) -> None:
    await _ensure_namespace(target, namespace, known)


async def _delete_source(source: Kube, n: Node, uid: str | None = None) -> None:
    """Remove the finalizers, then delete (by UID, so a namesake created since is left alone); a controller
    that put a finalizer back in between gets it removed again. `uid`: another copy's (a rollback)."""
    g = _gvk(n)
    ns = n.identity.namespace or None
    uid = uid or n.uid
    for _ in range(RETRIES):
        obj = await source.get(g, ns, n.name)
        if obj is None or obj["metadata"].get("uid") != uid:
            return
        if obj["metadata"].get("finalizers"):
            try:
                await source.merge_patch(g, ns, n.name, {"metadata": {
                    "finalizers": [], "resourceVersion": obj["metadata"]["resourceVersion"]}})
            except KubeError as e:
                if e.not_found:
                    return
                if not e.conflict:
                    raise
                continue
        await source.delete(g, ns, n.name, uid=uid)
        if await source.get(g, ns, n.name) is None:
            return
    raise MoveError(f"{n.kind} {n.identity.namespace}/{n.name} could not be deleted")


async def move(source: Kube, target: Kube | None, namespace: str, steps: Steps, dry_run: bool = False,
               pause_timeout: float = 30.0) -> Outcome:
    t0 = time.monotonic()
    with steps.step(f"Discovering Cluster API objects in namespace {namespace} 🔎"):
        graph = await discover(source, namespace)
    out = Outcome(graph)
    tenants = [n for n in graph.move_nodes() if movegraph.is_pause_root(n)]
    if dry_run:
        hosts = await host_plan(source, target, graph)
        out.warnings = graph.not_ready() + [f"{p} is paused" for p in graph.already_paused()] + \
            list(hosts.problems) + hosts.lines()
        return out
    assert target is not None
    if not graph.of_kind("Cluster") and not tenants:
        raise MoveError(f"nothing to move in namespace {namespace}")
    problems = graph.not_ready() + [f"{p} is paused (unpause it first)" for p in graph.already_paused()]
    if problems:
        raise MoveError("not ready to move:\n  " + "\n  ".join(problems))
    await check_target(target, graph)
    hosts = await host_plan(source, target, graph)
    if hosts.problems:
        raise MoveError("docker hosts (docs/multihost.md), nothing changed:\n  " + "\n  ".join(hosts.problems))

    with steps.step("Pausing the clusters at the source ⏸"):
        await _set_paused(source, tenants, True)
        late = await _wait_paused(source, graph.of_kind("Cluster"), pause_timeout)
        if late:
            out.warnings.append(f"the source's controllers did not report Paused within {pause_timeout:.0f}s "
                                f"for {', '.join(late)} (not running?)")
        graph = await discover(source, namespace)  # what the controllers made before the pause moves too
        out.graph = graph
    sequence = graph.sequence()
    total = sum(len(g) for g in sequence)

    new_uids: dict[str, str] = {}
    namespaces: set[str] = set()
    made: list[tuple[GVK, str]] = []
    try:
        if hosts.add:
            with steps.step(f"Adding docker host(s) {', '.join(sorted(hosts.add))} at the target 🖥"):
                await _copy_hosts(source, target, hosts, made)
        with steps.step(f"Creating {total} objects at the target 📦"):
            for group in sequence:
                for n in group:
                    await _ensure_namespace(target, n.identity.namespace, namespaces)
                    await _create(target, n, new_uids)
                    out.moved += 1
                    steps.update(f"{out.moved}/{total}")
    except Exception as e:
        # nothing is deleted yet: undo, so the source runs the clusters as before and a retry starts clean
        with steps.step("Rolling back: removing the copies from the target, resuming at the source ↩"):
            for n in reversed([n for g in sequence for n in g if n.uid in new_uids]):
                await _delete_source(target, n, new_uids[n.uid])
            await _uncopy_hosts(target, hosts, made)
            await _set_paused(source, tenants, False)
        raise MoveError(f"creating the objects at the target failed, rolled back (the source is unchanged): "
                        f"{type(e).__name__}: {e}") from e
    try:
        with steps.step("Deleting the objects from the source 🔥"):
            for group in reversed(sequence):
                for n in group:
                    await _delete_source(source, n)
    except Exception as e:
        raise MoveError(f"deleting from the source failed: {type(e).__name__}: {e}; every object is at the target, "
                        f"still paused there, and what is left at the source is paused too: delete it from the "
                        f"source (removing finalizers first), then resume the target (`spec.paused` on its "
                        f"Clusters, the {PAUSED_ANNOTATION} annotation on ClusterClasses/ClusterResourceSets)") from e
    with steps.step("Resuming the clusters at the target ▶️"):
        await _set_paused(target, [n for n in graph.move_nodes() if movegraph.is_pause_root(n)], False)
    out.seconds = time.monotonic() - t0
    return out


async def command(source: Kube, target: Kube | None, namespace: str, dry_run: bool, steps: Steps) -> list[str]:
    """What `capd-py move` runs: the object tree on stdout for --dry-run, progress and a summary on stderr.
    Returns the lines for stdout."""
    try:
        out = await move(source, target, namespace, steps, dry_run=dry_run)
    finally:
        source.close()
        if target is not None:
            target.close()
    for w in out.warnings:
        steps.info(f"warning: {w}")
    if dry_run:
        n = len(out.graph.move_nodes())
        steps.info(f"{n} objects would move (dry run: nothing changed)")
        return out.graph.tree()
    steps.info(f"moved {out.moved} objects in {out.seconds:.1f}s")
    return []
