"""The DevMachine inMemory backend's decisions, as upstream v1.14's in-memory backend: waits for the cluster
infrastructure and bootstrap data, then VM -> Node -> etcd + API server (control plane), each after its startup
duration (+ a stable jitter share), Ready once all are; the DevCluster's endpoint and status."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.reconcile import coreutil
from capd_py.reconcile import inmemory_backend as im

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 1, 1, 0, 0, 0, tzinfo=dt.UTC)


def devmachine(durations: dict[str, str] | None = None, jitter: str = "", status: dict[str, Any] | None = None,
               provider_id: str | None = None) -> dict[str, Any]:
    parts = {p: {"provisioning": {"startupDuration": d, **({"startupJitter": jitter} if jitter else {})}}
             for p, d in (durations or {}).items()}
    spec: dict[str, Any] = {"backend": {"inMemory": parts}}
    if provider_id:
        spec["providerID"] = provider_id
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachine",
            "metadata": {"name": "m1", "namespace": "ns", "uid": "uid-1", "generation": 1},
            "spec": spec, "status": status or {}}


def machine(cp: bool = True, data: bool = True, fd: str | None = None) -> dict[str, Any]:
    labels = {"cluster.x-k8s.io/control-plane": ""} if cp else {}
    spec: dict[str, Any] = {"version": "v1.34.4", "bootstrap": {"dataSecretName": "s"} if data else {}}
    if fd:
        spec["failureDomain"] = fd
    return {"metadata": {"name": "m1", "labels": labels}, "spec": spec}


def cluster(infra: bool = True, cp_init: bool = False) -> dict[str, Any]:
    return {"metadata": {"name": "c1"}, "status": {"initialization": {"infrastructureProvisioned": infra,
                                                                      "controlPlaneInitialized": cp_init}}}


def reasons(plan: im.Plan) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in plan.status["conditions"]}


def test_waits_for_cluster_infrastructure_then_bootstrap_data() -> None:
    p = im.decide(im.Observed(devmachine(), machine(), cluster(infra=False), T0))
    assert reasons(p)[im.VM_PROVISIONED] == ("False", im.R_WAITING_FOR_CLUSTER_INFRASTRUCTURE)
    assert reasons(p)[im.NODE_PROVISIONED] == ("False", im.R_WAITING_FOR_VM)
    assert reasons(p)["Ready"][0] == "False" and not p.create_vm and p.requeue_after is None
    p = im.decide(im.Observed(devmachine(), machine(data=False), cluster(), T0))
    assert reasons(p)[im.VM_PROVISIONED] == ("False", im.R_WAITING_FOR_BOOTSTRAP_DATA)
    worker = im.decide(im.Observed(devmachine(), machine(cp=False, data=False), cluster(), T0))
    assert reasons(worker)[im.VM_PROVISIONED] == ("False", im.R_WAITING_FOR_CP_INITIALIZED)
    assert im.ETCD_PROVISIONED not in reasons(worker), "workers have no etcd / API server"


def test_zero_durations_provision_everything_in_one_pass() -> None:
    p = im.decide(im.Observed(devmachine(), machine(fd="fd1"), cluster(), T0))
    assert p.create_vm and p.create_node and p.create_etcd and p.create_api_server
    assert p.provider_id == "in-memory://m1" == im.provider_id(devmachine())
    assert all(v == ("True", im.R_PROVISIONED) for k, v in reasons(p).items() if k != "Ready")
    assert reasons(p)["Ready"] == ("True", im.R_READY)
    assert p.status["initialization"] == {"provisioned": True} and p.status["failureDomain"] == "fd1"
    assert p.requeue_after is None


def test_each_part_waits_its_startup_duration_after_the_one_before() -> None:
    dm = devmachine({"vm": "10s", "node": "2s", "etcd": "3s", "apiServer": "1s"})
    p = im.decide(im.Observed(dm, machine(), cluster(), T0))
    assert p.create_vm and not p.create_node and p.requeue_after == 10
    assert reasons(p)[im.VM_PROVISIONED] == ("False", im.R_WAITING_FOR_STARTUP_TIMEOUT)
    # 10 s after the VM record: provisioned, the Node waits 2 s from now
    t = T0 + dt.timedelta(seconds=10)
    p = im.decide(im.Observed(dm, machine(), cluster(), t, vm_created=T0))
    assert not p.create_vm and p.provider_id and not p.create_node and p.requeue_after == 2
    assert reasons(p)[im.NODE_PROVISIONED] == ("False", im.R_WAITING_FOR_STARTUP_TIMEOUT)
    assert reasons(p)[im.ETCD_PROVISIONED] == ("False", im.R_WAITING_FOR_NODE)
    dm = {**dm, "status": p.status, "spec": {**dm["spec"], "providerID": p.provider_id}}
    t2 = t + dt.timedelta(seconds=2)
    p = im.decide(im.Observed(dm, machine(), cluster(), t2, vm_created=T0))
    assert p.create_node and not p.create_etcd and not p.create_api_server and p.provider_id is None
    assert p.requeue_after == 1  # the API server's 1 s comes before etcd's 3 s
    dm = {**dm, "status": p.status}
    p = im.decide(im.Observed(dm, machine(), cluster(), t2 + dt.timedelta(seconds=3), vm_created=T0, node=True))
    assert p.create_etcd and p.create_api_server and reasons(p)["Ready"] == ("True", im.R_READY)
    dm = {**dm, "status": p.status}
    again = im.decide(im.Observed(dm, machine(), cluster(), t2 + dt.timedelta(seconds=60), vm_created=T0,
                                  node=True, etcd=True, api_server=True))
    assert not (again.create_vm or again.create_node or again.create_etcd or again.create_api_server)
    assert again.status == dm["status"], "a provisioned machine's status is stable"


def test_jitter_is_a_stable_share_per_machine_and_part() -> None:
    dm = devmachine({"vm": "10s"}, jitter="0.5")
    s = im.startup_seconds(dm, "vm")
    assert 10 <= s <= 15 and s == im.startup_seconds(dm, "vm")
    other = {**dm, "metadata": {**dm["metadata"], "uid": "uid-2"}}
    assert im.startup_seconds(other, "vm") != s
    assert im.startup_seconds(devmachine({"vm": "10s"}), "vm") == 10
    assert im.startup_seconds(devmachine(), "node") == 0


@pytest.mark.parametrize("text,want", [("0", 0), ("2s", 2), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600),
                                       ("1.5s", 1.5)])
def test_durations(text: str, want: float) -> None:
    assert im.parse_duration(text) == want


def test_an_unparsable_duration_is_a_condition() -> None:
    p = im.decide(im.Observed(devmachine({"vm": "ten seconds"}), machine(), cluster(), T0))
    assert reasons(p)[im.VM_PROVISIONED] == ("False", im.R_INVALID) and not p.create_vm
    assert "ten seconds" in (cond.get({"status": p.status}, im.VM_PROVISIONED) or {})["message"]


def test_cluster_endpoint_and_status() -> None:
    assert im.endpoint("127.0.0.1", 20001) == {"host": "127.0.0.1", "port": 20001}
    st = im.cluster_status({"metadata": {"name": "c1", "generation": 3}, "status": {}})
    assert st["initialization"] == {"provisioned": True}
    assert [(c["type"], c["status"], c["observedGeneration"]) for c in st["conditions"]] == [("Ready", "True", 3)]
    assert coreutil.iso(T0) == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize(("current", "want"), [
    (None, (None, True)),                                                   # no endpoint yet: any free port
    ({"host": "", "port": 0}, (None, True)),
    ({"host": "127.0.0.1", "port": 20003}, (20003, True)),                  # a restart keeps the address
    ({"host": "c1.ns.in-memory.invalid", "port": 6443}, (None, False)),     # written elsewhere: not served
    ({"host": "10.0.0.9", "port": 20003}, (None, False)),
])
def test_listener_port(current: dict[str, object] | None, want: tuple[int | None, bool]) -> None:
    assert im.listener_port(current, "127.0.0.1") == want


def test_the_first_api_server_opens_the_listener() -> None:
    cp = machine()
    worker = im.Observed(devmachine({}), machine(cp=False), cluster(), T0, api_server=True)
    plan = im.Plan(status={})
    assert not im.should_serve(worker, plan, serving=False)
    o = im.Observed(devmachine({}), cp, cluster(), T0)
    assert not im.should_serve(o, plan, serving=False)              # no API server Pod yet
    assert im.should_serve(o, im.Plan(status={}, create_api_server=True), serving=False)
    up = im.Observed(devmachine({}), cp, cluster(), T0, api_server=True)
    assert im.should_serve(up, plan, serving=False)                 # after a restart
    assert not im.should_serve(up, plan, serving=True)


def test_a_provider_id_is_a_provisioned_vm_when_the_status_was_dropped() -> None:
    """clusterctl's move drops every status: the DevMachine's providerID still says its VM was provisioned, so the
    target neither waits for the cluster's infrastructure nor for the VM's startup again (upstream CAPD: a docker
    machine with a providerID is provisioned)."""
    dm = devmachine({"vm": "10s"}, provider_id="in-memory://m1")
    p = im.decide(im.Observed(dm, machine(), cluster(infra=False), T0, vm_created=T0, node=True, etcd=True,
                              api_server=True))
    assert reasons(p)[im.VM_PROVISIONED] == ("True", im.R_PROVISIONED) and reasons(p)["Ready"][0] == "True"
    assert p.provider_id is None and not (p.create_node or p.create_etcd or p.create_api_server)


def test_restore_makes_again_what_a_provisioned_machine_had() -> None:
    done = im.decide(im.Observed(devmachine(), machine(), cluster(), T0)).status
    pid = "in-memory://m1"
    # status kept (capd-py's move, a restart): its conditions say what it had
    assert im.restore(devmachine(status=done, provider_id=pid), machine()) == im.Restore(True, True, True, True)
    assert im.restore(devmachine(status=done, provider_id=pid), machine(cp=False)) == im.Restore(True, True)
    half = {"conditions": cond.set_condition(done["conditions"], im.NODE_PROVISIONED, False, "x")}
    assert im.restore(devmachine(status=half, provider_id=pid), machine()) == im.Restore(vm=True)
    # status dropped (clusterctl's move: only clusters whose Machines all have a Node move): every part
    assert im.restore(devmachine(provider_id=pid), machine()) == im.Restore(True, True, True, True)
    # nothing for a machine not provisioned, without a Machine, or being deleted
    assert im.restore(devmachine(status=done), machine()) == im.Restore()
    assert im.restore(devmachine(status=done, provider_id=pid), None) == im.Restore()
    deleting = devmachine(status=done, provider_id=pid)
    deleting["metadata"]["deletionTimestamp"] = coreutil.iso(T0)
    assert im.restore(deleting, machine()) == im.Restore()
