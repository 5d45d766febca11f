"""The CLI's views of a real cluster (issue 15 item 4): get clusters, get nodes, describe with conditions.
Uses the shared quick cluster (made with `apply --wait`, which these tests thereby also cover)."""

from __future__ import annotations

import pytest

from capd_py.testing.e2e import Mgmt, WorkloadCluster

pytestmark = pytest.mark.e2e


def test_get_clusters_nodes_and_describe_conditions(mgmt: Mgmt, quick_cluster: WorkloadCluster) -> None:
    name = quick_cluster.name
    out = mgmt.capd("get", "clusters").stdout.splitlines()
    assert out[0].split()[:3] == ["NAME", "CLUSTERCLASS", "AVAILABLE"]
    row = next(r.split() for r in out[1:] if r.split()[0] == name)
    # no class and no topology version: the empty columns vanish from the split
    assert row[1] == "True" and "Provisioned" in row and row[-1].endswith(("s", "m", "h")), row
    assert name in mgmt.capd("get", "clusters", "-o", "name").stdout.split()
    assert f"default/{name}" in mgmt.capd("get", "clusters", "-A", "-o", "name").stdout.split()

    nodes = mgmt.capd("get", "nodes", "--cluster", name).stdout.splitlines()
    assert nodes[0].split()[:2] == ["NAME", "ROLE"]
    rows = [r.split() for r in nodes[1:]]
    assert len(rows) == quick_cluster.control_planes + quick_cluster.workers
    assert [r[1] for r in rows] == ["control-plane"] * quick_cluster.control_planes + \
        ["worker"] * quick_cluster.workers
    assert all(r[2] == "Running" and r[3] == "Ready" and r[-1] == "running" for r in rows), rows

    tree = mgmt.capd("describe", "cluster", name, "--show-conditions", "Machine").stdout
    for cond in ("BootstrapConfigReady", "InfrastructureReady", "NodeHealthy"):
        assert cond in tree, tree
    assert "InfrastructureReady" not in mgmt.capd("describe", "cluster", name).stdout
    nonzero = mgmt.capd("describe", "cluster", name, "--show-conditions", "all+").stdout
    assert "Available" in nonzero and "Paused" not in nonzero
