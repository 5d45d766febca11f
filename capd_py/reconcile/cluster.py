"""Cluster decisions (pure): what to copy from the infrastructure cluster and control plane,
status (initialization, failureDomains, controlPlane/workers counts, phase, v1beta2 conditions)
and the deletion order: workers → control plane → infrastructure → finalizer.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.labels import CONTROL_PLANE
from capd_py.api.runtime_hooks import OK_TO_DELETE_ANNOTATION
from capd_py.reconcile import coreutil
from capd_py.reconcile.machineset import aggregate

INFRASTRUCTURE_READY = "InfrastructureReady"
CONTROL_PLANE_INITIALIZED = "ControlPlaneInitialized"
TOPOLOGY_RECONCILED = "TopologyReconciled"  # written by the topology controller
TOPOLOGY_BLOCKING_REASONS = frozenset({"ReconcileFailed", "ClusterClassNotReconciled", None})
CONTROL_PLANE_AVAILABLE = "ControlPlaneAvailable"
WORKERS_AVAILABLE = "WorkersAvailable"
REMOTE_CONNECTION_PROBE = "RemoteConnectionProbe"
CONTROL_PLANE_MACHINES_READY = "ControlPlaneMachinesReady"
WORKER_MACHINES_READY = "WorkerMachinesReady"
CONTROL_PLANE_MACHINES_UP_TO_DATE = "ControlPlaneMachinesUpToDate"
WORKER_MACHINES_UP_TO_DATE = "WorkerMachinesUpToDate"

R_READY, R_NOT_READY = "Ready", "NotReady"
R_OBJECT_DOES_NOT_EXIST, R_OBJECT_DELETED = "ObjectDoesNotExist", "ObjectDeleted"
R_INITIALIZED, R_NOT_INITIALIZED = "Initialized", "NotInitialized"
R_AVAILABLE, R_NOT_AVAILABLE, R_AVAILABLE_UNKNOWN = "Available", "NotAvailable", "AvailableUnknown"
REMOTE_CONNECTION_GRACE_SECONDS = 50.0  # upstream's --remote-connection-grace-period default
R_NO_WORKERS = "NoWorkers"
R_PROBE_SUCCEEDED, R_PROBE_FAILED = "ProbeSucceeded", "ProbeFailed"
R_NOT_DELETING, R_DELETING = "NotDeleting", "Deleting"
R_WAITING_WORKERS = "WaitingForWorkersDeletion"
R_WAITING_CP = "WaitingForControlPlaneDeletion"
R_WAITING_INFRA = "WaitingForInfrastructureDeletion"
R_DELETION_COMPLETED = "DeletionCompleted"
R_WAITING_BEFORE_DELETE_HOOK = "WaitingForBeforeDeleteHook"

PHASE_PENDING, PHASE_PROVISIONING, PHASE_PROVISIONED = "Pending", "Provisioning", "Provisioned"
PHASE_DELETING, PHASE_FAILED = "Deleting", "Failed"


@dataclass
class Observed:
    cluster: dict[str, Any]
    infra: dict[str, Any] | None = None          # None: missing (or no ref)
    control_plane: dict[str, Any] | None = None
    machines: list[dict[str, Any]] = field(default_factory=list)
    machine_deployments: list[dict[str, Any]] = field(default_factory=list)
    machine_sets: list[dict[str, Any]] = field(default_factory=list)
    machine_pools: list[dict[str, Any]] = field(default_factory=list)
    # why infra / control_plane is None although referenced (its CRD or the object is missing), and the contract
    # each follows (its CRD's cluster.x-k8s.io/<contract> label: which status fields to read)
    infra_missing: str = ""
    cp_missing: str = ""
    infra_contract: str | None = None
    cp_contract: str | None = None
    remote_probe: bool | None = None              # None: not probed
    remote_probe_error: str = ""                  # the address tried and the error, when it failed
    remote_probe_last_success: float = 0.0        # epoch seconds of the last successful probe (0: never)
    now: float = 0.0                              # epoch seconds of this pass (the grace period is measured by it)


def infra_ref(cluster: dict[str, Any]) -> dict[str, str] | None:
    return contract.ref(cluster, "spec", "infrastructureRef")


def cp_ref(cluster: dict[str, Any]) -> dict[str, str] | None:
    return contract.ref(cluster, "spec", "controlPlaneRef")


def spec_patch(obs: Observed) -> dict[str, Any] | None:
    """The Cluster's spec.controlPlaneEndpoint when it has none (a user-set endpoint wins, as upstream): the
    infrastructure cluster's once it is provisioned, else the control plane's own once it is initialized (a
    control plane provider that manages the endpoint, as upstream's reconcileControlPlane)."""
    if contract.control_plane_endpoint(obs.cluster) is not None:
        return None
    init = contract.dig(obs.cluster, "status", "initialization", default={}) or {}
    if obs.infra is not None and (contract.infra_provisioned(obs.infra, obs.infra_contract)
                                  or init.get("infrastructureProvisioned")):
        ep = contract.control_plane_endpoint(obs.infra)
        if ep:
            return {"spec": {"controlPlaneEndpoint": ep}}
    if obs.control_plane is not None and (contract.control_plane_initialized(obs.control_plane, obs.cp_contract)
                                          or init.get("controlPlaneInitialized")):
        ep = contract.control_plane_endpoint(obs.control_plane)
        if ep:
            return {"spec": {"controlPlaneEndpoint": ep}}
    return None


def _mirror(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    c = cond.get(obj or {}, ctype)
    return c if c and c.get("status") in (cond.TRUE, cond.FALSE, cond.UNKNOWN) else None


def _counts(machines: list[dict[str, Any]]) -> dict[str, int]:
    return {"replicas": len(machines),
            "readyReplicas": sum(1 for m in machines if cond.is_true(m, cond.READY)),
            "availableReplicas": sum(1 for m in machines if cond.is_true(m, cond.AVAILABLE)),
            "upToDateReplicas": sum(1 for m in machines if cond.is_true(m, "UpToDate")
                                    or cond.get(m, "UpToDate") is None)}


def compute_status(obs: Observed) -> dict[str, Any]:
    c = obs.cluster
    md = c.get("metadata") or {}
    gen = md.get("generation")
    old = dict(c.get("status") or {})
    st = dict(old)
    conds = list(old.get("conditions") or [])
    deleting = coreutil.is_deleting(c)

    def setc(ctype: str, status: bool | str, reason: str, msg: str = "") -> None:
        nonlocal conds
        conds = cond.set_condition(conds, ctype, status, reason, msg, observed_generation=gen)

    init = dict(old.get("initialization") or {})

    # Infrastructure
    iref = infra_ref(c)
    if iref is None:
        setc(INFRASTRUCTURE_READY, False, R_OBJECT_DOES_NOT_EXIST, "spec.infrastructureRef is not set")
    elif obs.infra is None:
        if init.get("infrastructureProvisioned") or deleting:
            setc(INFRASTRUCTURE_READY, False, R_OBJECT_DELETED, f"{coreutil.ref_str(iref)} has been deleted")
        else:
            setc(INFRASTRUCTURE_READY, False, R_OBJECT_DOES_NOT_EXIST,
                 obs.infra_missing or f"{coreutil.ref_str(iref)} does not exist")
    else:
        if contract.infra_provisioned(obs.infra, obs.infra_contract):
            init["infrastructureProvisioned"] = True
        provisioned = bool(init.get("infrastructureProvisioned"))
        # as upstream: the provider's Ready condition mirrored when it writes one, else initialization.provisioned
        m = _mirror(obs.infra, cond.READY)
        if m is not None:
            reason = m.get("reason") or ""
            if m["status"] == cond.TRUE and reason in ("", "NoReasonReported"):
                reason = R_READY
            setc(INFRASTRUCTURE_READY, m["status"], reason or R_NOT_READY, m.get("message") or "")
        elif provisioned:
            setc(INFRASTRUCTURE_READY, True, R_READY)
        else:
            setc(INFRASTRUCTURE_READY, False, R_NOT_READY, f"{coreutil.ref_str(iref)} is not provisioned")
        if provisioned:  # copied once the infrastructure is provisioned, as upstream
            fds = contract.failure_domains(obs.infra, obs.infra_contract)
            if fds:
                st["failureDomains"] = fds
            else:
                st.pop("failureDomains", None)

    # Control plane
    cref = cp_ref(c)
    cp_machines = [m for m in obs.machines if CONTROL_PLANE in (m["metadata"].get("labels") or {})]
    workers = [m for m in obs.machines if CONTROL_PLANE not in (m["metadata"].get("labels") or {})]
    if cref is not None:
        cp_init = obs.control_plane is not None and contract.control_plane_initialized(obs.control_plane,
                                                                                       obs.cp_contract)
    else:  # no control plane object: the first control plane Machine with a Node initializes it
        cp_init = any(contract.dig(m, "status", "nodeRef", "name") for m in cp_machines)
    if cp_init:
        init["controlPlaneInitialized"] = True
    if init.get("controlPlaneInitialized"):
        setc(CONTROL_PLANE_INITIALIZED, True, R_INITIALIZED)
    elif cref is not None and obs.control_plane is None:
        setc(CONTROL_PLANE_INITIALIZED, False, R_OBJECT_DOES_NOT_EXIST,
             obs.cp_missing or f"{coreutil.ref_str(cref)} does not exist")
    else:
        setc(CONTROL_PLANE_INITIALIZED, False, R_NOT_INITIALIZED, "Control plane not yet initialized")
    if init:
        st["initialization"] = init

    if cref is not None:
        if obs.control_plane is None:
            was = bool(init.get("controlPlaneInitialized"))
            setc(CONTROL_PLANE_AVAILABLE, False, R_OBJECT_DELETED if (was or deleting) else R_OBJECT_DOES_NOT_EXIST,
                 f"{coreutil.ref_str(cref)} has been deleted" if (was or deleting)
                 else obs.cp_missing or f"{coreutil.ref_str(cref)} does not exist")
        else:
            # as upstream: the control plane's Available condition mirrored (its reason kept; a True one without a
            # reason gets Available), else initialization.controlPlaneInitialized as fallback
            m = _mirror(obs.control_plane, cond.AVAILABLE)
            if m is None:
                inited = bool(init.get("controlPlaneInitialized"))
                setc(CONTROL_PLANE_AVAILABLE, inited, R_AVAILABLE if inited else R_NOT_AVAILABLE,
                     "" if inited else f"{cref['kind']} status.initialization.controlPlaneInitialized is false")
            else:
                st_ = m["status"]
                reason = m.get("reason") or ""
                if reason in ("", "NoReasonReported"):
                    reason = R_AVAILABLE if st_ == cond.TRUE else R_NOT_AVAILABLE if st_ == cond.FALSE \
                        else R_AVAILABLE_UNKNOWN
                setc(CONTROL_PLANE_AVAILABLE, st_, reason, m.get("message") or "")
            reps = contract.control_plane_replicas(obs.control_plane, obs.cp_contract)
            desired = contract.dig(obs.control_plane, "spec", "replicas")
            cps: dict[str, int] = {k: int(v) for k, v in reps.items() if v is not None}
            if desired is not None:
                cps["desiredReplicas"] = int(desired)
            st["controlPlane"] = cps
    elif cp_machines:
        st["controlPlane"] = {"desiredReplicas": len(cp_machines), **_counts(cp_machines)}

    # Workers: MachineDeployments and MachinePools (upstream setWorkersAvailableCondition)
    groups = [*obs.machine_deployments, *obs.machine_pools]
    g_names = [f"{m['kind']} {m['metadata']['name']}" for m in groups]
    if not groups and not workers:
        setc(WORKERS_AVAILABLE, True, R_NO_WORKERS)
    else:
        bad = [n for n, m in zip(g_names, groups, strict=True) if not cond.is_true(m, cond.AVAILABLE)]
        unknown = [n for n, m in zip(g_names, groups, strict=True) if cond.get(m, cond.AVAILABLE) is None]
        if bad and len(unknown) < len(bad):
            setc(WORKERS_AVAILABLE, False, R_NOT_AVAILABLE,
                 "Not available: " + ", ".join(sorted(set(bad) - set(unknown))))
        elif unknown:
            setc(WORKERS_AVAILABLE, cond.UNKNOWN, R_AVAILABLE_UNKNOWN,
                 "Not reporting Available: " + ", ".join(sorted(unknown)))
        else:
            setc(WORKERS_AVAILABLE, True, R_AVAILABLE)
    if groups or workers:
        desired = sum(coreutil.replicas_of(m) for m in groups)
        desired += sum(coreutil.replicas_of(m) for m in obs.machine_sets if not contract.controller_owner(m))
        st["workers"] = {"desiredReplicas": desired, **_counts(workers)}
    else:
        st.pop("workers", None)

    # Machine aggregates
    for ctype, group in ((CONTROL_PLANE_MACHINES_READY, cp_machines), (WORKER_MACHINES_READY, workers)):
        s_, r_, m_ = aggregate(group, "MachinesReady", R_READY, R_NOT_READY, "ReadyUnknown")
        setc(ctype, s_, r_, m_)
    for ctype, group in ((CONTROL_PLANE_MACHINES_UP_TO_DATE, cp_machines), (WORKER_MACHINES_UP_TO_DATE, workers)):
        known = [m for m in group if cond.get(m, "UpToDate") is not None]
        s_, r_, m_ = aggregate(known, "MachinesUpToDate", "UpToDate", "NotUpToDate", "UpToDateUnknown")
        setc(ctype, s_, r_, m_)

    # RollingOut / ScalingUp / ScalingDown: true when the control plane or a MachineDeployment says so
    sources = ([obs.control_plane] if obs.control_plane is not None else []) + list(obs.machine_deployments) \
        + list(obs.machine_pools)
    for ctype, yes, no in (("RollingOut", "RollingOut", "NotRollingOut"), ("ScalingUp", "ScalingUp", "NotScalingUp"),
                           ("ScalingDown", "ScalingDown", "NotScalingDown")):
        active = sorted(f"{o['kind']} {o['metadata']['name']}" for o in sources if cond.is_true(o, ctype))
        if active:
            setc(ctype, True, yes, ", ".join(active))
        else:
            setc(ctype, False, no)

    if obs.remote_probe is not None:
        setc(REMOTE_CONNECTION_PROBE, *remote_connection(obs))

    # Deleting (the controller sets the deleting reason; Paused is the reconcile skeleton's)
    cur_del = next((x for x in conds if x.get("type") == cond.DELETING), None)
    if not deleting:
        setc(cond.DELETING, False, R_NOT_DELETING)
    elif not cur_del or cur_del.get("status") != cond.TRUE:
        setc(cond.DELETING, True, R_DELETING, "Cluster deletion in progress")

    # Available summary
    view = {"status": {"conditions": conds}}
    need = [INFRASTRUCTURE_READY, WORKERS_AVAILABLE]
    if cref is not None:
        need.insert(1, CONTROL_PLANE_AVAILABLE)
    else:
        need.insert(1, CONTROL_PLANE_INITIALIZED)
    if obs.remote_probe is not None:
        need.append(REMOTE_CONNECTION_PROBE)
    for gate in contract.dig(c, "spec", "availabilityGates", default=[]) or []:
        need.append(gate.get("conditionType"))
    missing = [t for t in need if t and not cond.is_true(view, t)]
    if contract.dig(c, "spec", "topology"):
        # as upstream: a topology that failed (or whose class is not reconciled) makes the Cluster unavailable;
        # one still rolling out a change (upgrading, creating workers) does not
        tr = cond.get(view, TOPOLOGY_RECONCILED)
        if tr is None or tr.get("status") != cond.TRUE and tr.get("reason") in TOPOLOGY_BLOCKING_REASONS:
            missing.append(TOPOLOGY_RECONCILED)
    if deleting:
        setc(cond.AVAILABLE, False, R_NOT_AVAILABLE, "Cluster is being deleted")
    elif missing:
        setc(cond.AVAILABLE, False, R_NOT_AVAILABLE, "; ".join(f"{t} is not True" for t in missing))
    else:
        setc(cond.AVAILABLE, True, R_AVAILABLE)

    st["conditions"] = conds
    if gen is not None:
        st["observedGeneration"] = gen
    st["phase"] = phase(c, st)
    return st


def remote_connection(obs: Observed, grace: float = REMOTE_CONNECTION_GRACE_SECONDS) -> tuple[bool, str, str]:
    """RemoteConnectionProbe as upstream: a failed probe turns it False only once the last success is older than
    the grace period (`--remote-connection-grace-period`, 50 s), so one slow answer of a busy API server does not
    make the Cluster unavailable; never reached at all: False at once. The message names the address and the error
    (and when the probe last succeeded): stable text, no write while the failure stays the same."""
    if obs.remote_probe:
        return True, R_PROBE_SUCCEEDED, ""
    last = obs.remote_probe_last_success
    if last and obs.now - last <= grace:
        return True, R_PROBE_SUCCEEDED, ""
    msg = "Remote connection probe failed"
    if last:
        msg += f", probe last succeeded at {_dt.datetime.fromtimestamp(last, _dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    return False, R_PROBE_FAILED, msg + (f": {obs.remote_probe_error}" if obs.remote_probe_error else "")


def phase(cluster: dict[str, Any], status: dict[str, Any]) -> str:
    if coreutil.is_deleting(cluster):
        return PHASE_DELETING
    if status.get("failureReason") or contract.dig(status, "deprecated", "v1beta1", "failureReason"):
        return PHASE_FAILED
    init = status.get("initialization") or {}
    if init.get("infrastructureProvisioned") and contract.control_plane_endpoint(cluster):
        return PHASE_PROVISIONED
    if infra_ref(cluster) is not None or cp_ref(cluster) is not None:
        return PHASE_PROVISIONING
    return PHASE_PENDING


# --- deletion -------------------------------------------------------------------------------------


@dataclass
class DeletionPlan:
    step: str                      # "hook" | "workers" | "control_plane" | "infrastructure" | "done"
    reason: str
    message: str
    delete: list[dict[str, Any]] = field(default_factory=list)  # objects to delete now (any kind)


def _top_level_workers(obs: Observed) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(objects to delete, everything still to wait for) among worker descendants."""
    to_delete: list[dict[str, Any]] = []
    for md in obs.machine_deployments:
        to_delete.append(md)
    for mp in obs.machine_pools:
        to_delete.append(mp)
    for ms in obs.machine_sets:
        if contract.controller_owner(ms, "MachineDeployment") is None:
            to_delete.append(ms)
    workers = [m for m in obs.machines if CONTROL_PLANE not in (m["metadata"].get("labels") or {})]
    for m in workers:
        owner = contract.controller_owner(m)
        if owner is None or owner.get("kind") not in ("MachineSet", "MachinePool"):
            to_delete.append(m)
    waiting = [*obs.machine_deployments, *obs.machine_pools, *obs.machine_sets, *workers]
    return [o for o in to_delete if not coreutil.is_deleting(o)], waiting


def waits_for_before_delete_hook(cluster: dict[str, Any], runtime_sdk: bool, cluster_topology: bool) -> bool:
    """Upstream's reconcileDelete with the RuntimeSDK and ClusterTopology gates on: a Cluster with a managed topology
    is not torn down before the topology controller marked it ok-to-delete (its BeforeClusterDelete hook let go)."""
    annotations = (cluster.get("metadata") or {}).get("annotations") or {}
    return runtime_sdk and cluster_topology and bool(contract.dig(cluster, "spec", "topology")) \
        and OK_TO_DELETE_ANNOTATION not in annotations


def deletion_plan(obs: Observed, wait_for_hook: bool = False) -> DeletionPlan:
    """Upstream order: MachineDeployments, MachinePools, MachineSets and worker Machines first, waiting until they
    are all gone; then the control plane object; then the infrastructure cluster; then (no Machines
    left at all) the finalizer goes. `wait_for_hook` (waits_for_before_delete_hook): nothing is deleted yet."""
    if wait_for_hook:
        return DeletionPlan("hook", R_WAITING_BEFORE_DELETE_HOOK, "Waiting for BeforeClusterDelete hook")
    to_delete, waiting = _top_level_workers(obs)
    if waiting:
        names = ", ".join(sorted(f"{o['kind']} {o['metadata']['name']}" for o in waiting)[:5])
        return DeletionPlan("workers", R_WAITING_WORKERS, f"Waiting for {len(waiting)} worker object(s) to be "
                            f"deleted: {names}", to_delete)
    if obs.control_plane is not None:
        d = [] if coreutil.is_deleting(obs.control_plane) else [obs.control_plane]
        return DeletionPlan("control_plane", R_WAITING_CP,
                            f"Waiting for {coreutil.ref_str(cp_ref(obs.cluster))} to be deleted", d)
    if obs.machines:  # control plane Machines outliving their control plane object
        names = ", ".join(sorted(m["metadata"]["name"] for m in obs.machines)[:5])
        return DeletionPlan("control_plane", R_WAITING_CP, f"Waiting for Machine(s) {names} to be deleted",
                            [m for m in obs.machines if not coreutil.is_deleting(m)])
    if obs.infra is not None:
        d = [] if coreutil.is_deleting(obs.infra) else [obs.infra]
        return DeletionPlan("infrastructure", R_WAITING_INFRA,
                            f"Waiting for {coreutil.ref_str(infra_ref(obs.cluster))} to be deleted", d)
    return DeletionPlan("done", R_DELETION_COMPLETED, "")


def controls_its_objects(cluster: dict[str, Any]) -> bool:
    """Whether the Cluster's owner reference on its InfrastructureCluster and control plane is a controller one:
    with a managed topology only (upstream ensureOwnerRefAndLabel: CAPI manages their whole lifecycle then; without,
    a plain owner reference leaves room for another tool's controller reference)."""
    return bool(contract.dig(cluster, "spec", "topology"))
