"""Upstream CAPD v1.13's DockerCluster / DockerClusterTemplate defaulting and validating webhooks
(test/infrastructure/docker/internal/webhooks) as pure functions. The Docker*Template immutability is CEL in the
CRDs. Upstream CAPD has no defaulting webhook for DockerMachine, DockerMachineTemplate or DockerMachinePool(Template)
and its only schema default (`loadBalancer.customHAProxyConfigTemplateRef.name: ""`) is in capd-py's CRDs too;
what its controllers default at run time (bootstrapTimeout 5m, the load balancer and node images) capd-py's
controllers default the same way (docs/docker-provider.md)."""

from __future__ import annotations

import copy
from typing import Any

from capd_py.api import features
from capd_py.api.admission import checks
from capd_py.api.admission.core import Gates, _get, enabled
from capd_py.api.admission.fielderrors import FieldError, forbidden, invalid

API_SERVER_PORT = 6443


def dict_at(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """parent[key], made an empty object first when it is missing or null (as Go decodes a struct field)."""
    v = parent.get(key)
    if not isinstance(v, dict):
        v = parent[key] = {}
    return v


def _default_spec(spec: dict[str, Any]) -> None:
    """upstream defaultDockerClusterSpec: controlPlaneEndpoint.port 6443 when unset (0), each failure domain's
    controlPlane false when unset. And `loadBalancer: {}` when unset or null: upstream's webhook answers with the object
    re-encoded from its Go type, where `LoadBalancer DockerLoadBalancer `json:"loadBalancer,omitempty"`` is a struct
    (omitempty never omits one), so every DockerCluster upstream admits is stored with it (the admission oracle's
    verdicts, docs/conformance.md)."""
    dict_at(spec, "loadBalancer")
    ep = dict_at(spec, "controlPlaneEndpoint")
    if not ep.get("port"):
        ep["port"] = API_SERVER_PORT
    domains = spec.get("failureDomains")
    if isinstance(domains, list):
        # Go decodes a null entry as an empty FailureDomain and answers with it (then its name is missing)
        spec["failureDomains"] = domains = [{} if fd is None else fd for fd in domains]
    for fd in domains or []:
        if isinstance(fd, dict) and fd.get("controlPlane") is None:
            fd["controlPlane"] = False


def default_dockercluster(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    _default_spec(dict_at(out, "spec"))
    return out


def default_dockerclustertemplate(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """As upstream. One exception: an update leaving spec.template.spec as stored is not defaulted, so a template
    stored before capd-py defaulted it (no webhook then) can still be applied unchanged (its spec.template.spec is
    immutable, a CEL rule, and upstream compares old and new both defaulted)."""
    if old is not None and _get(obj, "spec", "template", "spec") == _get(old, "spec", "template", "spec"):
        return obj
    out = copy.deepcopy(obj)
    _default_spec(dict_at(dict_at(dict_at(out, "spec"), "template"), "spec"))
    return out


def _sorted_failure_domains(spec: dict[str, Any] | None, path: str) -> list[FieldError]:
    domains = (spec or {}).get("failureDomains") or []
    names = [str(d.get("name") or "") for d in domains if isinstance(d, dict)]
    if names != sorted(names):
        return [invalid(f"{path}.failureDomains", domains, "failure domains must be sorted by name")]
    return []


def validate_dockercluster(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    return _sorted_failure_domains(new.get("spec"), "spec")


def validate_dockerclustertemplate(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    if old is None and not enabled(gates, features.CLUSTER_TOPOLOGY):
        return [forbidden("spec", "can be set only if the ClusterTopology feature flag is enabled")]
    errs = _sorted_failure_domains(_get(new, "spec", "template", "spec"), "spec")
    if old is None:  # upstream checks the template's metadata on create only
        errs += checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata")
    return errs
