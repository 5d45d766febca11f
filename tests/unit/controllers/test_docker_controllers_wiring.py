from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any

import pytest

from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE, GVK, INFRA_GROUP, MACHINE
from capd_py.controllers import dockercluster as dcc
from capd_py.controllers import dockermachine as dmc
from capd_py.controllers.mappers import Controller, Mapper
from capd_py.kube.cache import Store

pytestmark = pytest.mark.unit

CN = "cluster.x-k8s.io/cluster-name"


def test_controllers_declare_their_watches() -> None:
    dc, dm = dcc.controller(), dmc.controller()
    assert dc.gvk == DOCKER_CLUSTER and {g.kind for g, _ in dc.watches} == {"Cluster", "Machine", "DockerMachine"}
    assert dm.gvk == DOCKER_MACHINE and {g.kind for g, _ in dm.watches} == {"Machine", "Cluster", "DockerCluster"}


def test_docker_controllers_keep_no_module_state_and_dockermachine_stands_alone() -> None:
    for mod in (dcc, dmc):
        tree = ast.parse(inspect.getsource(mod))
        assigned = [t.id for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign)
                    for t in (n.targets if isinstance(n, ast.Assign) else [n.target]) if isinstance(t, ast.Name)]
        # besides the logger only the frozen skeleton Kind and the reconcile function made from it
        # (controllers/skeleton.py): still no mutable module state
        assert assigned == ["log", "KIND", "reconcile"], (mod.__name__, assigned)
        with pytest.raises(dataclasses.FrozenInstanceError):
            mod.KIND.finalizer = "x"
    imports = [n.module for n in ast.walk(ast.parse(inspect.getsource(dmc))) if isinstance(n, ast.ImportFrom)]
    assert "capd_py.controllers.dockercluster" not in imports


def _mapper(ctrl: Controller, gvk: GVK) -> Mapper:
    return next(m for g, m in ctrl.watches if g == gvk)


def _store(**objs: list[dict[str, Any]]) -> Store:
    kinds = {"clusters": CLUSTER, "machines": MACHINE, "docker_clusters": DOCKER_CLUSTER,
             "docker_machines": DOCKER_MACHINE}
    store = Store()
    for key, g in kinds.items():
        store.serve(g)
        store.replace(g, [{**o, "metadata": {"resourceVersion": "1", **o["metadata"]}} for o in objs.get(key, [])])
    return store


def _cluster(name: str = "c1", ns: str = "ns", dc: str | None = "dc1", kind: str = "DockerCluster") -> dict[str, Any]:
    spec = {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": kind, "name": dc}} if dc else {}
    return {"kind": "Cluster", "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}"}, "spec": spec}


def test_dockercluster_mappers() -> None:
    c = dcc.controller()
    cluster = _cluster()
    cache = _store(clusters=[cluster])
    assert _mapper(c, CLUSTER)(cluster, cache) == [("ns", "dc1")]
    cp = {"metadata": {"name": "m", "namespace": "ns", "labels": {CN: "c1", "cluster.x-k8s.io/control-plane": ""}}}
    worker = {"metadata": {"name": "w", "namespace": "ns", "labels": {CN: "c1"}}}
    assert _mapper(c, MACHINE)(cp, cache) == [("ns", "dc1")]
    assert _mapper(c, MACHINE)(worker, cache) == []
    assert _mapper(c, DOCKER_MACHINE)(worker, cache) == [("ns", "dc1")]
    assert _mapper(c, DOCKER_MACHINE)({"metadata": {"name": "x", "namespace": "other"}}, cache) == []
    # a cluster of another provider, or one the cache has not seen (nor its DockerCluster): no key
    assert _mapper(c, DOCKER_MACHINE)(worker, _store(clusters=[_cluster(kind="OtherCluster")])) == []
    assert _mapper(c, DOCKER_MACHINE)(worker, _store()) == []


def test_dockercluster_mapper_finds_the_docker_cluster_before_the_cluster_is_cached() -> None:
    c = dcc.controller()
    dc = {"kind": "DockerCluster", "metadata": {"name": "dc9", "namespace": "ns", "ownerReferences": [
        {"kind": "Cluster", "name": "c1", "controller": True, "uid": "u"}]}}
    other = {"kind": "DockerCluster", "metadata": {"name": "dc8", "namespace": "ns", "labels": {CN: "c2"}}}
    worker = {"metadata": {"name": "w", "namespace": "ns", "labels": {CN: "c1"}}}
    assert _mapper(c, DOCKER_MACHINE)(worker, _store(docker_clusters=[dc, other])) == [("ns", "dc9")]


def test_dockermachine_mappers() -> None:
    c = dmc.controller()
    machine = {"kind": "Machine", "metadata": {"name": "m", "namespace": "ns", "labels": {CN: "c1"}},
               "spec": {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerMachine", "name": "dm1"}}}
    cache = _store(clusters=[_cluster()], machines=[machine],
                   docker_machines=[{"metadata": {"name": n, "namespace": "ns", "labels": {CN: "c1"}}}
                                    for n in ("dm2", "dm1")]
                   + [{"metadata": {"name": "dm3", "namespace": "ns", "labels": {CN: "c2"}}}])
    assert _mapper(c, MACHINE)(machine, cache) == [("ns", "dm1")]
    other = {**machine, "spec": {"infrastructureRef": {"apiGroup": "x.io", "kind": "OtherMachine", "name": "o"}}}
    assert _mapper(c, MACHINE)(other, cache) == []
    assert _mapper(c, CLUSTER)({"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}}, cache) == [
        ("ns", "dm1"), ("ns", "dm2")]
    dc = {"kind": "DockerCluster", "metadata": {"name": "dc1", "namespace": "ns",
                                                "ownerReferences": [{"kind": "Cluster", "name": "c1",
                                                                     "controller": True}]}}
    assert _mapper(c, DOCKER_CLUSTER)(dc, cache) == [("ns", "dm1"), ("ns", "dm2")]
    assert _mapper(c, DOCKER_CLUSTER)({"kind": "DockerCluster", "metadata": {"name": "x", "namespace": "ns"}},
                                      cache) == []


def test_dockermachine_mapper_reaches_unlabelled_docker_machines_through_their_machine() -> None:
    c = dmc.controller()
    machine = {"kind": "Machine", "metadata": {"name": "m", "namespace": "ns", "labels": {CN: "c1"}},
               "spec": {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerMachine", "name": "dm7"}}}
    cache = _store(machines=[machine], docker_machines=[{"metadata": {"name": "dm7", "namespace": "ns"}}])
    assert _mapper(c, CLUSTER)({"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}}, cache) == [
        ("ns", "dm7")]
