"""Issue 26 item 5 end to end: upstream cluster-autoscaler (built by `make cluster-autoscaler`, clusterapi cloud
provider) scales a MachineDeployment from 0 to 1 for a Pod that cannot be scheduled, and back to 0 once the Pod is
gone. The autoscaler runs on the host: `--kubeconfig` the workload cluster, `--cloud-config` the management plane,
node groups found by auto-discovery (the MachineDeployment's min/max size annotations). Scale from zero works from
the DockerMachineTemplate's status.capacity (the DockerMachineTemplate controller) and the node-group labels the
MachineDeployment names in `capacity.cluster-autoscaler.kubernetes.io/labels`, which its kubelets also set.

On the shared e2e-quick (1 control plane + 1 worker, whose md-0 has no autoscaler annotations and so is no node
group): the MachineDeployment and its templates are this test's, deleted at the end, so e2e-quick is left as found.
Marked `autoscaler` and left out of the default run (pyproject addopts): the Go module proxy does not serve
cluster-autoscaler, so a fresh machine cannot build it (hack/build-cluster-autoscaler.sh). Run it with
`pytest -m autoscaler tests/e2e/test_autoscaler.py` once the binary is cached."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.testing.e2e import (
    Mgmt,
    WorkloadCluster,
    delete_cluster_objects,
    nodes_ready,
    run,
    wait_for,
    workload_kubectl,
)
from capd_py.testing.envtest import cache_dir, free_port, stop_process_group

pytestmark = [pytest.mark.e2e, pytest.mark.autoscaler, pytest.mark.timeout(1200)]

VERSION = os.environ.get("CAPD_PY_CLUSTER_AUTOSCALER_VERSION", "1.35.2")
MIN, MAX = ("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size")
LABELS = "capacity.cluster-autoscaler.kubernetes.io/labels"

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  nodeSelector: {{autoscale-e2e: "{group}"}}
  terminationGracePeriodSeconds: 0
  containers:
  - {{name: app, image: capd-py/echo:latest, imagePullPolicy: Never, resources: {{requests: {{cpu: 100m}}}}}}
"""


def _autoscaler_binary() -> Path:
    p = cache_dir() / "cluster-autoscaler" / VERSION / "cluster-autoscaler"
    if not p.exists():
        pytest.fail(f"{p} is missing: run `make cluster-autoscaler` (hack/build-cluster-autoscaler.sh {VERSION})",
                    pytrace=False)
    return p


def _node_group(mgmt: Mgmt, cluster: str, md: str, group: str) -> str:
    """A MachineDeployment at 0 replicas, min 0 / max 1: the default template's `-md-0` objects renamed to `md`;
    its kubelets label their Node `autoscale-e2e=<group>`, which the autoscaler's template node has too."""
    docs = [d for d in yaml.safe_load_all(mgmt.capd("generate", "cluster", cluster).stdout)
            if d and d["metadata"]["name"] == f"{cluster}-md-0"
            and d["kind"] in ("DockerMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment")]
    assert len(docs) == 3, [d["kind"] for d in docs]
    for d in docs:
        d["metadata"]["name"] = md
        if d["kind"] == "KubeadmConfigTemplate":
            registration = d["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]
            registration.setdefault("kubeletExtraArgs", []).append({"name": "node-labels",
                                                                    "value": f"autoscale-e2e={group}"})
        if d["kind"] == "MachineDeployment":
            d["metadata"]["annotations"] = {MIN: "0", MAX: "1", LABELS: f"autoscale-e2e={group}"}
            d["spec"]["replicas"] = 0
            tspec = d["spec"]["template"]["spec"]
            tspec["bootstrap"]["configRef"]["name"] = tspec["infrastructureRef"]["name"] = md
    return yaml.safe_dump_all(docs)


def _replicas(mgmt: Mgmt, md: str, ns: str) -> int:
    return int(mgmt.get("machinedeployment", md, ns)["spec"].get("replicas", -1))


def _pod_running(kc: Path, name: str) -> bool:
    pod = json.loads(workload_kubectl(kc, "get", "pod", name, "-o", "json"))
    return bool(pod["status"].get("phase") == "Running")


def _start_autoscaler(mgmt: Mgmt, qc: WorkloadCluster, log: Path) -> subprocess.Popen[bytes]:
    args = [str(_autoscaler_binary()), "--cloud-provider=clusterapi", f"--kubeconfig={qc.kubeconfig}",
            f"--cloud-config={mgmt.kubeconfig}",
            f"--node-group-auto-discovery=clusterapi:namespace={qc.namespace},clusterName={qc.name}",
            "--scan-interval=5s", "--scale-down-delay-after-add=20s", "--scale-down-unneeded-time=15s",
            "--scale-down-delay-after-delete=0s", "--scale-down-delay-after-failure=10s",
            "--max-node-provision-time=5m", "--skip-nodes-with-local-storage=false",
            "--skip-nodes-with-system-pods=false", "--leader-elect=false",
            "--expander=random", f"--address=127.0.0.1:{free_port()}", "--v=2"]
    with open(log, "wb") as out:
        return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    stop_process_group(proc, 20)


def _remove_node_group(mgmt: Mgmt, qc: WorkloadCluster, md: str, pod: str) -> None:
    """Leave e2e-quick as found: the test's Pod, MachineDeployment (and anything it still had) and templates gone."""
    workload_kubectl(qc.kubeconfig, "delete", "pod", pod, "--ignore-not-found", "--wait=false")
    mgmt.kubectl("delete", "machinedeployment", md, "-n", qc.namespace, "--ignore-not-found", "--wait=false")

    def gone() -> bool:
        left = [o for o in mgmt.kubectl("get", "machinedeployments,machinesets,machines,dockermachines,kubeadmconfigs",
                                        "-n", qc.namespace, "-l", f"cluster.x-k8s.io/cluster-name={qc.name}",
                                        "-o", "name").split() if o.split("/", 1)[1].startswith(md)]
        names = run(["docker", "ps", "-a", "--format", "{{.Names}}", "--filter",
                     f"label=io.x-k8s.capd-py.cluster={qc.name}"]).stdout.split()
        return (not left and not [n for n in names if n.startswith(md)]
                and nodes_ready(qc.kubeconfig, qc.control_planes + qc.workers))
    wait_for(gone, 300, f"MachineDeployment {md}, its Machines, containers and Node gone", 3)
    mgmt.kubectl("delete", "dockermachinetemplate,kubeadmconfigtemplate", md, "-n", qc.namespace,
                 "--ignore-not-found")


def test_autoscaler_scales_a_machinedeployment_from_zero_and_back(mgmt: Mgmt, quick_cluster: WorkloadCluster,
                                                                   tmp_path: Path) -> None:
    t_all = time.monotonic()
    group = secrets.token_hex(3)
    name, kc, ns = quick_cluster.name, quick_cluster.kubeconfig, quick_cluster.namespace
    md, pod = f"{name}-md-as-{group}", f"autoscale-{group}"
    base = quick_cluster.control_planes + quick_cluster.workers
    timings: dict[str, float] = {}
    log = tmp_path / "cluster-autoscaler.log"
    proc: subprocess.Popen[bytes] | None = None
    ok = False
    try:
        mgmt.kubectl("apply", "-f", "-", input_=_node_group(mgmt, name, md, group))
        capacity: dict[str, Any] = {}

        def template_capacity() -> bool:
            capacity.update((mgmt.get("dockermachinetemplate", md, ns).get("status") or {}).get("capacity") or {})
            return {"cpu", "memory"} <= set(capacity)
        wait_for(template_capacity, 60, "the DockerMachineTemplate's status.capacity")
        assert _replicas(mgmt, md, ns) == 0
        proc = _start_autoscaler(mgmt, quick_cluster, log)

        # a Pod only a node of the group can take: the autoscaler scales the MachineDeployment 0 -> 1
        t0 = time.monotonic()
        workload_kubectl(kc, "apply", "-f", "-", input_=POD.format(name=pod, group=group))
        wait_for(lambda: _replicas(mgmt, md, ns) == 1, 180, f"the autoscaler scaling {md} to 1")
        timings["pending Pod -> MachineDeployment scaled to 1"] = time.monotonic() - t0
        wait_for(lambda: nodes_ready(kc, base + 1), 420, "the new worker Ready")
        timings["pending Pod -> new Node Ready"] = time.monotonic() - t0
        wait_for(lambda: _pod_running(kc, pod), 180, "the Pod Running on the new node")
        timings["pending Pod -> Pod Running"] = time.monotonic() - t0
        node = json.loads(workload_kubectl(kc, "get", "pod", pod, "-o", "json"))["spec"]["nodeName"]
        assert node.startswith(md), node

        # the Pod gone: the node is unneeded, the autoscaler scales back to 0 and the Machine goes
        t0 = time.monotonic()
        workload_kubectl(kc, "delete", "pod", pod, "--wait=true")
        wait_for(lambda: _replicas(mgmt, md, ns) == 0, 300, f"the autoscaler scaling {md} back to 0")
        timings["Pod deleted -> MachineDeployment scaled to 0"] = time.monotonic() - t0
        wait_for(lambda: nodes_ready(kc, base), 300, "the autoscaled worker gone")
        timings["Pod deleted -> Node gone"] = time.monotonic() - t0
        ok = True
    finally:
        if proc is not None:
            _stop(proc)
            if not ok:
                print("\n--- cluster-autoscaler log tail ---\n" +
                      "\n".join(log.read_text(errors="replace").splitlines()[-80:]))
        t0 = time.monotonic()
        try:
            _remove_node_group(mgmt, quick_cluster, md, pod)
        except BaseException:
            quick_cluster.deleted = True  # e2e-quick is not as it was: the next user gets a fresh one
            delete_cluster_objects(mgmt, name, ns)
            if ok:
                raise
        finally:
            timings["cleanup"] = time.monotonic() - t0
            timings["whole test"] = time.monotonic() - t_all
            print("\n" + "\n".join(f"{k}: {v:.1f}s" for k, v in timings.items()))
