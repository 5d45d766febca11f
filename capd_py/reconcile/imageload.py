"""Loading local docker images into node containers' containerd (pure parts): what `capd-py load image`
and a DockerMachine's `spec.preLoadImages` do, like `kind load docker-image` and upstream CAPD.

Nothing is ever pulled: an image comes from the host's docker daemon (`docker save`) and goes into the
node's containerd with `ctr images import`. A node that already has an image with the same ID is skipped,
as kind does: docker's image ID is the digest of the image's config, and containerd keeps that config
under the same digest (what the CRI reports as the image's ID), so equal digests mean the same image.

Images loaded into a cluster with `capd-py load image` are recorded on its Cluster (RECORDED_ANNOTATION),
so machines created later get them at boot too, like their `spec.preLoadImages`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api.infrakinds import docker_spec

# On the Cluster: the image references `capd-py load image` loaded into every node, comma-separated (image
# references never contain commas). Read by the DockerMachine controller when a new node boots.
RECORDED_ANNOTATION = "infrastructure.cluster.x-k8s.io/capd-py-load-images"

CTR = ("ctr", "--namespace=k8s.io")
LIST_COMMAND = [*CTR, "images", "ls"]
# `--all-platforms`: a `docker save` tarball holds one platform anyway, and without it ctr 1.6 refuses a
# tarball whose platform it does not recognise as its own; the import unpacks into the default snapshotter,
# the one the CRI uses.
IMPORT_COMMAND = [*CTR, "images", "import", "--all-platforms", "-"]
IMPORT_TIMEOUT = 600.0

SOURCE_SPEC = "spec.preLoadImages"
SOURCE_RECORDED = f"the Cluster's {RECORDED_ANNOTATION} annotation (capd-py load image)"


def content_command(digest: str) -> list[str]:
    return [*CTR, "content", "get", digest]


def normalize(ref: str) -> str:
    """The name containerd gives a docker reference (`ctr import` of a `docker save` tarball, the CRI):
    `busybox` -> `docker.io/library/busybox:latest`, `capd-py/echo:v1` -> `docker.io/capd-py/echo:v1`,
    `registry.k8s.io/pause:3.10` unchanged (the first component names a registry when it has a `.` or `:`
    or is `localhost`)."""
    name = ref if "/" in ref else f"library/{ref}"
    first = name.split("/", 1)[0]
    if not ("." in first or ":" in first or first == "localhost"):
        name = f"docker.io/{name}"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last and "@" not in name:
        name += ":latest"
    return name


def parse_list(output: str) -> dict[str, str]:
    """`ctr images ls` -> {image name: manifest (or index) digest}. Columns: REF TYPE DIGEST SIZE ..."""
    out: dict[str, str] = {}
    for line in output.splitlines():
        cols = line.split()
        if len(cols) >= 3 and cols[0] != "REF" and cols[2].startswith("sha256:"):
            out[cols[0]] = cols[2]
    return out


def next_digest(content: str, arch: str = "amd64") -> tuple[str, str] | None:
    """From a manifest: ("config", its config digest); from an index / manifest list: ("manifest", the
    digest of the linux/`arch` manifest, else the first); None when unreadable."""
    try:
        doc = json.loads(content)
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    cfg = doc.get("config")
    if isinstance(cfg, dict) and isinstance(cfg.get("digest"), str):
        return ("config", cfg["digest"])
    manifests = [m for m in doc.get("manifests") or [] if isinstance(m, dict) and isinstance(m.get("digest"), str)]
    if not manifests:
        return None
    for m in manifests:
        p = m.get("platform") or {}
        if p.get("os") == "linux" and p.get("architecture") == arch:
            return ("manifest", m["digest"])
    return ("manifest", manifests[0]["digest"])


@dataclass(frozen=True)
class Outcome:
    """What happened to one image on one node: "present" (same ID already there: skipped), "loaded"
    (imported and read back with the right ID) or "failed" (`detail` says why)."""
    node: str
    ref: str
    image_id: str
    result: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.result != "failed"


def plan(images: Mapping[str, str], present: Mapping[str, str | None]) -> list[str]:
    """The references a node must get: those whose ID in its containerd (`present`, by reference; None when
    absent) differs from the local image's (`images`)."""
    return [ref for ref, iid in images.items() if present.get(ref) != iid]


def unique(refs: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(r.strip() for r in refs if r and r.strip()))


# --- recorded on the Cluster ---------------------------------------------------------------------------

def recorded(cluster: Mapping[str, Any] | None) -> list[str]:
    ann = ((cluster or {}).get("metadata") or {}).get("annotations") or {}
    return unique(str(ann.get(RECORDED_ANNOTATION) or "").split(","))


def record(cluster: Mapping[str, Any], refs: Iterable[str]) -> str | None:
    """The annotation value with `refs` added (order kept), or None when they are all recorded already."""
    have = recorded(cluster)
    new = unique([*have, *refs])
    return None if new == have else ",".join(new)


# --- at boot ---------------------------------------------------------------------------------------------

def boot_images(dm: Mapping[str, Any], cluster: Mapping[str, Any] | None) -> dict[str, str]:
    """{reference: source} a new node gets before its bootstrap runs: the DockerMachine's spec.preLoadImages
    (upstream's field) and the images recorded on its Cluster by `capd-py load image`."""
    out = {r: SOURCE_SPEC for r in unique(str(x) for x in docker_spec(dict(dm)).get("preLoadImages") or [])}
    for r in recorded(cluster):
        out.setdefault(r, SOURCE_RECORDED)
    return out


@dataclass(frozen=True)
class BootDecision:
    """`load`: {reference: local image ID} to load now. `blocked`: a spec.preLoadImages image the docker daemon
    does not have stops the bootstrap (as upstream, whose pre-load failure fails the reconcile) with `message`,
    looked at again after `requeue_after`. `skipped`: recorded images gone from the daemon since they were
    loaded (removed or renamed): the node boots without them, reported in an Event, not a reason to keep a
    new node from joining."""
    load: dict[str, str] = field(default_factory=dict)
    blocked: bool = False
    message: str = ""
    skipped: list[str] = field(default_factory=list)
    requeue_after: float | None = None


PRELOAD_RECHECK_SECONDS = 15.0


def boot_decision(wanted: Mapping[str, str], local_ids: Mapping[str, str | None]) -> BootDecision:
    """`wanted` from boot_images, `local_ids` the docker daemon's image ID per reference (None: absent)."""
    load = {r: iid for r in wanted if (iid := local_ids.get(r))}
    missing_spec = [r for r, src in wanted.items() if src == SOURCE_SPEC and not local_ids.get(r)]
    skipped = [r for r, src in wanted.items() if src != SOURCE_SPEC and not local_ids.get(r)]
    if missing_spec:
        names = ", ".join(missing_spec)
        msg = (f"pre-loading images: {names} (spec.preLoadImages) not present in the local docker daemon and "
               "capd-py never pulls images: build, tag or `docker load` it (or remove it from "
               "spec.preLoadImages); the bootstrap starts once it exists")
        return BootDecision(load, True, msg, skipped, PRELOAD_RECHECK_SECONDS)
    return BootDecision(load, False, "", skipped)


def failed_message(outcomes: Iterable[Outcome]) -> str:
    bad = [o for o in outcomes if not o.ok]
    return "; ".join(f"{o.ref}: {o.detail}" for o in bad)
