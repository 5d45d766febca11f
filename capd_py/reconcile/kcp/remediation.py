"""Remediation decisions (upstream: controlplane/kubeadm reconcilers remediation.go): a control-plane Machine a
MachineHealthCheck marked (OwnerRemediated=False) is replaced by deleting it, one at a time.

As upstream:
- one remediation at a time: the KCP carries `controlplane.cluster.x-k8s.io/remediation-in-progress` (JSON
  {machine, timestamp, retryCount}) from the deletion until the replacement Machine exists; the replacement gets
  it as `controlplane.cluster.x-k8s.io/remediation-for`, so a replacement that fails too is a *retry*;
- retry limits from `spec.remediation`: within `minHealthyPeriodSeconds` (default 1 h) of the last remediation a
  new failure counts as a retry of the same machine; a retry waits `retryPeriodSeconds` (default 0) after the last
  one and stops after `maxRetry` retries (unlimited when unset);
- before the control plane is initialized the first Machine may be remediated (a failed `kubeadm init`); after,
  never the last one, never while another Machine provisions or is deleted, never while another member is
  unhealthy (etcd quorum comes first);
- the Machine's OwnerRemediated condition says why it waits (reasons RemediationDeferred / CannotBeRemediated, then
  MachineDeleting), with upstream's messages; `status.lastRemediation` shows the newest remediation.
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from typing import Any

from capd_py.api import contract, godur
from capd_py.api.labels import KCP_REMEDIATION_FOR, KCP_REMEDIATION_IN_PROGRESS
from capd_py.reconcile.kcp.common import Action, MachineView

IN_PROGRESS_ANNOTATION = KCP_REMEDIATION_IN_PROGRESS
FOR_ANNOTATION = KCP_REMEDIATION_FOR
DEFAULT_MIN_HEALTHY_PERIOD_SECONDS = 3600

R_DEFERRED = "RemediationDeferred"
R_CANNOT = "CannotBeRemediated"
R_DELETING = "MachineDeleting"
R_REMEDIATING = "Remediating"


@dataclass(frozen=True)
class RemediationData:
    """What upstream keeps in the two annotations (and shows as status.lastRemediation)."""
    machine: str
    timestamp: _dt.datetime
    retry_count: int = 0

    def to_annotation(self) -> str:
        return json.dumps({"machine": self.machine, "timestamp": _rfc3339(self.timestamp),
                           "retryCount": self.retry_count}, separators=(",", ":"))

    @classmethod
    def from_annotation(cls, value: str | None) -> RemediationData | None:
        """None for a missing or unreadable value (upstream then treats the machine as never remediated)."""
        if not value:
            return None
        try:
            d = json.loads(value)
            ts = _parse_time(d.get("timestamp"))
            return cls(str(d["machine"]), ts or _dt.datetime.min.replace(tzinfo=_dt.UTC), int(d.get("retryCount") or 0))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def to_status(self) -> dict[str, Any]:
        return {"machine": self.machine, "time": _rfc3339(self.timestamp), "retryCount": self.retry_count}


def _rfc3339(t: _dt.datetime) -> str:
    return t.astimezone(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(v: Any) -> _dt.datetime | None:
    if not v:
        return None
    return _dt.datetime.fromisoformat(str(v).replace("Z", "+00:00"))


def machines_to_remediate(live: list[MachineView]) -> list[MachineView]:
    """Marked machines in the order remediation takes them: not provisioned (no node) first, then unhealthy
    static pods, then the oldest (upstream's "most broken first")."""
    return sorted((m for m in live if m.remediate),
                  key=lambda m: (bool(m.node_name), m.healthy, m.created, m.name))


def _spec_seconds(kcp: dict[str, Any], field: str, default: int) -> int:
    v = contract.dig(kcp, "spec", "remediation", field)
    return default if v is None else int(v)


def retry_limits(kcp: dict[str, Any], sick: MachineView, now: _dt.datetime) -> tuple[RemediationData, Action | None]:
    """upstream checkRetryLimits: the data for this remediation, and a wait that holds it (None: go ahead)."""
    data = RemediationData(sick.name, now, 0)
    last = RemediationData.from_annotation(sick.remediation_for)
    if last is None:
        return data, None
    min_healthy = _spec_seconds(kcp, "minHealthyPeriodSeconds", DEFAULT_MIN_HEALTHY_PERIOD_SECONDS)
    retry_period = _spec_seconds(kcp, "retryPeriodSeconds", 0)
    last_time = last.timestamp
    if last_time == _dt.datetime.min.replace(tzinfo=_dt.UTC):
        last_time = now - _dt.timedelta(seconds=2 * max(min_healthy, retry_period))
    if last_time + _dt.timedelta(seconds=min_healthy) <= now:
        return data, None  # healthy long enough: a new sequence
    data = RemediationData(sick.name, now, last.retry_count)
    if last_time + _dt.timedelta(seconds=retry_period) > now:
        msg = (f"KubeadmControlPlane can't remediate this machine because the operation already failed in the latest "
               f"{godur.format_seconds(max(0, int(retry_period)))} (RetryPeriodSeconds)")
        return data, _hold(sick, R_DEFERRED, f"Machine {sick.name}: {msg}", msg)
    max_retry = contract.dig(kcp, "spec", "remediation", "maxRetry")
    if max_retry is not None and data.retry_count >= int(max_retry):
        msg = (f"KubeadmControlPlane can't remediate this machine because the operation already failed "
               f"{int(max_retry)} times (MaxRetry)")
        return data, _hold(sick, R_CANNOT, f"Machine {sick.name}: {msg}", msg)
    return RemediationData(sick.name, now, data.retry_count + 1), None


def in_progress(kcp: dict[str, Any]) -> RemediationData | None:
    return RemediationData.from_annotation(replacement_annotation(kcp))


def stale_in_progress(kcp: dict[str, Any], machines: list[MachineView]) -> bool:
    """The in-progress annotation outlived its remediation (a Machine was created after it: the replacement
    exists, e.g. the controller stopped between creating it and clearing the annotation)."""
    data = in_progress(kcp)
    return data is not None and any(m.created > data.timestamp for m in machines)


def _hold(sick: MachineView, reason: str, kcp_msg: str, machine_msg: str) -> Action:
    """A wait: `kcp_msg` for the KCP's conditions, (reason, machine_msg) for the Machine's OwnerRemediated."""
    return Action("wait", reason, kcp_msg, machine=sick.name, machine_condition=(reason, machine_msg))


def remediation_step(kcp: dict[str, Any], live: list[MachineView], initialized: bool, now: _dt.datetime,
                     all_machines: list[MachineView] | None = None) -> Action | None:
    """The remediation step of this pass (upstream reconcileUnhealthyMachines). `live`: Machines not being
    deleted; `all_machines` also those being deleted (default: `live`)."""
    machines = live if all_machines is None else all_machines
    to_fix = machines_to_remediate(live)
    if not to_fix:
        return None
    if in_progress(kcp) is not None and not stale_in_progress(kcp, machines):
        return None  # the replacement of the last remediation is not there yet: scale up creates it
    sick = to_fix[0]
    data, held = retry_limits(kcp, sick, now)
    if held is not None:
        return held
    if initialized:
        others = [m for m in live if m.name != sick.name]
        if not others:
            msg = "KubeadmControlPlane can't remediate if current replicas are less or equal to 1"
            return _hold(sick, R_CANNOT, f"Machine {sick.name} needs remediation, but it is the only control-plane "
                                         "machine: scale up first or fix it by hand", msg)
        if any(m.deleting for m in machines):
            return _hold(sick, R_DEFERRED, f"Machine {sick.name} needs remediation; waiting for the Machines being "
                                           "deleted to go first",
                         "KubeadmControlPlane waiting for control plane Machine deletion to complete before "
                         "triggering remediation")
        provisioning = sorted(m.name for m in others if not m.node_name)
        if provisioning:
            return _hold(sick, R_DEFERRED, f"Machine {sick.name} needs remediation; waiting for Machine "
                                           f"{', '.join(provisioning)} to finish provisioning",
                         "KubeadmControlPlane waiting for control plane Machine provisioning to complete before "
                         "triggering remediation")
        bad = sorted(m.name for m in others if not m.healthy)
        if bad:
            return _hold(sick, R_CANNOT, f"Machine {sick.name} needs remediation; waiting for Machine "
                                         f"{', '.join(bad)} to be healthy first to keep etcd quorum",
                         "KubeadmControlPlane can't remediate this Machine because this could result in loosing "
                         "Kubernetes control plane components or in etcd quorum loss")
    return Action("scale-down", R_REMEDIATING, f"Remediating unhealthy Machine {sick.name}", machine=sick.name,
                  machine_condition=(R_DELETING, "Machine is deleting"), remediation_start=data.to_annotation())


def remediation_action(live: list[MachineView], kcp: dict[str, Any] | None = None, initialized: bool = True,
                       now: _dt.datetime | None = None) -> Action | None:
    """`remediation_step` with the defaults of an initialized control plane, now."""
    return remediation_step(kcp or {}, live, initialized, now or _dt.datetime.now(_dt.UTC))


def replacement_annotation(kcp: dict[str, Any]) -> str | None:
    """The remediation-for value a new control-plane Machine carries: the in-progress remediation it replaces."""
    return ((kcp.get("metadata") or {}).get("annotations") or {}).get(IN_PROGRESS_ANNOTATION)


def last_remediation(kcp: dict[str, Any], machine_annotations: list[dict[str, str]]) -> dict[str, Any] | None:
    """status.lastRemediation: the remediation in progress, else the newest remediation-for of the Machines."""
    data = in_progress(kcp)
    if data is None:
        found = [d for d in (RemediationData.from_annotation(a.get(FOR_ANNOTATION)) for a in machine_annotations)
                 if d is not None]
        data = max(found, key=lambda d: d.timestamp) if found else None
    return data.to_status() if data else None


def remediating_message(live: list[MachineView]) -> str:
    """The Remediating condition message; empty when nothing is marked."""
    fix = sorted(v.name for v in live if v.remediate)
    if not fix:
        return ""
    return f"Machine {', '.join(fix)} marked for remediation by a MachineHealthCheck"
