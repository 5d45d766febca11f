"""Issue 11 item 5(d): upstream clusterctl (built from the Go module proxy, `make clusterctl`) reads the
capd-py management cluster: `describe cluster` shows the Cluster, its control plane and machines with their
Ready states, and `get kubeconfig` returns a kubeconfig that works against the workload API server.

It reads the shared `e2e-quick` cluster (tests/e2e/conftest.py `quick_cluster`): no cluster of its own."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from capd_py.api.gvk import NODE
from capd_py.kube.client import Kube
from capd_py.testing.e2e import Mgmt, WorkloadCluster, run, workload_kubectl

pytestmark = pytest.mark.e2e




def run_clusterctl(clusterctl: str, mgmt: Mgmt, tmp: Path, *args: str) -> str:
    # a config dir of its own (clusterctl writes ~/.config/cluster-api); no GitHub version check offline
    env = {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp / "xdg"), "NO_COLOR": "1"}
    return run([clusterctl, *args, "--kubeconfig", mgmt.kubeconfig], env=env, timeout=120).stdout


def describe_rows(out: str) -> dict[str, dict[str, str]]:
    """`clusterctl describe cluster` table -> {object (Kind/name, tree prefix stripped): {column: value}}."""
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("NAME "))
    head = lines[header]
    names = ["NAME", "REPLICAS", "AVAILABLE", "READY", "UP TO DATE", "STATUS", "REASON", "SINCE", "MESSAGE"]
    starts = [head.index(n) for n in names]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[header + 1:]:
        cells = {n: line[s:e].strip() for n, s, e in zip(names, starts, [*starts[1:], len(line) + 1], strict=True)}
        name = cells["NAME"].lstrip("│├└─ ")
        if name:
            rows[name] = cells
    return rows


def test_describe_cluster(clusterctl: str, mgmt: Mgmt, quick_cluster: WorkloadCluster, tmp_path: Path) -> None:
    name = quick_cluster.name
    out = run_clusterctl(clusterctl, mgmt, tmp_path, "describe", "cluster", name, "-n", "default",
                         "--grouping=false")
    print(f"\n{out}")
    rows = describe_rows(out)
    cluster = rows[f"Cluster/{name}"]
    assert cluster["STATUS"] == "True" and cluster["REASON"] == "Available", cluster
    infra = rows[f"ClusterInfrastructure - DockerCluster/{name}"]
    assert infra["STATUS"] == "True", infra
    cp = rows[f"ControlPlane - KubeadmControlPlane/{name}-control-plane"]
    assert cp["STATUS"] == "True" and cp["READY"] == "1" and cp["AVAILABLE"] == "1", cp
    md = rows[f"MachineDeployment/{name}-md-0"]
    assert md["STATUS"] == "True" and md["READY"] == "1", md
    machines = json.loads(mgmt.kubectl("get", "machines", "-n", "default", "-l",
                                       f"cluster.x-k8s.io/cluster-name={name}", "-o", "json"))["items"]
    assert len(machines) == quick_cluster.control_planes + quick_cluster.workers
    for m in machines:
        row = rows[f"Machine/{m['metadata']['name']}"]
        # a Machine's row: READY is 1 and STATUS is its Ready condition
        assert row["READY"] == "1" and row["STATUS"] == "True" and row["REASON"] == "Ready", row


def test_get_kubeconfig_reaches_the_workload_cluster(clusterctl: str, mgmt: Mgmt, quick_cluster: WorkloadCluster,
                                                     tmp_path: Path) -> None:
    text = run_clusterctl(clusterctl, mgmt, tmp_path, "get", "kubeconfig", quick_cluster.name, "-n", "default")
    kc = tmp_path / "clusterctl.kubeconfig"
    kc.write_text(text)
    want = quick_cluster.control_planes + quick_cluster.workers
    # kubectl
    nodes = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
    assert len(nodes) == want
    assert all(any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]) for n in nodes)
    # and the Kube client capd-py's controllers use
    kube = Kube.from_kubeconfig(str(kc))
    try:
        names = {n["metadata"]["name"] for n in asyncio.run(kube.list(NODE))}
    finally:
        kube.close()
    assert names == {n["metadata"]["name"] for n in nodes}
    # the same cluster capd-py's own `get kubeconfig` reaches
    ours = json.loads(workload_kubectl(quick_cluster.kubeconfig, "get", "ns", "kube-system", "-o", "json"))
    theirs = json.loads(workload_kubectl(kc, "get", "ns", "kube-system", "-o", "json"))
    assert ours["metadata"]["uid"] == theirs["metadata"]["uid"]
    run([clusterctl, "version"], env={"CLUSTERCTL_DISABLE_VERSIONCHECK": "true"})
