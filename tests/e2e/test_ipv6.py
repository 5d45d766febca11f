"""Issue 26 item 3: IPv6 and dual-stack clusters from upstream's own e2e flavors.

Upstream release-1.13's `cluster-template-ipv6` (classic: KubeadmControlPlane advertising on `::`, kubelets on
`node-ip: ::`) and `cluster-template-topology-dualstack-ipv4-primary` / `-ipv6-primary` (the e2e quick-start
ClusterClass with `externalCloudProvider: true` and `ipv6Primary`), vendored rendered under tests/fixtures/upstream,
filled by upstream clusterctl with the values of upstream's test/e2e/config/docker.yaml, only the CNI swapped for
capd-netd's manifest (upstream's kindnet image would be pulled). Each becomes Available; nodes, pods and Services
get addresses of the cluster's families, pods reach pods on other nodes and Services answer in each family.
"""

from __future__ import annotations

import ipaddress
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
    run,
    wait_for,
    workload_kubectl,
)
from capd_py.testing.upstream import UPSTREAM, render

pytestmark = pytest.mark.e2e

# one echo pod per node (control planes included), behind a Service of every family the cluster has
ECHO = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: echo6}
spec:
  selector: {matchLabels: {app: echo6}}
  template:
    metadata: {labels: {app: echo6}}
    spec:
      tolerations: [{operator: Exists}]
      containers:
      - {name: echo, image: capd-py/echo:latest, imagePullPolicy: Never, ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: echo6}
spec:
  ipFamilyPolicy: PreferDualStack
  selector: {app: echo6}
  ports: [{port: 80, targetPort: 8080}]
"""


def quick_start_class() -> str:
    """Upstream's e2e quick-start ClusterClass with its one variable as upstream's docker.yaml leaves it (no
    DOCKER_PRELOAD_IMAGES: the default, none)."""
    return (UPSTREAM / "e2e-clusterclass-quick-start.yaml").read_text().replace("${DOCKER_PRELOAD_IMAGES:-[]}", "[]")


def _versions(addresses: list[str]) -> list[int]:
    return [ipaddress.ip_address(a).version for a in addresses]


def check_cluster(mgmt: Mgmt, name: str, kc: Path, nodes: int, families: list[int]) -> None:
    """Machines, Nodes, pods and a Service of the cluster carry addresses of `families` (primary first), pods
    reach the echo pod on every node, and the Service answers on each of its cluster IPs."""
    dc = mgmt.get("dockercluster", mgmt.get("cluster", name)["spec"]["infrastructureRef"]["name"])
    host = dc["spec"]["controlPlaneEndpoint"]["host"]
    # as upstream CAPD: an IPv6 cluster's endpoint is the load balancer's IPv6 address, a dual-stack one's IPv4
    assert ipaddress.ip_address(host).version == (6 if families == [6] else 4), host
    dms = json.loads(mgmt.kubectl("get", "dockermachines", "-n", "default", "-l",
                                  f"cluster.x-k8s.io/cluster-name={name}", "-o", "json"))["items"]
    want = list(families) if len(families) == 1 else [4, 6]  # upstream CAPD lists a dual-stack machine's IPv4 first
    for dm in dms:
        internal = [a["address"] for a in dm["status"]["addresses"] if a["type"] == "InternalIP"]
        assert _versions(internal) == want, (dm["metadata"]["name"], internal)
    node_list = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
    assert len(node_list) == nodes
    for n in node_list:
        internal = [a["address"] for a in n["status"]["addresses"] if a["type"] == "InternalIP"]
        assert sorted(_versions(internal)) == sorted(want), (n["metadata"]["name"], internal)
        assert sorted(_versions([c.split("/")[0] for c in n["spec"]["podCIDRs"]])) == sorted(families), n["spec"]
        taints = [t["key"] for t in n["spec"].get("taints", [])]
        assert "node.cloudprovider.kubernetes.io/uninitialized" not in taints, taints

    workload_kubectl(kc, "apply", "-f", "-", input_=ECHO)
    wait_for(lambda: json.loads(workload_kubectl(kc, "get", "ds", "echo6", "-o", "json"))["status"]
             .get("numberReady") == nodes, 180, f"echo pods Ready on {nodes} node(s)")
    pods = json.loads(workload_kubectl(kc, "get", "pods", "-l", "app=echo6", "-o", "json"))["items"]
    for p in pods:
        # one address of each family; kubelet orders them by its node's first InternalIP (IPv4 first on dual-stack
        # machines, as upstream CAPD lists them), not by the cluster's primary family
        assert sorted(_versions([i["ip"] for i in p["status"]["podIPs"]])) == sorted(families), p["status"]["podIPs"]
    svc = json.loads(workload_kubectl(kc, "get", "svc", "echo6", "-o", "json"))["spec"]
    assert _versions(svc["clusterIPs"]) == families, svc
    # from each node (through its routes to the other nodes' pod ranges), every pod by each of its addresses,
    # and the Service by each of its cluster IPs
    containers = [n["metadata"]["name"] for n in node_list]
    names = {p["metadata"]["name"] for p in pods}

    def get(container: str, ip: str, port: int) -> str:
        host = f"[{ip}]" if ":" in ip else ip
        return run(["docker", "exec", container, "curl", "-s", "--max-time", "2", f"http://{host}:{port}/"],
                   check=False).stdout.strip()

    targets = [(p["metadata"]["name"], i["ip"]) for p in pods for i in p["status"]["podIPs"]]
    for c in containers:
        for pod, ip in targets:
            def answers(c: str = c, ip: str = ip, pod: str = pod) -> bool:
                return get(c, ip, 8080) == pod
            wait_for(answers, 60, f"{c} -> pod {pod} at {ip}", interval=1)
    for ip in svc["clusterIPs"]:
        seen: set[str] = set()

        def all_seen(ip: str = ip, seen: set[str] = seen) -> bool:
            out = get(containers[-1], ip, 80)
            if out:
                seen.add(out)
            return seen >= names

        wait_for(all_seen, 120, f"service {ip} to route to {sorted(names)}", interval=0.2)
    wait_for(lambda: json.loads(workload_kubectl(kc, "-n", "kube-system", "get", "deploy", "coredns", "-o", "json"))
             ["status"].get("readyReplicas") == 2, 180, "CoreDNS Ready")


def delete(mgmt: Mgmt, name: str, path: Path) -> float:
    t = time.monotonic()
    mgmt.capd("delete", "cluster", name, "--wait", "--timeout", "300")
    wait_for(lambda: not docker_leftovers(name), 120, "no docker leftovers")
    wait_for(lambda: not cluster_objects_left(mgmt, name), 60, "no Cluster API objects of the cluster")
    mgmt.kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait")
    delete_cluster_objects(mgmt, name)
    return time.monotonic() - t


def _available(mgmt: Mgmt, name: str, kc: Path, nodes: int, timeout: float) -> None:
    try:
        wait_for(lambda: mgmt.condition("cluster", name, "Available"), timeout, f"cluster {name} Available", 5)
    except AssertionError as e:
        tree = mgmt.capd("describe", "cluster", name, "--show-conditions", "all", check=False)
        raise AssertionError(f"{e}\n{tree.stdout}\n{tree.stderr}\n{mgmt.log_tail(120)}") from None
    mgmt.capd("get", "kubeconfig", name, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, nodes), 180, f"{nodes} Ready nodes")


def test_upstream_ipv6_flavor(clusterctl: str, mgmt: Mgmt, cluster_cleanup: list[str], tmp_path: Path) -> None:
    name = "e2e-ipv6"
    path = render(clusterctl, "e2e-cluster-template-ipv6.yaml", name, tmp_path, 1)
    t0 = time.monotonic()
    cluster_cleanup.append(name)
    mgmt.kubectl("apply", "-f", str(path))
    kc = tmp_path / f"{name}.kubeconfig"
    _available(mgmt, name, kc, 2, 600)
    available = time.monotonic() - t0
    check_cluster(mgmt, name, kc, 2, [6])
    print(f"\nupstream ipv6 flavor (1 CP + 1 worker): Available with Ready nodes after {available:.0f}s; "
          f"checked after {time.monotonic() - t0:.0f}s; deleted in {delete(mgmt, name, path):.0f}s")


def test_upstream_dualstack_flavors(clusterctl: str, mgmt: Mgmt, cluster_cleanup: list[str], tmp_path: Path) -> None:
    """Both primaries at once: ipv6-primary with a MachineDeployment worker and a MachinePool worker (3 nodes),
    ipv4-primary with its control plane only (the class's workers at 0 replicas)."""
    mgmt.kubectl("apply", "-f", "-", input_=quick_start_class())
    wait_for(lambda: mgmt.condition("clusterclass", "quick-start", "VariablesReady"), 60, "ClusterClass ready")
    clusters: dict[str, tuple[str, int, list[int]]] = {
        "e2e-ds6": ("e2e-cluster-template-topology-dualstack-ipv6-primary.yaml", 1, [6, 4]),
        "e2e-ds4": ("e2e-cluster-template-topology-dualstack-ipv4-primary.yaml", 0, [4, 6]),
    }
    paths: dict[str, Path] = {}
    t0 = time.monotonic()
    for name, (template, workers, _) in clusters.items():
        paths[name] = render(clusterctl, template, name, tmp_path, workers)
        cluster_cleanup.append(name)
        mgmt.kubectl("apply", "-f", str(paths[name]))
    report: list[str] = []
    for name, (_, workers, families) in clusters.items():
        nodes = 1 + 2 * workers
        kc = tmp_path / f"{name}.kubeconfig"
        _available(mgmt, name, kc, nodes, 720)
        took = time.monotonic() - t0
        cluster = mgmt.get("cluster", name)
        pods = cluster["spec"]["clusterNetwork"]["pods"]["cidrBlocks"]
        assert _versions([c.split("/")[0] for c in pods]) == families, pods
        check_cluster(mgmt, name, kc, nodes, families)
        # issue 26 item 2: the class's lbImageRepository left at its default ("kindest") names upstream CAPD's
        # load balancer image, <repository>/haproxy:<default tag>
        lb_image = run(["docker", "inspect", "-f", "{{.Config.Image}}", f"{name}-lb"]).stdout.strip()
        assert lb_image == "kindest/haproxy:v20230606-42a2262b", lb_image
        report.append(f"{name} ({'IPv6' if families[0] == 6 else 'IPv4'} primary, {nodes} node(s)): Available "
                      f"with Ready nodes after {took:.0f}s")
    for name in clusters:
        report.append(f"{name} deleted in {delete(mgmt, name, paths[name]):.0f}s")
    mgmt.kubectl("delete", "-f", "-", "--ignore-not-found", input_=quick_start_class())
    print("\n" + "; ".join(report))
