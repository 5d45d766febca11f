"""Cluster (with its managed topology) and ClusterClass.

Rules from upstream api/core/v1beta1/conversion.go (release-1.13): template references lose their
`ref` wrapper and namespace (`{ref: ObjectReference}` -> `{templateRef: {apiVersion, kind, name}}`),
machineHealthCheck becomes healthCheck (checks/remediation), node timeouts move under deletion as seconds,
naming strategies become naming, a MachineDeployment strategy becomes rollout.strategy + deletion.order +
healthCheck.remediation.maxInFlight, `class`/`classNamespace` become classRef.
"""

from __future__ import annotations

from typing import Any

from capd_py.api.conversion.core import (
    bool_up,
    health_check_down,
    health_check_up,
    namespace_of,
    node_timeouts_down,
    node_timeouts_up,
    strategy_down,
    strategy_up,
)
from capd_py.api.conversion.fields import (
    Obj,
    VersionResolver,
    failure_domains_down,
    failure_domains_up,
    get,
    items,
    move,
    pop,
    prune_empty,
    ref_down,
    ref_up,
    status_down,
    status_up,
    template_ref_down,
    template_ref_up,
)

# ------------------------------------------------------------------------------------------- topology


def _variables_up(obj: Obj, path: str) -> None:
    for variable in items(obj, path):
        variable.pop("definitionFrom", None)  # removed in v1beta2 (definitions are no longer per patch)


def topology_up(topology: Obj) -> None:
    move(topology, "class", "classRef.name")
    move(topology, "classNamespace", "classRef.namespace")
    topology.pop("rolloutAfter", None)  # never implemented upstream; gone in v1beta2
    _variables_up(topology, "variables")
    control_plane = topology.get("controlPlane")
    if isinstance(control_plane, dict):
        node_timeouts_up(control_plane)
        move(control_plane, "machineHealthCheck", "healthCheck")
        if isinstance(control_plane.get("healthCheck"), dict):
            health_check_up(control_plane["healthCheck"])
        _variables_up(control_plane, "variables.overrides")
    for md in items(topology, "workers.machineDeployments"):
        node_timeouts_up(md)
        move(md, "machineHealthCheck", "healthCheck")
        if isinstance(md.get("healthCheck"), dict):
            health_check_up(md["healthCheck"])
        strategy_up(md, "healthCheck.remediation")
        _variables_up(md, "variables.overrides")
    for mp in items(topology, "workers.machinePools"):
        node_timeouts_up(mp)
        _variables_up(mp, "variables.overrides")


def _health_check_back(obj: Obj, namespace: str | None) -> None:
    check = obj.pop("healthCheck", None)
    if isinstance(check, dict):
        health_check_down(check, namespace)
        if check:
            obj["machineHealthCheck"] = check


def topology_down(topology: Obj, namespace: str | None) -> None:
    move(topology, "classRef.name", "class")
    move(topology, "classRef.namespace", "classNamespace")
    topology.pop("classRef", None)
    control_plane = topology.get("controlPlane")
    if isinstance(control_plane, dict):
        node_timeouts_down(control_plane)
        _health_check_back(control_plane, namespace)
    for md in items(topology, "workers.machineDeployments"):
        node_timeouts_down(md)
        # maxInFlight first: in v1beta1 it lives in strategy, not in the health check.
        strategy_down(md, "healthCheck.remediation")
        prune_empty(md, "healthCheck.remediation")
        _health_check_back(md, namespace)
    for mp in items(topology, "workers.machinePools"):
        node_timeouts_down(mp)


# -------------------------------------------------------------------------------------------- Cluster

_CLUSTER_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "failureReason", "failureMessage"),
    "lifted": ("conditions", "controlPlane", "workers"),
    "initialization": {
        "controlPlaneReady": "controlPlaneInitialized",
        "infrastructureReady": "infrastructureProvisioned",
    },
}


def cluster_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    for key in ("infrastructureRef", "controlPlaneRef"):
        if key in spec:
            spec[key] = ref_up(spec[key])
    bool_up(spec, "paused")
    if isinstance(spec.get("topology"), dict):
        topology_up(spec["topology"])
    status = obj.get("status")
    if isinstance(status, dict) and "failureDomains" in status:
        status["failureDomains"] = failure_domains_up(status["failureDomains"])
    status_up(obj, **_CLUSTER_STATUS)


def cluster_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = obj.setdefault("spec", {})
    namespace = namespace_of(obj)
    for key in ("infrastructureRef", "controlPlaneRef"):
        if key in spec:
            spec[key] = ref_down(spec[key], namespace, resolve)
    if get(spec, "clusterNetwork.apiServerPort") == 0:
        pop(spec, "clusterNetwork.apiServerPort")
    if isinstance(spec.get("topology"), dict):
        topology_down(spec["topology"], namespace)
    status = obj.get("status")
    if isinstance(status, dict) and "failureDomains" in status:
        status["failureDomains"] = failure_domains_down(status["failureDomains"])
    status_down(obj, **_CLUSTER_STATUS)


# --------------------------------------------------------------------------------------- ClusterClass

# JSONSchemaProps booleans that became *bool in v1beta2 (false in v1beta1 means unset).
_SCHEMA_BOOLS = ("uniqueItems", "exclusiveMaximum", "exclusiveMinimum", "x-kubernetes-preserve-unknown-fields",
                 "x-kubernetes-int-or-string")


def _schema_bools_up(schema: Any) -> None:
    if not isinstance(schema, dict):
        return
    for key in _SCHEMA_BOOLS:
        if schema.get(key) is False:
            schema.pop(key)
    for prop in (schema.get("properties") or {}).values():
        _schema_bools_up(prop)
    for key in ("items", "additionalProperties", "not"):
        _schema_bools_up(schema.get(key))
    for key in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(key) or []:
            _schema_bools_up(sub)


def _template_up(obj: Obj, src: str, dst: str) -> None:
    move(obj, f"{src}.ref", f"{dst}.templateRef", template_ref_up)


def _template_down(obj: Obj, src: str, dst: str, namespace: str | None) -> None:
    move(obj, f"{src}.templateRef", f"{dst}.ref", lambda r: template_ref_down(r, namespace))


def _worker_class_up(worker: Obj) -> None:
    move(worker, "template.metadata", "metadata")
    _template_up(worker, "template.bootstrap", "bootstrap")
    _template_up(worker, "template.infrastructure", "infrastructure")
    worker.pop("template", None)
    move(worker, "namingStrategy.template", "naming.template")
    worker.pop("namingStrategy", None)
    node_timeouts_up(worker)


def _worker_class_down(worker: Obj, namespace: str | None) -> None:
    _template_down(worker, "bootstrap", "template.bootstrap", namespace)
    _template_down(worker, "infrastructure", "template.infrastructure", namespace)
    move(worker, "metadata", "template.metadata")
    worker.pop("bootstrap", None)
    worker.pop("infrastructure", None)
    move(worker, "naming.template", "namingStrategy.template")
    worker.pop("naming", None)
    node_timeouts_down(worker)


_CC_STATUS: dict[str, Any] = {"deprecated": ("conditions",), "lifted": ("conditions",)}


def clusterclass_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    _template_up(spec, "infrastructure", "infrastructure")
    move(spec, "infrastructureNamingStrategy.template", "infrastructure.naming.template")
    spec.pop("infrastructureNamingStrategy", None)
    control_plane = spec.get("controlPlane")
    if isinstance(control_plane, dict):
        move(control_plane, "ref", "templateRef", template_ref_up)
        _template_up(control_plane, "machineInfrastructure", "machineInfrastructure")
        move(control_plane, "machineHealthCheck", "healthCheck")
        if isinstance(control_plane.get("healthCheck"), dict):
            health_check_up(control_plane["healthCheck"])
        move(control_plane, "namingStrategy.template", "naming.template")
        control_plane.pop("namingStrategy", None)
        node_timeouts_up(control_plane)
    for md in items(spec, "workers.machineDeployments"):
        _worker_class_up(md)
        move(md, "machineHealthCheck", "healthCheck")
        if isinstance(md.get("healthCheck"), dict):
            health_check_up(md["healthCheck"])
        strategy_up(md, "healthCheck.remediation")
    for mp in items(spec, "workers.machinePools"):
        _worker_class_up(mp)
    for variable in items(spec, "variables"):
        move(variable, "metadata", "deprecatedV1Beta1Metadata")
        _schema_bools_up(get(variable, "schema.openAPIV3Schema"))
    for patch in items(spec, "patches"):
        move(patch, "external.generateExtension", "external.generatePatchesExtension")
        move(patch, "external.validateExtension", "external.validateTopologyExtension")
        for definition in items(patch, "definitions"):
            bool_up(definition, "selector.matchResources.controlPlane")
            bool_up(definition, "selector.matchResources.infrastructureCluster")
    for variable in items(obj, "status.variables"):
        bool_up(variable, "definitionsConflict")
        for definition in items(variable, "definitions"):
            move(definition, "metadata", "deprecatedV1Beta1Metadata")
            _schema_bools_up(get(definition, "schema.openAPIV3Schema"))
    status_up(obj, **_CC_STATUS)


def clusterclass_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = obj.setdefault("spec", {})
    namespace = namespace_of(obj)
    move(spec, "infrastructure.naming.template", "infrastructureNamingStrategy.template")
    prune_empty(spec, "infrastructure.naming")
    _template_down(spec, "infrastructure", "infrastructure", namespace)
    control_plane = spec.get("controlPlane")
    if isinstance(control_plane, dict):
        move(control_plane, "templateRef", "ref", lambda r: template_ref_down(r, namespace))
        _template_down(control_plane, "machineInfrastructure", "machineInfrastructure", namespace)
        _health_check_back(control_plane, namespace)
        move(control_plane, "naming.template", "namingStrategy.template")
        control_plane.pop("naming", None)
        node_timeouts_down(control_plane)
    for md in items(spec, "workers.machineDeployments"):
        strategy_down(md, "healthCheck.remediation")
        prune_empty(md, "healthCheck.remediation")
        _health_check_back(md, namespace)
        prune_empty(md, "rollout")
        _worker_class_down(md, namespace)
    for mp in items(spec, "workers.machinePools"):
        _worker_class_down(mp, namespace)
    for variable in items(spec, "variables"):
        move(variable, "deprecatedV1Beta1Metadata", "metadata")
    for patch in items(spec, "patches"):
        move(patch, "external.generatePatchesExtension", "external.generateExtension")
        move(patch, "external.validateTopologyExtension", "external.validateExtension")
    for variable in items(obj, "status.variables"):
        for definition in items(variable, "definitions"):
            move(definition, "deprecatedV1Beta1Metadata", "metadata")
    status_down(obj, **_CC_STATUS)
