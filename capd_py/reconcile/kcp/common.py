"""What every KubeadmControlPlane decision module shares: condition types, the observed view of one
control-plane Machine, the next-step `Action`, and spec accessors."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract
from capd_py.api.admission import checks
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE

# --- conditions (v1beta2 types) -------------------------------------------------------------------
AVAILABLE = "Available"
INITIALIZED = "Initialized"
CERTIFICATES_AVAILABLE = "CertificatesAvailable"
MACHINES_READY = "MachinesReady"
MACHINES_UP_TO_DATE = "MachinesUpToDate"
ROLLING_OUT = "RollingOut"
SCALING_UP = "ScalingUp"
SCALING_DOWN = "ScalingDown"
ETCD_CLUSTER_HEALTHY = "EtcdClusterHealthy"
ETCD_MEMBER_HEALTHY = "EtcdMemberHealthy"  # on each Machine
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
    remediation_for: str = ""              # its remediation-for annotation: it replaced a remediated Machine
    # for its etcd member's health (reconcile/kcp/etcdhealth.py): upstream goes by status.nodeRef, not by a Node found
    node_ref: str = ""                     # status.nodeRef.name
    provider_id: str = ""
    infra_kind: str = ""                   # spec.infrastructureRef.kind
    node_created: _dt.datetime | None = None
    etcd_member: dict[str, Any] | None = None  # the Machine's EtcdMemberHealthy condition as it is

    @property
    def up_to_date(self) -> bool:
        return not self.outdated_reasons

    @property
    def healthy(self) -> bool:
        return bool(self.node_name and self.node_ready and all(self.pods_ready.get(p) for p in STATIC_PODS))

    @property
    def passes_preflight(self) -> bool:
        """Upstream KCP's preflight health of a machine before another scale step (checkHealthiness): a Node is
        linked to it and its static pods are Ready; the Node itself need not be Ready yet (upstream's conditions
        are the pods' and etcd's, and a joined control plane's Node turns Ready seconds after its pods)."""
        return bool(self.node_name and all(self.pods_ready.get(p) for p in STATIC_PODS))

    @property
    def ready(self) -> bool:
        return self.machine_ready if self.machine_ready is not None else self.healthy

    @property
    def available(self) -> bool:
        return self.machine_available if self.machine_available is not None else self.ready


# --- the next step ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    kind: str              # none | create-init | scale-up | scale-down | wait
    reason: str = ""
    message: str = ""
    machine: str = ""      # scale-down target
    failure_domain: str = ""
    rollout: bool = False  # the step is part of a rollout
    # remediation: the OwnerRemediated (reason, message) `machine` gets, and the remediation-in-progress
    # annotation value the KCP gets once `machine` is deleted
    machine_condition: tuple[str, str] | None = None
    remediation_start: str = ""


# --- spec helpers -------------------------------------------------------------------------------

def replicas(kcp: dict[str, Any]) -> int:
    r = contract.dig(kcp, "spec", "replicas")
    return 1 if r is None else int(r)


def max_surge(kcp: dict[str, Any]) -> int:
    v = contract.dig(kcp, "spec", "rollout", "strategy", "rollingUpdate", "maxSurge")
    if v is None:
        return 1
    # upstream reads it with IntValue() (update.go): a string that is no integer ("50%", upstream's e2e
    # kcp-scale-in flavor's `0"`) is 0; the webhook allows only 0 and 1
    return max(0, min(1, checks.int_value(v)))


def infra_template_ref(kcp: dict[str, Any]) -> dict[str, str] | None:
    return contract.ref(kcp, "spec", "machineTemplate", "spec", "infrastructureRef")


def selector(cluster_name: str) -> str:
    return f"{CLUSTER_NAME}={cluster_name},{CONTROL_PLANE}"
