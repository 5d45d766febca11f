"""Snapshots of a stopped cluster's containers (pure: the manifest and what a restore needs).

A snapshot is a folder `<capd-py home>/snapshots/<namespace>/<cluster>/<name>/` holding, per container, a copy of
each of its writable storage folders (docker's writable layer "/" and each volume, e.g. a node's "/var" with etcd,
containerd and the kubelet) and `manifest.json`, written last: a folder without it was interrupted (incomplete).
Copies are taken while every container is stopped (`capd-py stop cluster`'s way), so the etcd members of all
control planes are consistent with each other and with the nodes' kubelets and containerd.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

MANIFEST = "manifest.json"
VERSION = 1
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


def name_problem(name: str) -> str | None:
    if not _NAME.match(name):
        return (f"snapshot name {name!r}: lower-case letters, digits, '.', '_' or '-', at most 63, starting and "
                "ending with a letter or digit")
    return None


def folder_of(mount: str) -> str:
    """The snapshot's folder name for a container's storage: "/" (the writable layer) -> rootfs, "/var" -> var."""
    return "rootfs" if mount == "/" else "vol" + mount.replace("/", "_")


@dataclass(frozen=True)
class Saved:
    """One container as the snapshot holds it."""
    name: str
    role: str
    image: str
    image_id: str
    mounts: tuple[str, ...]        # "/" and volume mount points, each saved in folder_of(mount)


def manifest(namespace: str, cluster: str, name: str, created: str, containers: list[Saved],
             size: int) -> dict[str, Any]:
    return {"version": VERSION, "namespace": namespace, "cluster": cluster, "name": name, "created": created,
            "bytes": size, "containers": [{"name": c.name, "role": c.role, "image": c.image, "imageID": c.image_id,
                                           "mounts": list(c.mounts)} for c in containers]}


def saved(m: dict[str, Any]) -> list[Saved]:
    return [Saved(str(c["name"]), str(c.get("role", "")), str(c["image"]), str(c.get("imageID", "")),
                  tuple(c.get("mounts") or ())) for c in m.get("containers") or []]


def restore_problems(m: dict[str, Any], folders: set[str], now: dict[str, str | None],
                     image_ids: dict[str, str | None]) -> list[str]:
    """Why the snapshot cannot be restored in place ([] = it can). `folders`: "<container>/<folder>" present in the
    snapshot; `now`: the cluster's containers today -> their image reference (None: gone); `image_ids`: image
    reference -> the local image ID (None: the image is gone)."""
    if m.get("version") != VERSION:
        return [f"snapshot format version {m.get('version')!r}, this capd-py reads {VERSION}"]
    out: list[str] = []
    boxes = saved(m)
    if not boxes:
        out.append("the snapshot holds no containers")
    for c in boxes:
        for mount in c.mounts:
            if f"{c.name}/{folder_of(mount)}" not in folders:
                out.append(f"the snapshot lacks {c.name}'s {mount} (incomplete: delete it)")
        if now.get(c.name) is None:
            out.append(f"container {c.name} is gone: a restore in place needs the snapshot's containers (the cluster "
                       "was deleted or that machine replaced since)")
            continue
        have = image_ids.get(c.image)
        if have is None:
            out.append(f"image {c.image} is gone: build it again (make images) before restoring")
        elif c.image_id and have != c.image_id:
            out.append(f"image {c.image} is now {have[:19]}, the snapshot was taken on {c.image_id[:19]}")
    extra = sorted(set(now) - {c.name for c in boxes})
    if extra:
        out.append("containers made after the snapshot: " + ", ".join(extra)
                   + " (scale the cluster back to the snapshot's machines first)")
    return out


def human(size: int) -> str:
    n = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
