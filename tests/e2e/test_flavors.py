"""`capd-py generate cluster --flavor machinepool`: a cluster whose workers are a MachinePool (issue 11, item 4),
1 control plane + 2 pool workers, Available with 2 Ready pool Nodes, then deleted without leftovers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from capd_py.testing.e2e import (
    Mgmt,
    cluster_objects_left,
    delete_cluster_objects,
    docker_leftovers,
    nodes_ready,
    wait_for,
    workload_kubectl,
)

pytestmark = pytest.mark.e2e

NAME = "e2e-flavor-mp"


def test_machinepool_flavor_cluster(mgmt: Mgmt, cluster_cleanup: list[str], tmp_path: Path) -> None:
    t0 = time.monotonic()
    manifest = mgmt.capd("generate", "cluster", NAME, "--flavor", "machinepool",
                         "--control-plane-machine-count", "1", "--worker-machine-count", "2").stdout
    cluster_cleanup.append(NAME)
    mgmt.capd("apply", "-f", "-", input_=manifest)
    pool = f"{NAME}-mp-0"

    def pool_ready() -> bool:
        mp = mgmt.get("machinepool", pool)
        st = mp.get("status") or {}
        return (mgmt.condition("cluster", NAME, "Available") and st.get("readyReplicas") == 2
                and st.get("availableReplicas") == 2 and len(st.get("nodeRefs") or []) == 2)

    wait_for(pool_ready, 420, f"cluster {NAME} Available with MachinePool {pool} at 2 ready replicas", 5)
    available = time.monotonic() - t0
    kc = tmp_path / f"{NAME}.kubeconfig"
    mgmt.capd("get", "kubeconfig", NAME, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, 3), 120, "3 Ready nodes")
    # the workers are the pool's: no MachineDeployment, 2 Machines owned by the MachinePool, 2 pool Nodes
    assert not mgmt.kubectl("get", "machinedeployments", "-n", "default", "-l",
                            f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "name").strip()
    machines = json.loads(mgmt.kubectl("get", "machines", "-n", "default", "-l",
                                       f"cluster.x-k8s.io/pool-name={pool}", "-o", "json"))["items"]
    assert len(machines) == 2
    assert all(o["kind"] == "MachinePool" and o["name"] == pool
               for m in machines for o in m["metadata"]["ownerReferences"] if o.get("controller"))
    mp = mgmt.get("machinepool", pool)
    nodes = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
    pool_nodes = [n for n in nodes if n["spec"].get("providerID") in mp["spec"]["providerIDList"]]
    assert len(pool_nodes) == 2 and {n["metadata"]["name"] for n in pool_nodes} == {
        r["name"] for r in mp["status"]["nodeRefs"]}
    print(f"\n--flavor machinepool 1 CP + 2 pool workers: Available with 2 ready pool nodes after {available:.0f}s")

    t1 = time.monotonic()
    mgmt.capd("delete", "cluster", NAME, "--wait", "--timeout", "300")
    wait_for(lambda: not docker_leftovers(NAME), 120, "no docker leftovers")
    wait_for(lambda: not cluster_objects_left(mgmt, NAME), 60, "no Cluster API objects of the cluster")
    deleted = time.monotonic() - t1
    delete_cluster_objects(mgmt, NAME)  # the CNI ConfigMap and ClusterResourceSet (they outlive the Cluster)
    assert not mgmt.kubectl("get", "clusterresourceset,configmap", f"{NAME}-crs-0", f"cni-{NAME}-crs-0",
                            "-n", "default", "--ignore-not-found", "-o", "name").strip()
    print(f"deleted in {deleted:.0f}s; whole test {time.monotonic() - t0:.0f}s")
