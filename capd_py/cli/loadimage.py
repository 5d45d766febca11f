"""`capd-py load image IMAGE... --cluster NAME [--nodes n1,n2] [-n NS]`: local docker images into every node of a
workload cluster, like `kind load docker-image` (no registry is ever involved).

Each node's containerd is asked first; an image it has with the same ID is skipped. Each missing image is
`docker save`d once and imported into the nodes that lack it in parallel (capd_py/runtime/images.py). Loading
into the whole cluster (no --nodes) also records the references on the Cluster (annotation
`infrastructure.cluster.x-k8s.io/capd-py-load-images`), so machines created later load them at boot before
their bootstrap, as they do their DockerMachine's spec.preLoadImages. The record is written before the nodes
are loaded, so a machine booting meanwhile gets the image too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from capd_py.api.gvk import CLUSTER
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_MACHINE, CONTAINER_NAMESPACE
from capd_py.reconcile import imageload
from capd_py.reconcile.imageload import Outcome
from capd_py.runtime import images
from capd_py.runtime.protocol import ContainerRuntime


class LoadImageError(Exception):
    """Nothing was loaded: say why (exit 1)."""


def cluster_nodes(runtime: ContainerRuntime, namespace: str, cluster: str) -> list[str]:
    """The cluster's node containers (one per Machine, by capd-py's labels), by name."""
    found = runtime.list_containers(labels={CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: namespace,
                                            CONTAINER_MACHINE: ""})
    return sorted(c.name for c in found)


def select_nodes(nodes: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """--nodes: each must be one of the cluster's node containers (kind: "unknown node")."""
    if not wanted:
        return list(nodes)
    unknown = [n for n in wanted if n not in nodes]
    if unknown:
        raise LoadImageError(f"unknown node(s) {', '.join(unknown)}; the cluster's nodes are: "
                             f"{', '.join(nodes) or 'none'}")
    return list(dict.fromkeys(wanted))


def resolve(runtime: ContainerRuntime, refs: Sequence[str]) -> dict[str, str]:
    """{reference: local image ID}; every image must be in the local docker daemon (nothing is pulled)."""
    ids = images.local_ids(runtime, list(dict.fromkeys(refs)))
    missing = [r for r, i in ids.items() if i is None]
    if missing:
        raise LoadImageError(f"image(s) not present locally: {', '.join(missing)} (capd-py never pulls: "
                             "docker build / docker tag / docker load it first)")
    return {r: i for r, i in ids.items() if i is not None}


async def record(kube: Any, namespace: str, cluster: str, refs: Sequence[str], attempts: int = 5) -> bool:
    """Add `refs` to the Cluster's recorded images (optimistic concurrency: retried on a conflict). Returns
    whether the annotation changed. Raises LoadImageError when the Cluster does not exist."""
    from capd_py.kube.client import KubeError
    for attempt in range(attempts):
        obj = await kube.get(CLUSTER, namespace, cluster)
        if obj is None:
            raise LoadImageError(f"cluster {namespace}/{cluster} not found in the management cluster")
        value = imageload.record(obj, refs)
        if value is None:
            return False
        patch = {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"],
                              "annotations": {imageload.RECORDED_ANNOTATION: value}}}
        try:
            await kube.merge_patch(CLUSTER, namespace, cluster, patch)
            return True
        except KubeError as e:
            if not e.conflict or attempt == attempts - 1:
                raise
    return False


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)
    recorded: bool = False

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def table(self) -> str:
        """stdout: one line per node and image, `NODE IMAGE RESULT [DETAIL]` (tab-separated)."""
        return "".join(f"{o.node}\t{o.ref}\t{o.result}" + (f"\t{o.detail}" if o.detail else "") + "\n"
                       for o in self.outcomes)


def load(runtime: ContainerRuntime, nodes: Sequence[str], ids: dict[str, str],
         progress: Callable[[str], None] | None = None) -> Report:
    return Report(images.load_images(runtime, nodes, ids, progress=progress))
