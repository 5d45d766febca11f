from __future__ import annotations

import pytest

from capd_py.reconcile import cluster as rc
from capd_py.testing import builders

try:
    from core_fixtures import condition, healthy_machine, machine, owner_ref, ts
except ImportError:  # pragma: no cover
    from .core_fixtures import condition, healthy_machine, machine, owner_ref, ts  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def cluster(deleting: bool = False, endpoint: dict | None = None) -> dict:
    return builders.cluster(uid="uid-c1", generation=1, endpoint=endpoint, deleted_at=ts(1) if deleting else None)


def infra(provisioned: bool = True) -> dict:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster",
            "metadata": {"name": "c1"}, "spec": {"controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443}},
            "status": {"initialization": {"provisioned": provisioned},
                       "failureDomains": [{"name": "fd1", "controlPlane": True}]}}


def kcp(initialized: bool = True, available: str | None = "True") -> dict:
    st: dict = {"initialization": {"controlPlaneInitialized": initialized}, "replicas": 3, "readyReplicas": 2,
                "availableReplicas": 2, "upToDateReplicas": 3}
    if available:
        st["conditions"] = [condition("Available", available)]
    return {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
            "metadata": {"name": "c1-cp"}, "spec": {"replicas": 3}, "status": st}


def md(name: str, available: str | None = "True") -> dict:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": name}, "spec": {"replicas": 2},
            "status": {"conditions": [condition("Available", available)] if available else []}}


def cmap(st: dict) -> dict[str, dict]:
    return {c["type"]: c for c in st["conditions"]}


def test_endpoint_copied_unless_set() -> None:
    assert rc.spec_patch(rc.Observed(cluster(), infra=infra())) == \
        {"spec": {"controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443}}}
    assert rc.spec_patch(rc.Observed(cluster(endpoint={"host": "x", "port": 1}), infra=infra())) is None
    assert rc.spec_patch(rc.Observed(cluster(), infra=None)) is None


def test_missing_objects_are_conditions() -> None:
    st = rc.compute_status(rc.Observed(cluster()))
    c = cmap(st)
    assert c["InfrastructureReady"]["status"] == "False"
    assert c["InfrastructureReady"]["reason"] == "ObjectDoesNotExist"
    assert "DockerCluster c1 does not exist" in c["InfrastructureReady"]["message"]
    assert c["ControlPlaneAvailable"]["reason"] == "ObjectDoesNotExist"
    assert c["ControlPlaneInitialized"]["reason"] == "ObjectDoesNotExist"
    assert c["Available"]["status"] == "False"
    assert st["phase"] == "Provisioning"


def test_provisioned_and_available() -> None:
    mds = [md("md1")]
    workers = [healthy_machine("w1"), healthy_machine("w2")]
    obs = rc.Observed(cluster(endpoint={"host": "172.18.0.3", "port": 6443}), infra=infra(), control_plane=kcp(),
                      machines=workers, machine_deployments=mds)
    st = rc.compute_status(obs)
    c = cmap(st)
    assert c["InfrastructureReady"]["status"] == "True"
    assert c["ControlPlaneInitialized"]["status"] == "True"
    assert c["ControlPlaneAvailable"]["status"] == "True"
    assert c["WorkersAvailable"]["status"] == "True"
    assert c["Available"]["status"] == "True"
    assert c["Deleting"]["status"] == "False"
    assert "Paused" not in c  # the reconcile skeleton's (tests/unit/controllers/test_skeleton.py)
    assert st["initialization"] == {"infrastructureProvisioned": True, "controlPlaneInitialized": True}
    assert st["failureDomains"] == [{"name": "fd1", "controlPlane": True}]
    assert st["phase"] == "Provisioned"
    assert st["controlPlane"] == {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 2, "availableReplicas": 2,
                                  "upToDateReplicas": 3}
    assert st["workers"]["desiredReplicas"] == 2 and st["workers"]["readyReplicas"] == 2
    assert c["WorkerMachinesReady"]["status"] == "True"
    assert c["ControlPlaneMachinesReady"]["reason"] == "NoReplicas"
    assert c["WorkerMachinesUpToDate"]["reason"] == "NoReplicas"  # nobody reports UpToDate yet


def test_worker_machines_not_ready() -> None:
    obs = rc.Observed(cluster(), infra=infra(), control_plane=kcp(),
                      machines=[healthy_machine("w1"), machine("w2", conds=[condition("Ready", "False")])])
    c = cmap(rc.compute_status(obs))
    assert c["WorkerMachinesReady"]["status"] == "False" and "w2" in c["WorkerMachinesReady"]["message"]


def test_workers_not_available_and_no_workers() -> None:
    obs = rc.Observed(cluster(), infra=infra(), control_plane=kcp(), machine_deployments=[md("a", "False")])
    c = cmap(rc.compute_status(obs))
    assert c["WorkersAvailable"]["status"] == "False" and "a" in c["WorkersAvailable"]["message"]
    assert c["Available"]["status"] == "False"
    c = cmap(rc.compute_status(rc.Observed(cluster(), infra=infra(), control_plane=kcp())))
    assert c["WorkersAvailable"]["reason"] == "NoWorkers" and c["WorkersAvailable"]["status"] == "True"


def test_control_plane_available_falls_back_to_initialized() -> None:
    """As upstream: no Available condition on the control plane -> its controlPlaneInitialized decides."""
    c = cmap(rc.compute_status(rc.Observed(cluster(), infra=infra(), control_plane=kcp(available=None))))
    assert (c["ControlPlaneAvailable"]["status"], c["ControlPlaneAvailable"]["reason"]) == ("True", "Available")
    c = cmap(rc.compute_status(rc.Observed(cluster(), infra=infra(),
                                           control_plane=kcp(initialized=False, available=None))))
    assert (c["ControlPlaneAvailable"]["status"], c["ControlPlaneAvailable"]["reason"]) == ("False", "NotAvailable")


def test_initialization_sticky_and_infra_deleted() -> None:
    cl = cluster()
    cl["status"] = rc.compute_status(rc.Observed(cl, infra=infra(), control_plane=kcp()))
    st = rc.compute_status(rc.Observed(cl, infra=None, control_plane=kcp(initialized=False)))
    assert st["initialization"]["controlPlaneInitialized"] is True
    assert cmap(st)["InfrastructureReady"]["reason"] == "ObjectDeleted"


def test_status_stable() -> None:
    cl = cluster(endpoint={"host": "h", "port": 1})
    obs = rc.Observed(cl, infra=infra(), control_plane=kcp())
    cl["status"] = rc.compute_status(obs)
    assert rc.compute_status(rc.Observed(cl, infra=infra(), control_plane=kcp())) == cl["status"]


# --- deletion order ----------------------------------------------------------------------------

def kinds(objs: list[dict]) -> list[str]:
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objs)


def test_deletion_order() -> None:
    cl = cluster(deleting=True)
    md1 = md("md1")
    ms_md = {"kind": "MachineSet", "metadata": {"name": "md1-x", "ownerReferences": [
        owner_ref("MachineDeployment", "md1")]}, "spec": {}}
    ms_alone = {"kind": "MachineSet", "metadata": {"name": "lone"}, "spec": {}}
    w_ms = machine("w1", owner=owner_ref("MachineSet", "md1-x"))
    w_bare = machine("bare")
    cp_m = machine("cp1", labels={"cluster.x-k8s.io/control-plane": ""}, owner=owner_ref("KubeadmControlPlane", "c"))
    obs = rc.Observed(cl, infra=infra(), control_plane=kcp(), machines=[w_ms, w_bare, cp_m],
                      machine_deployments=[md1], machine_sets=[ms_md, ms_alone])
    p = rc.deletion_plan(obs)
    assert p.step == "workers" and p.reason == "WaitingForWorkersDeletion"
    # MDs, MSs not owned by an MD and bare worker Machines; never the control plane yet
    assert kinds(p.delete) == ["Machine/bare", "MachineDeployment/md1", "MachineSet/lone"]

    # while they are going away, nothing new is deleted but we keep waiting
    w_ms["metadata"]["deletionTimestamp"] = ts(1)
    p = rc.deletion_plan(rc.Observed(cl, infra=infra(), control_plane=kcp(), machines=[w_ms, cp_m]))
    assert p.step == "workers" and p.delete == []

    p = rc.deletion_plan(rc.Observed(cl, infra=infra(), control_plane=kcp(), machines=[cp_m]))
    assert p.step == "control_plane" and p.reason == "WaitingForControlPlaneDeletion"
    assert kinds(p.delete) == ["KubeadmControlPlane/c1-cp"]

    gone_cp = kcp()
    gone_cp["metadata"]["deletionTimestamp"] = ts(1)
    p = rc.deletion_plan(rc.Observed(cl, infra=infra(), control_plane=gone_cp, machines=[cp_m]))
    assert p.step == "control_plane" and p.delete == []

    # control plane object gone but its Machines remain: infra waits
    p = rc.deletion_plan(rc.Observed(cl, infra=infra(), control_plane=None, machines=[cp_m]))
    assert p.step == "control_plane" and kinds(p.delete) == ["Machine/cp1"]

    p = rc.deletion_plan(rc.Observed(cl, infra=infra(), control_plane=None))
    assert p.step == "infrastructure" and p.reason == "WaitingForInfrastructureDeletion"
    assert kinds(p.delete) == ["DockerCluster/c1"]

    p = rc.deletion_plan(rc.Observed(cl))
    assert p.step == "done"


def test_deleting_status() -> None:
    st = rc.compute_status(rc.Observed(cluster(deleting=True), infra=infra(), control_plane=kcp()))
    assert st["phase"] == "Deleting"
    assert cmap(st)["Deleting"]["status"] == "True"
    assert cmap(st)["Available"]["status"] == "False"


def test_rolling_out_aggregated() -> None:
    d = md("md1")
    d["kind"] = "MachineDeployment"
    d["status"]["conditions"].append(condition("RollingOut", "True"))
    c = cmap(rc.compute_status(rc.Observed(cluster(), infra=infra(), control_plane=kcp(), machine_deployments=[d])))
    assert c["RollingOut"]["status"] == "True" and "md1" in c["RollingOut"]["message"]
    assert c["ScalingUp"]["status"] == "False"


def test_remote_connection_probe_has_upstreams_grace_period() -> None:
    """One failed probe of a busy API server does not make the Cluster unavailable: RemoteConnectionProbe turns
    False only once the last success is older than 50 s (upstream's --remote-connection-grace-period); a cluster
    never reached is False at once."""
    now = 1_800_000_000.0
    ok = rc.Observed(cluster(), remote_probe=True, now=now, remote_probe_last_success=now)
    assert rc.remote_connection(ok) == (True, "ProbeSucceeded", "")
    blip = rc.Observed(cluster(), remote_probe=False, remote_probe_error="10.0.0.2:6443: TimeoutError: no answer",
                       remote_probe_last_success=now - 20, now=now)
    assert rc.remote_connection(blip)[0] is True
    down = rc.Observed(cluster(), remote_probe=False, remote_probe_error="10.0.0.2:6443: TimeoutError: no answer",
                       remote_probe_last_success=now - 51, now=now)
    assert rc.remote_connection(down) == (False, "ProbeFailed", "Remote connection probe failed, probe last succeeded "
                                          "at 2027-01-15T07:59:09Z: 10.0.0.2:6443: TimeoutError: no answer")
    never = rc.Observed(cluster(), remote_probe=False, remote_probe_error="x: refused", now=now)
    assert rc.remote_connection(never) == (False, "ProbeFailed", "Remote connection probe failed: x: refused")


@pytest.mark.parametrize(("topology", "annotations", "gates", "waits"), [
    (True, {}, (True, True), True),
    (True, {"runtime.cluster.x-k8s.io/ok-to-delete": ""}, (True, True), False),
    (True, {}, (False, True), False),  # RuntimeSDK off: today's deletion
    (True, {}, (True, False), False),  # ClusterTopology off
    (False, {}, (True, True), False),  # no managed topology: nobody would mark it
])
def test_deletion_waits_for_before_cluster_delete(topology: bool, annotations: dict[str, str],
                                                  gates: tuple[bool, bool], waits: bool) -> None:
    cl = cluster(deleting=True)
    cl["metadata"]["annotations"] = annotations
    if topology:
        cl["spec"]["topology"] = {"version": "v1.35.0", "classRef": {"name": "cc"}}
    assert rc.waits_for_before_delete_hook(cl, *gates) is waits
    p = rc.deletion_plan(rc.Observed(cl, infra=infra(), control_plane=kcp(), machine_deployments=[md("md1")]),
                         rc.waits_for_before_delete_hook(cl, *gates))
    if waits:  # upstream's ClusterDeletingWaitingForBeforeDeleteHookReason: nothing is deleted yet
        assert (p.step, p.reason, p.message, p.delete) == ("hook", "WaitingForBeforeDeleteHook",
                                                           "Waiting for BeforeClusterDelete hook", [])
    else:
        assert p.step == "workers"


def test_the_cluster_controls_its_objects_with_a_topology_only() -> None:
    """upstream ensureOwnerRefAndLabel: controller owner of the InfrastructureCluster and control plane when the
    Cluster has a managed topology (its e2e asserts it for ClusterClass clusters), a plain owner otherwise."""
    assert rc.controls_its_objects({"spec": {"topology": {"classRef": {"name": "cc"}, "version": "v1.35.4"}}})
    assert not rc.controls_its_objects({"spec": {"controlPlaneRef": {"kind": "KubeadmControlPlane"}}})
