"""`capd-py snapshot create|restore|list|delete`: copies of a stopped cluster's container storage under the capd-py
home (what is kept and what a restore needs: capd_py/reconcile/snapshot.py). Stopping and starting are
`capd-py stop|start cluster`'s (capd_py/cli/power.py)."""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE
from capd_py.cli import power
from capd_py.cli.steps import Steps
from capd_py.kube.client import Kube
from capd_py.reconcile import powerstate as ps
from capd_py.reconcile import snapshot as sn
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
                saved.append(sn.Saved(cname, role, image, image_id or "", tuple(sorted(paths))))
        except (RuntimeError_, treesync.TreeError, OSError) as e:
            raise SnapshotError(f"copying: {e} (the partial copy is in {partial}; run create again)") from e
    size = await asyncio.to_thread(treesync.tree_size, partial)
    created = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (partial / sn.MANIFEST).write_text(json.dumps(sn.manifest(namespace, cluster, name, created, saved, size),
                                                  indent=1))
    partial.rename(dest)
    if was_running:
        await _drive(kube, rt, ps.START, namespace, cluster, steps, timeout)
    return dest, size


async def restore(kube: Kube, rt: ContainerRuntime, root: Path, namespace: str, cluster: str, name: str,
                  steps: Steps, timeout: float) -> None:
    """Check the snapshot and today's containers, stop the cluster (killed: its state is overwritten), make each
    container's storage equal to the snapshot's copy again, start it. Run again after an interruption."""
    src = folder(root, namespace, cluster, name)
    if not src.is_dir():
        if src.with_name(name + ".partial").exists():
            raise SnapshotError(f"snapshot {name} of {namespace}/{cluster} is incomplete (its creation was "
                                "interrupted): delete it")
        raise SnapshotError(f"no snapshot {name} of {namespace}/{cluster} (capd-py snapshot list {cluster})")
    if not (src / sn.MANIFEST).exists():
        raise SnapshotError(f"snapshot {name} of {namespace}/{cluster} is incomplete (no {sn.MANIFEST}): delete it")
    m = json.loads((src / sn.MANIFEST).read_text())
    boxes = await asyncio.to_thread(_containers, rt, namespace, cluster)
    folders = {f"{c.name}/{p.name}" for c in sn.saved(m) if (src / c.name).is_dir() for p in (src / c.name).iterdir()}
    images = {c.image for c in sn.saved(m)}
    ids = {i: await asyncio.to_thread(rt.image_id, i) for i in images}
    problems = sn.restore_problems(m, folders, {n: img for n, (_, img) in boxes.items()}, ids)
    if problems:
        raise SnapshotError("cannot restore in place: " + "; ".join(problems))
    await _drive(kube, rt, ps.STOP, namespace, cluster, steps, timeout, stop_timeout=0)
    with steps.step(f"Restoring the storage of {len(boxes)} container(s) ⏪"):
        try:
            for c in sn.saved(m):
                paths = await asyncio.to_thread(rt.storage_paths, c.name)
                for mount in c.mounts:
                    if mount not in paths:
                        raise SnapshotError(f"{c.name} has no {mount} any more")
                    steps.update(f"{c.name} {mount}")
                    await asyncio.to_thread(treesync.sync_tree, src / c.name / sn.folder_of(mount), paths[mount])
        except (RuntimeError_, treesync.TreeError, OSError) as e:
            raise SnapshotError(f"restoring: {e} (run restore again)") from e
    await _drive(kube, rt, ps.START, namespace, cluster, steps, timeout)
