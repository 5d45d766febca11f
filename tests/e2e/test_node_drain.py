"""Machine deletion as upstream v1.13 on a real cluster, the essence of upstream's node-drain e2e
(test/e2e/node_drain.go) kept cheap: on the shared e2e-quick (1 control plane + 1 worker), MachineDrainRules order
the evictions of two Deployments' Pods on the worker (order -10 first, order 10 last, CoreDNS and other order-0 Pods
between), Pods of a Skip rule and of the `cluster.x-k8s.io/drain: skip` label are never evicted, and after the drain
the Machine waits (WaitingForVolumeDetach) for a VolumeAttachment of the Node until it is deleted. The worker
Machine is deleted and its MachineSet replaces it: e2e-quick ends as it was found (1 control plane + 1 worker,
Ready), with a new worker. The rules, the workload namespace and the PersistentVolume are removed at the end."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from capd_py.testing.e2e import Mgmt, WorkloadCluster, nodes_ready, wait_for, workload_kubectl
from capd_py.testing.quiet import wait_resyncs_sync

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

WNS = "e2e-drain"   # the workload namespace of the test's Deployments

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {labels}}}
    spec:
      terminationGracePeriodSeconds: 1
      nodeSelector: {{kubernetes.io/hostname: {node}}}
      containers:
      - {{name: c, image: capd-py/echo:latest, imagePullPolicy: Never}}
"""


def _rule(ns: str, name: str, behavior: str, pods: list[dict[str, Any]], order: int | None = None,
          cluster: str = "") -> dict[str, Any]:
    drain: dict[str, Any] = {"behavior": behavior}
    if order is not None:
        drain["order"] = order
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDrainRule",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"drain": drain, "pods": pods,
                     # only the worker Machines of this Cluster
                     "machines": [{"selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": cluster},
                                                "matchExpressions": [{"key": "cluster.x-k8s.io/control-plane",
                                                                      "operator": "DoesNotExist"}]}}]}}


def _pods(kc: Path, node: str) -> dict[str, dict[str, Any]]:
    out = json.loads(workload_kubectl(kc, "get", "pods", "-A", "--field-selector", f"spec.nodeName={node}",
                                      "-o", "json"))["items"]
    return {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in out}


def test_drain_rules_order_evictions_and_volumes_hold_the_machine(mgmt: Mgmt, quick_cluster: WorkloadCluster) -> None:
    t0 = time.monotonic()
    c, kc, ns = quick_cluster, quick_cluster.kubeconfig, quick_cluster.namespace
    (worker,) = json.loads(mgmt.kubectl("get", "machines", "-n", ns, "-l",
                                        f"cluster.x-k8s.io/cluster-name={c.name},!cluster.x-k8s.io/control-plane",
                                        "-o", "json"))["items"]
    machine, node = worker["metadata"]["name"], worker["status"]["nodeRef"]["name"]
    rules = [_rule(ns, "e2e-drain-first", "Drain", [{"selector": {"matchLabels": {"app": "first"}}}], -10, c.name),
             _rule(ns, "e2e-drain-last", "Drain", [{"selector": {"matchLabels": {"app": "last"}},
                                                    "namespaceSelector": {"matchLabels": {
                                                        "kubernetes.io/metadata.name": WNS}}}], 10, c.name),
             _rule(ns, "e2e-drain-skip", "Skip", [{"selector": {"matchLabels": {"app": "skipped"}}}], None, c.name)]
    mgmt.kubectl("apply", "-f", "-", input_="\n---\n".join(json.dumps(r) for r in rules))
    pv, va = f"{c.name}-e2e-drain", f"{c.name}-e2e-drain"
    try:
        workload_kubectl(kc, "create", "namespace", WNS)
        docs = [DEPLOYMENT.format(name=n, ns=WNS, replicas=r, node=node, labels=json.dumps(lbl)) for n, r, lbl in (
            ("first", 2, {"app": "first"}), ("last", 2, {"app": "last"}), ("skipped", 1, {"app": "skipped"}),
            ("kept", 1, {"app": "kept", "cluster.x-k8s.io/drain": "skip"}))]
        workload_kubectl(kc, "apply", "-f", "-", input_="\n---\n".join(docs))
        wait_for(lambda: {d["metadata"]["name"]: d["status"].get("readyReplicas") for d in json.loads(
            workload_kubectl(kc, "get", "deploy", "-n", WNS, "-o", "json"))["items"]} == {
                "first": 2, "last": 2, "skipped": 1, "kept": 1}, 120, "the test's Pods Ready on the worker")
        # a volume "attached" to the worker: a PersistentVolume of claim e2e-drain/data and its VolumeAttachment
        workload_kubectl(kc, "apply", "-f", "-", input_=json.dumps({
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "csi": {"driver": "csi.e2e.example.com", "volumeHandle": pv},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": WNS, "name": "data"}}}))
        workload_kubectl(kc, "apply", "-f", "-", input_=json.dumps({
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": va},
            "spec": {"attacher": "csi.e2e.example.com", "nodeName": node, "source": {"persistentVolumeName": pv}}}))
        workload_kubectl(kc, "patch", "volumeattachment", va, "--subresource=status", "--type=merge",
                         "-p", '{"status": {"attached": true}}')
        before = _pods(kc, node)
        ours = {k for k in before if k.startswith(f"{WNS}/")}
        assert len(ours) == 6, sorted(before)

        t_delete = time.monotonic()
        mgmt.kubectl("delete", "machine", machine, "-n", ns, "--wait=false")
        gone_at: dict[str, float] = {}   # pod -> when first seen evicted (deletionTimestamp) or gone
        deleting: dict[str, Any] = {}
        messages: list[str] = []          # the Deleting condition's messages while draining
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            now = _pods(kc, node)
            for k in before:
                if k not in gone_at and (k not in now or now[k]["metadata"].get("deletionTimestamp")):
                    gone_at[k] = time.monotonic() - t_delete
            m = json.loads(mgmt.kubectl("get", "machine", machine, "-n", ns, "-o", "json"))
            deleting = next((x for x in m["status"].get("conditions") or [] if x["type"] == "Deleting"), {})
            if deleting.get("reason") == "DrainingNode":
                messages.append(deleting.get("message", ""))
            if deleting.get("reason") == "WaitingForVolumeDetach":
                break
            time.sleep(0.5)
        assert deleting.get("reason") == "WaitingForVolumeDetach", (deleting, gone_at)
        drained_at = time.monotonic() - t_delete
        started = m["status"]["deletion"]["waitForNodeVolumeDetachStartTime"]
        assert deleting["message"] == (f"Waiting for Node volumes to be detached (started at {started})\n"
                                       f"* PersistentVolumeClaims: {WNS}/data")
        assert m["status"]["deletion"]["nodeDrainStartTime"]
        first = [t for k, t in gone_at.items() if "/first-" in k]
        last = [t for k, t in gone_at.items() if "/last-" in k]
        assert len(first) == 2 and len(last) == 2, gone_at
        assert max(first) < min(last), f"order -10 before order 10: {gone_at}"
        # upstream's condition message while the first group goes: the last group announced
        assert any(msg.startswith("Drain not completed yet (started at ") and
                   "After above Pods have been removed from the Node, the following Pods will be evicted:" in msg
                   and f"{WNS}/last-" in msg for msg in messages), messages[-3:]
        for k in ours:
            if "/skipped-" in k or "/kept-" in k:
                assert k not in gone_at, f"{k} was evicted"
        order = sorted(gone_at.items(), key=lambda x: x[1])
        print("\nevictions, seconds after the delete: " + ", ".join(f"{k} {t:.1f}" for k, t in order))
        # held while the volume is attached: the infrastructure and the Node stay, through a full resync pass (this
        # Machine reconciled again, level-triggered; not a fixed 3 s). Not a quiet window: the MachineSet's
        # replacement worker is being made in the namespace meanwhile.
        assert mgmt.activity is not None
        wait_resyncs_sync(mgmt.activity, 1, timeout=120, what=f"a resync pass while {machine} waits for its volume")
        assert mgmt.kubectl("get", "dockermachine", "-n", ns, worker["spec"]["infrastructureRef"]["name"],
                            "-o", "name", check=False).strip()
        assert mgmt.get("machine", machine, ns)["metadata"].get("deletionTimestamp")

        t_detach = time.monotonic()
        workload_kubectl(kc, "delete", "volumeattachment", va)
        wait_for(lambda: not mgmt.kubectl("get", "machine", machine, "-n", ns, "-o", "name", "--ignore-not-found"),
                 120, f"Machine {machine} deleted after the volume detached")
        gone = time.monotonic() - t_detach
        # the MachineSet's replacement worker: e2e-quick as found
        wait_for(lambda: nodes_ready(kc, c.control_planes + c.workers) and len(json.loads(workload_kubectl(
            kc, "get", "nodes", "-o", "json"))["items"]) == c.control_planes + c.workers, 300,
            "the replacement worker Ready")
        print(f"drain done {drained_at:.0f} s after the delete; Machine gone {gone:.0f} s after the detach; "
              f"test {time.monotonic() - t0:.0f} s")
    finally:
        mgmt.kubectl("delete", "machinedrainrules", "-n", ns, *[r["metadata"]["name"] for r in rules],
                     "--ignore-not-found", check=False)
        workload_kubectl(kc, "delete", "namespace", WNS, "--ignore-not-found", "--wait=false")
        workload_kubectl(kc, "delete", "volumeattachment", va, "--ignore-not-found")
        workload_kubectl(kc, "delete", "pv", pv, "--ignore-not-found", "--wait=false")
