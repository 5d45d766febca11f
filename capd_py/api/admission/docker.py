"""Upstream CAPD v1.13's DockerCluster / DockerClusterTemplate validating webhooks (test/infrastructure/docker/
internal/webhooks) as pure functions. Their defaults (controlPlaneEndpoint.port, failure domains' controlPlane)
and the Docker*Template immutability are not here: the immutability is CEL in the CRDs, the defaults go with the
rest of upstream CAPD's defaults (issue 26 item 2, docs/DEVELOPING.md "Validation")."""

from __future__ import annotations

from typing import Any

from capd_py.api import features
from capd_py.api.admission import checks
from capd_py.api.admission.core import Gates, _get, enabled
from capd_py.api.admission.fielderrors import FieldError, forbidden, invalid


def _sorted_failure_domains(spec: dict[str, Any] | None, path: str) -> list[FieldError]:
    domains = (spec or {}).get("failureDomains") or []
    names = [str(d.get("name") or "") for d in domains]
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
