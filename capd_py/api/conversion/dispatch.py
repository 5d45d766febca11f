"""Which kinds convert, and the entry points: to_hub, from_hub, convert."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from capd_py.api.conversion import addons, clusterclass, core, docker, kubeadm, preserve, runtime
from capd_py.api.conversion.fields import (
    ConversionError,
    Obj,
    VersionResolver,
    default_resolver,
    drop_empty,
    group_of,
)

HUB_VERSION = "v1beta2"
SPOKE_VERSION = "v1beta1"


@dataclass(frozen=True)
class KindConversion:
    up: Callable[[Obj], None]
    down: Callable[[Obj, VersionResolver], None]
    # Upstream stores the hub object on down-conversion for every kind whose v1beta1 cannot say everything;
    # it does not for MachineSet, ClusterResourceSet(Binding), DockerClusterTemplate, DockerMachinePoolTemplate,
    # DevClusterTemplate.
    preserve: bool = True
    # Required objects kept when empty (see fields.drop_empty).
    keep_empty: frozenset[str] = frozenset()
    # the older version served beside the hub (upstream's runtime group has v1alpha1, not v1beta1)
    spoke: str = SPOKE_VERSION


# Upstream's Docker templates marshal `spec.template.spec` even when empty (no omitzero there).
_TEMPLATE = frozenset({"spec.template.spec"})
# A Dev* backend is a pointer to a struct: `inMemory: {}` (or `docker: {}`) names the backend and must stay.
_BACKEND = frozenset({"spec.backend", "spec.backend.docker", "spec.backend.inMemory"})
_TEMPLATE_BACKEND = _TEMPLATE | {f"spec.template.{p}" for p in _BACKEND}

_KINDS: dict[tuple[str, str], KindConversion] = {
    ("cluster.x-k8s.io", "Cluster"): KindConversion(clusterclass.cluster_up, clusterclass.cluster_down),
    ("cluster.x-k8s.io", "ClusterClass"): KindConversion(
        clusterclass.clusterclass_up, clusterclass.clusterclass_down),
    ("cluster.x-k8s.io", "Machine"): KindConversion(core.machine_up, core.machine_down),
    ("cluster.x-k8s.io", "MachineSet"): KindConversion(core.machineset_up, core.machineset_down, preserve=False),
    ("cluster.x-k8s.io", "MachineDeployment"): KindConversion(
        core.machinedeployment_up, core.machinedeployment_down),
    ("cluster.x-k8s.io", "MachineHealthCheck"): KindConversion(
        core.machinehealthcheck_up, core.machinehealthcheck_down),
    ("cluster.x-k8s.io", "MachinePool"): KindConversion(core.machinepool_up, core.machinepool_down),
    # the same fields in both versions; upstream's ConvertTo/ConvertFrom store no conversion data
    ("cluster.x-k8s.io", "MachineDrainRule"): KindConversion(docker.identity_up, docker.identity_down, preserve=False),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfig"): KindConversion(
        kubeadm.kubeadmconfig_up, kubeadm.kubeadmconfig_down),
    ("bootstrap.cluster.x-k8s.io", "KubeadmConfigTemplate"): KindConversion(
        kubeadm.kubeadmconfigtemplate_up, kubeadm.kubeadmconfigtemplate_down),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlane"): KindConversion(
        kubeadm.kubeadmcontrolplane_up, kubeadm.kubeadmcontrolplane_down),
    ("controlplane.cluster.x-k8s.io", "KubeadmControlPlaneTemplate"): KindConversion(
        kubeadm.kubeadmcontrolplanetemplate_up, kubeadm.kubeadmcontrolplanetemplate_down),
    ("addons.cluster.x-k8s.io", "ClusterResourceSet"): KindConversion(
        addons.clusterresourceset_up, addons.clusterresourceset_down, preserve=False),
    ("addons.cluster.x-k8s.io", "ClusterResourceSetBinding"): KindConversion(
        addons.clusterresourcesetbinding_up, addons.clusterresourcesetbinding_down, preserve=False),
    ("infrastructure.cluster.x-k8s.io", "DockerCluster"): KindConversion(
        docker.dockercluster_up, docker.dockercluster_down),
    ("infrastructure.cluster.x-k8s.io", "DockerClusterTemplate"): KindConversion(
        docker.dockerclustertemplate_up, docker.dockerclustertemplate_down, preserve=False, keep_empty=_TEMPLATE),
    ("infrastructure.cluster.x-k8s.io", "DockerMachine"): KindConversion(
        docker.dockermachine_up, docker.dockermachine_down),
    ("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate"): KindConversion(
        docker.dockermachinetemplate_up, docker.dockermachinetemplate_down, keep_empty=_TEMPLATE),
    ("infrastructure.cluster.x-k8s.io", "DockerMachinePool"): KindConversion(
        docker.dockermachinepool_up, docker.dockermachinepool_down),
    ("infrastructure.cluster.x-k8s.io", "DockerMachinePoolTemplate"): KindConversion(
        docker.identity_up, docker.identity_down, preserve=False, keep_empty=_TEMPLATE),
    # Upstream v1.14 serves DevMachinePool and DevMachinePoolTemplate at v1beta2 only.
    ("infrastructure.cluster.x-k8s.io", "DevCluster"): KindConversion(
        docker.devcluster_up, docker.devcluster_down, keep_empty=_BACKEND),
    ("infrastructure.cluster.x-k8s.io", "DevClusterTemplate"): KindConversion(
        docker.devclustertemplate_up, docker.devclustertemplate_down, preserve=False, keep_empty=_TEMPLATE_BACKEND),
    ("infrastructure.cluster.x-k8s.io", "DevMachine"): KindConversion(
        docker.dockermachine_up, docker.dockermachine_down, keep_empty=_BACKEND),
    ("infrastructure.cluster.x-k8s.io", "DevMachineTemplate"): KindConversion(
        docker.dockermachinetemplate_up, docker.dockermachinetemplate_down, keep_empty=_TEMPLATE_BACKEND),
    # an empty namespaceSelector (what the webhook defaults) is a set pointer upstream, kept in both versions
    ("runtime.cluster.x-k8s.io", "ExtensionConfig"): KindConversion(
        runtime.extensionconfig_up, runtime.extensionconfig_down, preserve=False,
        keep_empty=frozenset({"spec.namespaceSelector"}), spoke="v1alpha1"),
}

CONVERTIBLE_KINDS: frozenset[tuple[str, str]] = frozenset(_KINDS)
"""(group, kind) of every kind served in an older version (v1beta1, or spoke_version's) and v1beta2."""


def spoke_version(group: str, kind: str) -> str:
    """The older version a kind is served in beside v1beta2 (v1beta1 but for ExtensionConfig's v1alpha1)."""
    conversion = _KINDS.get((group, kind))
    return conversion.spoke if conversion is not None else SPOKE_VERSION


def _lookup(obj: Obj, expected_version: str | None) -> tuple[str, KindConversion]:
    """`expected_version` None: the kind's spoke version."""
    api_version, kind = obj.get("apiVersion", ""), obj.get("kind", "")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise ConversionError("apiVersion and kind must be strings")
    group = group_of(api_version)
    version = api_version.rsplit("/", 1)[-1]
    conversion = _KINDS.get((group, kind))
    expected = expected_version or (conversion.spoke if conversion is not None else SPOKE_VERSION)
    if version != expected:
        raise ConversionError(f"{kind} {api_version}: expected version {expected}")
    if conversion is None:
        raise ConversionError(f"no conversion for {kind} in group {group!r}")
    return group, conversion


def _tidy(obj: Obj, conversion: KindConversion) -> None:
    for key in ("spec", "status"):
        if isinstance(obj.get(key), dict):
            obj[key] = drop_empty(obj[key], conversion.keep_empty, key)
            if not obj[key]:
                del obj[key]


def _up(obj: Obj, group: str, conversion: KindConversion) -> Obj:
    out = copy.deepcopy(obj)
    conversion.up(out)
    _tidy(out, conversion)
    out["apiVersion"] = f"{group}/{HUB_VERSION}"
    return out


def _down(obj: Obj, group: str, conversion: KindConversion, resolve: VersionResolver) -> Obj:
    out = copy.deepcopy(obj)
    conversion.down(out, resolve)
    _tidy(out, conversion)
    out["apiVersion"] = f"{group}/{conversion.spoke}"
    return out


def to_hub(obj: Obj, resolve: VersionResolver = default_resolver) -> Obj:
    """v1beta1 -> v1beta2. The conversion-data annotation, if any, is consumed: fields the v1beta1 client
    left as they were come back exactly as stored (see preserve.py)."""
    group, conversion = _lookup(obj, None)
    spoke = copy.deepcopy(obj)
    stored = preserve.take(spoke)
    converted = _up(spoke, group, conversion)
    if stored is None or not conversion.preserve:
        return converted
    stored = {**stored, "apiVersion": converted["apiVersion"], "kind": converted["kind"],
              "metadata": converted.get("metadata", {})}
    baseline = _up(_down(stored, group, conversion, resolve), group, conversion)
    return preserve.restore(stored, baseline, converted)


def from_hub(obj: Obj, resolve: VersionResolver = default_resolver) -> Obj:
    """v1beta2 -> v1beta1, recording the hub object in the conversion-data annotation (as upstream)."""
    group, conversion = _lookup(obj, HUB_VERSION)
    out = _down(obj, group, conversion, resolve)
    if conversion.preserve:
        preserve.store(obj, out)
    return out


def convert(obj: Obj, to_api_version: str, resolve: VersionResolver = default_resolver) -> Obj:
    """What a ConversionReview asks: `obj` in `to_api_version` (an unchanged copy if already there)."""
    api_version = obj.get("apiVersion", "")
    if api_version == to_api_version:
        return copy.deepcopy(obj)
    if not isinstance(api_version, str) or group_of(api_version) != group_of(to_api_version):
        raise ConversionError(f"cannot convert {api_version!r} to {to_api_version!r}: different groups")
    target = to_api_version.rsplit("/", 1)[-1]
    if target == HUB_VERSION:
        return to_hub(obj, resolve)
    if target == spoke_version(group_of(to_api_version), str(obj.get("kind", ""))):
        return from_hub(obj, resolve)
    raise ConversionError(f"unsupported target version {to_api_version!r}")
