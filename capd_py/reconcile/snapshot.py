"""Snapshots of a stopped cluster's containers (pure: the manifest and what a restore needs).

A snapshot is a folder `<capd-py home>/snapshots/<namespace>/<cluster>/<name>/` holding, per container, a copy of
each of its writable storage folders (docker's writable layer "/" and each volume, e.g. a node's "/var" with etcd,
containerd and the kubelet) and `manifest.json`, written last: a folder without it was interrupted (incomplete).
Copies are taken while every container is stopped (`capd-py stop cluster`'s way), so the etcd members of all
control planes are consistent with each other and with the nodes' kubelets and containerd.

Format 2 also keeps what recreating a deleted cluster needs: per container the ContainerSpec that makes it again
as it was (image, labels, network and static address, pinned host ports, privilege mode, extra mounts), the
cluster's docker network (name, labels, subnets) and, in `objects.json`, the cluster's management objects and
Secrets as they were while stopped (paused, power state "stopped"; the object graph of `capd-py move`).

A restore is one of two (`restore_plan`):
- in place: the Cluster exists; the same containers must exist (`restore_problems`); storage synced back;
- recreate: the Cluster is gone (`capd-py delete cluster`): network, containers (created, not started), storage,
  the objects (paused, owner references re-linked to the new UIDs), then `start cluster`'s way up. Progress is
  kept in `restore.json` inside the snapshot (the phase reached, the new Cluster's UID) so a killed restore run
  again goes on, and a Cluster of that name made by someone else is told apart from the one it made itself.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from capd_py.api.containers import ContainerSpec, Mount, NetworkInfo, PortMapping
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE

MANIFEST = "manifest.json"
OBJECTS = "objects.json"      # the management objects (Secrets included: written 0600)
PROGRESS = "restore.json"     # a recreating restore's progress, removed when it is done
VERSION = 2
READS = (1, 2)                # format 1 (no specs, network or objects) can still be restored in place
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
    spec: ContainerSpec | None = None   # what makes it again (format 2)


@dataclass(frozen=True)
class SavedNetwork:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    subnet: str = ""
    subnet6: str = ""


def network_of(net: NetworkInfo) -> SavedNetwork:
    return SavedNetwork(net.name, dict(net.labels), net.subnet, net.subnet6)


def spec_dict(spec: ContainerSpec) -> dict[str, Any]:
    return asdict(spec)


def spec_from(d: dict[str, Any]) -> ContainerSpec:
    """The inverse of spec_dict (JSON gives lists where the spec has tuples)."""
    return ContainerSpec(**{**d, "mounts": tuple(Mount(**m) for m in d.get("mounts") or ()),
                            "ports": tuple(PortMapping(**p) for p in d.get("ports") or ()),
                            "command": tuple(d.get("command") or ()), "entrypoint": tuple(d.get("entrypoint") or ()),
                            "labels": dict(d.get("labels") or {}), "env": dict(d.get("env") or {}),
                            "sysctls": dict(d.get("sysctls") or {})})


def manifest(namespace: str, cluster: str, name: str, created: str, containers: list[Saved],
             size: int, network: SavedNetwork | None = None, objects: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": VERSION, "namespace": namespace, "cluster": cluster, "name": name, "created": created,
        "bytes": size, "containers": [{"name": c.name, "role": c.role, "image": c.image, "imageID": c.image_id,
                                       "mounts": list(c.mounts)} | ({"spec": spec_dict(c.spec)} if c.spec else {})
                                      for c in containers],
        "objects": objects}
    if network is not None:
        out["network"] = asdict(network)
    return out


def saved(m: dict[str, Any]) -> list[Saved]:
    return [Saved(str(c["name"]), str(c.get("role", "")), str(c["image"]), str(c.get("imageID", "")),
                  tuple(c.get("mounts") or ()), spec_from(c["spec"]) if c.get("spec") else None)
            for c in m.get("containers") or []]


def saved_network(m: dict[str, Any]) -> SavedNetwork | None:
    n = m.get("network")
    return SavedNetwork(**n) if n else None


def restore_problems(m: dict[str, Any], folders: set[str], now: dict[str, str | None],
                     image_ids: dict[str, str | None]) -> list[str]:
    """Why the snapshot cannot be restored in place ([] = it can). `folders`: "<container>/<folder>" present in the
    snapshot; `now`: the cluster's containers today -> their image reference (None: gone); `image_ids`: image
    reference -> the local image ID (None: the image is gone)."""
    if m.get("version") not in READS:
        return [version_problem(m)]
    out = storage_problems(m, folders)
    boxes = saved(m)
    for c in boxes:
        if now.get(c.name) is None:
            out.append(f"container {c.name} is gone: a restore in place needs the snapshot's containers (the cluster "
                       "was deleted or that machine replaced since)")
            continue
        out += image_problems(c, image_ids)
    extra = sorted(set(now) - {c.name for c in boxes})
    if extra:
        out.append("containers made after the snapshot: " + ", ".join(extra)
                   + " (scale the cluster back to the snapshot's machines first)")
    return out


def version_problem(m: dict[str, Any]) -> str:
    return f"snapshot format version {m.get('version')!r}, this capd-py reads {', '.join(map(str, READS))}"


def storage_problems(m: dict[str, Any], folders: set[str]) -> list[str]:
    out: list[str] = []
    boxes = saved(m)
    if not boxes:
        out.append("the snapshot holds no containers")
    for c in boxes:
        for mount in c.mounts:
            if f"{c.name}/{folder_of(mount)}" not in folders:
                out.append(f"the snapshot lacks {c.name}'s {mount} (incomplete: delete it)")
    return out


def image_problems(c: Saved, image_ids: dict[str, str | None]) -> list[str]:
    have = image_ids.get(c.image)
    if have is None:
        return [f"image {c.image} is gone: build it again (make images) before restoring"]
    if c.image_id and have != c.image_id:
        return [f"image {c.image} is now {have[:19]}, the snapshot was taken on {c.image_id[:19]}"]
    return []


# -- restore: in place, or recreating a deleted cluster -----------------------------------------------------------

IN_PLACE, RECREATE = "in-place", "recreate"
# restore.json phases, in order: each names the first part not known to be done
STORAGE, OBJECTS_PHASE, START = "storage", "objects", "start"
_STOPPED = ("created", "exited", "dead")


@dataclass(frozen=True)
class Box:
    """A container today: its labels' namespace and cluster, status and image reference."""
    namespace: str
    cluster: str
    status: str
    image: str


def box_of(labels: dict[str, str], status: str, image: str) -> Box:
    return Box(labels.get(CONTAINER_NAMESPACE, ""), labels.get(CONTAINER_CLUSTER, ""), status, image)


@dataclass(frozen=True)
class Now:
    cluster_uid: str | None                 # the Cluster of the snapshot's namespace/name today (None: absent)
    boxes: dict[str, Box]                   # the cluster's containers (by labels) and any of the snapshot's names
    network: NetworkInfo | None             # the docker network of the snapshot's network name
    image_ids: dict[str, str | None]        # image reference -> local image ID (None: gone)
    progress: dict[str, Any] | None = None  # restore.json (None: no recreating restore under way)


@dataclass(frozen=True)
class Plan:
    mode: str
    problems: tuple[str, ...] = ()
    make_network: bool = False
    stop: tuple[str, ...] = ()       # ours and not stopped: stopped before their storage is written
    create: tuple[str, ...] = ()     # missing: created (not started) from the snapshot's spec
    sync: tuple[str, ...] = ()       # containers whose storage is made the snapshot's
    objects: bool = False            # create the management objects (those present are updated)


def restore_plan(m: dict[str, Any], folders: set[str], objects_saved: bool, now: Now) -> Plan:
    """What `snapshot restore` does (pure). `folders`: "<container>/<folder>" present in the snapshot;
    `objects_saved`: its objects.json exists. In place when the Cluster exists and no recreating restore is
    under way; otherwise recreate, refused with every reason at once when something is missing or in the way."""
    if m.get("version") not in READS:
        return Plan(RECREATE, (version_problem(m),))
    ns, cluster = str(m.get("namespace", "")), str(m.get("cluster", ""))
    boxes = saved(m)
    ours = {n: b for n, b in now.boxes.items() if (b.namespace, b.cluster) == (ns, cluster)}
    under_way = now.progress is not None
    if now.cluster_uid is not None and not under_way:
        return Plan(IN_PLACE, tuple(restore_problems(m, folders, {n: b.image for n, b in ours.items()},
                                                     now.image_ids)),
                    sync=tuple(c.name for c in boxes))
    problems = storage_problems(m, folders)
    net = saved_network(m)
    if not objects_saved or net is None or any(c.spec is None for c in boxes):
        problems.append("the snapshot holds no management objects or container specs (taken by a capd-py before "
                        "format 2): it can only be restored in place, onto the cluster it was taken of")
    for c in boxes:
        problems += image_problems(c, now.image_ids)
    if now.cluster_uid is not None and now.cluster_uid != (now.progress or {}).get("clusterUID"):
        problems.append(f"Cluster {ns}/{cluster} exists and is not the one this restore made: another cluster "
                        "took the name since (delete it first)")
    names = {c.name for c in boxes}
    for n, b in sorted(now.boxes.items()):
        if n in names and (b.namespace, b.cluster) != (ns, cluster):
            problems.append(f"container name {n} is in use by cluster {b.namespace}/{b.cluster}")
    extra = sorted(set(ours) - names)
    if extra:
        problems.append("containers of the cluster not in the snapshot: " + ", ".join(extra) + " (remove them: "
                        "docker rm -f)")
    if net is not None and now.network is not None:
        owner = (now.network.labels.get(CONTAINER_NAMESPACE), now.network.labels.get(CONTAINER_CLUSTER))
        if owner[1] and owner != (ns, cluster):
            problems.append(f"docker network {net.name} belongs to cluster {owner[0]}/{owner[1]}")
        elif now.network.subnet != net.subnet:
            problems.append(f"docker network {net.name} has subnet {now.network.subnet}, the snapshot's addresses "
                            f"are in {net.subnet} (remove the network)")
    if problems:
        return Plan(RECREATE, tuple(problems))
    phase = (now.progress or {}).get("phase", STORAGE)
    if phase != STORAGE and now.cluster_uid is None:
        phase = STORAGE  # the Cluster it made was deleted again (with its containers): everything anew
    if phase == START:
        return Plan(RECREATE)
    missing = tuple(c.name for c in boxes if c.name not in ours)
    if phase == OBJECTS_PHASE:  # the storage was written; a container removed since is made and filled again
        return Plan(RECREATE, make_network=now.network is None, create=missing, sync=missing, objects=True)
    return Plan(RECREATE, make_network=now.network is None,
                stop=tuple(c.name for c in boxes if c.name in ours and ours[c.name].status not in _STOPPED),
                create=missing, sync=tuple(c.name for c in boxes), objects=True)


def human(size: int) -> str:
    n = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
