"""MachinePool decisions (capd_py.reconcile.machinepool), plain data in, plain data out."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.labels import CLUSTER_NAME, MACHINE_POOL_NAME
from capd_py.reconcile import machine as rm
from capd_py.reconcile import machinepool as rmp

try:
    from core_fixtures import NOW, condition, machine, owner_ref, ts
except ImportError:  # pragma: no cover
    from .core_fixtures import NOW, condition, machine, owner_ref, ts  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def mp(replicas: int | None = 2, version: str = "v1.34.4", **spec: Any) -> dict[str, Any]:
    o: dict[str, Any] = {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
        "metadata": {"name": "c1-mp-0", "namespace": "ns", "uid": "uid-mp", "generation": 3,
                     "resourceVersion": "7", "labels": {CLUSTER_NAME: "c1"}},
        "spec": {"clusterName": "c1", "template": {
            "metadata": {"labels": {"pool": "a"}, "annotations": {"note": "x"}},
            "spec": {"clusterName": "c1", "version": version,
                     "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                                 "name": "c1-mp-0-config"}},
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "DockerMachinePool", "name": "c1-dmp-0"}}}, **spec},
        "status": {},
    }
    if replicas is not None:
        o["spec"]["replicas"] = replicas
    return o


def kubeadm_config(created: bool = True) -> dict[str, Any]:
    st: dict[str, Any] = {"initialization": {"dataSecretCreated": True}, "dataSecretName": "c1-mp-0-config"} \
        if created else {"conditions": [condition("Ready", "False", reason="NotReady")]}
    return {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": "c1-mp-0-config", "namespace": "ns"}, "status": st}


def dmp(provisioned: bool = True, ids: list[str] | None = None, replicas: int = 2,
        kind: str | None = "DockerMachine") -> dict[str, Any]:
    st: dict[str, Any] = {"replicas": replicas}
    if provisioned:
        st["ready"] = True
        st["initialization"] = {"provisioned": True}
    if kind:
        st["infrastructureMachineKind"] = kind
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachinePool",
            "metadata": {"name": "c1-dmp-0", "namespace": "ns"},
            "spec": {"providerIDList": ids if ids is not None else ["docker:////c1-mp-0-a", "docker:////c1-mp-0-b"]},
            "status": st}


def docker_machine(name: str, deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": "ns", "labels": {MACHINE_POOL_NAME: "c1-mp-0",
                                                                        CLUSTER_NAME: "c1"}}
    if deleting:
        md["deletionTimestamp"] = ts(1)
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachine", "metadata": md,
            "spec": {}}


def node(name: str, pid: str, ready: bool = True, ready_for: float = 1000) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {"providerID": pid},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                       "lastTransitionTime": ts(ready_for)}]}}


def pool_machine(name: str, ready: bool = True, version: str = "v1.34.4", uptodate: bool = True) -> dict[str, Any]:
    conds = [condition("Ready", "True" if ready else "False", 1000),
             condition("Available", "True" if ready else "False", 1000),
             condition("UpToDate", "True" if uptodate else "False", 1000)]
    return machine(name, labels={MACHINE_POOL_NAME: "c1-mp-0"}, owner=owner_ref("MachinePool", "c1-mp-0", "uid-mp"),
                   conds=conds, version=version)


# --- spec ----------------------------------------------------------------------------------------


def test_data_secret_name_and_provider_ids_are_copied() -> None:
    p = rmp.spec_patch(mp(), kubeadm_config(), dmp())
    assert p == {"spec": {"template": {"spec": {"bootstrap": {"dataSecretName": "c1-mp-0-config"}}},
                          "providerIDList": ["docker:////c1-mp-0-a", "docker:////c1-mp-0-b"]}}
    done = mp(providerIDList=["docker:////c1-mp-0-a", "docker:////c1-mp-0-b"])
    done["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = "c1-mp-0-config"
    assert rmp.spec_patch(done, kubeadm_config(), dmp()) is None


def test_nothing_copied_before_the_providers_are_ready() -> None:
    assert rmp.spec_patch(mp(), kubeadm_config(created=False), dmp(provisioned=False)) is None
    # upstream: an empty list while the infrastructure still reports replicas is not trusted
    assert rmp.spec_patch(mp(), None, dmp(ids=[], replicas=2)) is None
    assert rmp.spec_patch(mp(providerIDList=["x"]), None, dmp(ids=[], replicas=0)) == \
        {"spec": {"providerIDList": None}}


# --- MachinePool Machines -------------------------------------------------------------------------


def test_a_machine_per_infrastructure_machine() -> None:
    pool = mp()
    pool["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = "c1-mp-0-config"
    pool["spec"]["template"]["spec"]["deletion"] = {"nodeDrainTimeoutSeconds": 30}
    existing = pool_machine("c1-mp-0-a")
    existing["spec"]["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine",
                                             "name": "c1-mp-0-a"}
    want = rmp.machines_to_create(pool, [docker_machine("c1-mp-0-a"), docker_machine("c1-mp-0-b"),
                                         docker_machine("c1-mp-0-c", deleting=True)], [existing])
    assert [m["metadata"]["name"] for m in want] == ["c1-mp-0-b"]
    (m,) = want
    assert m["metadata"]["labels"] == {"pool": "a", MACHINE_POOL_NAME: "c1-mp-0", CLUSTER_NAME: "c1"}
    assert m["metadata"]["annotations"] == {"note": "x"}
    assert m["metadata"]["ownerReferences"] == [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
                                                  "name": "c1-mp-0", "uid": "uid-mp", "controller": True,
                                                  "blockOwnerDeletion": True}]
    assert m["spec"] == {"clusterName": "c1", "bootstrap": {"dataSecretName": "c1-mp-0-config"},
                         "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                               "kind": "DockerMachine", "name": "c1-mp-0-b"},
                         "version": "v1.34.4", "deletion": {"nodeDrainTimeoutSeconds": 30}}


def test_machine_before_bootstrap_data_waits_with_an_empty_secret_name_then_gets_it() -> None:
    pool = mp()
    (m,) = rmp.machines_to_create(pool, [docker_machine("c1-mp-0-a")], [])
    assert m["spec"]["bootstrap"] == {"dataSecretName": ""}  # upstream's value: admitted, waits
    pool["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = "c1-mp-0-config"
    m["metadata"]["resourceVersion"] = "1"
    m["spec"]["deletion"] = {"nodeDeletionTimeoutSeconds": 10}  # upstream's Machine webhook's default
    assert rmp.machine_patch(pool, m) == {"spec": {"bootstrap": {"dataSecretName": "c1-mp-0-config"}}}
    m["spec"]["bootstrap"]["dataSecretName"] = "c1-mp-0-config"
    assert rmp.machine_patch(pool, m) is None
    # a version bump does not touch existing Machines (their instances are replaced instead)
    pool["spec"]["template"]["spec"]["version"] = "v1.35.0"
    assert rmp.machine_patch(pool, m) is None
    # a pool Machine whose owner references were removed (a restore; upstream's e2e) is adopted again
    owners = m["metadata"].pop("ownerReferences")
    assert rmp.machine_patch(pool, m) == {"metadata": {"ownerReferences": owners}}


def test_machines_controlled_by_others_are_not_the_pools() -> None:
    mine = pool_machine("a")
    other = machine("b", labels={MACHINE_POOL_NAME: "c1-mp-0"}, owner=owner_ref("MachineSet", "ms"))
    orphan = machine("c", labels={MACHINE_POOL_NAME: "c1-mp-0"})
    unlabelled = machine("d", owner=owner_ref("MachinePool", "c1-mp-0", "uid-mp"))
    assert [m["metadata"]["name"] for m in rmp.machines_of(mp(), [mine, other, orphan, unlabelled])] == ["a", "c"]


def test_long_pool_names_become_hashed_label_values() -> None:
    assert rmp.label_value("short") == "short"
    v = rmp.label_value("x" * 70)
    assert v.startswith("hash_") and v.endswith("_z") and len(v) <= 63
    assert v == rmp.label_value("x" * 70) != rmp.label_value("y" * 70)


def test_pool_machines_up_to_date() -> None:
    pool = mp(version="v1.35.0")
    assert rmp.machine_up_to_date(pool, pool_machine("a", version="v1.35.0"))[0] == cond.TRUE
    s, r, msg = rmp.machine_up_to_date(pool, pool_machine("a", version="v1.34.4"))
    assert (s, r) == (cond.FALSE, "NotUpToDate") and "v1.35.0 required" in msg
    gone = pool_machine("a", version="v1.35.0")
    gone["metadata"]["deletionTimestamp"] = ts(1)
    assert rmp.machine_up_to_date(pool, gone) == (cond.FALSE, "NotUpToDate", "Machine is being deleted")


def test_machine_status_takes_up_to_date_from_its_pool() -> None:
    m = pool_machine("a", version="v1.34.4")
    m["status"] = {}
    st = rm.compute_status(rm.Observed(machine=m, machine_pool=mp(version="v1.35.0"), now=NOW))
    assert cond.get({"status": st}, "UpToDate")["status"] == cond.FALSE  # type: ignore[index]
    st = rm.compute_status(rm.Observed(machine=m, machine_pool=mp(), now=NOW))
    assert cond.get({"status": st}, "UpToDate")["status"] == cond.TRUE  # type: ignore[index]


# --- nodes ----------------------------------------------------------------------------------------


def test_node_refs_by_provider_id() -> None:
    nodes = [node("n-a", "docker:////c1-mp-0-a"), node("n-b", "docker:////c1-mp-0-b", ready_for=5),
             node("n-c", "docker:////c1-mp-0-c", ready=False), node("cp", "docker:////c1-cp")]
    nr = rmp.node_refs(["docker:////c1-mp-0-a", "docker:////c1-mp-0-b", "docker:////c1-mp-0-c",
                        "docker:////gone"], nodes, 10, NOW)
    assert [r["name"] for r in nr.refs] == ["n-a", "n-b", "n-c"]
    assert nr.refs[0] == {"apiVersion": "v1", "kind": "Node", "name": "n-a", "uid": "uid-n-a"}
    assert (nr.ready, nr.available) == (2, 1)


def test_retired_nodes_are_those_whose_provider_id_left_the_list() -> None:
    pool = mp(providerIDList=["docker:////c1-mp-0-a"])
    pool["status"]["nodeRefs"] = [{"name": "n-a"}, {"name": "n-b"}]
    nodes = [node("n-a", "docker:////c1-mp-0-a"), node("n-b", "docker:////c1-mp-0-b"), node("cp", "docker:////x")]
    assert rmp.retired_nodes(pool, nodes) == ["n-b"]


# --- status ---------------------------------------------------------------------------------------


def test_status_of_a_running_pool() -> None:
    pool = mp(providerIDList=["docker:////c1-mp-0-a", "docker:////c1-mp-0-b"])
    pool["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = "c1-mp-0-config"
    obs = rmp.Observed(mp=pool, bootstrap=kubeadm_config(), infra=dmp(),
                       machines=[pool_machine("c1-mp-0-a"), pool_machine("c1-mp-0-b")],
                       nodes=[node("n-a", "docker:////c1-mp-0-a"), node("n-b", "docker:////c1-mp-0-b")], now=NOW)
    st = rmp.compute_status(obs)
    assert st["initialization"] == {"bootstrapDataSecretCreated": True, "infrastructureProvisioned": True}
    assert (st["replicas"], st["readyReplicas"], st["availableReplicas"], st["upToDateReplicas"]) == (2, 2, 2, 2)
    assert [r["name"] for r in st["nodeRefs"]] == ["n-a", "n-b"]
    # the v1beta1 counters upstream keeps from the Nodes (upstream's e2e waits on readyReplicas there)
    assert st["deprecated"]["v1beta1"] == {"readyReplicas": 2, "availableReplicas": 2, "unavailableReplicas": 0}
    assert st["phase"] == "Running" and st["observedGeneration"] == 3
    view = {"status": st}
    for t in ("BootstrapConfigReady", "InfrastructureReady", "MachinesReady", "MachinesUpToDate", "Available"):
        assert cond.is_true(view, t), t
    for t in ("ScalingUp", "ScalingDown", "Deleting"):
        assert cond.get(view, t)["status"] == cond.FALSE, t  # type: ignore[index]
    # Paused=False is the reconcile skeleton's: asserted on the reconciled MachinePool (test_machinepool_operator.py)
    # stable: computing again from the written status changes nothing
    again = copy.deepcopy(pool)
    again["status"] = st
    assert rmp.compute_status(rmp.Observed(**{**obs.__dict__, "mp": again})) == st


def test_scaling_conditions_and_phase() -> None:
    pool = mp(replicas=3)
    obs = rmp.Observed(mp=pool, bootstrap=kubeadm_config(), infra=dmp(), machines=[pool_machine("a"),
                                                                                     pool_machine("b")], now=NOW)
    st = rmp.compute_status(obs)
    assert cond.is_true({"status": st}, "ScalingUp") and st["phase"] == "ScalingUp"
    assert not cond.is_true({"status": st}, "Available")
    pool = mp(replicas=1)
    st = rmp.compute_status(rmp.Observed(mp=pool, bootstrap=kubeadm_config(), infra=dmp(),
                                         machines=[pool_machine("a"), pool_machine("b")], now=NOW))
    assert cond.is_true({"status": st}, "ScalingDown") and st["phase"] == "ScalingDown"


def test_missing_infrastructure_pool_is_a_clear_condition() -> None:
    st = rmp.compute_status(rmp.Observed(mp=mp(), bootstrap=kubeadm_config(), infra=None, now=NOW))
    c = cond.get({"status": st}, "InfrastructureReady")
    assert c is not None and c["status"] == cond.FALSE and c["reason"] == "ObjectDoesNotExist"
    assert "DockerMachinePool c1-dmp-0 does not exist" in c["message"]
    assert "replicas" not in st and st["phase"] == "Provisioning"
    assert not cond.is_true({"status": st}, "Available")


def test_a_template_as_infrastructure_reference_is_invalid() -> None:
    pool = mp()
    pool["spec"]["template"]["spec"]["infrastructureRef"]["kind"] = "DockerMachinePoolTemplate"
    problem = rmp.infra_ref_problem(pool)
    assert problem and "a template" in problem and "DockerMachinePool)" in problem
    st = rmp.compute_status(rmp.Observed(mp=pool, infra_error=problem, now=NOW))
    c = cond.get({"status": st}, "InfrastructureReady")
    assert c is not None and c["reason"] == "InvalidReference"
    assert rmp.infra_ref_problem(mp()) is None


def test_missing_bootstrap_config_and_waiting_data() -> None:
    st = rmp.compute_status(rmp.Observed(mp=mp(), bootstrap=None, infra=dmp(provisioned=False), now=NOW))
    c = cond.get({"status": st}, "BootstrapConfigReady")
    assert c is not None and c["reason"] == "ObjectDoesNotExist" and st["phase"] == "Pending"
    st = rmp.compute_status(rmp.Observed(mp=mp(), bootstrap=kubeadm_config(False), infra=dmp(provisioned=False),
                                         now=NOW))
    assert cond.get({"status": st}, "BootstrapConfigReady")["reason"] == "NotReady"  # type: ignore[index]
    assert st["initialization"]["bootstrapDataSecretCreated"] is False


def test_deletion_deletes_infrastructure_bootstrap_and_machines_then_is_done() -> None:
    m = pool_machine("a")
    p = rmp.deletion_plan(kubeadm_config(), dmp(), [m])
    assert [o["kind"] for o in p.delete] == ["DockerMachinePool", "KubeadmConfig", "Machine"] and not p.done
    m["metadata"]["deletionTimestamp"] = ts(1)
    p = rmp.deletion_plan(None, None, [m])
    assert p.delete == [] and p.waiting == ["Machine a"]
    assert rmp.deletion_plan(None, None, []).done


# --- where other kinds meet MachinePools -----------------------------------------------------------


def test_kubeadm_config_owner_helpers_know_machine_pools() -> None:
    from capd_py.reconcile import kubeadmconfig as kc

    pool = mp(replicas=2)
    assert kc.is_machine_pool(pool) and not kc.is_control_plane_machine(pool)
    assert not kc.machine_has_node(pool)
    pool["status"]["nodeRefs"] = [{"name": "a"}, {"name": "b"}]
    assert kc.machine_has_node(pool)


def test_cluster_counts_and_deletes_machine_pools() -> None:
    from capd_py.reconcile import cluster as rc

    cluster: dict[str, Any]
    cluster = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
               "metadata": {"name": "c1", "namespace": "ns", "generation": 1, "deletionTimestamp": ts(1)},
               "spec": {}, "status": {}}
    pool = mp(replicas=2)
    pool["status"]["conditions"] = [condition("Available", "False", reason="NotAvailable")]
    obs = rc.Observed(cluster=cluster, machine_pools=[pool], machines=[pool_machine("c1-mp-0-a")])
    plan = rc.deletion_plan(obs)
    assert plan.step == "workers" and [o["kind"] for o in plan.delete] == ["MachinePool"]
    assert "MachinePool c1-mp-0" in plan.message
    del cluster["metadata"]["deletionTimestamp"]
    st = rc.compute_status(obs)
    assert st["workers"]["desiredReplicas"] == 2
    c = cond.get({"status": st}, "WorkersAvailable")
    assert c is not None and c["status"] == cond.FALSE and "MachinePool c1-mp-0" in c["message"]


def test_new_machines_spread_over_the_pools_failure_domains() -> None:
    pool = mp(failureDomains=["fd4", "fd5", "fd6"])
    existing = pool_machine("c1-mp-0-a")
    existing["spec"]["failureDomain"] = "fd4"
    existing["spec"]["infrastructureRef"] = {"kind": "DockerMachine", "name": "c1-mp-0-a"}
    want = rmp.machines_to_create(pool, [docker_machine(f"c1-mp-0-{x}") for x in "abcde"], [existing])
    assert [(m["metadata"]["name"], m["spec"]["failureDomain"]) for m in want] == [
        ("c1-mp-0-b", "fd5"), ("c1-mp-0-c", "fd6"), ("c1-mp-0-d", "fd4"), ("c1-mp-0-e", "fd5")]
    assert "failureDomain" not in rmp.machines_to_create(mp(), [docker_machine("x")], [])[0]["spec"]
