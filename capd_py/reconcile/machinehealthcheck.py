"""MachineHealthCheck decisions (pure): targets, per-Machine health, remediation gating.

Upstream v1beta2: spec.checks.{nodeStartupTimeoutSeconds (default 600, 0 disables),
unhealthyNodeConditions[{type,status,timeoutSeconds}], unhealthyMachineConditions[...]},
spec.remediation.triggerIf.{unhealthyLessThanOrEqualTo (int or %, default 100%), unhealthyInRange
"[a-b]"}; status expectedMachines/currentHealthy/remediationsAllowed/targets; condition
RemediationAllowed (reason TooManyUnhealthy when gated). The MHC marks Machines
HealthCheckSucceeded=False and OwnerRemediated=False; the owner (MachineSet / control plane)
remediates.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, selectors
from capd_py.api.labels import CONTROL_PLANE, PAUSED_ANNOTATION, REMEDIATE_MACHINE_ANNOTATION
from capd_py.reconcile import coreutil

HEALTH_CHECK_SUCCEEDED = "HealthCheckSucceeded"
OWNER_REMEDIATED = "OwnerRemediated"
REMEDIATION_ALLOWED = "RemediationAllowed"

R_SUCCEEDED = "HealthCheckSucceeded"
R_UNHEALTHY_NODE = "UnhealthyNode"
R_UNHEALTHY_MACHINE = "UnhealthyMachine"
R_NODE_STARTUP_TIMEOUT = "NodeStartupTimeout"
R_NODE_DELETED = "NodeDeleted"
R_HAS_REMEDIATE_ANNOTATION = "HasRemediateAnnotation"
R_WAITING_FOR_REMEDIATION = "WaitingForRemediation"
R_REMEDIATION_ALLOWED = "RemediationAllowed"
R_TOO_MANY_UNHEALTHY = "TooManyUnhealthy"

DEFAULT_NODE_STARTUP_TIMEOUT = 600
SKIP_REMEDIATION_ANNOTATION = "cluster.x-k8s.io/skip-remediation"


@dataclass
class Target:
    machine: dict[str, Any]
    node: dict[str, Any] | None = None
    node_missing: bool = False  # the Machine has a nodeRef but that Node is gone


@dataclass
class Verdict:
    name: str
    healthy: bool
    reason: str = R_SUCCEEDED
    message: str = ""
    next_check: float | None = None  # seconds until the state may change


def targets(mhc: dict[str, Any], machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    cn = contract.dig(mhc, "spec", "clusterName")
    sel = contract.dig(mhc, "spec", "selector")
    if selectors.selector_is_empty(sel):
        return []  # an empty selector selects nothing (upstream validation forbids it)
    skip = (PAUSED_ANNOTATION, SKIP_REMEDIATION_ANNOTATION)
    return sorted((m for m in machines if contract.dig(m, "spec", "clusterName") == cn
                   and not coreutil.is_deleting(m)
                   and not any(a in (m["metadata"].get("annotations") or {}) for a in skip)
                   and selectors.selector_matches(sel, m["metadata"].get("labels"))),
                  key=lambda m: m["metadata"]["name"])


def _t(obj: dict[str, Any] | None, ctype: str) -> _dt.datetime | None:
    c = cond.get(obj or {}, ctype)
    return coreutil.parse_time(c.get("lastTransitionTime")) if c else None


def _check_conditions(rules: list[dict[str, Any]] | None, conds: dict[str | None, dict[str, Any]], where: str,
                      now: _dt.datetime, msgs: list[str], nexts: list[float]) -> None:
    """Apply unhealthy-condition rules ({type, status, timeoutSeconds}) to `conds`: an overdue match
    adds a message, a pending one the seconds until it is due."""
    for uc in rules or []:
        c = conds.get(uc.get("type"))
        if not c or c.get("status") != uc.get("status"):
            continue
        timeout = int(uc.get("timeoutSeconds") or 0)
        since = coreutil.parse_time(c.get("lastTransitionTime")) or now
        left = timeout - (now - since).total_seconds()
        if left < 0:
            msgs.append(f"Condition {uc['type']} on {where} is reporting status {uc['status']} "
                        f"for more than {timeout}s")
        else:
            nexts.append(left + 1)


def evaluate(mhc: dict[str, Any], cluster: dict[str, Any] | None, t: Target, now: _dt.datetime) -> Verdict:
    m = t.machine
    name = m["metadata"]["name"]
    if REMEDIATE_MACHINE_ANNOTATION in (m["metadata"].get("annotations") or {}):
        return Verdict(name, False, R_HAS_REMEDIATE_ANNOTATION,
                       "Health check failed: marked for remediation via cluster.x-k8s.io/remediate-machine annotation")
    is_cp = CONTROL_PLANE in (m["metadata"].get("labels") or {})
    if cluster is None or not cond.is_true(cluster, "InfrastructureReady") or \
            (not is_cp and not cond.is_true(cluster, "ControlPlaneInitialized")):
        return Verdict(name, True, R_SUCCEEDED, "", None)  # not evaluated yet

    checks = contract.dig(mhc, "spec", "checks", default={}) or {}
    msgs: list[str] = []
    nexts: list[float] = []
    reason = R_UNHEALTHY_NODE

    machine_conds = {c.get("type"): c for c in contract.dig(m, "status", "conditions", default=[]) or []}
    _check_conditions(checks.get("unhealthyMachineConditions"), machine_conds, "Machine", now, msgs, nexts)
    if msgs:
        reason = R_UNHEALTHY_MACHINE

    node_msgs: list[str] = []
    node_reason = R_UNHEALTHY_NODE
    if t.node_missing:
        node_msgs.append(f"Node {contract.dig(m, 'status', 'nodeRef', 'name')} has been deleted")
        node_reason = R_NODE_DELETED
    elif t.node is None:
        raw = checks.get("nodeStartupTimeoutSeconds")
        timeout = DEFAULT_NODE_STARTUP_TIMEOUT if raw is None else int(raw)
        if timeout > 0:
            comparison = coreutil.parse_time(m["metadata"].get("creationTimestamp")) or now
            for obj, ctype in ((cluster, "ControlPlaneInitialized"), (cluster, "InfrastructureReady"),
                               (m, "InfrastructureReady")):
                ts = _t(obj, ctype)
                if cond.is_true(obj or {}, ctype) and ts and ts > comparison:
                    comparison = ts
            left = timeout - (now - comparison).total_seconds()
            if left < 0:
                node_msgs.append(f"Node failed to report startup in {timeout}s")
                node_reason = R_NODE_STARTUP_TIMEOUT
            else:
                nexts.append(left + 1)
    else:
        node_conds = {c.get("type"): c for c in contract.dig(t.node, "status", "conditions", default=[]) or []}
        _check_conditions(checks.get("unhealthyNodeConditions"), node_conds, "Node", now, node_msgs, nexts)
    if not msgs:
        reason = node_reason
    all_msgs = msgs + node_msgs
    if all_msgs:
        return Verdict(name, False, reason, "Health check failed: " + "; ".join(all_msgs))
    return Verdict(name, True, R_SUCCEEDED, "", min(nexts) if nexts else None)


def max_unhealthy(mhc: dict[str, Any], total: int) -> int:
    v = contract.dig(mhc, "spec", "remediation", "triggerIf", "unhealthyLessThanOrEqualTo")
    return coreutil.scaled_value(v, total, round_up=True, default="100%")


_RANGE = re.compile(r"^\[(\d+)-(\d+)\]$")


def remediation_allowed(mhc: dict[str, Any], total: int, unhealthy: int) -> tuple[bool, int, str]:
    """(allowed, remediationsAllowed, message)."""
    rng = contract.dig(mhc, "spec", "remediation", "triggerIf", "unhealthyInRange")
    if rng:
        mt = _RANGE.match(str(rng).strip())
        if mt:
            lo, hi = int(mt.group(1)), int(mt.group(2))
            ok = lo <= unhealthy <= hi
            return ok, max(0, hi - unhealthy) if ok else 0, \
                "" if ok else f"Remediation is not allowed, the number of unhealthy machines ({unhealthy}) is " \
                              f"outside the range {rng}"
    mx = max_unhealthy(mhc, total)
    if unhealthy <= mx:
        return True, mx - unhealthy, ""
    return False, 0, (f"Remediation is not allowed, the number of not started or unhealthy machines exceeds "
                      f"maxUnhealthy (total: {total}, unhealthy: {unhealthy}, maxUnhealthy: {mx})")


@dataclass
class Outcome:
    verdicts: list[Verdict]
    allowed: bool
    remediations_allowed: int
    message: str
    machine_conditions: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # name -> new conditions
    next_check: float | None = None


def decide(mhc: dict[str, Any], cluster: dict[str, Any] | None, tgts: list[Target],
           now: _dt.datetime | None = None) -> Outcome:
    now = now or coreutil.utcnow()
    verdicts = [evaluate(mhc, cluster, t, now) for t in tgts]
    unhealthy = [v for v in verdicts if not v.healthy]
    allowed, n_allowed, msg = remediation_allowed(mhc, len(tgts), len(unhealthy))
    out = Outcome(verdicts, allowed, n_allowed, msg)
    nexts = [v.next_check for v in verdicts if v.next_check is not None]
    out.next_check = min(nexts) if nexts else None
    for t, v in zip(tgts, verdicts, strict=True):
        m = t.machine
        conds = list(contract.dig(m, "status", "conditions", default=[]) or [])
        gen = m["metadata"].get("generation")
        if v.healthy:
            new = cond.set_condition(conds, HEALTH_CHECK_SUCCEEDED, True, R_SUCCEEDED, observed_generation=gen)
            new = [c for c in new if c.get("type") != OWNER_REMEDIATED]
        else:
            new = cond.set_condition(conds, HEALTH_CHECK_SUCCEEDED, False, v.reason, v.message,
                                     observed_generation=gen)
            if allowed and cond.get({"status": {"conditions": conds}}, OWNER_REMEDIATED) is None:
                new = cond.set_condition(new, OWNER_REMEDIATED, False, R_WAITING_FOR_REMEDIATION,
                                         "Waiting for remediation", observed_generation=gen)
        if new != conds:
            out.machine_conditions[v.name] = new
    return out


def compute_status(mhc: dict[str, Any], out: Outcome) -> dict[str, Any]:
    st = dict(mhc.get("status") or {})
    gen = mhc["metadata"].get("generation")
    st["expectedMachines"] = len(out.verdicts)
    st["currentHealthy"] = sum(1 for v in out.verdicts if v.healthy)
    st["remediationsAllowed"] = out.remediations_allowed
    st["targets"] = [v.name for v in out.verdicts]
    if not st["targets"]:
        st.pop("targets")
    if gen is not None:
        st["observedGeneration"] = gen
    conds = st.get("conditions")
    if out.allowed:
        conds = cond.set_condition(conds, REMEDIATION_ALLOWED, True, R_REMEDIATION_ALLOWED,
                                   observed_generation=gen)
    else:
        conds = cond.set_condition(conds, REMEDIATION_ALLOWED, False, R_TOO_MANY_UNHEALTHY, out.message,
                                   observed_generation=gen)
    st["conditions"] = conds
    return st
