"""The two shapes of capd-py's infrastructure kinds, and where each keeps its docker fields (pure).

Upstream v1.14 added DevCluster / DevMachine / DevMachinePool (and their templates): one kind per role whose
`spec.backend` says how it is made, `docker` (the Docker* kinds' fields moved under `spec.backend.docker`) or
`inMemory`. Upstream's Docker* controllers convert their objects into Dev* ones and run the docker backend; capd-py
does the mirror image with no conversion: the one docker implementation (capd_py/reconcile/docker*.py and
capd_py/controllers/docker*.py) reads the docker fields through `docker_spec` / `pool_template` and writes the kinds
an `InfraKinds` names, so DockerCluster and DevCluster{backend.docker} run the same code (docs/dev-kinds.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capd_py.api.gvk import (
    DEV_CLUSTER,
    DEV_MACHINE,
    DEV_MACHINE_POOL,
    DEV_MACHINE_TEMPLATE,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    DOCKER_MACHINE_POOL,
    DOCKER_MACHINE_TEMPLATE,
    GVK,
)

BACKEND_DOCKER = "docker"
BACKEND_IN_MEMORY = "inMemory"


@dataclass(frozen=True)
class InfraKinds:
    """The kinds one flavour of the infrastructure provider reconciles together: a cluster's machines are of
    `machine`, a pool's instances too, its load balancer follows the control-plane `machine`s."""
    cluster: GVK
    machine: GVK
    machine_template: GVK
    pool: GVK

    @property
    def dev(self) -> bool:
        return self.cluster.kind == DEV_CLUSTER.kind


DOCKER = InfraKinds(DOCKER_CLUSTER, DOCKER_MACHINE, DOCKER_MACHINE_TEMPLATE, DOCKER_MACHINE_POOL)
DEV = InfraKinds(DEV_CLUSTER, DEV_MACHINE, DEV_MACHINE_TEMPLATE, DEV_MACHINE_POOL)
_DEV_KINDS = frozenset(("DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate", "DevMachinePool",
                        "DevMachinePoolTemplate"))


def is_dev(obj: dict[str, Any] | None) -> bool:
    return str((obj or {}).get("kind") or "") in _DEV_KINDS


def _spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    s = (obj or {}).get("spec")
    return s if isinstance(s, dict) else {}


def backend(obj: dict[str, Any] | None) -> str:
    """`inMemory` for a Dev* object whose spec.backend says so, else `docker` (the Docker* kinds; a Dev* object
    without a backend is docker, upstream's default)."""
    if is_dev(obj) and isinstance((_spec(obj).get("backend") or {}).get(BACKEND_IN_MEMORY), dict):
        return BACKEND_IN_MEMORY
    return BACKEND_DOCKER


def docker_spec(obj: dict[str, Any] | None) -> dict[str, Any]:
    """The docker fields of a DockerCluster / DockerMachine (its spec) or a DevCluster / DevMachine
    (spec.backend.docker): loadBalancer, failureDomains; customImage, preLoadImages, extraMounts, bootstrapTimeout.
    `spec.controlPlaneEndpoint` and `spec.providerID` are in `spec` for both."""
    if is_dev(obj):
        d = (_spec(obj).get("backend") or {}).get(BACKEND_DOCKER)
        return d if isinstance(d, dict) else {}
    return _spec(obj)


def pool_template(obj: dict[str, Any] | None) -> dict[str, Any]:
    """What each instance of a pool is made from: a DockerMachinePool's spec.template, a DevMachinePool's
    spec.backend.docker (customImage, preLoadImages, extraMounts)."""
    if is_dev(obj):
        return docker_spec(obj)
    t = _spec(obj).get("template")
    return t if isinstance(t, dict) else {}


def instance_spec(pool: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """The spec of one pool instance holding the docker `fields`: a DockerMachine's spec, a DevMachine's
    spec.backend.docker."""
    return {"backend": {BACKEND_DOCKER: fields}} if is_dev(pool) else dict(fields)


def kinds_of(obj_or_kind: dict[str, Any] | str | None) -> InfraKinds:
    """The flavour an object (or kind name) belongs to."""
    kind = obj_or_kind if isinstance(obj_or_kind, str) else str((obj_or_kind or {}).get("kind") or "")
    return DEV if kind in _DEV_KINDS else DOCKER
