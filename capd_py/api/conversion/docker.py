"""infrastructure.cluster.x-k8s.io kinds of the Docker provider.

Rules from upstream test/infrastructure/docker/api/v1beta1/conversion.go (release-1.13 for the Docker* kinds,
v1.14.0 for the Dev* kinds): failure domains become a list, `ready` becomes status.initialization.provisioned,
conditions move as for the core kinds. The Dev* kinds convert as the Docker* kinds do, their docker fields one
level down (`spec.backend.docker`, upstream's Convert_v1beta*_DockerClusterBackendSpec); the in-memory backend's
fields are the same in both versions. Upstream serves DevMachinePool(Template) at v1beta2 only.
"""

from __future__ import annotations

from typing import Any

from capd_py.api.conversion.fields import (
    Obj,
    VersionResolver,
    failure_domains_down,
    failure_domains_up,
    get,
    status_down,
    status_up,
)

_PROVISIONED: dict[str, Any] = {
    "deprecated": ("conditions",),
    "lifted": ("conditions",),
    "initialization": {"ready": "provisioned"},
}


def _domains(spec: Any, fn: Any) -> None:
    if isinstance(spec, dict) and "failureDomains" in spec:
        spec["failureDomains"] = fn(spec["failureDomains"])


def _cluster_up(obj: Obj, spec: str) -> None:
    _domains(get(obj, spec), failure_domains_up)
    _domains(obj.get("status"), failure_domains_up)
    status_up(obj, **_PROVISIONED)


def _cluster_down(obj: Obj, spec: str) -> None:
    _domains(get(obj, spec), failure_domains_down)
    _domains(obj.get("status"), failure_domains_down)
    status_down(obj, **_PROVISIONED)


def dockercluster_up(obj: Obj) -> None:
    _cluster_up(obj, "spec")


def dockercluster_down(obj: Obj, resolve: VersionResolver) -> None:
    _cluster_down(obj, "spec")


def devcluster_up(obj: Obj) -> None:
    _cluster_up(obj, "spec.backend.docker")


def devcluster_down(obj: Obj, resolve: VersionResolver) -> None:
    _cluster_down(obj, "spec.backend.docker")


def dockerclustertemplate_up(obj: Obj) -> None:
    _domains(get(obj, "spec.template.spec"), failure_domains_up)


def dockerclustertemplate_down(obj: Obj, resolve: VersionResolver) -> None:
    _domains(get(obj, "spec.template.spec"), failure_domains_down)


def devclustertemplate_up(obj: Obj) -> None:
    _domains(get(obj, "spec.template.spec.backend.docker"), failure_domains_up)


def devclustertemplate_down(obj: Obj, resolve: VersionResolver) -> None:
    _domains(get(obj, "spec.template.spec.backend.docker"), failure_domains_down)


# A DevMachine / DevMachineTemplate converts as a DockerMachine / DockerMachineTemplate: their spec fields are the
# same in both versions (`providerID`, `backend`), the status differs as the DockerMachine's.
def dockermachine_up(obj: Obj) -> None:
    status_up(obj, **_PROVISIONED)


def dockermachine_down(obj: Obj, resolve: VersionResolver) -> None:
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("failureDomain", None)  # v1beta2 only; the conversion-data annotation keeps it
    status_down(obj, **_PROVISIONED)


def dockermachinetemplate_up(obj: Obj) -> None:
    pass


def dockermachinetemplate_down(obj: Obj, resolve: VersionResolver) -> None:
    obj.pop("status", None)  # v1beta1 Docker/DevMachineTemplate has no status (capacity is v1beta2 only)


# Upstream's v1beta1 DockerMachinePool has no v1beta2 sub-status: new conditions survive only through the
# conversion-data annotation.
_POOL: dict[str, Any] = {"deprecated": ("conditions",), "lifted": ()}


def dockermachinepool_up(obj: Obj) -> None:
    status_up(obj, **_POOL)
    # capd-py's DockerMachinePool also reports the contract's initialization.provisioned; it follows `ready`.
    if get(obj, "status.ready") is True:
        obj["status"].setdefault("initialization", {})["provisioned"] = True


def dockermachinepool_down(obj: Obj, resolve: VersionResolver) -> None:
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("conditions", None)
        status.pop("initialization", None)
    status_down(obj, **_POOL)


def identity_up(obj: Obj) -> None:
    pass


def identity_down(obj: Obj, resolve: VersionResolver) -> None:
    pass
