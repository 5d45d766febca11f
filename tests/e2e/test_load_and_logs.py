"""Issue 15 items 2-3 end to end: `capd-py load image` into a real cluster (a pod runs it with
imagePullPolicy Never; a second load skips by digest), a worker added later gets the loaded image and its
DockerMachineTemplate's spec.preLoadImages before it joins, and `capd-py export logs` writes the folder a bug
report needs. On the shared e2e-quick (1 control plane + 1 worker; no cluster of its own): the later worker comes
from a MachineDeployment of this test's (its own templates, spec.preLoadImages set), deleted at the end together
with the recorded images, so e2e-quick is left as it was found (its later users count its nodes and machines).
If that cleanup fails, e2e-quick is deleted and marked so, and the next user gets a fresh one."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.reconcile.imageload import RECORDED_ANNOTATION, normalize
from capd_py.testing.e2e import (
    Mgmt,
    WorkloadCluster,
    delete_cluster_objects,
    nodes_ready,
    run,
    wait_for,
    workload_kubectl,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  tolerations: [{{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}}]
  nodeSelector: {{kubernetes.io/hostname: {node}}}
  containers:
  - {{name: app, image: "{image}", imagePullPolicy: Never}}
"""


def _build(tag: str, label: str) -> str:
    """A small image of our own with a new ID (FROM the local echo image: nothing is pulled)."""
    run(["docker", "build", "-q", "-t", tag, "-"], input_=f"FROM capd-py/echo:latest\nLABEL e2e={label}\n")
    return run(["docker", "image", "inspect", "-f", "{{.Id}}", tag]).stdout.strip()


def _ctr_images(node: str) -> str:
    return run(["docker", "exec", node, "ctr", "--namespace=k8s.io", "images", "ls", "-q"]).stdout


def _pod_running(kc: Path, name: str) -> bool:
    pod = json.loads(workload_kubectl(kc, "get", "pod", name, "-o", "json"))
    return bool(pod["status"].get("phase") == "Running")


def _nodes(kc: Path) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
    return items


def _extra_workers(mgmt: Mgmt, cluster: str, md: str, preload: str) -> str:
    """A second MachineDeployment (1 replica) for the cluster: the default template's `-md-0` objects renamed
    to `md`, its DockerMachineTemplate with spec.preLoadImages."""
    docs = [d for d in yaml.safe_load_all(mgmt.capd("generate", "cluster", cluster).stdout)
            if d and d["metadata"]["name"] == f"{cluster}-md-0"
            and d["kind"] in ("DockerMachineTemplate", "KubeadmConfigTemplate", "MachineDeployment")]
    assert len(docs) == 3, [d["kind"] for d in docs]
    for d in docs:
        d["metadata"]["name"] = md
        if d["kind"] == "DockerMachineTemplate":
            d["spec"]["template"]["spec"]["preLoadImages"] = [preload]
        if d["kind"] == "MachineDeployment":
            d["spec"]["replicas"] = 1
            tspec = d["spec"]["template"]["spec"]
            tspec["bootstrap"]["configRef"]["name"] = tspec["infrastructureRef"]["name"] = md
    return yaml.safe_dump_all(docs)


def _remove_extra_workers(mgmt: Mgmt, qc: WorkloadCluster, md: str, pods: list[str]) -> None:
    """Leave e2e-quick as found: the MachineDeployment, its Machines, containers and Nodes gone, its templates
    deleted, the recorded images forgotten, the test's pods deleted."""
    mgmt.kubectl("delete", "machinedeployment", md, "-n", qc.namespace, "--ignore-not-found", "--wait=false")

    def gone() -> bool:
        left = [o for o in mgmt.kubectl("get", "machinedeployments,machinesets,machines,dockermachines,kubeadmconfigs",
                                        "-n", qc.namespace, "-l", f"cluster.x-k8s.io/cluster-name={qc.name}",
                                        "-o", "name").split() if o.split("/", 1)[1].startswith(md)]
        left += mgmt.kubectl("get", "machinedeployment", md, "-n", qc.namespace, "--ignore-not-found",
                             "-o", "name").split()
        names = run(["docker", "ps", "-a", "--format", "{{.Names}}", "--filter",
                     f"label=io.x-k8s.capd-py.cluster={qc.name}"]).stdout.split()
        return (not left and not [n for n in names if n.startswith(md)]
                and nodes_ready(qc.kubeconfig, qc.control_planes + qc.workers))
    wait_for(gone, 300, f"MachineDeployment {md}, its Machines, containers and Node gone", 3)
    mgmt.kubectl("delete", "dockermachinetemplate,kubeadmconfigtemplate", md, "-n", qc.namespace,
                 "--ignore-not-found")
    mgmt.kubectl("annotate", "cluster", qc.name, "-n", qc.namespace, f"{RECORDED_ANNOTATION}-")
    if pods:
        workload_kubectl(qc.kubeconfig, "delete", "pod", *pods, "--ignore-not-found", "--wait=false")


def _table(stdout: str) -> dict[tuple[str, str], str]:
    return {(cols[0], cols[1]): cols[2] for cols in (ln.split("\t") for ln in stdout.splitlines() if ln)}


def test_load_image_preload_and_export_logs(mgmt: Mgmt, quick_cluster: WorkloadCluster, tmp_path: Path) -> None:
    t_all = time.monotonic()
    hexid = secrets.token_hex(3)
    name, kc, ns = quick_cluster.name, quick_cluster.kubeconfig, quick_cluster.namespace
    md = f"{name}-md-load-{hexid}"
    loaded, preloaded = f"capd-py/echo:e2e-load-{hexid}", f"capd-py/echo:e2e-preload-{hexid}"
    third = f"capd-py/echo:e2e-third-{hexid}"
    timings: dict[str, float] = {}
    pods: list[str] = []
    ok = False
    try:
        loaded_id = _build(loaded, f"load-{hexid}")
        _build(preloaded, f"preload-{hexid}")
        assert RECORDED_ANNOTATION not in (mgmt.get("cluster", name, ns)["metadata"].get("annotations") or {}), \
            f"{name} has images recorded already: a previous user did not clean up"
        base = {n["metadata"]["name"]: n for n in _nodes(kc)}
        assert len(base) == quick_cluster.control_planes + quick_cluster.workers
        cp = next(n for n, obj in base.items() if "node-role.kubernetes.io/control-plane" in obj["metadata"]["labels"])

        # load: into every node, recorded on the Cluster
        t0 = time.monotonic()
        first = mgmt.capd("load", "image", loaded, "--cluster", name, "-n", ns)
        timings[f"load image ({len(base)} nodes)"] = time.monotonic() - t0
        assert _table(first.stdout) == {(n, loaded): "loaded" for n in base}, first.stdout + first.stderr
        for n in base:
            assert normalize(loaded) in _ctr_images(n), n
        assert mgmt.get("cluster", name, ns)["metadata"]["annotations"][RECORDED_ANNOTATION] == loaded
        pods.append("on-cp")
        workload_kubectl(kc, "apply", "-f", "-", input_=POD.format(name="on-cp", node=cp, image=loaded))
        wait_for(lambda: _pod_running(kc, "on-cp"), 180, "the pod with the loaded image Running (pull policy Never)")

        # again: same digest in the nodes, skipped
        t0 = time.monotonic()
        again = mgmt.capd("load", "image", loaded, "--cluster", name, "-n", ns)
        timings["load image again (skipped)"] = time.monotonic() - t0
        assert _table(again.stdout) == {(n, loaded): "present" for n in base}, again.stdout + again.stderr
        assert "found to be already present on all nodes" in again.stderr
        # a missing image is an error, nothing loaded
        bad = mgmt.capd("load", "image", f"capd-py/echo:absent-{hexid}", "--cluster", name, "-n", ns, check=False)
        assert bad.returncode == 1 and "not present locally" in bad.stderr

        # a new worker gets the recorded image and its spec.preLoadImages before it joins
        t0 = time.monotonic()
        mgmt.kubectl("apply", "-f", "-", input_=_extra_workers(mgmt, name, md, preloaded))
        wait_for(lambda: nodes_ready(kc, len(base) + 1), 420, "the new worker Ready")
        timings["new MachineDeployment (1 replica): worker Ready"] = time.monotonic() - t0
        worker = next(n["metadata"]["name"] for n in _nodes(kc) if n["metadata"]["name"] not in base)
        assert worker.startswith(md), worker
        have = _ctr_images(worker)
        assert normalize(loaded) in have and normalize(preloaded) in have, have
        pods.append("on-worker")
        workload_kubectl(kc, "apply", "-f", "-", input_=POD.format(name="on-worker", node=worker, image=loaded))
        wait_for(lambda: _pod_running(kc, "on-worker"), 180, "the loaded image's pod Running on the new worker")
        both = mgmt.capd("load", "image", loaded, "--cluster", name, "-n", ns)
        assert _table(both.stdout) == {(n, loaded): "present" for n in [*base, worker]}, both.stdout
        # a new image into every node at once (saved once, imported in parallel); --nodes picks one
        _build(third, f"third-{hexid}")
        t0 = time.monotonic()
        two = mgmt.capd("load", "image", third, loaded, "--cluster", name, "-n", ns)
        timings[f"load image ({len(base) + 1} nodes, 1 new + 1 present)"] = time.monotonic() - t0
        assert _table(two.stdout) == {**{(n, third): "loaded" for n in [*base, worker]},
                                      **{(n, loaded): "present" for n in [*base, worker]}}, two.stdout
        one = mgmt.capd("load", "image", third, "--cluster", name, "-n", ns, "--nodes", worker)
        assert _table(one.stdout) == {(worker, third): "present"}, one.stdout
        unknown = mgmt.capd("load", "image", third, "--cluster", name, "-n", ns, "--nodes", "nope", check=False)
        assert unknown.returncode == 1 and "unknown node(s) nope" in unknown.stderr
        assert mgmt.get("cluster", name, ns)["metadata"]["annotations"][RECORDED_ANNOTATION] == f"{loaded},{third}"
        assert run(["docker", "image", "inspect", "-f", "{{.Id}}", loaded]).stdout.strip() == loaded_id

        # export logs: one folder, its path on stdout
        t0 = time.monotonic()
        out = tmp_path / "logs"
        ex = mgmt.capd("export", "logs", name, str(out), "-n", ns, "--controllers-log", str(mgmt.log))
        timings["export logs"] = time.monotonic() - t0
        assert ex.stdout.strip() == str(out)
        for node in [*base, worker]:
            assert "kubeadm" in (out / node / "bootstrap.log").read_text(), node
            assert (out / node / "kubelet.log").stat().st_size > 0
            assert json.loads((out / node / "inspect.json").read_text())["Name"] == f"/{node}"
            assert list((out / node / "pods").glob("*/*/*.log")), f"{node}: no pod logs"
        assert list((out / cp / "pods").glob("default_on-cp_*/app/*.log"))
        assert normalize(preloaded) in (out / worker / "images.txt").read_text()
        assert "backend" in (out / f"{name}-lb" / "haproxy.cfg").read_text()
        objs = list(yaml.safe_load_all((out / "objects.yaml").read_text()))
        assert any(o["kind"] == "Cluster" and o["metadata"]["name"] == name for o in objs)
        assert {"Machine", "DockerMachine", "KubeadmControlPlane", "MachineDeployment"} <= {o["kind"] for o in objs}
        assert (out / "controllers.log").stat().st_size > 0 and "Ready" in (out / "workload.txt").read_text()
        ok = True
    finally:
        t0 = time.monotonic()
        try:
            _remove_extra_workers(mgmt, quick_cluster, md, pods)
        except BaseException:
            # e2e-quick is not as it was: the next user gets a fresh one
            quick_cluster.deleted = True
            delete_cluster_objects(mgmt, name, ns)
            if ok:
                raise
        finally:
            timings["cleanup (MachineDeployment gone)"] = time.monotonic() - t0
            run(["docker", "rmi", "-f", loaded, preloaded, third], check=False)
            timings["whole test"] = time.monotonic() - t_all
            print("\n" + "\n".join(f"{k}: {v:.1f}s" for k, v in timings.items()))
