"""KubeadmControlPlane decisions (pure: observed state in, one next action out).

Follows upstream KCP semantics in a simplified, one-step-at-a-time form:
- the first machine runs `kubeadm init`; nothing else is created until the control plane is initialised;
- scale up / down by one machine per step, and only while every other machine is healthy (node Ready,
  static pods running) and none is being deleted;
- scale down picks a machine marked with the delete annotation, else an outdated one, else the oldest,
  always from the failure domain with the most machines; its etcd member is removed before deletion;
- rollout: a machine is outdated when its version, infrastructure template, KubeadmConfig spec differ
  from the KCP, or it was created before spec.rollout.after; with maxSurge 1 (default) a new machine is
  added first and then an outdated one removed; with maxSurge 0 the outdated one goes first;
- new machines go to the control-plane failure domain with the fewest machines.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from capd_py.api import contract
from capd_py.api.labels import (
    CLONED_FROM_NAME,
    CLUSTER_NAME,
    CONTROL_PLANE,
    CONTROL_PLANE_NAME,
)
from capd_py.reconcile.kubeadmconfig import cluster_configuration

# --- conditions (v1beta2 types and reasons) -------------------------------------------------------
AVAILABLE = "Available"
INITIALIZED = "Initialized"
CERTIFICATES_AVAILABLE = "CertificatesAvailable"
MACHINES_READY = "MachinesReady"
MACHINES_UP_TO_DATE = "MachinesUpToDate"
ROLLING_OUT = "RollingOut"
SCALING_UP = "ScalingUp"
SCALING_DOWN = "ScalingDown"
ETCD_CLUSTER_HEALTHY = "EtcdClusterHealthy"
COMPONENTS_HEALTHY = "ControlPlaneComponentsHealthy"
DELETING = "Deleting"
REMEDIATING = "Remediating"
# capd-py's stand-in for upstream's admission warning about an even number of replicas.
REPLICAS_WARNING = "ReplicasWarning"

CERTIFICATES_EXPIRY_ANNOTATION = "machine.cluster.x-k8s.io/certificates-expiry"  # on the KubeadmConfig, RFC3339

STATIC_PODS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")


def parse_time(s: str | None) -> _dt.datetime | None:
    if not s:
        return None
    try:
        return _dt.datetime.fromisoformat(str(s).replace("Z", "+00:00")).astimezone(_dt.UTC)
    except ValueError:
        return None


# --- observed machine ---------------------------------------------------------------------------

@dataclass
class MachineView:
    name: str
    created: _dt.datetime
    failure_domain: str = ""
    deleting: bool = False
    delete_annotation: bool = False
    node_name: str = ""
    node_ready: bool = False
    pods_ready: dict[str, bool] = field(default_factory=dict)  # static pod component -> running & ready
    outdated_reasons: list[str] = field(default_factory=list)
    machine_ready: bool | None = None      # Machine Ready condition, when the Machine controller sets it
    machine_available: bool | None = None
    remediate: bool = False                # a MachineHealthCheck asked the owner to remediate (OwnerRemediated=False)

    @property
    def up_to_date(self) -> bool:
        return not self.outdated_reasons

    @property
    def healthy(self) -> bool:
        return bool(self.node_name and self.node_ready and all(self.pods_ready.get(p) for p in STATIC_PODS))

    @property
    def ready(self) -> bool:
        return self.machine_ready if self.machine_ready is not None else self.healthy

    @property
    def available(self) -> bool:
        return self.machine_available if self.machine_available is not None else self.ready


# --- spec helpers -------------------------------------------------------------------------------

def replicas(kcp: dict[str, Any]) -> int:
    r = contract.dig(kcp, "spec", "replicas")
    return 1 if r is None else int(r)


def max_surge(kcp: dict[str, Any]) -> int:
    v = contract.dig(kcp, "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")
    if v is None:
        return 1
    if isinstance(v, str) and v.endswith("%"):
        return math.ceil(replicas(kcp) * int(v[:-1]) / 100)
    return max(0, min(1, int(v)))  # one machine at a time either way


def infra_template_ref(kcp: dict[str, Any]) -> dict[str, str] | None:
    return contract.ref(kcp, "spec", "machineTemplate", "spec", "infrastructureRef")


_NAME_VAR = re.compile(r"\{\{\s*\.(cluster\.name|kubeadmControlPlane\.name|random)\s*\}\}")


def machine_name(kcp: dict[str, Any], cluster_name: str, random: str) -> str:
    """spec.machineNaming.template (upstream variables .cluster.name, .kubeadmControlPlane.name, .random);
    default `<kcp>-<random>`."""
    tpl = contract.dig(kcp, "spec", "machineNaming", "template") or "{{ .kubeadmControlPlane.name }}-{{ .random }}"
    values = {"cluster.name": cluster_name, "kubeadmControlPlane.name": kcp["metadata"]["name"], "random": random}
    name = _NAME_VAR.sub(lambda m: values[m.group(1)], tpl)
    if "{{" in name or len(name) > 63:
        name = f"{kcp['metadata']['name'][:57]}-{random}"
    return name


def selector(cluster_name: str) -> str:
    return f"{CLUSTER_NAME}={cluster_name},{CONTROL_PLANE}"


def machine_labels(kcp: dict[str, Any], cluster_name: str) -> dict[str, str]:
    labels = dict(contract.dig(kcp, "spec", "machineTemplate", "metadata", "labels", default={}) or {})
    labels.update({CLUSTER_NAME: cluster_name, CONTROL_PLANE: "", CONTROL_PLANE_NAME: kcp["metadata"]["name"]})
    return labels


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


def init_config_spec(kcp: dict[str, Any]) -> dict[str, Any]:
    """KubeadmConfig spec for the first machine: the KCP's spec without joinConfiguration (the CRD
    rejects empty objects, so `format` is always set to keep the spec non-empty)."""
    spec = json.loads(json.dumps(contract.dig(kcp, "spec", "kubeadmConfigSpec", default={}) or {}))
    spec.pop("joinConfiguration", None)
    spec.setdefault("format", "cloud-config")
    return spec


def join_config_spec(kcp: dict[str, Any]) -> dict[str, Any]:
    """KubeadmConfig spec for joining machines: no initConfiguration; joinConfiguration.controlPlane set."""
    spec = json.loads(json.dumps(contract.dig(kcp, "spec", "kubeadmConfigSpec", default={}) or {}))
    spec.pop("initConfiguration", None)
    spec.setdefault("format", "cloud-config")
    jc = spec.get("joinConfiguration") or {}
    jc["controlPlane"] = jc.get("controlPlane") or {}
    spec["joinConfiguration"] = jc
    return spec


def kubeadm_spec_differs(kcp: dict[str, Any], config_spec: dict[str, Any] | None) -> bool:
    """Compare a machine's KubeadmConfig spec with the KCP's, ignoring what the bootstrap controller
    fills in (discovery) and which of init/join the machine used."""
    if config_spec is None:
        return False  # config gone (e.g. machine being created/deleted): do not roll on missing data
    want = _prune(contract.dig(kcp, "spec", "kubeadmConfigSpec", default={}) or {})
    have = _prune(config_spec)
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


# --- failure domains ----------------------------------------------------------------------------

def control_plane_failure_domains(cluster: dict[str, Any] | None) -> list[str]:
    return [fd["name"] for fd in contract.failure_domains(cluster)
            if fd.get("name") and fd.get("controlPlane", True)]


def pick_failure_domain_for_scale_up(fds: list[str], machines: list[MachineView]) -> str:
    """The failure domain with the fewest machines (up-to-date ones count first, as upstream)."""
    if not fds:
        return ""
    def key(fd: str) -> tuple[int, int, str]:
        total = sum(1 for m in machines if m.failure_domain == fd and not m.deleting)
        up = sum(1 for m in machines if m.failure_domain == fd and not m.deleting and m.up_to_date)
        return (up, total, fd)
    return min(fds, key=key)


def pick_machine_for_scale_down(machines: list[MachineView], prefer_outdated: bool = True) -> MachineView | None:
    live = [m for m in machines if not m.deleting]
    if not live:
        return None
    pool = [m for m in live if m.delete_annotation]
    if not pool and prefer_outdated:
        pool = [m for m in live if not m.up_to_date]
    if not pool:
        pool = live
    counts: dict[str, int] = {}
    for m in live:
        counts[m.failure_domain] = counts.get(m.failure_domain, 0) + 1
    crowded = max(counts.get(m.failure_domain, 0) for m in pool)
    candidates = [m for m in pool if counts.get(m.failure_domain, 0) == crowded]
    return min(candidates, key=lambda m: (m.created, m.name))  # the oldest


# --- the next step ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    kind: str              # none | create-init | scale-up | scale-down | wait
    reason: str = ""
    message: str = ""
    machine: str = ""      # scale-down target
    failure_domain: str = ""
    rollout: bool = False  # the step is part of a rollout


def next_action(kcp: dict[str, Any], cluster: dict[str, Any], machines: list[MachineView], initialized: bool) -> Action:
    want = replicas(kcp)
    live = [m for m in machines if not m.deleting]
    fds = control_plane_failure_domains(cluster)
    if not machines:
        if want == 0:
            return Action("none", message="No replicas requested")
        return Action("create-init", failure_domain=pick_failure_domain_for_scale_up(fds, machines),
                      message="Creating the first control-plane machine (kubeadm init)")
    if not initialized:
        return Action("wait", "WaitingForControlPlaneInitialized",
                      "Waiting for the first control-plane machine to initialize the control plane")
    deleting = [m.name for m in machines if m.deleting]
    if deleting:
        return Action("wait", "WaitingForMachineDeletion", f"Waiting for Machine {', '.join(sorted(deleting))} "
                      "to be deleted")
    to_fix = sorted((m for m in live if m.remediate), key=lambda m: (m.created, m.name))
    if to_fix:
        sick = to_fix[0]
        others = [m for m in live if m.name != sick.name]
        if not others:
            return Action("wait", "CannotBeRemediated", f"Machine {sick.name} needs remediation, but it is the "
                          "only control-plane machine: scale up first or fix it by hand")
        bad = sorted(m.name for m in others if not m.healthy)
        if bad:
            return Action("wait", "RemediationDeferred", f"Machine {sick.name} needs remediation; waiting for "
                          f"Machine {', '.join(bad)} to be healthy first to keep etcd quorum")
        return Action("scale-down", "Remediating", f"Remediating unhealthy Machine {sick.name}",
                      machine=sick.name)
    unhealthy = sorted(m.name for m in live if not m.healthy)
    outdated = [m for m in live if not m.up_to_date]
    surge = max_surge(kcp)

    def gate(kind: str, **kw: Any) -> Action:
        # the machine being removed is allowed to be unhealthy (e.g. its etcd member is already gone)
        blocking = [n for n in unhealthy if n != kw.get("machine")]
        if blocking:
            return Action("wait", "WaitingForMachinesHealthy",
                          f"Waiting for Machine {', '.join(blocking)} to be healthy (node Ready, static pods "
                          f"running) before {'scaling up' if kind == 'scale-up' else 'scaling down'}",
                          rollout=kw.get("rollout", False))
        return Action(kind, **kw)

    if len(live) < want:
        return gate("scale-up", failure_domain=pick_failure_domain_for_scale_up(fds, live),
                    message=f"Scaling up control plane to {want} replicas (actual {len(live)})")
    if len(live) > want:
        target = pick_machine_for_scale_down(live)
        assert target is not None
        return gate("scale-down", machine=target.name, rollout=bool(outdated) and not target.up_to_date,
                    message=f"Scaling down control plane to {want} replicas (actual {len(live)})")
    if outdated:
        if surge >= 1 or want == 1:
            return gate("scale-up", failure_domain=pick_failure_domain_for_scale_up(fds, live), rollout=True,
                        message=f"Rolling out: adding an up-to-date machine before removing {len(outdated)} "
                                "outdated")
        target = pick_machine_for_scale_down(live)
        assert target is not None
        return gate("scale-down", machine=target.name, rollout=True,
                    message="Rolling out (maxSurge 0): removing an outdated machine first")
    return Action("none")


# --- status -------------------------------------------------------------------------------------

def min_version(versions: list[str]) -> str | None:
    def key(v: str) -> tuple[int, ...]:
        parts = v.lstrip("v").split("-")[0].split(".")
        try:
            return tuple(int(p) for p in parts)
        except ValueError:
            return (0,)
    vs = [v for v in versions if v]
    return min(vs, key=key) if vs else None


def even_replicas_message(kcp: dict[str, Any]) -> str | None:
    r = replicas(kcp)
    if r > 0 and r % 2 == 0:
        return (f"spec.replicas is {r}: an even number of control-plane machines does not improve etcd fault "
                f"tolerance over {r - 1} and a rollout may lose quorum; use an odd number")
    return None


def etcd_member_to_remove(members: list[dict[str, Any]], node_name: str) -> dict[str, Any] | None:
    """From `etcdctl member list -w json` members, the one of `node_name` (kubeadm names members after
    the node)."""
    for m in members:
        if m.get("name") == node_name:
            return m
    return None


def member_id(member: dict[str, Any]) -> int:
    """etcdctl prints IDs as numbers (or hex strings with --hex)."""
    v = member.get("ID")
    return int(v, 16) if isinstance(v, str) else int(v or 0)


def member_id_hex(member: dict[str, Any]) -> str:
    return format(member_id(member), "x")


# --- the workload's kubeadm-config ConfigMap -----------------------------------------------------

KUBEADM_CONFIG_MAP = "kubeadm-config"
_SYNCED_KEYS = ("apiServer", "controllerManager", "scheduler", "etcd", "dns", "imageRepository", "featureGates")


def updated_cluster_configuration(current_yaml: str, kcp: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """The kube-system/kubeadm-config `ClusterConfiguration` a joining machine should see: kubeadm join
    reads it from the cluster, so before adding a machine of a new version (or with changed control-plane
    settings) it must carry spec.version and the KCP's clusterConfiguration sections. None: unchanged."""
    cur = yaml.safe_load(current_yaml or "") or {}
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
