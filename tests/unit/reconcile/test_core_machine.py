from __future__ import annotations

import datetime as _dt
from typing import Any

import pytest

from capd_py.reconcile import machine as rm

try:
    from core_fixtures import NOW, condition, machine, ts
except ImportError:  # pragma: no cover
    from .core_fixtures import NOW, condition, machine, ts  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def full_machine(**kw: object) -> dict:
    m = machine("m1", **kw)  # type: ignore[arg-type]
    m["spec"]["bootstrap"] = {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                            "name": "m1"}}
    m["spec"]["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine",
                                      "name": "m1"}
    return m


def bootstrap(ready: bool) -> dict:
    st: dict = {"initialization": {"dataSecretCreated": ready}}
    if ready:
        st["dataSecretName"] = "m1-bootstrap"
    return {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": "m1"}, "status": st}


def infra(ready: bool) -> dict:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachine",
            "metadata": {"name": "m1"}, "spec": {"providerID": "docker:////c1-m1", "failureDomain": "fd1"},
            "status": {"initialization": {"provisioned": ready},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}}


def node(ready: str = "True", pressure: bool = False) -> dict:
    conds = [{"type": "Ready", "status": ready, "lastTransitionTime": ts(100), "reason": "KubeletReady"}]
    if pressure:
        conds.append({"type": "MemoryPressure", "status": "True", "lastTransitionTime": ts(10)})
    return {"metadata": {"name": "c1-m1"}, "spec": {"providerID": "docker:////c1-m1"},
            "status": {"conditions": conds, "nodeInfo": {"kubeletVersion": "v1.34.4"}}}


def conds_of(st: dict) -> dict[str, dict]:
    return {c["type"]: c for c in st["conditions"]}


def test_spec_patch_bootstrap_and_provider_id() -> None:
    m = full_machine()
    obs = rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), now=NOW)
    assert rm.spec_patch(obs) == {"spec": {"bootstrap": {"dataSecretName": "m1-bootstrap"},
                                           "providerID": "docker:////c1-m1"}}
    m["spec"]["bootstrap"]["dataSecretName"] = "m1-bootstrap"
    m["spec"]["providerID"] = "docker:////c1-m1"
    assert rm.spec_patch(obs) is None
    assert rm.spec_patch(rm.Observed(machine=full_machine(), bootstrap=bootstrap(False), infra=infra(False))) is None


def test_phase_progression() -> None:
    m = full_machine()
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(False), infra=infra(False), now=NOW))
    assert st["phase"] == "Pending"
    c = conds_of(st)
    assert c["BootstrapConfigReady"]["status"] == "False" and c["InfrastructureReady"]["status"] == "False"
    assert c["Ready"]["status"] == "False"

    m["spec"]["bootstrap"]["dataSecretName"] = "m1-bootstrap"
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(False), now=NOW))
    assert st["phase"] == "Provisioning"
    assert st["initialization"]["bootstrapDataSecretCreated"] is True

    m["spec"]["providerID"] = "docker:////c1-m1"
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True),
                                       workload_reachable=True, now=NOW))
    assert st["phase"] == "Provisioned"
    assert st["addresses"][0]["address"] == "10.0.0.2"
    assert st["failureDomain"] == "fd1"
    assert conds_of(st)["NodeReady"]["reason"] == "NodeDoesNotExist"

    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=node(),
                                       workload_reachable=True, now=NOW))
    assert st["phase"] == "Running"
    assert st["nodeRef"] == {"name": "c1-m1"}
    assert st["nodeInfo"]["kubeletVersion"] == "v1.34.4"
    c = conds_of(st)
    assert c["NodeReady"]["status"] == "True" and c["NodeHealthy"]["status"] == "True"
    assert c["Ready"]["status"] == "True" and c["Available"]["status"] == "True"


def test_min_ready_seconds() -> None:
    m = full_machine()
    m["spec"].update({"minReadySeconds": 60, "providerID": "p", "bootstrap": {"dataSecretName": "s"}})
    obs = rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=node(),
                      workload_reachable=True, now=NOW)
    st = rm.compute_status(obs)
    c = conds_of(st)
    assert c["Ready"]["status"] == "True"
    assert c["Available"]["status"] == "False" and c["Available"]["reason"] == "WaitingForMinReadySeconds"
    assert 59 <= (rm.available_requeue(m, st, NOW) or 0) <= 61
    m["status"] = st
    later = NOW + _dt.timedelta(seconds=61)
    st2 = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=node(),
                                        workload_reachable=True, now=later))
    assert conds_of(st2)["Available"]["status"] == "True"


def test_missing_objects_reported_not_raised() -> None:
    st = rm.compute_status(rm.Observed(machine=full_machine(), bootstrap=None, infra=None, now=NOW))
    c = conds_of(st)
    assert c["BootstrapConfigReady"]["reason"] == "ObjectDoesNotExist"
    assert "KubeadmConfig m1" in c["BootstrapConfigReady"]["message"]
    assert c["InfrastructureReady"]["reason"] == "ObjectDoesNotExist"


def test_infra_deleted_after_provisioning() -> None:
    m = full_machine()
    m["status"]["initialization"] = {"infrastructureProvisioned": True}
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=None, now=NOW))
    assert conds_of(st)["InfrastructureReady"]["reason"] == "ObjectDeleted"
    assert st["initialization"]["infrastructureProvisioned"] is True  # sticky


def test_data_secret_without_config_ref() -> None:
    m = machine("m1")
    m["spec"]["bootstrap"] = {"dataSecretName": "given"}
    st = rm.compute_status(rm.Observed(machine=m, bootstrap_ref=False, infra=infra(False), now=NOW))
    assert conds_of(st)["BootstrapConfigReady"]["reason"] == "DataSecretProvided"


def test_node_unhealthy_and_deleted() -> None:
    m = full_machine()
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True),
                                       node=node(pressure=True), workload_reachable=True, now=NOW))
    assert conds_of(st)["NodeHealthy"]["status"] == "False"
    assert conds_of(st)["Ready"]["status"] == "False"
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True),
                                       node=node(ready="Unknown"), workload_reachable=True, now=NOW))
    assert conds_of(st)["NodeReady"]["status"] == "Unknown"
    m["status"]["nodeRef"] = {"name": "c1-m1"}
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=None,
                                       workload_reachable=True, now=NOW))
    assert conds_of(st)["NodeReady"]["reason"] == "NodeDeleted"
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=None,
                                       workload_reachable=False, now=NOW))
    assert conds_of(st)["NodeHealthy"]["reason"] == "ConnectionDown"


def test_other_writers_conditions_kept_and_failed_health_check_not_ready() -> None:
    m = full_machine()
    m["spec"].update({"providerID": "p", "bootstrap": {"dataSecretName": "s"}})
    m["status"]["conditions"] = [condition("HealthCheckSucceeded", "False"), condition("OwnerRemediated", "False")]
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=node(),
                                       workload_reachable=True, now=NOW))
    c = conds_of(st)
    assert c["HealthCheckSucceeded"]["status"] == "False" and "OwnerRemediated" in c
    assert c["Ready"]["status"] == "False"


def test_status_stable() -> None:
    m = full_machine()
    obs = rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=node(),
                      workload_reachable=True, now=NOW)
    st = rm.compute_status(obs)
    m["status"] = st
    assert rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), node=node(),
                                         workload_reachable=True, now=NOW + _dt.timedelta(minutes=5))) == st


def test_deleting_phase_and_condition() -> None:
    m = full_machine(deleting=True)
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=None, infra=None, now=NOW))
    assert st["phase"] == "Deleting"
    assert conds_of(st)["Deleting"]["status"] == "True"
    assert conds_of(st)["Ready"]["status"] == "False"


def test_node_metadata_patch() -> None:
    m = machine("m1", labels={"node-role.kubernetes.io/worker": "", "node.cluster.x-k8s.io/pool": "a",
                              "other": "x"}, owner={"kind": "MachineSet", "name": "ms1", "uid": "u",
                                                    "controller": True})
    n = node()
    p = rm.node_metadata_patch(m, n)
    assert p == {"metadata": {"annotations": {"cluster.x-k8s.io/cluster-name": "c1",
                                              "cluster.x-k8s.io/cluster-namespace": "ns",
                                              "cluster.x-k8s.io/machine": "m1",
                                              "cluster.x-k8s.io/owner-kind": "MachineSet",
                                              "cluster.x-k8s.io/owner-name": "ms1"},
                              "labels": {"node-role.kubernetes.io/worker": "", "node.cluster.x-k8s.io/pool": "a"}}}
    n["metadata"].update(p["metadata"])
    assert rm.node_metadata_patch(m, n) is None


def test_external_owner_refs() -> None:
    m = machine("m1", uid="mu")
    ms_ref = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms", "uid": "su"}
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "xu"}
    obj = {"metadata": {"ownerReferences": [ms_ref, other]}}
    want = rm.external_owner_refs(obj, m)
    assert want is not None
    assert [r["uid"] for r in want] == ["xu", "mu"] and want[-1]["controller"] is True
    obj["metadata"]["ownerReferences"] = want
    assert rm.external_owner_refs(obj, m) is None
    kcp = {"metadata": {"ownerReferences": [{"kind": "KubeadmControlPlane", "name": "k", "uid": "ku",
                                             "controller": True}]}}
    assert [r["uid"] for r in rm.external_owner_refs(kcp, m) or []] == ["mu"]


def test_unreachable_before_node_is_waiting_not_connection_down() -> None:
    m = full_machine()
    st = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), now=NOW))
    assert conds_of(st)["NodeReady"]["reason"] == "NodeDoesNotExist"
    m["status"] = st
    st2 = rm.compute_status(rm.Observed(machine=m, bootstrap=bootstrap(True), infra=infra(True), now=NOW))
    assert st2 == st


def test_up_to_date() -> None:
    from capd_py.reconcile import machinedeployment as rmd

    md: dict[str, Any]
    md = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
          "metadata": {"name": "md1", "namespace": "ns", "uid": "u"},
          "spec": {"clusterName": "c1", "template": {"spec": {"version": "v1.34.4"}}}}
    h = rmd.template_hash(md, NOW)
    ms = {"metadata": {"name": "md1-x", "labels": {"machine-template-hash": h}}}
    m = machine("m1", version="v1.34.4")
    assert rm.up_to_date(m, ms, md, NOW) == ("True", "UpToDate", "")
    assert rm.up_to_date(m, None, None, NOW) is None
    m["status"]["nodeInfo"] = {"kubeletVersion": "v1.33.0"}
    assert rm.up_to_date(m, ms, md, NOW)[:2] == ("False", "Updating")  # type: ignore[index]
    md["spec"]["template"]["spec"]["version"] = "v1.35.0"
    assert rm.up_to_date(m, ms, md, NOW)[:2] == ("False", "NotUpToDate")  # type: ignore[index]
    st = rm.compute_status(rm.Observed(machine=m, infra=infra(False), bootstrap=bootstrap(False), machine_set=ms,
                                       machine_deployment=md, now=NOW))
    assert conds_of(st)["UpToDate"]["status"] == "False"


def test_node_of_machine_by_node_ref_then_provider_id() -> None:
    nodes = [{"metadata": {"name": "n1"}, "spec": {"providerID": "docker:////n1"}},
             {"metadata": {"name": "n2"}, "spec": {}}]
    by_ref = {"metadata": {"name": "m"}, "spec": {}, "status": {"nodeRef": {"name": "n2"}}}
    by_pid = {"metadata": {"name": "m"}, "spec": {"providerID": "docker:////n1"}}
    stale_ref = {"metadata": {"name": "m"}, "spec": {"providerID": "docker:////n1"},
                 "status": {"nodeRef": {"name": "gone"}}}
    assert rm.node_of_machine(nodes, by_ref) is nodes[1]
    assert rm.node_of_machine(nodes, by_pid) is nodes[0]
    assert rm.node_of_machine(nodes, stale_ref) is nodes[0]
    assert rm.node_of_machine(nodes, {"metadata": {"name": "m"}, "spec": {}}) is None
    assert rm.machines_of_node([by_ref, by_pid, {"metadata": {"name": "x"}, "spec": {}}], nodes[0]) == ["m"]


def test_provisioned_only_with_a_provider_id() -> None:
    """As upstream: an infrastructure machine that says provisioned but has no spec.providerID does not make its
    Machine provisioned (issue 25)."""
    from capd_py.reconcile import machine as rm_

    m = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
         "metadata": {"name": "m1", "namespace": "ns", "uid": "u", "generation": 1},
         "spec": {"clusterName": "c1", "bootstrap": {"dataSecretName": "s"},
                  "infrastructureRef": {"apiGroup": "infrastructure.example.com", "kind": "MinimalMachine",
                                        "name": "mm1"}}}
    im: dict[str, Any]
    im = {"apiVersion": "infrastructure.example.com/v1alpha1", "kind": "MinimalMachine",
          "metadata": {"name": "mm1"}, "spec": {}, "status": {"initialization": {"provisioned": True}}}
    st = rm_.compute_status(rm_.Observed(machine=m, infra=im, bootstrap_ref=False, infra_contract="v1beta2"))
    c = next(c for c in st["conditions"] if c["type"] == "InfrastructureReady")
    assert c["status"] == "False" and "spec.providerID" in c["message"]
    assert not (st.get("initialization") or {}).get("infrastructureProvisioned")
    assert rm_.spec_patch(rm_.Observed(machine=m, infra=im, bootstrap_ref=False)) is None
    im["spec"]["providerID"] = "minimal://mm1"
    st = rm_.compute_status(rm_.Observed(machine=m, infra=im, bootstrap_ref=False, infra_contract="v1beta2"))
    assert st["initialization"]["infrastructureProvisioned"] is True
    assert rm_.spec_patch(rm_.Observed(machine=m, infra=im, bootstrap_ref=False)) == \
        {"spec": {"providerID": "minimal://mm1"}}


def test_infrastructure_and_bootstrap_ready_mirror_the_providers_ready() -> None:
    """As upstream: the provider's Ready condition is mirrored when it writes one; the initialization fields are
    the fallback (issue 25)."""
    from capd_py.reconcile import machine as rm_

    m = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
         "metadata": {"name": "m1", "namespace": "ns", "uid": "u", "generation": 1},
         "spec": {"clusterName": "c1",
                  "bootstrap": {"configRef": {"apiGroup": "bootstrap.example.com", "kind": "MinimalConfig",
                                              "name": "b1"}},
                  "infrastructureRef": {"apiGroup": "infrastructure.example.com", "kind": "MinimalMachine",
                                        "name": "mm1"}}}
    ready_false = [{"type": "Ready", "status": "False", "reason": "VMStarting", "message": "vm starting",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    im: dict[str, Any]
    im = {"apiVersion": "infrastructure.example.com/v1alpha1", "kind": "MinimalMachine", "metadata": {"name": "mm1"},
          "spec": {"providerID": "minimal://mm1"},
          "status": {"initialization": {"provisioned": True}, "conditions": ready_false}}
    bc = {"apiVersion": "bootstrap.example.com/v1alpha1", "kind": "MinimalConfig", "metadata": {"name": "b1"},
          "status": {"initialization": {"dataSecretCreated": True}, "dataSecretName": "b1",
                     "conditions": [{"type": "Ready", "status": "True", "reason": "", "message": "",
                                     "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    st = rm_.compute_status(rm_.Observed(machine=m, infra=im, bootstrap=bc))
    conds = {c["type"]: c for c in st["conditions"]}
    assert (conds["InfrastructureReady"]["status"], conds["InfrastructureReady"]["reason"],
            conds["InfrastructureReady"]["message"]) == ("False", "VMStarting", "vm starting")
    assert st["initialization"]["infrastructureProvisioned"] is True  # the initialization field decides that
    assert (conds["BootstrapConfigReady"]["status"], conds["BootstrapConfigReady"]["reason"]) == ("True", "Ready")
    del im["status"]["conditions"]
    st = rm_.compute_status(rm_.Observed(machine=m, infra=im, bootstrap=bc))
    assert {c["type"]: c for c in st["conditions"]}["InfrastructureReady"]["status"] == "True"


def _owned(kind: str, controller: bool = False) -> dict[str, Any]:
    o: dict[str, Any] = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind, "name": "x", "uid": "u"}
    if controller:
        o["controller"] = True
    return o


def test_the_cluster_adopts_stand_alone_machines_only() -> None:
    """upstream's shouldAdopt: a Machine made by a MachineSet, MachinePool or control plane waits for that owner
    after its owner references are removed (upstream's e2e removes them all and expects exactly one owner back)."""
    def _m(labels: dict[str, str], owners: list[dict[str, Any]]) -> dict[str, Any]:
        return {"metadata": {"name": "m", "labels": labels, "ownerReferences": owners}}
    assert rm.cluster_adopts(_m({}, []))
    assert not rm.cluster_adopts(_m({}, [_owned("Cluster")]))
    assert not rm.cluster_adopts(_m({}, [_owned("MachineSet", controller=True)]))
    for label in ("cluster.x-k8s.io/set-name", "cluster.x-k8s.io/pool-name", "cluster.x-k8s.io/control-plane-name"):
        assert not rm.cluster_adopts(_m({label: "owner"}, [])), label
