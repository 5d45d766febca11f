"""The objects a new control-plane Machine consists of (upstream: internal/desiredstate): the
infrastructure machine cloned from spec.machineTemplate.spec.infrastructureRef, the KubeadmConfig
(init for the first machine, join for the others) and the Machine pointing at both, all owned by the KCP.

The infrastructure clone and the Machine's references reuse the MachineSet helpers
(`machineset.clone_from_template`, `coreutil.ref_of`), so both owners build Machines the same way.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from capd_py.api import contract, gvk, versions
from capd_py.api.admission.core import machine_deletion
from capd_py.api.gvk import GVK, KUBEADM_CONFIG, MACHINE
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTROL_PLANE,
    CONTROL_PLANE_NAME,
    KCP_CLEANUP_HOOK,
    KCP_REMEDIATION_FOR,
)
from capd_py.reconcile import coreutil
from capd_py.reconcile.kcp.common import infra_template_ref
from capd_py.reconcile.kcp.remediation import replacement_annotation
from capd_py.reconcile.machineset import clone_from_template, instance_kind

_NAME_VAR = re.compile(r"\{\{\s*\.(cluster\.name|kubeadmControlPlane\.name|random)\s*\}\}")

# Machine spec fields copied from spec.machineTemplate.spec when set.
MACHINE_TEMPLATE_FIELDS = ("readinessGates", "deletion", "taints")


def machine_name(kcp: dict[str, Any], cluster_name: str, random: str) -> str:
    """spec.machineNaming.template (upstream variables .cluster.name, .kubeadmControlPlane.name, .random);
    default `<kcp>-<random>`."""
    tpl = contract.dig(kcp, "spec", "machineNaming", "template") or "{{ .kubeadmControlPlane.name }}-{{ .random }}"
    values = {"cluster.name": cluster_name, "kubeadmControlPlane.name": kcp["metadata"]["name"], "random": random}
    name = _NAME_VAR.sub(lambda m: values[m.group(1)], tpl)
    if "{{" in name or len(name) > 63:
        name = f"{kcp['metadata']['name'][:57]}-{random}"
    return name


def machine_labels(kcp: dict[str, Any], cluster_name: str) -> dict[str, str]:
    labels = dict(contract.dig(kcp, "spec", "machineTemplate", "metadata", "labels", default={}) or {})
    labels.update({CLUSTER_NAME: cluster_name, CONTROL_PLANE: "", CONTROL_PLANE_NAME: kcp["metadata"]["name"]})
    return labels


# kubeadm's ControlPlaneKubeletLocalMode gate (kubelets talk to their own API server): upstream's KCP turns it on
# for 1.31 <= version < 1.36 (desiredstate.DefaultFeatureGates); from 1.36 the gate no longer exists
KUBELET_LOCAL_MODE = "ControlPlaneKubeletLocalMode"


def default_feature_gates(spec: dict[str, Any], version: str) -> dict[str, Any]:
    """`spec` with upstream KCP's default kubeadm feature gate for `version`, unless the spec sets it itself."""
    try:
        v = versions.parse(version)
    except ValueError:
        return spec
    if not (1, 31) <= (v.major, v.minor) < (1, 36):
        return spec
    cc = dict(spec.get("clusterConfiguration") or {})
    gates = dict(cc.get("featureGates") or {})
    gates.setdefault(KUBELET_LOCAL_MODE, True)
    cc["featureGates"] = gates
    return {**spec, "clusterConfiguration": cc}


def _kubeadm_spec(kcp: dict[str, Any]) -> dict[str, Any]:
    """A copy of spec.kubeadmConfigSpec with upstream's default feature gates for spec.version (as upstream's
    ComputeDesiredKubeadmConfig writes into every KubeadmConfig it makes)."""
    spec = dict(json.loads(json.dumps(contract.dig(kcp, "spec", "kubeadmConfigSpec", default={}) or {})))
    return default_feature_gates(spec, str(contract.dig(kcp, "spec", "version") or ""))


def init_config_spec(kcp: dict[str, Any]) -> dict[str, Any]:
    """KubeadmConfig spec for the first machine: the KCP's spec without joinConfiguration (the CRD
    rejects empty objects, so `format` is always set to keep the spec non-empty)."""
    spec = _kubeadm_spec(kcp)
    spec.pop("joinConfiguration", None)
    spec.setdefault("format", "cloud-config")
    return spec


def join_config_spec(kcp: dict[str, Any]) -> dict[str, Any]:
    """KubeadmConfig spec for joining machines: no initConfiguration; joinConfiguration.controlPlane set."""
    spec = _kubeadm_spec(kcp)
    spec.pop("initConfiguration", None)
    spec.setdefault("format", "cloud-config")
    jc = spec.get("joinConfiguration") or {}
    jc["controlPlane"] = jc.get("controlPlane") or {}
    spec["joinConfiguration"] = jc
    return spec


def template_gvk(kcp: dict[str, Any]) -> tuple[GVK, dict[str, str]] | str:
    """The kind and reference of the infrastructure machine template, or why there is none."""
    tref = infra_template_ref(kcp)
    tg = gvk.by_group_kind(tref["apiGroup"], tref["kind"]) if tref else None
    if not tref or tg is None:
        return "spec.machineTemplate.spec.infrastructureRef is not set or of an unknown kind"
    return tg, tref


@dataclass(frozen=True)
class DesiredMachine:
    """Create in this order: infra, config, machine (then hand infra and config to the Machine)."""
    name: str
    infra_gvk: GVK
    infra: dict[str, Any]
    config: dict[str, Any]
    machine: dict[str, Any]


def desired_machine(kcp: dict[str, Any], cluster: dict[str, Any], template: dict[str, Any], name: str, *,
                    init: bool, failure_domain: str, infra_gvk: GVK | None = None) -> DesiredMachine | str:
    """The three objects of a new control-plane Machine called `name`, or why they cannot be built. `infra_gvk`:
    the infrastructure machine's kind as its CRD serves it (the controller resolves it through the contract);
    without it, a kind capd-py serves."""
    ns, cname = kcp["metadata"]["namespace"], cluster["metadata"]["name"]
    infra_kind = instance_kind(template["kind"])
    if infra_gvk is None:
        infra_gvk = gvk.by_group_kind(gvk.group_of(template["apiVersion"]), infra_kind)
    if infra_gvk is None:
        return f"unknown infrastructure machine kind {infra_kind}"
    labels = machine_labels(kcp, cname)
    owner = contract.owner_ref(kcp)
    infra = clone_from_template(template, name, ns, cname, owner, extra_labels=labels)
    infra["apiVersion"] = infra_gvk.api_version
    config = {
        "apiVersion": KUBEADM_CONFIG.api_version, "kind": KUBEADM_CONFIG.kind,
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels), "ownerReferences": [owner]},
        "spec": init_config_spec(kcp) if init else join_config_spec(kcp),
    }
    mt = contract.dig(kcp, "spec", "machineTemplate", default={}) or {}
    mspec: dict[str, Any] = {
        "clusterName": cname,
        "version": contract.dig(kcp, "spec", "version"),
        "bootstrap": {"configRef": coreutil.ref_of(config)},
        "infrastructureRef": coreutil.ref_of(infra),
    }
    if failure_domain:
        mspec["failureDomain"] = failure_domain
    for k in MACHINE_TEMPLATE_FIELDS:
        if contract.dig(mt, "spec", k):
            mspec[k] = contract.dig(mt, "spec", k)
    machine = {
        "apiVersion": MACHINE.api_version, "kind": MACHINE.kind,
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels),
                     "annotations": {**(contract.dig(mt, "metadata", "annotations", default={}) or {}),
                                     KCP_CLEANUP_HOOK: "", **_remediation_for(kcp)},
                     "ownerReferences": [owner]},
        "spec": mspec,
    }
    return DesiredMachine(name=name, infra_gvk=infra_gvk, infra=infra, config=config, machine=machine)


def machine_in_place_patch(kcp: dict[str, Any], machine: dict[str, Any]) -> dict[str, Any] | None:
    """spec.machineTemplate.spec fields upstream changes on existing control-plane Machines without a rollout
    (readinessGates, deletion timeouts, taints) and the control-plane-name label; None when they match."""
    mt = contract.dig(kcp, "spec", "machineTemplate", "spec", default={}) or {}
    want = {**{k: mt.get(k) for k in MACHINE_TEMPLATE_FIELDS}, "deletion": machine_deletion(mt.get("deletion"))}
    out: dict[str, Any] = coreutil.in_place_spec_patch(want, machine.get("spec") or {}) or {}
    # the label every control-plane Machine of the KCP carries (upstream forces it on update): an adopted
    # Machine, made before the KCP, gets it here
    if (machine["metadata"].get("labels") or {}).get(CONTROL_PLANE_NAME) != kcp["metadata"]["name"]:
        out["metadata"] = {"labels": {CONTROL_PLANE_NAME: kcp["metadata"]["name"]}}
    return out or None


def _remediation_for(kcp: dict[str, Any]) -> dict[str, str]:
    """A Machine made while a remediation is in progress replaces the remediated one: it carries the remediation's
    data, so a failure of it counts as a retry (upstream desired_state)."""
    v = replacement_annotation(kcp)
    return {KCP_REMEDIATION_FOR: v} if v else {}
