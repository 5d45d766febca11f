"""cluster.x-k8s.io kinds: Machine, MachineSet, MachineDeployment, MachinePool, MachineHealthCheck.

Rules from upstream api/core/v1beta1/conversion.go (release-1.13); Cluster, ClusterClass and the
topology are in clusterclass.py. `*_up` functions turn a v1beta1 body into v1beta2 in place, `*_down` the reverse.
"""

from __future__ import annotations

from typing import Any

from capd_py.api.conversion.fields import (
    Obj,
    VersionResolver,
    duration_down,
    duration_to_seconds,
    duration_up,
    get,
    move,
    pop,
    prune_empty,
    put,
    ref_down,
    ref_up,
    seconds_to_duration,
    status_down,
    status_up,
    template_ref_down,
    template_ref_up,
)

NODE_TIMEOUTS = (
    ("nodeDrainTimeout", "deletion.nodeDrainTimeoutSeconds"),
    ("nodeVolumeDetachTimeout", "deletion.nodeVolumeDetachTimeoutSeconds"),
    ("nodeDeletionTimeout", "deletion.nodeDeletionTimeoutSeconds"),
)


def node_timeouts_up(obj: Obj, prefix: str = "") -> None:
    for old, new in NODE_TIMEOUTS:
        duration_up(obj, prefix + old, prefix + new)


def node_timeouts_down(obj: Obj, prefix: str = "") -> None:
    for old, new in NODE_TIMEOUTS:
        duration_down(obj, prefix + new, prefix + old)
    prune_empty(obj, prefix + "deletion")


def bool_up(obj: Obj, path: str) -> None:
    """A v1beta1 bool that became *bool: false means "unset" (upstream's Convert_bool_To_Pointer_bool)."""
    if get(obj, path) is False:
        pop(obj, path)


# ------------------------------------------------------------------------------------------- Machine


def machine_spec_up(spec: Obj) -> None:
    if isinstance(get(spec, "bootstrap.configRef"), dict):
        spec["bootstrap"]["configRef"] = ref_up(spec["bootstrap"]["configRef"])
    if "infrastructureRef" in spec:
        spec["infrastructureRef"] = ref_up(spec["infrastructureRef"])
    node_timeouts_up(spec)


def machine_spec_down(spec: Obj, namespace: str | None, resolve: VersionResolver) -> None:
    if isinstance(get(spec, "bootstrap.configRef"), dict):
        spec["bootstrap"]["configRef"] = ref_down(spec["bootstrap"]["configRef"], namespace, resolve)
    if "infrastructureRef" in spec:
        spec["infrastructureRef"] = ref_down(spec["infrastructureRef"], namespace, resolve)
    node_timeouts_down(spec)
    # v1beta2-only: in v1beta1 the owners (MachineSet, MachineDeployment, MachinePool) carry it at spec level.
    spec.pop("minReadySeconds", None)


MACHINE_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "failureReason", "failureMessage"),
    "lifted": ("conditions",),
    "initialization": {
        "bootstrapReady": "bootstrapDataSecretCreated",
        "infrastructureReady": "infrastructureProvisioned",
    },
}


def machine_up(obj: Obj) -> None:
    machine_spec_up(obj.setdefault("spec", {}))
    status_up(obj, **MACHINE_STATUS)
    status = obj.get("status") or {}
    if isinstance(status.get("nodeRef"), dict):
        status["nodeRef"] = {"name": status["nodeRef"].get("name", "")}


def machine_down(obj: Obj, resolve: VersionResolver) -> None:
    machine_spec_down(obj.setdefault("spec", {}), namespace_of(obj), resolve)
    status = obj.get("status")
    if isinstance(status, dict):
        if isinstance(status.get("nodeRef"), dict):
            status["nodeRef"] = {"apiVersion": "v1", "kind": "Node", "name": status["nodeRef"].get("name", "")}
        # Updating did not exist in v1beta1; only the Machine controller writes the phase.
        if status.get("phase") == "Updating":
            status["phase"] = "Running"
        status.pop("failureDomain", None)
    status_down(obj, **MACHINE_STATUS)


# ----------------------------------------------------------------------------------------- MachineSet

_SET_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "failureReason", "failureMessage", "availableReplicas",
                   "fullyLabeledReplicas", "readyReplicas"),
    "lifted": ("conditions", "readyReplicas", "availableReplicas", "upToDateReplicas"),
}


def _min_ready_up(spec: Obj) -> None:
    value = spec.pop("minReadySeconds", None)
    if value:  # upstream: 0 -> unset
        put(spec, "template.spec.minReadySeconds", value)


def _min_ready_down(spec: Obj) -> None:
    value = pop(spec, "template.spec.minReadySeconds")
    if value is not None:
        spec["minReadySeconds"] = value


def machineset_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    machine_spec_up(spec.setdefault("template", {}).setdefault("spec", {}))
    _min_ready_up(spec)
    move(spec, "deletePolicy", "deletion.order")
    move(spec, "machineNamingStrategy.template", "machineNaming.template")
    status_up(obj, **_SET_STATUS)


def machineset_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = obj.setdefault("spec", {})
    _min_ready_down(spec)
    machine_spec_down(spec.setdefault("template", {}).setdefault("spec", {}), namespace_of(obj), resolve)
    move(spec, "deletion.order", "deletePolicy")
    move(spec, "machineNaming.template", "machineNamingStrategy.template")
    status_down(obj, **_SET_STATUS)


# -------------------------------------------------------------------------------------- MachineDeployment

_MD_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "availableReplicas", "unavailableReplicas", "updatedReplicas", "readyReplicas"),
    "lifted": ("conditions", "readyReplicas", "availableReplicas", "upToDateReplicas"),
}


def strategy_up(obj: Obj, remediation_path: str) -> None:
    """v1beta1 MachineDeploymentStrategy -> rollout.strategy + deletion.order + <remediation>.maxInFlight."""
    move(obj, "strategy.type", "rollout.strategy.type")
    move(obj, "strategy.rollingUpdate.maxUnavailable", "rollout.strategy.rollingUpdate.maxUnavailable")
    move(obj, "strategy.rollingUpdate.maxSurge", "rollout.strategy.rollingUpdate.maxSurge")
    move(obj, "strategy.rollingUpdate.deletePolicy", "deletion.order")
    move(obj, "strategy.remediation.maxInFlight", f"{remediation_path}.maxInFlight")
    obj.pop("strategy", None)


def strategy_down(obj: Obj, remediation_path: str) -> None:
    move(obj, "rollout.strategy.type", "strategy.type")
    move(obj, "rollout.strategy.rollingUpdate.maxUnavailable", "strategy.rollingUpdate.maxUnavailable")
    move(obj, "rollout.strategy.rollingUpdate.maxSurge", "strategy.rollingUpdate.maxSurge")
    move(obj, "deletion.order", "strategy.rollingUpdate.deletePolicy")
    move(obj, f"{remediation_path}.maxInFlight", "strategy.remediation.maxInFlight")
    prune_empty(obj, "rollout.strategy")


def machinedeployment_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    machine_spec_up(spec.setdefault("template", {}).setdefault("spec", {}))
    value = spec.pop("minReadySeconds", None)
    if value is not None:
        put(spec, "template.spec.minReadySeconds", value)
    strategy_up(spec, "remediation")
    move(spec, "rolloutAfter", "rollout.after")
    move(spec, "machineNamingStrategy.template", "machineNaming.template")
    # Gone in v1beta2 (upstream drops them: never used by the controllers).
    spec.pop("revisionHistoryLimit", None)
    spec.pop("progressDeadlineSeconds", None)
    bool_up(spec, "paused")
    status_up(obj, **_MD_STATUS)


def machinedeployment_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = obj.setdefault("spec", {})
    _min_ready_down(spec)
    machine_spec_down(spec.setdefault("template", {}).setdefault("spec", {}), namespace_of(obj), resolve)
    strategy_down(spec, "remediation")
    move(spec, "rollout.after", "rolloutAfter")
    move(spec, "machineNaming.template", "machineNamingStrategy.template")
    status_down(obj, **_MD_STATUS)


# ---------------------------------------------------------------------------------------- MachinePool

_MP_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "failureReason", "failureMessage", "readyReplicas", "availableReplicas",
                   "unavailableReplicas"),
    "lifted": ("conditions", "readyReplicas", "availableReplicas", "upToDateReplicas"),
    "initialization": {
        "bootstrapReady": "bootstrapDataSecretCreated",
        "infrastructureReady": "infrastructureProvisioned",
    },
}


def machinepool_up(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    machine_spec_up(spec.setdefault("template", {}).setdefault("spec", {}))
    value = spec.pop("minReadySeconds", None)
    if value is not None:
        put(spec, "template.spec.minReadySeconds", value)
    status_up(obj, **_MP_STATUS)


def machinepool_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = obj.setdefault("spec", {})
    _min_ready_down(spec)
    machine_spec_down(spec.setdefault("template", {}).setdefault("spec", {}), namespace_of(obj), resolve)
    status_down(obj, **_MP_STATUS)


# -------------------------------------------------------------------------------- MachineHealthCheck


def _conditions_up(conditions: Any) -> Any:
    return [
        {**{k: v for k, v in c.items() if k != "timeout"},
         "timeoutSeconds": duration_to_seconds(c.get("timeout") or "0s")}
        for c in conditions if isinstance(c, dict)
    ]


def _conditions_down(conditions: Any) -> Any:
    return [
        {**{k: v for k, v in c.items() if k != "timeoutSeconds"},
         "timeout": seconds_to_duration(c.get("timeoutSeconds", 0))}
        for c in conditions if isinstance(c, dict)
    ]


def health_check_up(check: Obj, remediation_template: str = "remediationTemplate") -> None:
    """v1beta1 MachineHealthCheck(Spec|Class|Topology) fields -> v1beta2 checks/remediation layout."""
    move(check, "unhealthyConditions", "checks.unhealthyNodeConditions", _conditions_up)
    move(check, "unhealthyMachineConditions", "checks.unhealthyMachineConditions", _conditions_up)
    duration_up(check, "nodeStartupTimeout", "checks.nodeStartupTimeoutSeconds")
    move(check, "maxUnhealthy", "remediation.triggerIf.unhealthyLessThanOrEqualTo")
    move(check, "unhealthyRange", "remediation.triggerIf.unhealthyInRange")
    move(check, remediation_template, "remediation.templateRef", template_ref_up)
    move(check, "enable", "enabled")


def health_check_down(check: Obj, namespace: str | None) -> None:
    move(check, "checks.unhealthyNodeConditions", "unhealthyConditions", _conditions_down)
    move(check, "checks.unhealthyMachineConditions", "unhealthyMachineConditions", _conditions_down)
    duration_down(check, "checks.nodeStartupTimeoutSeconds", "nodeStartupTimeout")
    move(check, "remediation.triggerIf.unhealthyLessThanOrEqualTo", "maxUnhealthy")
    move(check, "remediation.triggerIf.unhealthyInRange", "unhealthyRange")
    move(check, "remediation.templateRef", "remediationTemplate", lambda r: template_ref_down(r, namespace))
    move(check, "enabled", "enable")
    prune_empty(check, "checks")
    prune_empty(check, "remediation")


_MHC_STATUS: dict[str, Any] = {"deprecated": ("conditions",), "lifted": ("conditions",)}


def machinehealthcheck_up(obj: Obj) -> None:
    health_check_up(obj.setdefault("spec", {}))
    status_up(obj, **_MHC_STATUS)


def machinehealthcheck_down(obj: Obj, resolve: VersionResolver) -> None:
    health_check_down(obj.setdefault("spec", {}), namespace_of(obj))
    status_down(obj, **_MHC_STATUS)


def namespace_of(obj: Obj) -> str | None:
    ns = get(obj, "metadata.namespace")
    return ns if isinstance(ns, str) and ns else None
