"""Machine decisions (pure): spec fields copied from providers, status/conditions/phase. The deletion sequence
is reconcile/machine_deletion.py, the drain's and the volume wait's rules reconcile/drain.py. The controller does the
I/O around these functions.

Follows upstream Cluster API v1beta2: status.initialization.{bootstrapDataSecretCreated,
infrastructureProvisioned}, status.nodeRef {name}, conditions BootstrapConfigReady,
InfrastructureReady, NodeReady, NodeHealthy, Ready, Available, Deleting.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.labels import CONTROL_PLANE, CONTROL_PLANE_NAME, MACHINE_POOL_NAME, SET_NAME, TEMPLATE_HASH
from capd_py.reconcile import coreutil, machinepool
from capd_py.reconcile.machinedeployment import template_hash

# Condition types / reasons (upstream names).
BOOTSTRAP_CONFIG_READY = "BootstrapConfigReady"
INFRASTRUCTURE_READY = "InfrastructureReady"
NODE_HEALTHY = "NodeHealthy"
HEALTH_CHECK_SUCCEEDED = "HealthCheckSucceeded"
OWNER_REMEDIATED = "OwnerRemediated"
UP_TO_DATE = "UpToDate"

R_READY, R_NOT_READY, R_READY_UNKNOWN = "Ready", "NotReady", "ReadyUnknown"
R_AVAILABLE, R_NOT_AVAILABLE = "Available", "NotAvailable"
R_WAITING_MIN_READY = "WaitingForMinReadySeconds"
R_DATA_SECRET_PROVIDED = "DataSecretProvided"
R_OBJECT_DOES_NOT_EXIST = "ObjectDoesNotExist"
R_OBJECT_DELETED = "ObjectDeleted"
R_NODE_READY, R_NODE_NOT_READY, R_NODE_READY_UNKNOWN = "NodeReady", "NodeNotReady", "NodeReadyUnknown"
R_NODE_HEALTHY, R_NODE_NOT_HEALTHY, R_NODE_HEALTH_UNKNOWN = "NodeHealthy", "NodeNotHealthy", "NodeHealthyUnknown"
R_NODE_DOES_NOT_EXIST, R_NODE_DELETED = "NodeDoesNotExist", "NodeDeleted"
R_CONNECTION_DOWN = "ConnectionDown"
R_NOT_DELETING, R_DELETING = "NotDeleting", "Deleting"
R_DRAINING_NODE = "DrainingNode"
R_WAITING_VOLUME_DETACH = "WaitingForVolumeDetach"
R_WAITING_PRE_DRAIN_HOOK = "WaitingForPreDrainHook"
R_WAITING_PRE_TERMINATE_HOOK = "WaitingForPreTerminateHook"
PRE_DRAIN_HOOK_PREFIX = "pre-drain.delete.hook.machine.cluster.x-k8s.io"
PRE_TERMINATE_HOOK_PREFIX = "pre-terminate.delete.hook.machine.cluster.x-k8s.io"
R_WAITING_INFRA_DELETION = "WaitingForInfrastructureDeletion"
R_WAITING_BOOTSTRAP_DELETION = "WaitingForBootstrapDeletion"
R_DELETING_NODE = "DeletingNode"
R_DELETION_COMPLETED = "DeletionCompleted"

PHASE_PENDING, PHASE_PROVISIONING, PHASE_PROVISIONED = "Pending", "Provisioning", "Provisioned"
PHASE_RUNNING, PHASE_DELETING, PHASE_DELETED, PHASE_FAILED = "Running", "Deleting", "Deleted", "Failed"

NODE_PRESSURE_CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")


@dataclass
class Observed:
    """What the controller read. `*_ref` False means the Machine has no such reference."""
    machine: dict[str, Any]
    cluster: dict[str, Any] | None = None
    bootstrap: dict[str, Any] | None = None
    bootstrap_ref: bool = True
    infra: dict[str, Any] | None = None
    node: dict[str, Any] | None = None
    workload_reachable: bool = False
    now: _dt.datetime = field(default_factory=coreutil.utcnow)
    machine_set: dict[str, Any] | None = None          # controller owner, when a MachineSet
    machine_deployment: dict[str, Any] | None = None   # that MachineSet's controller owner
    machine_pool: dict[str, Any] | None = None         # controller owner, when a MachinePool
    # why bootstrap / infra is None although referenced (its CRD or the object is missing), and the contract each
    # follows (its CRD's label: which status fields to read)
    bootstrap_missing: str = ""
    infra_missing: str = ""
    bootstrap_contract: str | None = None
    infra_contract: str | None = None


def owner_remediated_status(machine: dict[str, Any], reason: str, message: str) -> dict[str, Any]:
    """The Machine's status with OwnerRemediated=False (`reason`, `message`): why its owner waits to remediate it,
    or that it deletes it. Equal to the current status when nothing changes (no write)."""
    st = dict(machine.get("status") or {})
    st["conditions"] = cond.set_condition(st.get("conditions"), OWNER_REMEDIATED, False, reason, message,
                                          observed_generation=(machine.get("metadata") or {}).get("generation"))
    return st


def cluster_adopts(machine: dict[str, Any]) -> bool:
    """Whether the Cluster becomes the Machine's owner: a stand-alone Machine only (upstream's shouldAdopt). A
    Machine a MachineSet, MachinePool or control plane made (its label says which) waits for that owner to adopt
    it again, e.g. after its owner references were removed or a restore from backup, so it never ends with two."""
    if contract.controller_owner(machine) is not None or contract.core_owner_name(machine, "Cluster"):
        return False
    labels = machine["metadata"].get("labels") or {}
    return not any(k in labels for k in (SET_NAME, MACHINE_POOL_NAME, CONTROL_PLANE_NAME))


def is_control_plane(machine: dict[str, Any]) -> bool:
    return CONTROL_PLANE in (machine.get("metadata", {}).get("labels") or {})


# --- spec ----------------------------------------------------------------------------------------


def spec_patch(obs: Observed) -> dict[str, Any] | None:
    """Fields the Machine controller copies into Machine.spec (merge patch), or None."""
    m = obs.machine
    spec = m.get("spec") or {}
    patch: dict[str, Any] = {}
    if obs.bootstrap is not None and contract.bootstrap_data_secret_created(obs.bootstrap, obs.bootstrap_contract):
        name = contract.bootstrap_data_secret_name(obs.bootstrap)
        if name and (spec.get("bootstrap") or {}).get("dataSecretName") != name:
            patch["bootstrap"] = {"dataSecretName": name}
    if obs.infra is not None and contract.infra_provisioned(obs.infra, obs.infra_contract):
        pid = contract.provider_id(obs.infra)
        if pid and spec.get("providerID") != pid:
            patch["providerID"] = pid
    return {"spec": patch} if patch else None


def mirror_ready(provider: dict[str, Any], fallback: bool, message: str) -> tuple[str, str, str]:
    """(status, reason, message) of a condition mirroring the provider object's Ready condition when it writes one
    (a True one without a reason gets Ready, as upstream), else `fallback` (its initialization fields)."""
    c = cond.get(provider, cond.READY)
    if c is not None and c.get("status") in (cond.TRUE, cond.FALSE, cond.UNKNOWN):
        reason = c.get("reason") or ""
        if reason in ("", "NoReasonReported"):
            reason = R_READY if c["status"] == cond.TRUE else R_NOT_READY
        return c["status"], reason, c.get("message") or ""
    return (cond.TRUE, R_READY, "") if fallback else (cond.FALSE, R_NOT_READY, message)


def infra_failure_domain(infra: dict[str, Any] | None) -> str | None:
    v = contract.dig(infra, "status", "failureDomain") or contract.dig(infra, "spec", "failureDomain")
    return str(v) if v else None


# --- up to date --------------------------------------------------------------------------------


def up_to_date(machine: dict[str, Any], ms: dict[str, Any] | None,
               md: dict[str, Any] | None, now: _dt.datetime) -> tuple[str, str, str] | None:
    """The UpToDate condition of a MachineDeployment's Machine, as upstream: its MachineSet's template
    is the MachineDeployment's current one (the template hash, which includes an expired
    spec.rollout.after), and the kubelet runs spec.version. None for other Machines (a control plane
    provider sets it for its own)."""
    if ms is None or md is None:
        return None
    if (ms["metadata"].get("labels") or {}).get(TEMPLATE_HASH) != template_hash(md, now):
        return cond.FALSE, "NotUpToDate", f"* MachineSet {ms['metadata']['name']} does not match the " \
                                          f"MachineDeployment {md['metadata']['name']} template"
    kubelet = contract.dig(machine, "status", "nodeInfo", "kubeletVersion")
    version = contract.dig(machine, "spec", "version")
    if kubelet and version and kubelet != version:
        return cond.FALSE, "Updating", f"* Node.status.nodeInfo.kubeletVersion {kubelet}, {version} required"
    return cond.TRUE, "UpToDate", ""


# --- external objects ----------------------------------------------------------------------------


def external_owner_refs(obj: dict[str, Any], machine: dict[str, Any],
                        control_plane_kind: str | None = None) -> list[dict[str, Any]] | None:
    """The ownerReferences a bootstrap config / infra machine should carry: the Machine as
    controller, with the on-create owners (MachineSet, control plane) removed, as upstream does.
    None when they already match."""
    cur = list(obj.get("metadata", {}).get("ownerReferences") or [])
    uid = machine["metadata"]["uid"]
    on_create = {"MachineSet", "KubeadmControlPlane", control_plane_kind or "KubeadmControlPlane"}
    keep = [r for r in cur if r.get("uid") != uid and r.get("kind") not in on_create and not r.get("controller")]
    mine = contract.owner_ref(machine, controller=True)
    existing = next((r for r in cur if r.get("uid") == uid), None)
    if existing and existing.get("controller"):
        mine = {**existing, "apiVersion": mine["apiVersion"]}  # as it is, at the served version
    want = [*keep, mine]
    return None if want == cur else want


# --- node metadata -------------------------------------------------------------------------------

NODE_ANNOTATION_CLUSTER_NAME = "cluster.x-k8s.io/cluster-name"
NODE_ANNOTATION_CLUSTER_NAMESPACE = "cluster.x-k8s.io/cluster-namespace"
NODE_ANNOTATION_MACHINE = "cluster.x-k8s.io/machine"
NODE_ANNOTATION_OWNER_KIND = "cluster.x-k8s.io/owner-kind"
NODE_ANNOTATION_OWNER_NAME = "cluster.x-k8s.io/owner-name"
# Machine labels in these domains are synced to the Node (upstream's managed label domains).
MANAGED_NODE_LABEL_DOMAINS = ("node-role.kubernetes.io", "node-restriction.kubernetes.io", "node.cluster.x-k8s.io")


def _managed_label(key: str) -> bool:
    prefix = key.split("/", 1)[0] if "/" in key else ""
    return any(prefix == d or prefix.endswith("." + d) for d in MANAGED_NODE_LABEL_DOMAINS)


def node_of_machine(nodes: Iterable[dict[str, Any]], machine: dict[str, Any]) -> dict[str, Any] | None:
    """The machine's Node among a workload cluster's: the one status.nodeRef names, else the one carrying the
    machine's spec.providerID (as the Machine controller finds it on the API server)."""
    node_name = contract.dig(machine, "status", "nodeRef", "name")
    pid = contract.provider_id(machine)
    listed = list(nodes)
    if node_name:
        for n in listed:
            if contract.dig(n, "metadata", "name") == node_name:
                return n
    if pid:
        for n in listed:
            if contract.provider_id(n) == pid:
                return n
    return None


def machines_of_node(machines: Iterable[dict[str, Any]], node: dict[str, Any]) -> list[str]:
    """Names of the Machines a workload Node's change concerns: those it is, or would be, found for."""
    return [m["metadata"]["name"] for m in machines if node_of_machine([node], m) is not None]


def node_metadata_patch(machine: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """Merge patch putting the Cluster API annotations (cluster, namespace, machine, owner) and the
    Machine's managed-domain labels on the workload Node; None when they are already there."""
    md = machine["metadata"]
    ann = {NODE_ANNOTATION_CLUSTER_NAME: contract.dig(machine, "spec", "clusterName") or "",
           NODE_ANNOTATION_CLUSTER_NAMESPACE: md.get("namespace") or "",
           NODE_ANNOTATION_MACHINE: md["name"]}
    owner = contract.controller_owner(machine)
    if owner:
        ann[NODE_ANNOTATION_OWNER_KIND] = owner.get("kind", "")
        ann[NODE_ANNOTATION_OWNER_NAME] = owner.get("name", "")
    labels = {k: v for k, v in (md.get("labels") or {}).items() if _managed_label(k)}
    nmd = node.get("metadata") or {}
    cur_a, cur_l = nmd.get("annotations") or {}, nmd.get("labels") or {}
    pa = {k: v for k, v in ann.items() if cur_a.get(k) != v}
    pl = {k: v for k, v in labels.items() if cur_l.get(k) != v}
    patch: dict[str, Any] = {}
    if pa:
        patch["annotations"] = pa
    if pl:
        patch["labels"] = pl
    return {"metadata": patch} if patch else None


# --- status --------------------------------------------------------------------------------------


def _node_condition(node: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for c in contract.dig(node, "status", "conditions", default=[]) or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def node_health(node: dict[str, Any]) -> tuple[str, str, str]:
    """(status, reason, message) of NodeHealthy computed from the node's conditions."""
    ready = _node_condition(node, "Ready")
    problems = [c["type"] for c in (contract.dig(node, "status", "conditions", default=[]) or [])
                if c.get("type") in NODE_PRESSURE_CONDITIONS and c.get("status") == "True"]
    if problems:
        return cond.FALSE, R_NODE_NOT_HEALTHY, "Node " + ", ".join(problems) + " condition(s) True"
    if ready is None or ready.get("status") == "Unknown":
        return cond.UNKNOWN, R_NODE_HEALTH_UNKNOWN, "Node Ready condition is Unknown"
    if ready.get("status") != "True":
        return cond.FALSE, R_NODE_NOT_HEALTHY, f"Node is not ready: {ready.get('message') or ready.get('reason') or ''}"
    if contract.dig(node, "spec", "unschedulable"):
        return cond.TRUE, R_NODE_HEALTHY, "Node is cordoned"
    return cond.TRUE, R_NODE_HEALTHY, ""


def compute_status(obs: Observed) -> dict[str, Any]:
    """The Machine's desired status, built on the current status so other writers' conditions
    (HealthCheckSucceeded, OwnerRemediated) are kept."""
    m = obs.machine
    md = m.get("metadata") or {}
    spec = m.get("spec") or {}
    old = dict(m.get("status") or {})
    st = dict(old)
    gen = md.get("generation")
    conds: list[dict[str, Any]] = list(old.get("conditions") or [])
    now = coreutil.iso(obs.now)

    def setc(ctype: str, status: bool | str, reason: str, msg: str = "") -> None:
        nonlocal conds
        conds = cond.set_condition(conds, ctype, status, reason, msg, observed_generation=gen, now=now)

    init = dict(old.get("initialization") or {})
    deleting = coreutil.is_deleting(m)

    # Bootstrap
    cfg_ref = contract.ref(m, "spec", "bootstrap", "configRef")
    if not obs.bootstrap_ref or cfg_ref is None:
        if (spec.get("bootstrap") or {}).get("dataSecretName"):
            init["bootstrapDataSecretCreated"] = True
            setc(BOOTSTRAP_CONFIG_READY, True, R_DATA_SECRET_PROVIDED)
        else:
            setc(BOOTSTRAP_CONFIG_READY, False, R_NOT_READY, "Waiting for spec.bootstrap.dataSecretName")
    elif obs.bootstrap is None:
        if deleting:
            setc(BOOTSTRAP_CONFIG_READY, False, R_OBJECT_DELETED, f"{coreutil.ref_str(cfg_ref)} has been deleted")
        else:
            setc(BOOTSTRAP_CONFIG_READY, False, R_OBJECT_DOES_NOT_EXIST,
                 obs.bootstrap_missing or f"{coreutil.ref_str(cfg_ref)} does not exist")
    else:
        created = contract.bootstrap_data_secret_created(obs.bootstrap, obs.bootstrap_contract)
        if created:
            init["bootstrapDataSecretCreated"] = True
        setc(BOOTSTRAP_CONFIG_READY, *mirror_ready(obs.bootstrap, created, "" if created else
                                                   f"{coreutil.ref_str(cfg_ref)} is not ready"))

    # Infrastructure
    infra_ref = contract.ref(m, "spec", "infrastructureRef")
    if obs.infra is None:
        if init.get("infrastructureProvisioned") or deleting:
            setc(INFRASTRUCTURE_READY, False, R_OBJECT_DELETED, f"{coreutil.ref_str(infra_ref)} has been deleted")
        else:
            setc(INFRASTRUCTURE_READY, False, R_OBJECT_DOES_NOT_EXIST,
                 obs.infra_missing or f"{coreutil.ref_str(infra_ref)} does not exist")
    else:
        # as upstream: a Machine is provisioned only once its infrastructure machine reports a providerID; then (and
        # from then on) its addresses and failure domain are copied
        provisioned = contract.infra_provisioned(obs.infra, obs.infra_contract)
        done = provisioned and bool(contract.provider_id(obs.infra))
        if done:
            init["infrastructureProvisioned"] = True
        why = "" if done else (f"{coreutil.ref_str(infra_ref)} is provisioned but has no spec.providerID yet"
                               if provisioned else f"{coreutil.ref_str(infra_ref)} is not provisioned")
        setc(INFRASTRUCTURE_READY, *mirror_ready(obs.infra, done, why))
        if init.get("infrastructureProvisioned"):
            addrs = contract.addresses(obs.infra)
            if addrs:
                st["addresses"] = addrs
            fd = infra_failure_domain(obs.infra) or spec.get("failureDomain")
            if fd:
                st["failureDomain"] = fd
    if init:
        st["initialization"] = init

    # Node
    node_ref = (old.get("nodeRef") or {}).get("name")
    if obs.node is not None:
        st["nodeRef"] = {"name": obs.node["metadata"]["name"]}
        ni = contract.dig(obs.node, "status", "nodeInfo")
        if ni:
            st["nodeInfo"] = ni
        ready = _node_condition(obs.node, "Ready")
        if ready is None or ready.get("status") == "Unknown":
            setc(cond.NODE_READY, cond.UNKNOWN, R_NODE_READY_UNKNOWN, "Node Ready condition is Unknown")
        elif ready.get("status") == "True":
            setc(cond.NODE_READY, True, R_NODE_READY)
        else:
            setc(cond.NODE_READY, False, R_NODE_NOT_READY, ready.get("message") or "")
        s, r, msg = node_health(obs.node)
        setc(NODE_HEALTHY, s, r, msg)
    elif not obs.workload_reachable:
        if node_ref:
            setc(cond.NODE_READY, cond.UNKNOWN, R_CONNECTION_DOWN, "Cannot reach the workload cluster")
            setc(NODE_HEALTHY, cond.UNKNOWN, R_CONNECTION_DOWN, "Cannot reach the workload cluster")
        else:
            msg = "Waiting for the workload cluster to be reachable"
            setc(cond.NODE_READY, cond.UNKNOWN, R_NODE_DOES_NOT_EXIST, msg)
            setc(NODE_HEALTHY, cond.UNKNOWN, R_NODE_DOES_NOT_EXIST, msg)
    elif node_ref:
        msg = f"Node {node_ref} has been deleted"
        setc(cond.NODE_READY, False, R_NODE_DELETED, msg)
        setc(NODE_HEALTHY, False, R_NODE_DELETED, msg)
    else:
        pid = spec.get("providerID")
        msg = f"Waiting for a Node with spec.providerID {pid} to exist" if pid else "Waiting for spec.providerID"
        setc(cond.NODE_READY, cond.UNKNOWN, R_NODE_DOES_NOT_EXIST, msg)
        setc(NODE_HEALTHY, cond.UNKNOWN, R_NODE_DOES_NOT_EXIST, msg)

    utd = up_to_date({**m, "status": st}, obs.machine_set, obs.machine_deployment, obs.now)
    if utd is None and obs.machine_pool is not None:
        utd = machinepool.machine_up_to_date(obs.machine_pool, m)
    if utd is not None:
        setc(UP_TO_DATE, *utd)

    # Deleting (the controller overrides the reason during deletion)
    cur_del = next((c for c in conds if c.get("type") == cond.DELETING), None)
    if not deleting:
        setc(cond.DELETING, False, R_NOT_DELETING)
    elif not cur_del or cur_del.get("status") != cond.TRUE:
        setc(cond.DELETING, True, R_DELETING, "Machine deletion in progress")

    # Ready summary
    view = {"status": {"conditions": conds}}
    not_ready = [c for c in (BOOTSTRAP_CONFIG_READY, INFRASTRUCTURE_READY, NODE_HEALTHY) if not cond.is_true(view, c)]
    hc = cond.get(view, HEALTH_CHECK_SUCCEEDED)
    if hc and hc.get("status") == cond.FALSE:
        not_ready.append(HEALTH_CHECK_SUCCEEDED)
    if deleting:
        setc(cond.READY, False, R_NOT_READY, "Machine deletion in progress")
    elif not_ready:
        setc(cond.READY, False, R_NOT_READY, "; ".join(f"{c} is not True" for c in not_ready))
    else:
        setc(cond.READY, True, R_READY)

    # Available: Ready for at least minReadySeconds
    view = {"status": {"conditions": conds}}
    ready_c = cond.get(view, cond.READY) or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    if ready_c.get("status") != cond.TRUE:
        setc(cond.AVAILABLE, False, R_NOT_READY, "Machine is not Ready")
    else:
        since = coreutil.parse_time(ready_c.get("lastTransitionTime")) or obs.now
        if (obs.now - since).total_seconds() >= min_ready:
            setc(cond.AVAILABLE, True, R_AVAILABLE)
        else:
            setc(cond.AVAILABLE, False, R_WAITING_MIN_READY, f"Waiting for {min_ready}s after Ready")

    st["conditions"] = conds
    if gen is not None:
        st["observedGeneration"] = gen
    st["phase"] = phase(obs.machine, st, obs.bootstrap_ref)
    return st


def available_requeue(machine: dict[str, Any], status: dict[str, Any], now: _dt.datetime) -> float | None:
    """Seconds until the Machine becomes Available (minReadySeconds), if it is waiting for it."""
    view = {"status": status}
    ready = cond.get(view, cond.READY)
    av = cond.get(view, cond.AVAILABLE)
    if not ready or ready.get("status") != cond.TRUE or (av and av.get("status") == cond.TRUE):
        return None
    min_ready = int((machine.get("spec") or {}).get("minReadySeconds") or 0)
    since = coreutil.parse_time(ready.get("lastTransitionTime")) or now
    return max(0.5, min_ready - (now - since).total_seconds() + 0.5)


def phase(machine: dict[str, Any], status: dict[str, Any], bootstrap_ref: bool = True) -> str:
    spec = machine.get("spec") or {}
    init = status.get("initialization") or {}
    if coreutil.is_deleting(machine):
        return PHASE_DELETING
    if status.get("failureReason") or contract.dig(status, "deprecated", "v1beta1", "failureReason"):
        return PHASE_FAILED
    if (status.get("nodeRef") or {}).get("name") and init.get("infrastructureProvisioned"):
        return PHASE_RUNNING
    if init.get("infrastructureProvisioned"):
        return PHASE_PROVISIONED
    if (spec.get("bootstrap") or {}).get("dataSecretName"):
        return PHASE_PROVISIONING
    return PHASE_PENDING
