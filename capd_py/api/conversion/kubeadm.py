"""KubeadmConfig, KubeadmConfigTemplate, KubeadmControlPlane, KubeadmControlPlaneTemplate.

Rules from upstream api/bootstrap/kubeadm/v1beta1/conversion.go and api/controlplane/kubeadm/v1beta1/
conversion.go (release-1.13): extraArgs maps become lists of {name, value}; durations become seconds;
`apiServer.timeoutForControlPlane` and `discovery.timeout` move to init/joinConfiguration.timeouts; the
kubeadm TypeMeta and the fields kubeadm derives from the Cluster (kubernetesVersion, clusterName, networking)
are gone; KCP's machineTemplate gains a `spec`, and its rollout/remediation/naming settings are regrouped.
"""

from __future__ import annotations

from typing import Any

from capd_py.api.conversion.core import bool_up, namespace_of, node_timeouts_down, node_timeouts_up
from capd_py.api.conversion.fields import (
    Obj,
    VersionResolver,
    args_down,
    args_up,
    duration_down,
    duration_to_seconds,
    duration_up,
    get,
    items,
    move,
    pop,
    prune_empty,
    put,
    ref_down,
    ref_up,
    seconds_to_duration,
    status_down,
    status_up,
)

_COMPONENTS = ("apiServer", "controllerManager", "scheduler", "etcd.local")


def _args(obj: Obj, path: str, fn: Any) -> None:
    value = get(obj, path)
    if value is not None:
        put(obj, path, fn(value))


def kubeadm_spec_up(spec: Obj) -> None:
    """KubeadmConfigSpec v1beta1 -> v1beta2, in place."""
    cluster = spec.get("clusterConfiguration")
    if isinstance(cluster, dict):
        # kubeadm's TypeMeta and what capd-py derives from the Cluster object are gone in v1beta2.
        for key in ("apiVersion", "kind", "kubernetesVersion", "clusterName", "networking"):
            cluster.pop(key, None)
        for component in _COMPONENTS:
            _args(cluster, f"{component}.extraArgs", args_up)
            for volume in items(cluster, f"{component}.extraVolumes"):
                bool_up(volume, "readOnly")
        health = pop(cluster, "apiServer.timeoutForControlPlane")
        if health is not None:
            seconds = duration_to_seconds(health)
            put(spec, "initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds", seconds)
            put(spec, "joinConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds", seconds)
        prune_empty(spec, "clusterConfiguration.apiServer")
    for key in ("initConfiguration", "joinConfiguration"):
        config = spec.get(key)
        if not isinstance(config, dict):
            continue
        config.pop("apiVersion", None)
        config.pop("kind", None)
        _args(config, "nodeRegistration.kubeletExtraArgs", args_up)
    for token in items(spec, "initConfiguration.bootstrapTokens"):
        duration_up(token, "ttl", "ttlSeconds")
    join = spec.get("joinConfiguration")
    if isinstance(join, dict):
        duration_up(join, "discovery.timeout", "timeouts.tlsBootstrapSeconds")
        bool_up(join, "discovery.bootstrapToken.unsafeSkipCAVerification")
        bool_up(join, "discovery.file.kubeConfig.cluster.insecureSkipTLSVerify")
        bool_up(join, "discovery.file.kubeConfig.user.exec.provideClusterInfo")
    for file in items(spec, "files"):
        bool_up(file, "append")
    bool_up(spec, "ignition.containerLinuxConfig.strict")
    spec.pop("useExperimentalRetryJoin", None)  # removed in v1beta2, upstream drops it


def kubeadm_spec_down(spec: Obj) -> None:
    """KubeadmConfigSpec v1beta2 -> v1beta1, in place."""
    cluster = spec.get("clusterConfiguration")
    if isinstance(cluster, dict):
        for component in _COMPONENTS:
            _args(cluster, f"{component}.extraArgs", args_down)
    health = get(spec, "initConfiguration.timeouts.controlPlaneComponentHealthCheckSeconds")
    if health is not None:
        put(spec, "clusterConfiguration.apiServer.timeoutForControlPlane", seconds_to_duration(health))
    tls = get(spec, "joinConfiguration.timeouts.tlsBootstrapSeconds")
    if tls is not None:
        put(spec, "joinConfiguration.discovery.timeout", seconds_to_duration(tls))
    for key in ("initConfiguration", "joinConfiguration"):
        config = spec.get(key)
        if not isinstance(config, dict):
            continue
        # The other timeouts exist only in v1beta2; the conversion-data annotation keeps them.
        config.pop("timeouts", None)
        _args(config, "nodeRegistration.kubeletExtraArgs", args_down)
        if not config:
            spec.pop(key)
    for token in items(spec, "initConfiguration.bootstrapTokens"):
        duration_down(token, "ttlSeconds", "ttl")


_KUBEADMCONFIG_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "failureReason", "failureMessage"),
    "lifted": ("conditions",),
    "initialization": {"ready": "dataSecretCreated"},
}


def kubeadmconfig_up(obj: Obj) -> None:
    if isinstance(obj.get("spec"), dict):
        kubeadm_spec_up(obj["spec"])
    status_up(obj, **_KUBEADMCONFIG_STATUS)


def kubeadmconfig_down(obj: Obj, resolve: VersionResolver) -> None:
    if isinstance(obj.get("spec"), dict):
        kubeadm_spec_down(obj["spec"])
    status_down(obj, **_KUBEADMCONFIG_STATUS)


def kubeadmconfigtemplate_up(obj: Obj) -> None:
    spec = get(obj, "spec.template.spec")
    if isinstance(spec, dict):
        kubeadm_spec_up(spec)


def kubeadmconfigtemplate_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = get(obj, "spec.template.spec")
    if isinstance(spec, dict):
        kubeadm_spec_down(spec)


# --------------------------------------------------------------------------------- KubeadmControlPlane


def _kcp_spec_up(spec: Obj, *, template: bool) -> None:
    """Shared by KubeadmControlPlane.spec and KubeadmControlPlaneTemplate.spec.template.spec."""
    if isinstance(spec.get("kubeadmConfigSpec"), dict):
        kubeadm_spec_up(spec["kubeadmConfigSpec"])
    machine = spec.get("machineTemplate")
    if isinstance(machine, dict):
        if not template:
            move(machine, "infrastructureRef", "spec.infrastructureRef", ref_up)
            move(machine, "readinessGates", "spec.readinessGates")
        node_timeouts_up(machine)
        move(machine, "deletion", "spec.deletion")
        move(machine, "taints", "spec.taints")
    move(spec, "rolloutBefore.certificatesExpiryDays", "rollout.before.certificatesExpiryDays")
    spec.pop("rolloutBefore", None)
    move(spec, "rolloutAfter", "rollout.after")
    move(spec, "rolloutStrategy.type", "rollout.strategy.type")
    move(spec, "rolloutStrategy.rollingUpdate.maxSurge", "rollout.strategy.rollingUpdate.maxSurge")
    spec.pop("rolloutStrategy", None)
    move(spec, "remediationStrategy.maxRetry", "remediation.maxRetry")
    duration_up(spec, "remediationStrategy.retryPeriod", "remediation.retryPeriodSeconds")
    duration_up(spec, "remediationStrategy.minHealthyPeriod", "remediation.minHealthyPeriodSeconds")
    spec.pop("remediationStrategy", None)
    move(spec, "machineNamingStrategy.template", "machineNaming.template")
    spec.pop("machineNamingStrategy", None)


def _kcp_spec_down(spec: Obj, namespace: str | None, resolve: VersionResolver, *, template: bool) -> None:
    if isinstance(spec.get("kubeadmConfigSpec"), dict):
        kubeadm_spec_down(spec["kubeadmConfigSpec"])
    machine = spec.get("machineTemplate")
    if isinstance(machine, dict):
        if not template:
            move(machine, "spec.infrastructureRef", "infrastructureRef",
                 lambda r: ref_down(r, namespace, resolve))
            move(machine, "spec.readinessGates", "readinessGates")
        move(machine, "spec.deletion", "deletion")
        node_timeouts_down(machine)
        move(machine, "spec.taints", "taints")
        prune_empty(machine, "spec")
    move(spec, "rollout.before.certificatesExpiryDays", "rolloutBefore.certificatesExpiryDays")
    move(spec, "rollout.after", "rolloutAfter")
    move(spec, "rollout.strategy.type", "rolloutStrategy.type")
    move(spec, "rollout.strategy.rollingUpdate.maxSurge", "rolloutStrategy.rollingUpdate.maxSurge")
    prune_empty(spec, "rollout.strategy")
    prune_empty(spec, "rollout.before")
    move(spec, "remediation.maxRetry", "remediationStrategy.maxRetry")
    duration_down(spec, "remediation.retryPeriodSeconds", "remediationStrategy.retryPeriod")
    duration_down(spec, "remediation.minHealthyPeriodSeconds", "remediationStrategy.minHealthyPeriod")
    prune_empty(spec, "remediation")
    move(spec, "machineNaming.template", "machineNamingStrategy.template")
    prune_empty(spec, "machineNaming")


_KCP_STATUS: dict[str, Any] = {
    "deprecated": ("conditions", "failureReason", "failureMessage", "updatedReplicas", "readyReplicas",
                   "unavailableReplicas"),
    "lifted": ("conditions", "readyReplicas", "availableReplicas", "upToDateReplicas"),
    "initialization": {"initialized": "controlPlaneInitialized"},
}


def kubeadmcontrolplane_up(obj: Obj) -> None:
    _kcp_spec_up(obj.setdefault("spec", {}), template=False)
    status = obj.get("status")
    if isinstance(status, dict):
        status.pop("ready", None)  # v1beta2 has no ready; down-conversion recomputes it
        move(status, "lastRemediation.timestamp", "lastRemediation.time")
    status_up(obj, **_KCP_STATUS)


def kubeadmcontrolplane_down(obj: Obj, resolve: VersionResolver) -> None:
    _kcp_spec_down(obj.setdefault("spec", {}), namespace_of(obj), resolve, template=False)
    status = obj.get("status")
    if isinstance(status, dict):
        move(status, "lastRemediation.time", "lastRemediation.timestamp")
    status_down(obj, **_KCP_STATUS)
    status = obj.get("status")
    if isinstance(status, dict):
        # As upstream: v1beta1 `ready` is rebuilt from the (v1beta1) ready replica count.
        status["ready"] = (status.get("readyReplicas") or 0) > 0


def kubeadmcontrolplanetemplate_up(obj: Obj) -> None:
    spec = get(obj, "spec.template.spec")
    if isinstance(spec, dict):
        _kcp_spec_up(spec, template=True)


def kubeadmcontrolplanetemplate_down(obj: Obj, resolve: VersionResolver) -> None:
    spec = get(obj, "spec.template.spec")
    if isinstance(spec, dict):
        _kcp_spec_down(spec, namespace_of(obj), resolve, template=True)
