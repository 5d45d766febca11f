"""Rollout decisions (upstream: internal/controllers/upgrade.go and the up-to-date checks): when a
control-plane Machine is outdated, which Machines need their API server certificate expiry noted, and
the kube-system/kubeadm-config ClusterConfiguration a joining machine must find in the workload cluster.

Which step a rollout takes next (surge or remove) is decided with every other scaling step in `scale.py`.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

import yaml

from capd_py.api import contract, kubeyaml
from capd_py.api.labels import CLONED_FROM_NAME
from capd_py.reconcile.kcp.common import CERTIFICATES_EXPIRY_ANNOTATION, infra_template_ref, parse_time
from capd_py.reconcile.kcp.desiredstate import default_feature_gates
from capd_py.reconcile.kubeadmconfig import cluster_configuration

KUBEADM_CONFIG_MAP = "kubeadm-config"
_SYNCED_KEYS = ("apiServer", "controllerManager", "scheduler", "etcd", "dns", "imageRepository", "featureGates")
API_SERVER_PORT = 6443


def _prune(v: Any) -> Any:
    """Drop empty values recursively so `{}` and a missing field compare equal."""
    if isinstance(v, dict):
        out = {k: _prune(x) for k, x in v.items()}
        return {k: x for k, x in out.items() if x not in (None, {}, [], "")}
    if isinstance(v, list):
        return [_prune(x) for x in v]
    return v


def _without(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}


def kubeadm_spec_differs(kcp: dict[str, Any], config_spec: dict[str, Any] | None) -> bool:
    """Compare a machine's KubeadmConfig spec with the KCP's, ignoring what the bootstrap controller
    fills in (discovery) and which of init/join the machine used. Both sides get upstream KCP's default
    feature gates first: a Machine made with the gate spelled out (upstream's KCP writes it; the kcp-adoption
    flavor's standalone KubeadmConfig has it) matches a KCP that leaves it to the default, and the other way."""
    if config_spec is None:
        return False  # config gone (e.g. machine being created/deleted): do not roll on missing data
    version = str(contract.dig(kcp, "spec", "version") or "")
    want = _prune(default_feature_gates(contract.dig(kcp, "spec", "kubeadmConfigSpec", default={}) or {}, version))
    have = _prune(default_feature_gates(config_spec, version))
    want.setdefault("format", "cloud-config")
    have.setdefault("format", "cloud-config")
    if _without(want, "initConfiguration", "joinConfiguration") != _without(have, "initConfiguration",
                                                                           "joinConfiguration"):
        return True
    if "initConfiguration" in config_spec:
        return bool(want.get("initConfiguration", {}) != have.get("initConfiguration", {}))

    def join(d: dict[str, Any]) -> dict[str, Any]:
        return _without(d.get("joinConfiguration") or {}, "discovery", "controlPlane")
    return join(want) != join(have)


def outdated_reasons(kcp: dict[str, Any], machine: dict[str, Any], config_spec: dict[str, Any] | None,
                     infra: dict[str, Any] | None, now: _dt.datetime,
                     config_meta: dict[str, Any] | None = None) -> list[str]:
    out: list[str] = []
    want_v = contract.dig(kcp, "spec", "version")
    have_v = contract.dig(machine, "spec", "version")
    if want_v and have_v != want_v:
        out.append(f"Version {have_v}, {want_v} required")
    tpl = infra_template_ref(kcp)
    if tpl and infra is not None:
        cloned = (infra.get("metadata", {}).get("annotations") or {}).get(CLONED_FROM_NAME)
        if cloned and cloned != tpl["name"]:
            out.append(f"{infra.get('kind', 'InfrastructureMachine')} is not up-to-date (cloned from {cloned}, "
                       f"{tpl['name']} required)")
    if kubeadm_spec_differs(kcp, config_spec):
        out.append("KubeadmConfig is not up-to-date")
    days = contract.dig(kcp, "spec", "rollout", "before", "certificatesExpiryDays")
    expiry = parse_time(((config_meta or {}).get("annotations") or {}).get(CERTIFICATES_EXPIRY_ANNOTATION))
    if days and expiry and expiry < now + _dt.timedelta(days=int(days)):
        out.append(f"Certificates expire on {expiry.strftime('%Y-%m-%d')}, within spec.rollout.before."
                   f"certificatesExpiryDays ({int(days)})")
    after = parse_time(contract.dig(kcp, "spec", "rollout", "after"))
    created = parse_time(machine.get("metadata", {}).get("creationTimestamp"))
    if after and after <= now and created and created < after:
        out.append("Machine was created before spec.rollout.after")
    return out


# --- certificate expiry (spec.rollout.before.certificatesExpiryDays) -------------------------------

def tracks_certificate_expiry(kcp: dict[str, Any]) -> bool:
    """Like upstream, the API server certificate expiry is only noted when a rollout depends on it."""
    return bool(contract.dig(kcp, "spec", "rollout", "before", "certificatesExpiryDays"))


def needs_certificate_expiry(machine: dict[str, Any], config: dict[str, Any] | None) -> bool:
    """A live Machine whose KubeadmConfig does not carry the expiry annotation yet (noted once)."""
    if machine["metadata"].get("deletionTimestamp") or config is None:
        return False
    return CERTIFICATES_EXPIRY_ANNOTATION not in (config["metadata"].get("annotations") or {})


def certificate_expiry_patch(expiry: str) -> dict[str, Any]:
    return {"metadata": {"annotations": {CERTIFICATES_EXPIRY_ANNOTATION: expiry}}}


# --- the workload's kubeadm-config ConfigMap -----------------------------------------------------

def updated_cluster_configuration(current_yaml: str, kcp: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """The kube-system/kubeadm-config `ClusterConfiguration` a joining machine should see: kubeadm join
    reads it from the cluster, so before adding a machine of a new version (or with changed control-plane
    settings) it must carry spec.version and the KCP's clusterConfiguration sections. None: unchanged."""
    cur = kubeyaml.load(current_yaml or "") or {}
    if not isinstance(cur, dict):
        return None
    spec = contract.dig(kcp, "spec", "kubeadmConfigSpec", default={}) or {}
    want = cluster_configuration(spec, cluster, str(contract.dig(kcp, "spec", "version") or ""))
    new = dict(cur)
    if want.get("kubernetesVersion"):
        new["kubernetesVersion"] = want["kubernetesVersion"]
    given = spec.get("clusterConfiguration") or {}
    for k in _SYNCED_KEYS:
        if k in given and k in want:
            new[k] = want[k]
    if new == cur:
        return None
    return str(yaml.safe_dump(new, sort_keys=False))


def kubeadm_config_map_patch(config_map: dict[str, Any], kcp: dict[str, Any],
                             cluster: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch bringing the workload's kubeadm-config in step with the KCP, None when it is."""
    new = updated_cluster_configuration((config_map.get("data") or {}).get("ClusterConfiguration", ""), kcp, cluster)
    if new is None:
        return None
    return {"metadata": {"resourceVersion": config_map["metadata"]["resourceVersion"]},
            "data": {"ClusterConfiguration": new}}
