from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from capd_py.cli.listing import CLUSTER_HEADER, NODE_HEADER, cluster_row, node_rows, table

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def test_cluster_row_from_v1beta2_status() -> None:
    c = {"metadata": {"name": "dev", "creationTimestamp": "2026-01-01T11:55:00Z"},
         "spec": {"topology": {"classRef": {"name": "quick-start"}, "version": "v1.34.4"}},
         "status": {"phase": "Provisioned", "conditions": [{"type": "Available", "status": "True"}],
                    "controlPlane": {"desiredReplicas": 1, "availableReplicas": 1},
                    "workers": {"desiredReplicas": 2, "availableReplicas": 1}}}
    assert cluster_row(c, NOW) == ("dev", "quick-start", "True", "1", "1", "2", "1", "Provisioned", "5m", "v1.34.4")
    bare = cluster_row({"metadata": {"name": "new"}}, NOW)
    assert bare[0] == "new" and set(bare[1:]) == {""}
    out = table(CLUSTER_HEADER, [cluster_row(c, NOW)])
    assert out.splitlines()[0].split() == ["NAME", "CLUSTERCLASS", "AVAILABLE", "CP", "DESIRED", "CP", "AVAILABLE",
                                           "W", "DESIRED", "W", "AVAILABLE", "PHASE", "AGE", "VERSION"]
    assert out.splitlines()[1].split()[:3] == ["dev", "quick-start", "True"]


def _m(name: str, cp: bool, phase: str, node: str | None = None) -> dict:
    labels = {"cluster.x-k8s.io/control-plane": ""} if cp else {}
    st: dict = {"phase": phase, "addresses": [{"type": "InternalIP", "address": "172.19.0.9"}]}
    if node:
        st["nodeRef"] = {"name": node}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"version": "v1.34.4"}, "status": st}


def test_node_rows_join_machines_nodes_and_containers() -> None:
    machines = [_m("dev-md-0-x", False, "Running", "dev-md-0-x"), _m("dev-cp-a", True, "Running", "dev-cp-a"),
                _m("dev-md-0-y", False, "Provisioning")]
    nodes = [{"metadata": {"name": "dev-cp-a"},
              "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.34.4"},
                         "addresses": [{"type": "InternalIP", "address": "172.19.0.3"}]}},
             {"metadata": {"name": "dev-md-0-x"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}]
    states = {"dev-cp-a": "running", "dev-md-0-x": "exited"}
    rows = node_rows(machines, nodes, states)
    assert rows[0] == ("dev-cp-a", "control-plane", "Running", "Ready", "v1.34.4", "172.19.0.3", "running")
    assert rows[1] == ("dev-md-0-x", "worker", "Running", "Unknown", "v1.34.4", "172.19.0.9", "exited")
    assert rows[2] == ("dev-md-0-y", "worker", "Provisioning", "NoNode", "v1.34.4", "172.19.0.9", "missing")
    # the workload API did not answer: status "?" for every row, the rest from the management side
    assert {r[3] for r in node_rows(machines, None, states)} == {"?"}
    assert table(NODE_HEADER, rows).splitlines()[0].split()[:2] == ["NAME", "ROLE"]


def test_cluster_row_shows_the_power_state() -> None:
    c: dict[str, Any]
    c = {"metadata": {"name": "dev", "annotations": {"infrastructure.cluster.x-k8s.io/capd-py-power-state": "stopped"}},
         "status": {"phase": "Provisioned"}}
    assert cluster_row(c, NOW)[7] == "Stopped"
    c["metadata"]["annotations"] = {}
    assert cluster_row(c, NOW)[7] == "Provisioned"
