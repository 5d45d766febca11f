"""Issue 15 items 2-3 end to end: `capd-py load image` into a real cluster (a pod runs it with
imagePullPolicy Never; a second load skips by digest), a worker added later gets the loaded image and its
DockerMachineTemplate's spec.preLoadImages before it joins, and `capd-py export logs` writes the folder a bug
report needs. Its own cluster (1 control plane, workers scaled 0 -> 1): the shared e2e-quick is left alone."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import pytest
import yaml

from capd_py.reconcile.imageload import RECORDED_ANNOTATION, normalize
from capd_py.testing.e2e import Mgmt, nodes_ready, run, wait_for, workload_kubectl

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


def _table(stdout: str) -> dict[tuple[str, str], str]:
    return {(cols[0], cols[1]): cols[2] for cols in (ln.split("\t") for ln in stdout.splitlines() if ln)}


def test_load_image_preload_and_export_logs(mgmt: Mgmt, cluster_cleanup: list[str], tmp_path: Path) -> None:
    t_all = time.monotonic()
    hexid = secrets.token_hex(3)
    name = f"e2e-load-{hexid}"
    loaded, preloaded = f"capd-py/echo:e2e-load-{hexid}", f"capd-py/echo:e2e-preload-{hexid}"
    third = f"capd-py/echo:e2e-third-{hexid}"
    timings: dict[str, float] = {}
    try:
        loaded_id = _build(loaded, f"load-{hexid}")
        _build(preloaded, f"preload-{hexid}")

        # 1 control plane, no workers yet; the workers' template pre-loads an image (upstream's field)
        docs = list(yaml.safe_load_all(mgmt.capd("generate", "cluster", name, "--worker-machine-count", "0").stdout))
        for d in docs:
            if d and d["kind"] == "DockerMachineTemplate" and d["metadata"]["name"] == f"{name}-md-0":
                d["spec"]["template"]["spec"]["preLoadImages"] = [preloaded]
        cluster_cleanup.append(name)
        t0 = time.monotonic()
        mgmt.capd("apply", "-f", "-", input_=yaml.safe_dump_all(docs))
        wait_for(lambda: mgmt.condition("cluster", name, "Available"), 600, f"cluster {name} Available", 3)
        timings["cluster Available"] = time.monotonic() - t0
        kc = tmp_path / "kubeconfig"
        mgmt.capd("get", "kubeconfig", name, "-o", str(kc))
        wait_for(lambda: nodes_ready(kc, 1), 300, "the control-plane node Ready")
        cp = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"][0]["metadata"]["name"]

        # load: into the one node, recorded on the Cluster
        t0 = time.monotonic()
        first = mgmt.capd("load", "image", loaded, "--cluster", name)
        timings["load image (1 node)"] = time.monotonic() - t0
        assert _table(first.stdout) == {(cp, loaded): "loaded"}, first.stdout + first.stderr
        assert normalize(loaded) in _ctr_images(cp)
        assert mgmt.get("cluster", name)["metadata"]["annotations"][RECORDED_ANNOTATION] == loaded
        workload_kubectl(kc, "apply", "-f", "-", input_=POD.format(name="on-cp", node=cp, image=loaded))
        wait_for(lambda: _pod_running(kc, "on-cp"), 180, "the pod with the loaded image Running (pull policy Never)")

        # again: same digest in the node, skipped
        t0 = time.monotonic()
        again = mgmt.capd("load", "image", loaded, "--cluster", name)
        timings["load image again (skipped)"] = time.monotonic() - t0
        assert _table(again.stdout) == {(cp, loaded): "present"}, again.stdout + again.stderr
        assert "found to be already present on all nodes" in again.stderr
        # a missing image is an error, nothing loaded
        bad = mgmt.capd("load", "image", f"capd-py/echo:absent-{hexid}", "--cluster", name, check=False)
        assert bad.returncode == 1 and "not present locally" in bad.stderr

        # a new worker gets the recorded image and its spec.preLoadImages before it joins
        t0 = time.monotonic()
        mgmt.kubectl("scale", "machinedeployment", f"{name}-md-0", "--replicas", "1", "-n", "default")
        wait_for(lambda: nodes_ready(kc, 2), 420, "the new worker Ready")
        timings["scale 0 -> 1 worker Ready"] = time.monotonic() - t0
        worker = next(n["metadata"]["name"] for n in json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))
                      ["items"] if n["metadata"]["name"] != cp)
        have = _ctr_images(worker)
        assert normalize(loaded) in have and normalize(preloaded) in have, have
        workload_kubectl(kc, "apply", "-f", "-", input_=POD.format(name="on-worker", node=worker, image=loaded))
        wait_for(lambda: _pod_running(kc, "on-worker"), 180, "the loaded image's pod Running on the new worker")
        both = mgmt.capd("load", "image", loaded, "--cluster", name)
        assert set(_table(both.stdout).values()) == {"present"}, both.stdout
        # a new image into both nodes at once (saved once, imported in parallel); --nodes picks one
        _build(third, f"third-{hexid}")
        t0 = time.monotonic()
        two = mgmt.capd("load", "image", third, loaded, "--cluster", name)
        timings["load image (2 nodes, 1 new + 1 present)"] = time.monotonic() - t0
        assert _table(two.stdout) == {(cp, third): "loaded", (worker, third): "loaded", (cp, loaded): "present",
                                      (worker, loaded): "present"}, two.stdout
        one = mgmt.capd("load", "image", third, "--cluster", name, "--nodes", worker)
        assert _table(one.stdout) == {(worker, third): "present"}, one.stdout
        unknown = mgmt.capd("load", "image", third, "--cluster", name, "--nodes", "nope", check=False)
        assert unknown.returncode == 1 and "unknown node(s) nope" in unknown.stderr
        assert mgmt.get("cluster", name)["metadata"]["annotations"][RECORDED_ANNOTATION] == f"{loaded},{third}"
        assert run(["docker", "image", "inspect", "-f", "{{.Id}}", loaded]).stdout.strip() == loaded_id

        # export logs: one folder, its path on stdout
        t0 = time.monotonic()
        out = tmp_path / "logs"
        ex = mgmt.capd("export", "logs", name, str(out), "--controllers-log", str(mgmt.log))
        timings["export logs"] = time.monotonic() - t0
        assert ex.stdout.strip() == str(out)
        for node in (cp, worker):
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
    finally:
        run(["docker", "rmi", "-f", loaded, preloaded, third], check=False)
        timings["whole test"] = time.monotonic() - t_all
        print("\n" + "\n".join(f"{k}: {v:.1f}s" for k, v in timings.items()))
