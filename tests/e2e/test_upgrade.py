"""Issue 13: a Kubernetes version upgrade of a real cluster, as a user does it with upstream Cluster API.

The shared `e2e-quick` cluster (1 control plane + 1 worker from the default template at K8S_VERSION; issue 40: no
cluster of its own): its other users read it or leave it as they found it, and sort before this module; the quick
test of test_workload_cluster.py, which sorts after it, checks its traffic and stability then and deletes it. An
echo Deployment (a pod per node) behind a Service. Then the KubeadmControlPlane moves to UPGRADE_TO_VERSION (with
CoreDNS's tag for that version, as upstream's e2e sets it: KCP never changes CoreDNS by itself), and once the
control plane runs it, the MachineDeployment. Throughout: the API answers through the load balancer every second
(0 failures), and the echo Service answers through the API server's service proxy (failures counted and bounded: a
pod moving off a node being replaced). At the end every node runs the new version, kube-proxy and CoreDNS are at
the new version's images, and the cluster is Available.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from capd_py.testing.e2e import (
    ECHO_APP,
    K8S_VERSION,
    UPGRADE_TO_VERSION,
    LBProbe,
    Mgmt,
    ServiceProbe,
    WorkloadCluster,
    nodes_ready,
    wait_for,
    workload_kubectl,
)

pytestmark = pytest.mark.e2e

# kubeadm's CoreDNS for each version (hack/build-addons.sh builds these; each node image preloads its own)
COREDNS_TAG = {"v1.34": "v1.12.1", "v1.35": "v1.13.1"}
ECHO_FAILURES_ALLOWED = 10  # seconds of a pod being moved off a replaced node, at most


def _minor(v: str) -> str:
    return ".".join(v.split(".")[:2])


def _nodes(kc: Path) -> list[dict[str, Any]]:
    return list(json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"])


def _all_at(kc: Path, version: str, count: int) -> bool:
    ns = _nodes(kc)
    return len(ns) == count and nodes_ready(kc, count) and \
        all(n["status"]["nodeInfo"]["kubeletVersion"] == version for n in ns)


@pytest.mark.timeout(2400)
def test_kcp_then_machine_deployment_upgrade_keeps_api_and_workload_up(
        mgmt: Mgmt, quick_cluster: WorkloadCluster) -> None:
    assert _minor(K8S_VERSION) != _minor(UPGRADE_TO_VERSION), "the upgrade test needs two minors"
    t0 = time.monotonic()
    name, kc = quick_cluster.name, quick_cluster.kubeconfig
    assert _all_at(kc, K8S_VERSION, 2), "e2e-quick is not as its other users must leave it"
    workload_kubectl(kc, "apply", "-f", "-", input_=ECHO_APP)
    wait_for(lambda: json.loads(workload_kubectl(kc, "get", "deploy", "echo", "-o", "json"))["status"]
             .get("readyReplicas") == 2, 240, "echo pods Ready")
    print(f"\n1 CP + 1 worker at {K8S_VERSION} with echo: {time.monotonic() - t0:.0f}s")
    kcp_name, md_name = f"{name}-control-plane", f"{name}-md-0"

    with LBProbe(kc) as api, ServiceProbe(kc, "echo") as echo:
        t1 = time.monotonic()
        mgmt.kubectl("patch", "kubeadmcontrolplane", kcp_name, "-n", "default", "--type=merge", "-p", json.dumps(
            {"spec": {"version": UPGRADE_TO_VERSION, "kubeadmConfigSpec": {"clusterConfiguration": {
                "dns": {"imageTag": COREDNS_TAG[_minor(UPGRADE_TO_VERSION)]}}}}}))

        def cp_upgraded() -> bool:
            st = mgmt.get("kubeadmcontrolplane", kcp_name).get("status") or {}
            return st.get("version") == UPGRADE_TO_VERSION and st.get("replicas") == 1 \
                and st.get("upToDateReplicas") == 1 and st.get("readyReplicas") == 1
        wait_for(cp_upgraded, 900, f"control plane at {UPGRADE_TO_VERSION}", 3)
        # the workers were not touched while the control plane moved
        md = mgmt.get("machinedeployment", md_name)
        assert md["spec"]["template"]["spec"]["version"] == K8S_VERSION
        cp_seconds = time.monotonic() - t1

        t2 = time.monotonic()
        mgmt.kubectl("patch", "machinedeployment", md_name, "-n", "default", "--type=merge", "-p",
                     json.dumps({"spec": {"template": {"spec": {"version": UPGRADE_TO_VERSION}}}}))
        wait_for(lambda: _all_at(kc, UPGRADE_TO_VERSION, 2), 900, f"both nodes Ready at {UPGRADE_TO_VERSION}", 3)

        def md_up_to_date() -> bool:
            machines = json.loads(mgmt.kubectl("get", "machines", "-n", "default", "-l",
                                               f"cluster.x-k8s.io/deployment-name={md_name}", "-o", "json"))["items"]
            return len(machines) == 1 and all(
                any(c["type"] == "UpToDate" and c["status"] == "True" for c in m["status"].get("conditions") or [])
                for m in machines)
        wait_for(md_up_to_date, 300, "the worker Machine UpToDate", 3)
        wait_for(lambda: json.loads(workload_kubectl(kc, "get", "deploy", "echo", "-o", "json"))["status"]
                 .get("readyReplicas") == 2, 240, "echo pods Ready after the upgrade")
        md_seconds = time.monotonic() - t2
        time.sleep(3)
    print(f"KCP upgrade {cp_seconds:.0f}s, MachineDeployment upgrade {md_seconds:.0f}s; API probes ok={api.ok} "
          f"failed={len(api.failures)}; echo probes ok={echo.ok} failed={len(echo.failures)}")
    assert api.ok > 30 and not api.failures, f"API unreachable through the LB during the upgrade: {api.failures}"
    assert echo.ok > 30 and len(echo.failures) <= ECHO_FAILURES_ALLOWED, echo.failures

    # the workload's add-ons follow the KCP (upstream: kube-proxy always, CoreDNS by dns.imageTag)
    ds = json.loads(workload_kubectl(kc, "-n", "kube-system", "get", "ds", "kube-proxy", "-o", "json"))
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"].endswith(f"kube-proxy:{UPGRADE_TO_VERSION}")
    dep = json.loads(workload_kubectl(kc, "-n", "kube-system", "get", "deploy", "coredns", "-o", "json"))
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith(
        f"coredns:{COREDNS_TAG[_minor(UPGRADE_TO_VERSION)]}")
    wait_for(lambda: mgmt.condition("cluster", name, "Available"), 300, "cluster Available after the upgrade", 5)
    kcp = mgmt.get("kubeadmcontrolplane", kcp_name)
    assert kcp["status"]["version"] == UPGRADE_TO_VERSION
    print(f"whole test {time.monotonic() - t0:.0f}s")
