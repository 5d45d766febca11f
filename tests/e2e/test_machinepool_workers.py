"""A MachinePool on the shared `e2e-quick` cluster (no cluster of its own): 1 -> 2 -> 1 replicas with Ready
workload Nodes behind status.nodeRefs, through `kubectl scale` (the scale subresource); deleting the pool leaves
no container, Node or object of it. (The module sorts before test_workload_cluster.py, whose quick test deletes
e2e-quick last.) Two pool instances made at once are test_flavors.py's (its pool starts at 2): here one more
node is enough to scale up (issue 40: each node costs ~20 CPU-s)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capd_py.testing.e2e import K8S_VERSION, Mgmt, WorkloadCluster, run, wait_for, workload_kubectl

pytestmark = pytest.mark.e2e


def pool_manifest(cluster: str, pool: str) -> str:
    """What upstream's machine-pool flavor writes (a KubeadmConfig without spec)."""
    return f"""
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {{name: {pool}-config, namespace: default}}
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta2
kind: DockerMachinePool
metadata: {{name: {pool}, namespace: default}}
spec:
  template: {{}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {{name: {pool}, namespace: default}}
spec:
  clusterName: {cluster}
  replicas: 1
  template:
    spec:
      bootstrap:
        configRef: {{apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: {pool}-config}}
      clusterName: {cluster}
      infrastructureRef: {{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachinePool, name: {pool}}}
      version: {K8S_VERSION}
"""


def ready_nodes(wc: WorkloadCluster) -> dict[str, dict[str, Any]]:
    items = json.loads(workload_kubectl(wc.kubeconfig, "get", "nodes", "-o", "json"))["items"]
    return {n["metadata"]["name"]: n for n in items
            if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])}


def pool_containers(cluster: str, pool: str) -> list[str]:
    names = run(["docker", "ps", "-a", "--format", "{{.Names}}", "--filter",
                 f"label=io.x-k8s.capd-py.cluster={cluster}"]).stdout.split()
    return [n for n in names if n.startswith(pool)]


def test_machine_pool_scales_with_ready_nodes(mgmt: Mgmt, quick_cluster: WorkloadCluster) -> None:
    cluster = quick_cluster.name
    pool = f"{cluster}-mp-0"
    base_nodes = quick_cluster.control_planes + quick_cluster.workers
    mgmt.kubectl("apply", "-f", "-", input_=pool_manifest(cluster, pool))
    try:
        def at(n: int) -> bool:
            mp = mgmt.get("machinepool", pool)
            st = mp.get("status") or {}
            refs = [r["name"] for r in st.get("nodeRefs") or []]
            nodes = ready_nodes(quick_cluster)
            return (st.get("replicas") == n and st.get("readyReplicas") == n and st.get("availableReplicas") == n
                    and len(refs) == n and all(r in nodes for r in refs) and len(nodes) == base_nodes + n
                    and len(mp["spec"].get("providerIDList") or []) == n and len(pool_containers(cluster, pool)) == n
                    and st.get("phase") == "Running")

        wait_for(lambda: at(1), 420, f"MachinePool {pool} with 1 Ready node", 5)
        mgmt.kubectl("scale", "machinepool", pool, "-n", "default", "--replicas=2")
        wait_for(lambda: at(2), 600, f"MachinePool {pool} with 2 Ready nodes", 5)
        mp = mgmt.get("machinepool", pool)
        nodes = ready_nodes(quick_cluster)
        for ref in mp["status"]["nodeRefs"]:
            assert nodes[ref["name"]]["spec"]["providerID"] in mp["spec"]["providerIDList"]
            assert nodes[ref["name"]]["metadata"]["annotations"]["cluster.x-k8s.io/owner-kind"] == "MachinePool"
        assert mgmt.condition("machinepool", pool, "Available")
        mgmt.kubectl("scale", "machinepool", pool, "-n", "default", "--replicas=1")
        wait_for(lambda: at(1), 420, f"MachinePool {pool} back to 1 Ready node", 5)
    finally:
        mgmt.kubectl("delete", "machinepool", pool, "-n", "default", "--ignore-not-found", "--wait=false",
                     check=False)

    def gone() -> bool:
        left = [mgmt.kubectl("get", kind, "-n", "default", "-l", f"cluster.x-k8s.io/pool-name={pool}", "-o", "name")
                for kind in ("machines", "dockermachines")]
        objs = [mgmt.kubectl("get", kind, "-n", "default", "--ignore-not-found", "-o", "name", name)
                for kind, name in (("machinepool", pool), ("dockermachinepool", pool),
                                   ("kubeadmconfig", f"{pool}-config"))]
        return (not any(s.strip() for s in left + objs) and not pool_containers(cluster, pool)
                and len(ready_nodes(quick_cluster)) == base_nodes)
    wait_for(gone, 300, f"MachinePool {pool}, its Machines, DockerMachines, containers and Nodes gone", 5)
