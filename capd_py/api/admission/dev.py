"""Upstream CAPD v1.14's DevCluster / DevClusterTemplate / DevMachine / DevMachineTemplate defaulting and validating
webhooks (test/infrastructure/docker/internal/webhooks/dev*.go) as pure functions.

- Defaulting: a spec naming no backend gets `backend.docker: {}` (upstream defaultDevClusterSpec /
  defaultDevMachineSpec); with the docker backend a DevCluster also gets what a DockerCluster gets
  (controlPlaneEndpoint.port 6443, each failure domain's controlPlane false).
- Validation: docker failure domains sorted by name; a DevClusterTemplate only with the ClusterTopology gate and
  its template metadata checked on create; a DevMachine's `spec.backend.docker.customImage` cannot change; a
  DevMachineTemplate's template metadata checked on create and update. The templates' `spec.template.spec`
  immutability is CEL in the CRDs (as for the Docker* templates).
Upstream has no webhook for DevMachinePool(Template); neither has capd-py.
"""

from __future__ import annotations

import copy
from typing import Any

from capd_py.api import features
from capd_py.api.admission import checks
from capd_py.api.admission.core import Gates, _get, enabled
from capd_py.api.admission.docker import API_SERVER_PORT, dict_at
from capd_py.api.admission.fielderrors import FieldError, forbidden, invalid


def _default_backend(spec: dict[str, Any]) -> dict[str, Any]:
    """upstream: neither inMemory nor docker set -> docker {}. The backend dict."""
    backend = dict_at(spec, "backend")
    if backend.get("inMemory") is None and backend.get("docker") is None:
        backend["docker"] = {}
    return backend


def default_dev_cluster_spec(spec: dict[str, Any]) -> None:
    """upstream defaultDevClusterSpec, and `backend.docker.loadBalancer: {}` as upstream's webhook answers it (the
    object re-encoded from its Go type, where that field is a struct omitempty never drops: api/admission/docker.py)."""
    backend = _default_backend(spec)
    docker = backend.get("docker")
    if isinstance(docker, dict):
        dict_at(docker, "loadBalancer")
        ep = dict_at(spec, "controlPlaneEndpoint")
        if not ep.get("port"):
            ep["port"] = API_SERVER_PORT
        for fd in docker.get("failureDomains") or []:
            if isinstance(fd, dict) and fd.get("controlPlane") is None:
                fd["controlPlane"] = False


def default_dev_machine_spec(spec: dict[str, Any]) -> None:
    """upstream defaultDevMachineSpec."""
    _default_backend(spec)


def _template_spec(out: dict[str, Any]) -> dict[str, Any]:
    return dict_at(dict_at(dict_at(out, "spec"), "template"), "spec")


def _unchanged_template(obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
    """An update leaving spec.template.spec as stored is not defaulted (as capd-py's Docker*Template defaulting):
    a template stored while the webhook was not running can be applied again unchanged (the CEL immutability rule
    compares what is stored; upstream compares old and new both defaulted)."""
    return old is not None and _get(obj, "spec", "template", "spec") == _get(old, "spec", "template", "spec")


def default_devcluster(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    default_dev_cluster_spec(dict_at(out, "spec"))
    return out


def default_devclustertemplate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    if _unchanged_template(obj, old):
        return obj
    out = copy.deepcopy(obj)
    default_dev_cluster_spec(_template_spec(out))
    return out


def default_devmachine(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    default_dev_machine_spec(dict_at(out, "spec"))
    return out


def default_devmachinetemplate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    if _unchanged_template(obj, old):
        return obj
    out = copy.deepcopy(obj)
    default_dev_machine_spec(_template_spec(out))
    return out


def _sorted_failure_domains(spec: dict[str, Any] | None, path: str) -> list[FieldError]:
    """upstream validateDevClusterSpec: only the docker backend has failure domains; they must be sorted."""
    docker = _get(spec, "backend", "docker")
    if not isinstance(docker, dict):
        return []
    domains = docker.get("failureDomains") or []
    names = [str(d.get("name") or "") for d in domains if isinstance(d, dict)]
    if names != sorted(names):
        return [invalid(f"{path}.backend.docker.failureDomains", domains, "failure domains must be sorted by name")]
    return []


def validate_devcluster(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    return _sorted_failure_domains(new.get("spec"), "spec")


def validate_devclustertemplate(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    if old is None and not enabled(gates, features.CLUSTER_TOPOLOGY):
        return [forbidden("spec", "can be set only if the ClusterTopology feature flag is enabled")]
    if old is not None:  # upstream's update checks immutability only (CEL here)
        return []
    return (_sorted_failure_domains(_get(new, "spec", "template", "spec"), "spec")  # upstream names spec.backend...
            + checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata"))


def validate_devmachine(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """upstream DevMachine.ValidateUpdate: with the docker backend before and after, customImage cannot change."""
    if old is None:
        return []
    before, after = _get(old, "spec", "backend", "docker"), _get(new, "spec", "backend", "docker")
    if isinstance(before, dict) and isinstance(after, dict) and \
            (before.get("customImage") or "") != (after.get("customImage") or ""):
        return [forbidden("spec.backend.docker.customImage", "cannot be modified")]
    return []


def validate_devmachinetemplate(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    return checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata")
