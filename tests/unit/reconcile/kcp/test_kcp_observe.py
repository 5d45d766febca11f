"""From Machines, Nodes and static pods to MachineViews."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile.kcp import observe

try:
    from kcp_fixtures import NOW, kcp, machine
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import NOW, kcp, machine  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

READY = [{"type": "Ready", "status": "True"}]


def node(name: str, *, ready: bool = True, pid: str = "", ip: str = "") -> dict[str, Any]:
    n: dict[str, Any] = {"metadata": {"name": name}, "spec": {"providerID": pid} if pid else {},
                         "status": {"conditions": READY if ready else []}}
    if ip:
        n["status"]["addresses"] = [{"type": "Hostname", "address": name}, {"type": "InternalIP", "address": ip}]
    return n


def pod(name: str, *, running: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "status": {"phase": "Running" if running else "Pending", "conditions": READY}}


def test_owned_by_uid_and_workers() -> None:
    ours, other = machine("m1"), machine("m2", owner_uid="someone-else")
    worker = machine("w1", labels={"cluster.x-k8s.io/cluster-name": "c1"})
    assert observe.owned(kcp(), [ours, other]) == [ours]
    assert observe.workers([ours, worker]) == [worker]


def test_node_for_by_node_ref_then_provider_id_then_name() -> None:
    m = machine("m1", nodeRef={"name": "n-ref"})
    m["spec"]["providerID"] = "docker:////m1"
    nodes = [node("m1"), node("n-pid", pid="docker:////m1"), node("n-ref")]
    assert observe.node_for(m, nodes)["metadata"]["name"] == "n-ref"  # type: ignore[index]
    assert observe.node_for(m, nodes[:2])["metadata"]["name"] == "n-pid"  # type: ignore[index]
    assert observe.node_for(m, nodes[:1])["metadata"]["name"] == "m1"  # type: ignore[index]
    assert observe.node_for(m, []) is None
    assert observe.node_internal_ip(node("x", ip="10.0.0.5")) == "10.0.0.5"
    assert observe.node_internal_ip(node("x")) is None


def test_machine_view() -> None:
    m = machine("m1", conditions=[{"type": "Ready", "status": "False"},
                                  {"type": "OwnerRemediated", "status": "False"}])
    m["metadata"]["annotations"] = {"cluster.x-k8s.io/delete-machine": ""}
    m["spec"]["failureDomain"] = "a"
    pods = {p["metadata"]["name"]: p for p in (pod("kube-apiserver-m1"), pod("etcd-m1", running=False))}
    v = observe.machine_view(kcp(), m, None, None, [node("m1")], pods, NOW)
    assert v.name == "m1" and v.failure_domain == "a" and v.delete_annotation and v.remediate
    assert v.node_name == "m1" and v.node_ready
    assert v.pods_ready == {"kube-apiserver": True, "kube-controller-manager": False, "kube-scheduler": False,
                            "etcd": False}
    assert v.machine_ready is False and v.machine_available is None and not v.ready
    assert v.created.hour == 10 and v.up_to_date
    # what its etcd member's health is read against: upstream goes by status.nodeRef and the provider ID
    assert v.node_ref == "" and v.provider_id == "" and v.etcd_member is None
    m["status"]["nodeRef"] = {"name": "m1"}
    m["spec"]["providerID"] = "docker:////m1"
    m["spec"]["infrastructureRef"] = {"kind": "DockerMachine", "name": "m1"}
    m["status"]["conditions"].append({"type": "EtcdMemberHealthy", "status": "True"})
    made = node("m1")
    made["metadata"]["creationTimestamp"] = "2026-01-01T10:05:00Z"
    v = observe.machine_view(kcp(), m, None, None, [made], pods, NOW)
    assert (v.node_ref, v.provider_id, v.infra_kind) == ("m1", "docker:////m1", "DockerMachine")
    assert v.etcd_member == {"type": "EtcdMemberHealthy", "status": "True"} and v.node_created is not None
    assert v.node_created.minute == 5


def test_machine_view_without_node_or_timestamps() -> None:
    m = machine("m1", deleting=True)
    del m["metadata"]["creationTimestamp"]
    m["spec"]["version"] = "v1.33.0"
    v = observe.machine_view(kcp(), m, None, None, [], {}, NOW)
    assert v.created == NOW and v.deleting and not v.node_name and not any(v.pods_ready.values())
    assert v.outdated_reasons == ["Version v1.33.0, v1.34.4 required"]

