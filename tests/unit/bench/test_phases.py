"""bench/phases.py: a cluster's creation timeline from object timestamps."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from phases import render, timeline  # noqa: E402

pytestmark = pytest.mark.unit


def _cond(t: str, status: str, when: str) -> dict[str, str]:
    return {"type": t, "status": status, "lastTransitionTime": when}


def test_timeline_orders_creations_and_true_steps_relative_to_the_cluster() -> None:
    cluster = {"kind": "Cluster", "metadata": {"name": "c", "creationTimestamp": "2026-12-03T01:00:00Z"},
               "status": {"conditions": [_cond("Available", "True", "2026-12-03T01:00:40Z"),
                                         _cond("Paused", "True", "2026-12-03T01:00:01Z")]}}
    machine = {"kind": "Machine", "metadata": {"name": "m", "creationTimestamp": "2026-12-03T01:00:02Z"},
               "status": {"conditions": [_cond("NodeHealthy", "True", "2026-12-03T01:00:30Z"),
                                         _cond("Ready", "False", "2026-12-03T01:00:10Z")]}}
    rows = timeline(cluster, [machine])
    assert rows == [(0.0, "Cluster/c", "created"), (2.0, "Machine/m", "created"),
                    (30.0, "Machine/m", "NodeHealthy"), (40.0, "Cluster/c", "Available")]
    assert "40 s  Cluster/c" in render(rows)


def test_timeline_shows_what_a_clusterresourceset_applied() -> None:
    cluster = {"kind": "Cluster", "metadata": {"name": "c", "creationTimestamp": "2026-12-03T01:00:00Z"}}
    binding = {"kind": "ClusterResourceSetBinding", "metadata": {"name": "c"}, "spec": {"bindings": [
        {"clusterResourceSetName": "crs", "resources": [
            {"kind": "ConfigMap", "name": "cni", "applied": True, "lastAppliedTime": "2026-12-03T01:00:21Z"},
            {"kind": "Secret", "name": "bad", "applied": False, "lastAppliedTime": "2026-12-03T01:00:22Z"}]}]}}
    assert (21.0, "ClusterResourceSetBinding/c", "applied ConfigMap/cni") in timeline(cluster, [binding])
    assert not [r for r in timeline(cluster, [binding]) if "Secret" in r[2]]
