from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.containers import HostCapacity
from capd_py.reconcile import dockermachinetemplate as rdmt

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("n", "want"), [
    (0, "0"), (1023, "1023"), (1024, "1Ki"), (1025, "1025"), (8 * 1024 ** 3, "8Gi"),
    (25165824000, "24000Mi"), (25165824 * 1000 + 1024, "24576001Ki"), (24 * 1024 ** 3 + 1024 ** 2, "24577Mi"),
    (3 * 1024 ** 6, "3Ei"),
])
def test_memory_is_written_as_a_binary_si_quantity_like_upstream(n: int, want: str) -> None:
    """resource.NewQuantity(n, resource.BinarySI).String()."""
    assert rdmt.binary_quantity(n) == want


def test_status_capacity_is_the_hosts_and_stable() -> None:
    host = HostCapacity(cpus=2, memory_bytes=24 * 1024 ** 3)
    template = {"status": {"other": "kept", "capacity": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}}}
    status = rdmt.desired_status(template, host)
    assert status == {"other": "kept", "capacity": {"cpu": "2", "memory": "24Gi"}}
    assert rdmt.desired_status({"status": status}, host) == status  # nothing to write the second time


def test_template_clusters_from_label_and_cluster_owner_references() -> None:
    def t(labels: dict[str, str], owners: list[tuple[str, str, str]]) -> dict[str, Any]:
        return {"metadata": {"labels": labels, "ownerReferences": [
            {"apiVersion": a, "kind": k, "name": n} for a, k, n in owners]}}
    assert rdmt.template_clusters({"metadata": {}}) == set()
    assert rdmt.template_clusters(t({"cluster.x-k8s.io/cluster-name": "c1"}, [])) == {"c1"}
    assert rdmt.template_clusters(t({}, [("cluster.x-k8s.io/v1beta2", "Cluster", "c1"),
                                         ("cluster.x-k8s.io/v1beta1", "Cluster", "c2")])) == {"c1", "c2"}
    # a ClusterClass owner, or a "Cluster" of another API group, is not a Cluster API Cluster
    assert rdmt.template_clusters(t({}, [("cluster.x-k8s.io/v1beta2", "ClusterClass", "cc"),
                                         ("example.com/v1", "Cluster", "x")])) == set()
