"""KubeadmControlPlane status and conditions from observed state (upstream:
internal/controllers/status.go). Everything here writes into a `conditions.StatusBuilder` the controller
then hands to the status writer (`lifecycle.write_status`: a patch of what changed, nothing when nothing did)."""

from __future__ import annotations

from typing import Any

from capd_py.api import conditions
from capd_py.api import versions as versions_mod
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import coreutil
from capd_py.reconcile.kcp import etcdhealth
from capd_py.reconcile.kcp.common import (
    AVAILABLE,
    CERTIFICATES_AVAILABLE,
    COMPONENTS_HEALTHY,
    DELETING,
    ETCD_CLUSTER_HEALTHY,
    ETCD_MEMBER_HEALTHY,
    INITIALIZED,
    MACHINES_READY,
    MACHINES_UP_TO_DATE,
    REMEDIATING,
    REPLICAS_WARNING,
    ROLLING_OUT,
    SCALING_DOWN,
    SCALING_UP,
    STATIC_PODS,
    Action,
    MachineView,
    replicas,
    selector,
)
from capd_py.reconcile.kcp.remediation import last_remediation, remediating_message
from capd_py.reconcile.machine import UP_TO_DATE

Status = conditions.StatusBuilder


def min_version(versions: list[str]) -> str | None:
    """The lowest version (upstream Machines.LowestVersion, which status.version reports): semver order, so
    a pre-release sorts before its release; versions that do not parse are left out."""
    parsed: list[tuple[versions_mod.Version, str]] = []
    for v in versions:
        try:
            parsed.append((versions_mod.parse(v if v.startswith("v") else f"v{v}"), v))
        except ValueError:
            continue
    return min(parsed)[1] if parsed else None


def even_replicas_message(kcp: dict[str, Any]) -> str | None:
    r = replicas(kcp)
    if r > 0 and r % 2 == 0:
        return (f"spec.replicas is {r}: an even number of control-plane machines does not improve etcd fault "
                f"tolerance over {r - 1} and a rollout may lose quorum; use an odd number")
    return None


def certificate_problems(found: dict[str, certs_mod.KeyPair]) -> list[str]:
    return [m for p, kp in found.items() if (m := certs_mod.validate_keypair(p, kp))]


def set_certificates(st: Status, problems: list[str]) -> None:
    if problems:
        st.set(CERTIFICATES_AVAILABLE, False, "InternalError", "; ".join(problems))
    else:
        st.set(CERTIFICATES_AVAILABLE, True, "Available")


def set_spec_status(st: Status, kcp: dict[str, Any], cluster_name: str) -> None:
    """What follows from the spec alone: the scale selector and the even-replicas warning."""
    st.status["selector"] = selector(cluster_name)
    even = even_replicas_message(kcp)
    if even:
        st.set(REPLICAS_WARNING, True, "EvenReplicas", even)
    else:
        st.set(REPLICAS_WARNING, False, "OddReplicas")


def external_etcd_availability(views: list[MachineView]) -> tuple[bool, str]:
    """Upstream's Available for an initialized control plane whose etcd is external (`clusterConfiguration.etcd.
    external`: no member of it on the machines): one Machine with a provider ID whose API server, controller manager
    and scheduler are healthy. (With its own etcd, reconcile/kcp/etcdhealth.py decides.) (available, why not)."""
    if any(v.provider_id and all(v.pods_ready.get(p) for p in STATIC_PODS[:3]) for v in views):
        return True, ""
    return False, "* There are no Machines with healthy control plane components, at least 1 required"


def apply(st: Status, kcp: dict[str, Any], views: list[MachineView], versions: list[str], initialized: bool,
          workload_reachable: bool, workload_error: str = "", etcd: etcdhealth.Assessment | None = None) -> None:
    """Replica counts, version, initialization and every machine / health condition.
    `versions`: the owned Machines' spec.version. `etcd`: what the control plane's own etcd reported (None: an
    external etcd: Available goes by the control-plane components alone, and EtcdClusterHealthy is not set, as
    upstream)."""
    want = replicas(kcp)
    live = [v for v in views if not v.deleting]
    s = st.status
    s["replicas"] = len(views)
    s["readyReplicas"] = sum(1 for v in views if v.ready)
    s["availableReplicas"] = sum(1 for v in views if v.available)
    s["upToDateReplicas"] = sum(1 for v in views if v.up_to_date)
    # upstream's updateV1Beta1Status: ready = the control plane's Ready Nodes (none counted while the workload
    # cluster cannot be read or the KCP is being deleted)
    ready_nodes = sum(1 for v in views if v.node_name and v.node_ready) \
        if workload_reachable and not kcp["metadata"].get("deletionTimestamp") else 0
    s["deprecated"] = coreutil.with_v1beta1_counters(
        s, updatedReplicas=s["upToDateReplicas"], readyReplicas=ready_nodes,
        unavailableReplicas=len(views) - ready_nodes)["deprecated"]
    ver = min_version(versions)
    if ver:
        s["version"] = ver
    if initialized:
        s["initialization"] = {**(s.get("initialization") or {}), "controlPlaneInitialized": True}
        st.set(INITIALIZED, True, "Initialized")
    elif views and not workload_reachable and workload_error:
        # upstream leaves the message empty and only logs why; say which address failed and how, so an
        # API server the controllers cannot reach (e.g. another docker network) is visible on the object
        st.set(INITIALIZED, False, "NotInitialized",
               f"Control plane not yet initialized: the workload cluster API is not reachable: {workload_error}")
    else:
        st.set(INITIALIZED, False, "NotInitialized", "Control plane not yet initialized")

    if not initialized:
        st.set(AVAILABLE, False, "NotAvailable", "Control plane not yet initialized")
    elif etcd is not None:
        st.set(AVAILABLE, etcd.available.status, etcd.available.reason, etcd.available.message)
    else:
        available, why = external_etcd_availability(views)
        st.set(AVAILABLE, available, "Available" if available else "NotAvailable", why)

    if not views:
        st.set(MACHINES_READY, True, "NoReplicas")
        st.set(MACHINES_UP_TO_DATE, True, "NoReplicas")
    else:
        not_ready = sorted(v.name for v in views if not v.ready)
        st.set(MACHINES_READY, not not_ready, "NotReady" if not_ready else "Ready",
               f"Machine {', '.join(not_ready)} not ready" if not_ready else "")
        outdated = [v for v in views if not v.up_to_date]
        msg = "; ".join(f"{v.name}: {', '.join(v.outdated_reasons)}" for v in outdated)
        st.set(MACHINES_UP_TO_DATE, not outdated, "NotUpToDate" if outdated else "UpToDate", msg)
    outdated = [v for v in live if not v.up_to_date]
    if outdated:
        st.set(ROLLING_OUT, True, "RollingOut",
               f"Rolling out {len(outdated)} not up-to-date replicas: "
               + "; ".join(sorted({r for v in outdated for r in v.outdated_reasons})))
    else:
        st.set(ROLLING_OUT, False, "NotRollingOut")
    if len(live) < want:
        st.set(SCALING_UP, True, "ScalingUp", f"Scaling up from {len(live)} to {want} replicas")
    else:
        st.set(SCALING_UP, False, "NotScalingUp")
    if len(live) > want or any(v.deleting for v in views):
        st.set(SCALING_DOWN, True, "ScalingDown", f"Scaling down from {len(views)} to {want} replicas")
    else:
        st.set(SCALING_DOWN, False, "NotScalingDown")

    external = initialized and etcd is None  # no etcd of its own: upstream leaves EtcdClusterHealthy to others
    if not initialized or not views:
        st.set(ETCD_CLUSTER_HEALTHY, conditions.UNKNOWN, "HealthUnknown", "Control plane not yet initialized")
        st.set(COMPONENTS_HEALTHY, conditions.UNKNOWN, "HealthUnknown", "Control plane not yet initialized")
    elif not workload_reachable:
        msg = f"The workload cluster API is not reachable: {workload_error}"
        if not external:
            st.set(ETCD_CLUSTER_HEALTHY, conditions.UNKNOWN, "ConnectionDown", msg)
        st.set(COMPONENTS_HEALTHY, conditions.UNKNOWN, "ConnectionDown", msg)
    else:
        if etcd is not None:
            st.set(ETCD_CLUSTER_HEALTHY, etcd.cluster.status, etcd.cluster.reason, etcd.cluster.message)
        bad = sorted(f"{v.name} ({', '.join(p for p in STATIC_PODS[:3] if not v.pods_ready.get(p))})"
                     for v in live if not all(v.pods_ready.get(p) for p in STATIC_PODS[:3]))
        st.set(COMPONENTS_HEALTHY, not bad, "NotHealthy" if bad else "Healthy",
               f"Control plane components not healthy on {'; '.join(bad)}" if bad else "")
    fix = remediating_message(live)
    if fix:
        st.set(REMEDIATING, True, "Remediating", fix)
    else:
        st.set(REMEDIATING, False, "NotRemediating")
    st.set(DELETING, False, "NotDeleting")


def progress(st: Status, kcp: dict[str, Any], action: Action, machines: int) -> None:
    """Add what a scaling / rollout step waits for to ScalingUp / ScalingDown."""
    if action.kind != "wait":
        return
    want = replicas(kcp)
    if machines > want or action.reason == "WaitingForMachineDeletion":
        st.set(SCALING_DOWN, True, "ScalingDown", f"Scaling down from {machines} to {want} replicas; "
                                                  f"{action.message}")
    elif machines < want or action.rollout:
        st.set(SCALING_UP, True, "ScalingUp", f"Scaling up from {machines} to {want} replicas; {action.message}")


def machine_conditions_status(machine: dict[str, Any], view: MachineView,
                              etcd_member: etcdhealth.Cond | None = None) -> dict[str, Any] | None:
    """The Machine's status with the conditions the control plane owns: UpToDate (upstream KCP's
    reconcileMachineUpToDateCondition) and, when etcd was read, EtcdMemberHealthy; None when the Machine already
    says so (no write)."""
    if view.up_to_date:
        wants = [(UP_TO_DATE, conditions.TRUE, "UpToDate", "")]
    else:
        wants = [(UP_TO_DATE, conditions.FALSE, "NotUpToDate", "; ".join(f"* {r}" for r in view.outdated_reasons))]
    if etcd_member is not None:
        wants.append((ETCD_MEMBER_HEALTHY, etcd_member.status, etcd_member.reason, etcd_member.message))
    status = dict(machine.get("status") or {})
    changed = False
    for ctype, cstatus, reason, message in wants:
        cur = conditions.get(machine, ctype)
        if cur and (cur.get("status"), cur.get("reason"), cur.get("message") or "") == (cstatus, reason, message):
            continue
        status["conditions"] = conditions.set_condition(status.get("conditions"), ctype, cstatus, reason, message,
                                                        machine["metadata"].get("generation"))
        changed = True
    return status if changed else None



def apply_pass(st: Status, kcp: dict[str, Any], views: list[MachineView], machines: list[dict[str, Any]],
               initialized: bool, workload_reachable: bool, workload_error: str,
               pending_annotations: dict[str, str | None], etcd: etcdhealth.Assessment | None = None) -> None:
    """`apply` for one pass, plus status.lastRemediation as the KCP's annotations will be once the pass has
    written the ones it changes (`pending_annotations`, None: removed)."""
    apply(st, kcp, views, [str((m.get("spec") or {}).get("version") or "") for m in machines], initialized,
          workload_reachable, workload_error, etcd)
    ann = {k: v for k, v in {**(kcp["metadata"].get("annotations") or {}), **pending_annotations}.items()
           if v is not None}
    last = last_remediation({"metadata": {"annotations": ann}},
                            [m["metadata"].get("annotations") or {} for m in machines])
    if last is not None:
        st.status["lastRemediation"] = last


# how often a steady control plane's health is read again (its Nodes are watched, its Pods are not)
STEADY_RECHECK = 30.0
# while a reachable control plane's components come up: a static pod turns Ready when its probe passes, and
# nothing else tells the KCP (a new cluster's Available waits for this poll after its last component)
COMING_UP_RECHECK = 2.0


def recheck_after(status: dict[str, Any], has_machines: bool, poll: float) -> float | None:
    """When to read the workload cluster again after a pass that changed nothing. Nothing wakes the KCP when a
    control-plane Pod becomes Ready (upstream does not watch them either: too many watches at scale; it requeues
    after 20 s). Not initialized or unreachable: every `poll` seconds. Reachable with a component not healthy or
    not Available: every COMING_UP_RECHECK seconds (a read of kube-system's control-plane Pods, no write unless
    something changed). Steady: every STEADY_RECHECK seconds, reads only. None without Machines."""
    if not has_machines:
        return None
    obj = {"status": status}
    healthy = conditions.get(obj, COMPONENTS_HEALTHY) or {}
    if not (status.get("initialization") or {}).get("controlPlaneInitialized") or healthy.get("status") not in (
            conditions.TRUE, conditions.FALSE):
        return poll  # no API to read yet, or not answering
    if healthy.get("status") == conditions.TRUE and conditions.is_true(obj, AVAILABLE):
        return max(poll, STEADY_RECHECK)
    return min(poll, COMING_UP_RECHECK)
