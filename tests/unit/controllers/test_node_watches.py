"""Events on workload clusters' Nodes reach the Machine that owns the Node, the DockerMachine that still has to
set its providerID, and the control plane while it initializes; the Manager enqueues what the mappers give."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.api.labels import CLUSTER_NAME, NODE_ROLE_CONTROL_PLANE
from capd_py.controllers import dockermachine, machine, machinepool
from capd_py.controllers import kubeadmcontrolplane as kcp
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.mappers import Controller
from capd_py.kube.cache import Store
from capd_py.kube.workload import WorkloadClients

pytestmark = pytest.mark.unit


def _machine(name: str, pid: str | None = None, node_ref: str | None = None, cluster: str = "c1") -> dict[str, Any]:
    m: dict[str, Any] = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                         "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1",
                                      "labels": {CLUSTER_NAME: cluster}},
                         "spec": {"clusterName": cluster, "infrastructureRef": {
                             "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine",
                             "name": f"dm-{name}"}}}
    if pid:
        m["spec"]["providerID"] = pid
    if node_ref:
        m["status"] = {"nodeRef": {"name": node_ref}}
    return m


def _node(name: str, pid: str | None = None, cp: bool = False) -> dict[str, Any]:
    n: dict[str, Any] = {"apiVersion": "v1", "kind": "Node",
                         "metadata": {"name": name, "labels": {NODE_ROLE_CONTROL_PLANE: ""} if cp else {}},
                         "spec": {}}
    if pid:
        n["spec"]["providerID"] = pid
    return n


def _cluster(initialized: bool) -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns", "resourceVersion": "1"},
            "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                         "kind": "KubeadmControlPlane", "name": "c1-cp"}},
            "status": {"initialization": {"controlPlaneInitialized": initialized}}}


def _pool(name: str, ids: list[str], refs: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1", "labels": {CLUSTER_NAME: "c1"}},
            "spec": {"clusterName": "c1", "providerIDList": ids},
            "status": {"nodeRefs": [{"name": r} for r in refs]}}


KINDS = {"Machine": gvk.MACHINE, "Cluster": gvk.CLUSTER, "MachinePool": gvk.MACHINE_POOL}


def _store(*objs: dict[str, Any]) -> Store:
    s = Store()
    for g in KINDS.values():
        s.serve(g)
    for o in objs:
        s.observe(KINDS[o["kind"]], o)
    return s


def _keys(c: Controller, node: dict[str, Any], store: Store, cluster: str = "c1") -> set[tuple[str, str]]:
    return {k for m in c.node_watches for k in m("ns", cluster, node, store)}


def test_machine_hears_its_node_by_provider_id_or_node_ref() -> None:
    s = _store(_machine("m1", pid="docker:////c1-m1"), _machine("m2", node_ref="c1-m2"), _machine("m3"),
               _machine("x1", pid="docker:////c1-m1", cluster="other"))
    c = machine.controller()
    assert _keys(c, _node("c1-m1", pid="docker:////c1-m1"), s) == {("ns", "m1")}
    assert _keys(c, _node("c1-m2"), s) == {("ns", "m2")}
    assert _keys(c, _node("c1-m3"), s) == set()  # no providerID on either side yet: the DockerMachine's turn


def test_dockermachine_hears_a_node_that_lacks_its_provider_id() -> None:
    s = _store(_machine("m1"), _machine("c1-m2"))
    c = dockermachine.controller()
    assert _keys(c, _node("c1-m1"), s) == {("ns", "dm-m1")}
    assert _keys(c, _node("c1-m2"), s) == {("ns", "dm-c1-m2")}  # a machine named after its cluster keeps its name
    assert _keys(c, _node("c1-m1", pid="docker:////c1-m1"), s) == set()  # already set: nothing to do


def test_control_plane_hears_every_node_until_initialized_then_control_plane_nodes() -> None:
    c = kcp.controller()
    assert _keys(c, _node("w1"), _store(_cluster(False))) == {("ns", "c1-cp")}
    assert _keys(c, _node("w1"), _store(_cluster(True))) == set()
    assert _keys(c, _node("cp1", cp=True), _store(_cluster(True))) == {("ns", "c1-cp")}
    assert _keys(c, _node("cp1", cp=True), _store()) == set()  # no Cluster in the cache


def test_machine_pool_hears_the_nodes_of_its_provider_ids_and_node_refs() -> None:
    s = _store(_pool("mp1", ["docker:////c1-a"]), _pool("mp2", ["docker:////c1-b"], refs=("c1-old",)))
    c = machinepool.controller()
    assert _keys(c, _node("c1-a", pid="docker:////c1-a"), s) == {("ns", "mp1")}
    assert _keys(c, _node("c1-old", pid="docker:////c1-old"), s) == {("ns", "mp2")}  # retired: to delete
    assert _keys(c, _node("c1-x", pid="docker:////c1-x"), s) == set()


async def test_manager_enqueues_node_events_and_registers_its_listener() -> None:
    wl = WorkloadClients(None)  # type: ignore[arg-type]  # the management client is not used here
    ctx = Ctx(kube=None, runtime=None, settings=Settings(), workload=wl)  # type: ignore[arg-type]
    mgr = Manager(ctx, [machine.controller(), kcp.controller()])
    assert wl._listener == mgr.dispatch_node
    mgr.store.observe(gvk.MACHINE, _machine("m1", pid="docker:////c1-m1"))
    mgr.store.observe(gvk.CLUSTER, _cluster(False))
    added: list[tuple[tuple[str, str, str], float]] = []
    mgr.queue.add = lambda key, after=0.0: added.append((key, after))  # type: ignore[method-assign]
    mgr.dispatch_node("ns", "c1", _node("c1-m1", pid="docker:////c1-m1"), False)
    assert (("Machine", "ns", "m1"), 0.0) in added
    # the KCP summarises: it hears of Nodes a little later, like of other objects
    assert (("KubeadmControlPlane", "ns", "c1-cp"), ctx.settings.aggregate_seconds) in added
    await mgr.stop()
    assert wl._listener is None
    await asyncio.sleep(0)
