"""Upstream cluster-autoscaler (clusterapi provider) against capd-py's CRDs, no workload cluster: the envtest API
server is both the management cluster and the "workload" one (a Ready Node object, a Pod marked Unschedulable by
hand, as a scheduler would). A MachineDeployment at 0 replicas with min 0 / max 1 is a node group, its
DockerMachineTemplate's status.capacity (written by capd-py's DockerMachineTemplate controller) is what the
autoscaler builds its template node from, and it scales the MachineDeployment to 1 through the scale subresource.
Marked `autoscaler` (left out of the default run: the binary needs `make cluster-autoscaler`, which the Go module
proxy cannot serve); tests/e2e/test_autoscaler.py does the whole round trip on real nodes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from capd_py.api.containers import HostCapacity
from capd_py.api.gvk import DOCKER_MACHINE_TEMPLATE, GVK, MACHINE_DEPLOYMENT
from capd_py.controllers import dockermachinetemplate as c_dmt
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest, cache_dir, free_port, stop_process_group
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.autoscaler]

VERSION = os.environ.get("CAPD_PY_CLUSTER_AUTOSCALER_VERSION", "1.35.2")
NODE = GVK("", "v1", "Node", "nodes", namespaced=False)
POD = GVK("", "v1", "Pod", "pods")
MIN, MAX = ("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size")


def _binary() -> Path:
    p = cache_dir() / "cluster-autoscaler" / VERSION / "cluster-autoscaler"
    if not p.exists():
        pytest.fail(f"{p} is missing: run `make cluster-autoscaler` (hack/build-cluster-autoscaler.sh {VERSION})",
                    pytrace=False)
    return p


def _md(ns: str, group: str) -> dict[str, Any]:
    labels = {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/deployment-name": "workers"}
    return {"apiVersion": MACHINE_DEPLOYMENT.api_version, "kind": "MachineDeployment",
            "metadata": {"name": "workers", "namespace": ns, "annotations": {
                MIN: "0", MAX: "1", "capacity.cluster-autoscaler.kubernetes.io/labels": f"autoscale={group}"}},
            "spec": {"clusterName": "c1", "replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "clusterName": "c1", "version": "v1.34.4",
                         "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                                     "kind": "KubeadmConfigTemplate", "name": "workers"}},
                         "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                               "kind": "DockerMachineTemplate", "name": "workers"}}}}}


async def _ready_node(kube: Kube, name: str) -> None:
    node = await kube.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}}})
    node["status"] = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                      "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z"}],
                      "capacity": {"cpu": "2", "memory": "4Gi", "pods": "110"},
                      "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}}
    await kube.replace(NODE, node, subresource="status")


async def _unschedulable_pod(kube: Kube, ns: str, group: str) -> None:
    pod = await kube.create(POD, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "wants-a-node",
                                                                                 "namespace": ns},
                                  "spec": {"nodeSelector": {"autoscale": group}, "containers": [
                                      {"name": "app", "image": "capd-py/echo:latest",
                                       "resources": {"requests": {"cpu": "100m"}}}]}})
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
        "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    await kube.replace(POD, pod, subresource="status")


async def test_autoscaler_scales_from_zero_from_the_template_capacity(envtest: EnvTest, kube: Kube, namespace: str,
                                                                      tmp_path: Path) -> None:
    binary = _binary()
    group = namespace
    ctx = direct_ctx(kube)
    assert isinstance(ctx.runtime, FakeRuntime)
    ctx.runtime.capacity = HostCapacity(cpus=4, memory_bytes=8 * 1024 ** 3)
    await kube.create(DOCKER_MACHINE_TEMPLATE, {
        "apiVersion": DOCKER_MACHINE_TEMPLATE.api_version, "kind": "DockerMachineTemplate",
        "metadata": {"name": "workers", "namespace": namespace}, "spec": {"template": {"spec": {}}}})
    await c_dmt.reconcile(ctx, namespace, "workers")
    await kube.create(MACHINE_DEPLOYMENT, _md(namespace, group))
    await _ready_node(kube, f"cp-{namespace}")
    await _unschedulable_pod(kube, namespace, group)

    kc = str(envtest.kubeconfig_path)
    log = tmp_path / "cluster-autoscaler.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [str(binary), "--cloud-provider=clusterapi", f"--kubeconfig={kc}", f"--cloud-config={kc}",
             f"--node-group-auto-discovery=clusterapi:namespace={namespace},clusterName=c1", "--scan-interval=2s",
             "--leader-elect=false", f"--address=127.0.0.1:{free_port()}", "--scale-down-enabled=false", "--v=4"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < 90:
            md = await kube.get(MACHINE_DEPLOYMENT, namespace, "workers")
            if md is not None and md["spec"].get("replicas") == 1:
                break
            assert proc.poll() is None, "cluster-autoscaler exited:\n" + log.read_text(errors="replace")[-4000:]
            await asyncio.sleep(1)
        else:
            pytest.fail("the autoscaler did not scale the MachineDeployment to 1 within 90 s; its log:\n"
                        + "\n".join(log.read_text(errors="replace").splitlines()[-60:]), pytrace=False)
        print(f"\nunschedulable Pod -> MachineDeployment scaled 0 -> 1: {time.monotonic() - t0:.1f}s")
    finally:
        stop_process_group(proc, 20)
        await kube.delete(NODE, None, f"cp-{namespace}")
