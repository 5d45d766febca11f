"""Issue 2: one real node from the node image: kubeadm init, node Ready, a pod Running.

Uses the docker CLI directly (not capd-py's runtime) so that it checks the image on its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest

from capd_py.testing import kubeadm_by_hand
from capd_py.testing.node_docker import run_node, sh, wait_for

pytestmark = pytest.mark.e2e

K8S_VERSION = os.environ.get("CAPD_PY_K8S_VERSION", "v1.34.4")
IMAGE = f"capd-py/node:{K8S_VERSION}"


@pytest.fixture
def node() -> object:
    if subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True).returncode != 0:
        pytest.fail(f"{IMAGE} is missing: run `make images`")
    name = f"capd-node-test-{uuid.uuid4().hex[:6]}"
    yield name
    subprocess.run(["docker", "rm", "-f", "-v", name], capture_output=True)


def test_single_node_kubeadm_init_ready_and_pod_running(node: str) -> None:
    t0 = time.monotonic()
    run_node(node, IMAGE)
    wait_for(lambda: "Reached target" in sh("docker", "logs", node) and "Multi-User" in sh("docker", "logs", node),
             120, "systemd multi-user target")
    booted = time.monotonic() - t0
    ip = json.loads(sh("docker", "inspect", node))[0]["NetworkSettings"]["IPAddress"]
    cfg = kubeadm_by_hand.init_config(ip, K8S_VERSION)
    sh("docker", "exec", "-i", node, "sh", "-c", f"mkdir -p /run/kubeadm && cat > {kubeadm_by_hand.CONFIG_PATH}",
       input_=cfg)
    sh("docker", "exec", node, *kubeadm_by_hand.init_command(), timeout=400)
    kubectl = ["docker", "exec", "-i", node, "kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]
    sh(*kubectl, "apply", "-f", "/kind/manifests/default-cni.yaml")

    def node_ready() -> bool:
        conds = json.loads(sh(*kubectl, "get", "node", node, "-o", "json"))["status"]["conditions"]
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    wait_for(node_ready, 180, "node Ready")
    ready = time.monotonic() - t0
    pod = """apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  containers:
  - name: pause
    image: registry.k8s.io/pause:3.10.1
    imagePullPolicy: Never
"""
    sh(*kubectl, "apply", "-f", "-", input_=pod)

    def pod_running() -> bool:
        p = json.loads(sh(*kubectl, "get", "pod", "hello", "-o", "json"))
        return p["status"].get("phase") == "Running" and bool(p["status"].get("podIP"))

    wait_for(pod_running, 120, "pod Running")
    # CoreDNS runs on the pod network: it proves CNI + kube-proxy (service VIP to the API) work too.
    wait_for(lambda: "Running" in sh(*kubectl, "-n", "kube-system", "get", "pods", "-l", "k8s-app=kube-dns",
                                     "-o", "jsonpath={.items[*].status.phase}"), 120, "CoreDNS Running")
    print(f"\nnode image {IMAGE}: systemd up {booted:.1f}s, node Ready {ready:.1f}s after docker run")
