"""Load local docker images into node containers' containerd, over the runtime Protocol (blocking), the way
`kind load docker-image` does: look in every node first (in parallel), `docker save` each image some node
lacks once, import it into those nodes in parallel, and read the result back. Used by `capd-py load image`
and by the DockerMachine controller for spec.preLoadImages (capd_py/reconcile/imageload.py has the rules).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from capd_py.reconcile import imageload
from capd_py.reconcile.imageload import Outcome
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_

READBACK_SECONDS = 5.0  # how long a just-imported image may take to show under its tag

log = logging.getLogger("capd_py.runtime.images")

# nodes worked on at once: each import is a docker exec streaming the tarball, mostly waiting on containerd
MAX_PARALLEL = 8


def local_ids(runtime: ContainerRuntime, refs: Sequence[str]) -> dict[str, str | None]:
    """The docker daemon's image ID of each reference (None: not present locally)."""
    return {r: runtime.image_id(r) for r in refs}


def node_ids(runtime: ContainerRuntime, node: str, refs: Sequence[str]) -> dict[str, str | None]:
    """The ID (config digest) of each reference in `node`'s containerd, None when it has no such image.
    Raises RuntimeError_ when containerd cannot be asked (container stopped, containerd not up)."""
    res = runtime.exec(node, imageload.LIST_COMMAND, timeout=60)
    if res.exit_code != 0:
        raise RuntimeError_(f"listing images in {node}: exit {res.exit_code}: {res.output.strip()[-300:]}")
    listed = imageload.parse_list(res.output)
    out: dict[str, str | None] = {}
    for ref in refs:
        digest: str | None = listed.get(imageload.normalize(ref))
        found: str | None = None
        for _ in range(3):  # index -> manifest -> config, at most
            if digest is None:
                break
            got = runtime.exec(node, imageload.content_command(digest), timeout=60)
            step = imageload.next_digest(got.output) if got.exit_code == 0 else None
            if step is None:
                break
            kind, digest = step
            if kind == "config":
                found = digest
                break
        out[ref] = found
    return out


class _Tarballs:
    """`docker save` of each image at most once, shared by every node that needs it."""

    def __init__(self, runtime: ContainerRuntime):
        self.runtime = runtime
        self.saved: dict[str, bytes | RuntimeError_] = {}

    def get(self, ref: str) -> bytes:
        if ref not in self.saved:
            try:
                self.saved[ref] = self.runtime.save_image(ref)
            except RuntimeError_ as e:
                self.saved[ref] = e
        got = self.saved[ref]
        if isinstance(got, RuntimeError_):
            raise got
        return got


def load_images(runtime: ContainerRuntime, nodes: Sequence[str], images: Mapping[str, str],
                parallel: int = MAX_PARALLEL, progress: Callable[[str], None] | None = None) -> list[Outcome]:
    """Load `images` ({reference: local image ID}, from local_ids) into each of `nodes`; a node that has an
    image with that ID already is skipped for it. One Outcome per (node, reference), nodes in the given
    order. Never raises for one node's trouble: that node's outcomes say "failed"."""
    say = progress or (lambda _msg: None)
    refs = list(images)
    workers = max(1, min(parallel, len(nodes)))

    def look(node: str) -> dict[str, str | None] | RuntimeError_:
        try:
            return node_ids(runtime, node, refs)
        except RuntimeError_ as e:
            return e

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="load-image") as pool:
        before = dict(zip(nodes, pool.map(look, nodes), strict=True))
    needed: dict[str, list[str]] = {}
    for node, have in before.items():
        if not isinstance(have, RuntimeError_):
            needed[node] = imageload.plan(images, have)
            for ref in needed[node]:
                say(f"Image: {ref!r} with ID {images[ref]!r} not yet present on node {node!r}, loading...")
    everywhere = all(not isinstance(h, RuntimeError_) for h in before.values())
    for ref in refs:
        if everywhere and not any(ref in n for n in needed.values()):
            say(f"Image: {ref!r} with ID {images[ref]!r} found to be already present on all nodes.")

    # saved once, before the parallel imports (a docker save of a large image is the slow part; doing it
    # under the pool would serialise the nodes behind it anyway)
    tarballs = _Tarballs(runtime)
    for ref in refs:
        if any(ref in n for n in needed.values()):
            try:
                tarballs.get(ref)
            except RuntimeError_:
                pass  # reported per node below

    def load(node: str) -> list[Outcome]:
        have = before[node]
        if isinstance(have, RuntimeError_):
            return [Outcome(node, r, images[r], "failed", str(have)) for r in refs]
        done: dict[str, Outcome] = {r: Outcome(node, r, images[r], "present") for r in refs if r not in needed[node]}
        for ref in needed[node]:
            try:
                res = runtime.exec(node, imageload.IMPORT_COMMAND, stdin=tarballs.get(ref),
                                   timeout=imageload.IMPORT_TIMEOUT)
            except RuntimeError_ as e:
                done[ref] = Outcome(node, ref, images[ref], "failed", str(e))
                continue
            if res.exit_code != 0:
                done[ref] = Outcome(node, ref, images[ref], "failed",
                                    f"ctr images import: exit {res.exit_code}: {res.output.strip()[-300:]}")
        todo = [r for r in needed[node] if r not in done]
        if todo:
            try:
                # containerd replaces a re-imported tag's record in two steps: read back until it has the new one
                # (seen on a loaded machine: right after an import of a rebuilt image the tag was briefly absent)
                after = Retrying(stop=stop_after_delay(READBACK_SECONDS), wait=wait_fixed(0.5),
                                 retry=retry_if_result(lambda got: any(got.get(x) != images[x] for x in todo)),
                                 retry_error_callback=lambda state: state.outcome.result() if state.outcome else {},
                                 )(node_ids, runtime, node, todo)
            except RuntimeError_ as e:
                after = {}
                for r in todo:
                    done[r] = Outcome(node, r, images[r], "failed", f"reading back: {e}")
            for r in todo:
                if r in done:
                    continue
                if after.get(r) == images[r]:
                    done[r] = Outcome(node, r, images[r], "loaded")
                else:
                    done[r] = Outcome(node, r, images[r], "failed", f"imported, but the node's containerd has "
                                      f"{imageload.normalize(r)} as {after.get(r) or 'nothing'}")
        return [done[r] for r in refs]

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="load-image") as pool:
        results = list(pool.map(load, nodes))
    out = [o for per_node in results for o in per_node]
    for o in out:
        if not o.ok:
            log.warning("loading %s into %s failed: %s", o.ref, o.node, o.detail)
    return out


def copy_image(source: ContainerRuntime, target: ContainerRuntime, ref: str) -> None:
    """`docker save REF` on one docker host streamed into `docker load` on another (capd-py never pulls); the
    reference must then be present on the target."""
    target.load_image(source.save_image_chunks(ref))
    if target.image_id(ref) is None:
        raise RuntimeError_(f"image {ref} was loaded but is not present under that reference on the target host")
