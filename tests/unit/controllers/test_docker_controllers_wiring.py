from __future__ import annotations

import pytest

from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE, GVK, INFRA_GROUP, MACHINE
from capd_py.controllers import dockercluster as dcc
from capd_py.controllers import dockermachine as dmc
from capd_py.controllers.manager import Controller, Mapper

pytestmark = pytest.mark.unit


def test_controllers_declare_their_watches() -> None:
    dc, dm = dcc.controller(), dmc.controller()
    assert dc.gvk == DOCKER_CLUSTER and {g.kind for g, _ in dc.watches} == {"Cluster", "Machine", "DockerMachine"}
    assert dm.gvk == DOCKER_MACHINE and {g.kind for g, _ in dm.watches} == {"Machine", "Cluster", "DockerCluster"}


def _mapper(ctrl: Controller, gvk: GVK) -> Mapper:
    return next(m for g, m in ctrl.watches if g == gvk)


def test_dockercluster_mappers() -> None:
    c = dcc.controller()
    cluster = {"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"},
               "spec": {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerCluster", "name": "dc1"}}}
    assert _mapper(c, CLUSTER)(cluster) == [("ns", "dc1")]
    dcc._DC_BY_CLUSTER[("ns", "c1")] = "dc1"
    cp = {"metadata": {"name": "m", "namespace": "ns",
                       "labels": {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/control-plane": ""}}}
    worker = {"metadata": {"name": "w", "namespace": "ns", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}}}
    assert _mapper(c, MACHINE)(cp) == [("ns", "dc1")]
    assert _mapper(c, MACHINE)(worker) == []
    assert _mapper(c, DOCKER_MACHINE)(worker) == [("ns", "dc1")]
    assert _mapper(c, DOCKER_MACHINE)({"metadata": {"name": "x", "namespace": "other"}}) == []


def test_dockermachine_mappers() -> None:
    c = dmc.controller()
    machine = {"kind": "Machine", "metadata": {"name": "m", "namespace": "ns"},
               "spec": {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerMachine", "name": "dm1"}}}
    assert _mapper(c, MACHINE)(machine) == [("ns", "dm1")]
    other = {**machine, "spec": {"infrastructureRef": {"apiGroup": "x.io", "kind": "OtherMachine", "name": "o"}}}
    assert _mapper(c, MACHINE)(other) == []
    dmc._DM_BY_CLUSTER[("ns", "c1")] = {"dm2", "dm1"}
    assert _mapper(c, CLUSTER)({"kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}}) == [
        ("ns", "dm1"), ("ns", "dm2")]
    dc = {"kind": "DockerCluster", "metadata": {"name": "dc1", "namespace": "ns",
                                                "ownerReferences": [{"kind": "Cluster", "name": "c1",
                                                                     "controller": True}]}}
    assert _mapper(c, DOCKER_CLUSTER)(dc) == [("ns", "dm1"), ("ns", "dm2")]
