"""`capd-py snapshot create|restore|list|delete`: copies of a stopped cluster's container storage, the specs of its
containers and network and its management objects under the capd-py home (what is kept and what a restore does:
capd_py/reconcile/snapshot.py). Stopping and starting are `capd-py stop|start cluster`'s (capd_py/cli/power.py);
the objects are `capd-py move`'s graph (capd_py/cli/move.py), created again the way move creates them."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capd_py.api.gvk import CLUSTER, of_object
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE
from capd_py.cli import move, power
from capd_py.cli.steps import Steps
from capd_py.kube.client import Kube
from capd_py.reconcile import powerstate as ps
from capd_py.reconcile import snapshot as sn
from capd_py.reconcile.movegraph import Graph
from capd_py.runtime import treesync
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_


class SnapshotError(Exception):
    pass


def folder(root: Path, namespace: str, cluster: str, name: str = "") -> Path:
    base = root / namespace / cluster
    return base / name if name else base


@dataclass
class Listed:
    name: str
    created: str
    size: int
    complete: bool


def listing(root: Path, namespace: str, cluster: str) -> list[Listed]:
    base = folder(root, namespace, cluster)
    out = []
    for d in sorted(base.iterdir()) if base.is_dir() else []:
        name = d.name.removesuffix(".partial")
        m = d / sn.MANIFEST
        if d.name.endswith(".partial") or not m.exists():
            out.append(Listed(name, "", treesync.tree_size(d), False))
            continue
        data = json.loads(m.read_text())
        out.append(Listed(name, str(data.get("created", "")), int(data.get("bytes", 0)), True))
    return out


def delete(root: Path, namespace: str, cluster: str, name: str) -> bool:
    found = False
    for d in (folder(root, namespace, cluster, name), folder(root, namespace, cluster, name + ".partial")):
        if d.exists():
            shutil.rmtree(d)
            found = True
    return found


async def _drive(kube: Kube, rt: ContainerRuntime, verb: str, namespace: str, cluster: str, steps: Steps,
                 timeout: float, stop_timeout: float = 10.0) -> None:
    run = power.Run(kube, rt, namespace, cluster, steps, time.monotonic() + timeout, stop_timeout)
    try:
        await power.drive(run, verb)
    except power.PowerError as e:
        raise SnapshotError(f"{verb} cluster: {e}") from e


def _containers(rt: ContainerRuntime, namespace: str, cluster: str) -> dict[str, tuple[str, str]]:
    """name -> (role, image reference) of the cluster's containers."""
    return {c.name: (c.labels.get(CONTAINER_ROLE, ""), c.image)
            for c in rt.list_containers({CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: namespace})}


async def create(kube: Kube, rt: ContainerRuntime, root: Path, namespace: str, cluster: str, name: str,
                 steps: Steps, timeout: float) -> tuple[Path, int]:
    """Stop the cluster (if running), copy every container's storage, write the manifest last, start it again
    (if it was running). Returns the snapshot's folder and size."""
    problem = sn.name_problem(name)
    if problem:
        raise SnapshotError(problem)
    dest = folder(root, namespace, cluster, name)
    if dest.exists():
        raise SnapshotError(f"snapshot {name} of {namespace}/{cluster} exists ({dest}); delete it first")
    boxes = await asyncio.to_thread(_containers, rt, namespace, cluster)
    if not boxes:
        raise SnapshotError(f"cluster {namespace}/{cluster} has no containers")
    o, _ = await power.observe(power.Run(kube, rt, namespace, cluster, steps, time.monotonic() + 5),
                               need_workload=False)
    was_running = o.state is None and all(b.status == "running" for b in o.containers)
    await _drive(kube, rt, ps.STOP, namespace, cluster, steps, timeout)
    partial = dest.with_name(name + ".partial")
    if partial.exists():  # an interrupted earlier attempt
        shutil.rmtree(partial)
    saved: list[sn.Saved] = []
    with steps.step(f"Copying the storage of {len(boxes)} container(s) 📦"):
        try:
            for cname, (role, image) in sorted(boxes.items()):
                paths = await asyncio.to_thread(rt.storage_paths, cname)
                for mount, src in sorted(paths.items()):
                    steps.update(f"{cname} {mount}")
                    await asyncio.to_thread(treesync.copy_tree, src, partial / cname / sn.folder_of(mount))
                image_id = await asyncio.to_thread(rt.image_id, image)
                spec = await asyncio.to_thread(rt.container_spec, cname)
                saved.append(sn.Saved(cname, role, image, image_id or "", tuple(sorted(paths)), spec))
        except (RuntimeError_, treesync.TreeError, OSError) as e:
            raise SnapshotError(f"copying: {e} (the partial copy is in {partial}; run create again)") from e
    net = await _network(rt, saved)
    with steps.step("Saving the cluster's management objects and Secrets 📜"):
        # taken while stopped: the Cluster is paused with power state "stopped", as a restore recreates it
        graph = await move.discover(kube, namespace)
        objs = [n.obj for n in graph.cluster_nodes(namespace, cluster)]
        if not objs:
            raise SnapshotError(f"cluster {namespace}/{cluster} not found")
        _write_private(partial / sn.OBJECTS, json.dumps(objs))
    size = await asyncio.to_thread(treesync.tree_size, partial)
    created = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (partial / sn.MANIFEST).write_text(json.dumps(sn.manifest(namespace, cluster, name, created, saved, size, net,
                                                              len(objs)), indent=1))
    partial.rename(dest)
    if was_running:
        await _drive(kube, rt, ps.START, namespace, cluster, steps, timeout)
    return dest, size


def _write_private(path: Path, text: str) -> None:
    """The objects include the cluster's Secrets (CA keys, kubeconfig): readable by the owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


async def _network(rt: ContainerRuntime, saved: list[sn.Saved]) -> sn.SavedNetwork | None:
    """The docker network the cluster's containers are on (the load balancer's first: every container of a
    cluster is on the same one)."""
    names = [c.spec.network for c in sorted(saved, key=lambda c: c.role != ps.LB) if c.spec and c.spec.network]
    if not names:
        return None
    net = await asyncio.to_thread(rt.get_network, names[0])
    if net is None:
        raise SnapshotError(f"docker network {names[0]} of the cluster is gone")
    return sn.network_of(net)


async def _now(kube: Kube, rt: ContainerRuntime, m: dict[str, Any], namespace: str, cluster: str,
               progress: dict[str, Any] | None) -> sn.Now:
    c = await kube.get(CLUSTER, namespace, cluster)
    boxes = {b.name: sn.box_of(b.labels, b.status, b.image) for b in await asyncio.to_thread(
        rt.list_containers, {CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: namespace})}
    for s in sn.saved(m):  # a namesake of another cluster would be in the way
        if s.name not in boxes:
            info = await asyncio.to_thread(rt.get_container, s.name)
            if info is not None:
                boxes[s.name] = sn.box_of(info.labels, info.status, info.image)
    net = sn.saved_network(m)
    ids = {s.image: await asyncio.to_thread(rt.image_id, s.image) for s in sn.saved(m)}
    return sn.Now(cluster_uid=(c or {}).get("metadata", {}).get("uid"), boxes=boxes,
                  network=await asyncio.to_thread(rt.get_network, net.name) if net else None, image_ids=ids,
                  progress=progress)


async def _sync(rt: ContainerRuntime, src: Path, boxes: list[sn.Saved], steps: Steps) -> None:
    with steps.step(f"Restoring the storage of {len(boxes)} container(s) ⏪"):
        try:
            for c in boxes:
                paths = await asyncio.to_thread(rt.storage_paths, c.name)
                for mount in c.mounts:
                    if mount not in paths:
                        raise SnapshotError(f"{c.name} has no {mount} any more")
                    steps.update(f"{c.name} {mount}")
                    await asyncio.to_thread(treesync.sync_tree, src / c.name / sn.folder_of(mount), paths[mount])
        except (RuntimeError_, treesync.TreeError, OSError) as e:
            raise SnapshotError(f"restoring: {e} (run restore again)") from e


async def restore(kube: Kube, rt: ContainerRuntime, root: Path, namespace: str, cluster: str, name: str,
                  steps: Steps, timeout: float) -> None:
    """In place (the Cluster exists): check the snapshot and today's containers, stop the cluster (killed: its
    state is overwritten), make each container's storage equal to the snapshot's copy again, start it. Recreate
    (the Cluster was deleted): see _recreate. Run again after an interruption."""
    src = folder(root, namespace, cluster, name)
    if not src.is_dir():
        if src.with_name(name + ".partial").exists():
            raise SnapshotError(f"snapshot {name} of {namespace}/{cluster} is incomplete (its creation was "
                                "interrupted): delete it")
        raise SnapshotError(f"no snapshot {name} of {namespace}/{cluster} (capd-py snapshot list {cluster})")
    if not (src / sn.MANIFEST).exists():
        raise SnapshotError(f"snapshot {name} of {namespace}/{cluster} is incomplete (no {sn.MANIFEST}): delete it")
    m = json.loads((src / sn.MANIFEST).read_text())
    folders = {f"{c.name}/{p.name}" for c in sn.saved(m) if (src / c.name).is_dir() for p in (src / c.name).iterdir()}
    progress_file = src / sn.PROGRESS
    progress = json.loads(progress_file.read_text()) if progress_file.exists() else None
    plan = sn.restore_plan(m, folders, (src / sn.OBJECTS).exists(), await _now(kube, rt, m, namespace, cluster,
                                                                                  progress))
    if plan.problems:
        how = "in place" if plan.mode == sn.IN_PLACE else "(recreating the deleted cluster)"
        raise SnapshotError(f"cannot restore {how}: " + "; ".join(plan.problems))
    if plan.mode == sn.RECREATE:
        await _recreate(kube, rt, src, m, plan, progress, steps, timeout)
        return
    await _drive(kube, rt, ps.STOP, namespace, cluster, steps, timeout, stop_timeout=0)
    await _sync(rt, src, sn.saved(m), steps)
    await _drive(kube, rt, ps.START, namespace, cluster, steps, timeout)


async def _recreate(kube: Kube, rt: ContainerRuntime, src: Path, m: dict[str, Any], plan: sn.Plan,
                    progress: dict[str, Any] | None, steps: Steps, timeout: float) -> None:
    """The deleted cluster back: its network, its containers (created stopped, same names, addresses, host ports),
    their storage, its objects (paused, power state "stopped", as saved), then `start cluster`'s way up to
    Available. The phase reached is recorded in restore.json first, so a run killed at any point and run again
    goes on from there; the file goes when the cluster is back."""
    namespace, cluster = str(m["namespace"]), str(m["cluster"])
    state: dict[str, Any] = dict(progress or {"phase": sn.STORAGE})

    def record(**kw: Any) -> None:
        state.update(kw)
        (src / sn.PROGRESS).write_text(json.dumps(state))
    record()
    boxes = {c.name: c for c in sn.saved(m)}
    try:
        net = sn.saved_network(m)
        if plan.make_network and net is not None:
            with steps.step(f"Creating docker network {net.name} ({net.subnet}) 🌐"):
                await asyncio.to_thread(rt.create_network, net.name, net.labels, net.subnet, net.subnet6)
        if plan.stop:
            with steps.step(f"Stopping {len(plan.stop)} container(s) left running ⏹"):
                await asyncio.gather(*(asyncio.to_thread(rt.stop_container, n, 0) for n in plan.stop))
        if plan.create:
            with steps.step(f"Creating {len(plan.create)} container(s), stopped: {', '.join(plan.create)} 📦"):
                for cname in plan.create:
                    spec = boxes[cname].spec
                    assert spec is not None  # restore_plan refuses snapshots without specs
                    await asyncio.to_thread(rt.create_container, spec)
    except RuntimeError_ as e:
        raise SnapshotError(f"{e} (run restore again)") from e
    if plan.sync:
        await _sync(rt, src, [boxes[n] for n in plan.sync], steps)
    if plan.objects:
        record(phase=sn.OBJECTS_PHASE)
        graph = Graph(json.loads((src / sn.OBJECTS).read_text()))
        sequence = graph.sequence()
        total = sum(len(g) for g in sequence)
        new_uids: dict[str, str] = {}
        known: set[str] = set()
        for ns, ref in graph.outside_owners():  # e.g. the ClusterResourceSet of a binding: today's, by name
            gvk = of_object(ref)
            have = await kube.get(gvk, ns or None, ref["name"]) if gvk and ref.get("name") else None
            if have is not None:
                new_uids[ref["uid"]] = have["metadata"]["uid"]
        with steps.step(f"Creating {total} management objects, paused 📜"):
            done = 0
            for group in sequence:
                for node in group:
                    await move.ensure_namespace(kube, node.identity.namespace, known)
                    await move.copy_object(kube, node, new_uids)
                    if node.kind == "Cluster":  # from now on a Cluster of that name is this restore's own
                        record(clusterUID=new_uids[node.uid])
                    done += 1
                    steps.update(f"{done}/{total}")
    record(phase=sn.START)
    await _drive(kube, rt, ps.START, namespace, cluster, steps, timeout)
    (src / sn.PROGRESS).unlink(missing_ok=True)
