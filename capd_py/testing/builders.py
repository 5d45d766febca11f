"""Plain-dict builders of Cluster API objects for tests that need no API server (the unit tier's mappers and pure
decisions): one place for each kind's shape; a test module's own `cluster()` / `machine()` is a thin wrapper that
sets the defaults it cares about. Objects for a real API server (templates, MachineSets, KCPs, Nodes) are
capd_py/testing/core_objects.py."""

from __future__ import annotations

from typing import Any

from capd_py.api.gvk import CLUSTER, MACHINE
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE

Obj = dict[str, Any]
# (apiGroup, kind) of the references a Cluster makes
DOCKER_INFRA = ("infrastructure.cluster.x-k8s.io", "DockerCluster")
KUBEADM_CONTROL_PLANE = ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane")


def _metadata(name: str, ns: str, uid: str | None, generation: int | None, labels: dict[str, str] | None,
              deleted_at: str | None, **extra: Any) -> Obj:
    md: Obj = {"name": name, "namespace": ns}
    if uid is not None:
        md["uid"] = uid
    if generation is not None:
        md["generation"] = generation
    if labels is not None:
        md["labels"] = labels
    md.update({k: v for k, v in extra.items() if v is not None})
    if deleted_at is not None:
        md["deletionTimestamp"] = deleted_at
    return md


def cluster(name: str = "c1", ns: str = "ns", *, uid: str | None = None, generation: int | None = None,
            labels: dict[str, str] | None = None, infra: tuple[str, str] | None = DOCKER_INFRA,
            control_plane: tuple[str, str] | None = KUBEADM_CONTROL_PLANE, endpoint: Obj | None = None,
            status: Obj | None = None, deleted_at: str | None = None) -> Obj:
    """A Cluster `name` referencing infrastructure `infra` (apiGroup, kind) named like it and a control plane
    `control_plane` named `<name>-cp` (None: no reference); `status` None leaves the key out."""
    spec: Obj = {}
    if infra is not None:
        spec["infrastructureRef"] = {"apiGroup": infra[0], "kind": infra[1], "name": name}
    if control_plane is not None:
        spec["controlPlaneRef"] = {"apiGroup": control_plane[0], "kind": control_plane[1], "name": f"{name}-cp"}
    if endpoint:
        spec["controlPlaneEndpoint"] = endpoint
    out: Obj = {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                "metadata": _metadata(name, ns, uid, generation, labels, deleted_at), "spec": spec}
    if status is not None:
        out["status"] = status
    return out


def machine(name: str = "m1", ns: str = "ns", *, cluster: str | None = "c1", control_plane: bool = False,
            labels: dict[str, str] | None = None, uid: str | None = None, generation: int | None = None,
            created: str | None = None, annotations: dict[str, str] | None = None,
            owners: list[Obj] | None = None, resource_version: str | None = None, deleted_at: str | None = None,
            spec: Obj | None = None, status: Obj | None = None) -> Obj:
    """A Machine of Cluster `cluster`: the cluster-name label (and the control-plane one with `control_plane`)
    before `labels`, unless `labels` is given with `cluster` None (exactly those labels); `spec` (clusterName
    set from `cluster`) and `status` None leave the keys out."""
    if cluster is None:
        lbl = labels
    else:
        lbl = {CLUSTER_NAME: cluster, **({CONTROL_PLANE: ""} if control_plane else {}), **(labels or {})}
    md = _metadata(name, ns, uid, generation, lbl, deleted_at, creationTimestamp=created, annotations=annotations,
                   resourceVersion=resource_version, ownerReferences=owners)
    out: Obj = {"apiVersion": MACHINE.api_version, "kind": "Machine", "metadata": md}
    if spec is not None:
        out["spec"] = {"clusterName": cluster, **spec} if cluster is not None else spec
    if status is not None:
        out["status"] = status
    return out
