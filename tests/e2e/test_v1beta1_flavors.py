"""Issue 16: upstream v1.10's v1beta1 *classic* default Docker flavor (cluster-template: Cluster + KCP +
MachineDeployment + ClusterResourceSet, all `*.cluster.x-k8s.io/v1beta1`), rendered by upstream clusterctl with
upstream's docker e2e values, applied unchanged with kubectl to a management cluster made by `capd-py init`
(host mode: the CRDs serve v1beta1 through the controllers' conversion webhook), becomes an Available cluster, and
`kubectl get clusters.v1beta1.cluster.x-k8s.io -o yaml` reads it back in v1beta1.

As tests/e2e/test_upstream_templates.py: the CNI is capd-netd's manifest (upstream's kindnet would be pulled) and
DOCKER_PRELOAD_IMAGES is left unset. A management cluster of its own, shared by this module's tests (the tier's
shared one is an envtest serving v1beta2 only): an API server of its own made one by `capd-py init --kubeconfig`
(CRDs, host controllers, the same host mode as `capd-py init`'s node; issue 40: no node whose only use would be to
run an API server).

Upstream v1.10's ClusterClass flavor (`clusterclass-quick-start.yaml` + `cluster-template-development.yaml`, v1beta1)
ran here on node containers too until issue 40 moved it where upstream v1.14 runs its ClusterClass specs, onto the
inMemory backend: tests/integration/cli/test_serving_v1beta1.py applies the class unchanged (its v1beta1 patches
reach the v1beta2 objects in v1beta2's shapes, the customImage patch the DockerMachineTemplate copies,
RefVersionsUpToDate False) and makes upstream v1.10's in-memory class Available through v1beta1, the Cluster read
back in v1beta1 with `controlPlaneReady`. What needed real nodes, the class's patches (the admission file, the
customImage) on node containers with the CNI applied by hand, is upstream v1.14's quick-start class in
tests/e2e/test_upstream_templates.py (`test_upstream_v1_14_development_template_on_docker`)."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.cli.management import DEFAULT_NODE_IMAGE
from capd_py.reconcile import servingcert
from capd_py.testing.e2e import K8S_VERSION, docker_leftovers, kubectl_bin, remove_management, run, wait_for
from capd_py.testing.envtest import EnvTest, free_port

pytestmark = pytest.mark.e2e

UPSTREAM_V1BETA1 = Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "v1beta1"
TEMPLATE = UPSTREAM_V1BETA1 / "cluster-template-classic.yaml"


def capd_netd_manifest() -> str:
    cm = next(d for d in parse_documents(generate_cluster("x", env={})) if d["kind"] == "ConfigMap")
    return str(cm["data"]["resources"])


class Management:
    def __init__(self, name: str, home: Path, kubeconfig: Path):
        self.name, self.home = name, home
        self.env = {**os.environ, "CAPD_PY_HOME": str(home), "CAPD_PY_PLAIN": "1"}
        self.kubeconfig = kubeconfig
        self.clusters: list[str] = []   # workload clusters whose containers teardown removes, whatever failed

    def capd(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "capd_py.cli", *args], capture_output=True, text=True,
                           env=self.env, timeout=timeout)
        assert r.returncode == 0, f"capd-py {' '.join(args)}: {r.stderr[-3000:]}"
        return r

    def kubectl(self, *args: str) -> str:
        return run([kubectl_bin(), "--kubeconfig", str(self.kubeconfig), *args]).stdout

    def get(self, resource: str, name: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", resource, name, "-n", "default", "-o", "json"))


@pytest.fixture(scope="module")
def management(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Management]:
    if run(["docker", "image", "inspect", DEFAULT_NODE_IMAGE], check=False).returncode != 0:
        pytest.fail(f"{DEFAULT_NODE_IMAGE} is missing: run `make images`", pytrace=False)
    api = EnvTest(controller_manager=True).start()   # with garbage collection, as a real cluster's
    m = Management(f"e2e-v1b1-{secrets.token_hex(3)}", tmp_path_factory.mktemp("v1beta1") / "home",
                   api.kubeconfig_path)
    try:
        t0 = time.monotonic()
        # the API server runs on this host: it reaches the controllers' conversion webhook at 127.0.0.1
        url = servingcert.host_mode_url("127.0.0.1", free_port())
        m.capd("init", "--kubeconfig", str(api.kubeconfig_path), "--name", m.name, "--webhook-url", url)
        print(f"\ninit {time.monotonic() - t0:.0f}s")
        yield m
    finally:  # never leave a container behind, whatever failed
        for cluster in m.clusters:
            label = f"label=io.x-k8s.capd-py.cluster={cluster}"
            for listing, remove in ((["ps", "-a"], ["rm", "-fv"]), (["network", "ls"], ["network", "rm"]),
                                    (["volume", "ls"], ["volume", "rm"])):
                for item in run(["docker", *listing, "-q", "--filter", label], check=False).stdout.split():
                    run(["docker", *remove, item], check=False)
        remove_management(m.name, {**os.environ, **m.env}, timeout=180)   # its controllers
        api.stop()


def test_upstream_v1_10_v1beta1_classic_flavor_becomes_available(management: Management, clusterctl: str,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_PRELOAD_IMAGES", raising=False)
    name = f"v1b1-{secrets.token_hex(2)}"
    management.clusters.append(name)
    t0 = time.monotonic()
    env = {**os.environ, "CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "DOCKER_SERVICE_DOMAIN": "cluster.local", "DOCKER_SERVICE_CIDRS": "10.128.0.0/12",
           "DOCKER_POD_CIDRS": "192.168.0.0/16", "CNI_RESOURCES": json.dumps({"resources": capd_netd_manifest()})}
    manifest = run([clusterctl, "generate", "cluster", name, "--from", str(TEMPLATE), "--target-namespace", "default",
                    "--kubernetes-version", K8S_VERSION, "--control-plane-machine-count", "1",
                    "--worker-machine-count", "1"], env=env, timeout=120).stdout
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    assert {d["apiVersion"] for d in docs if d["kind"] != "ConfigMap"} == {
        "cluster.x-k8s.io/v1beta1", "controlplane.cluster.x-k8s.io/v1beta1", "bootstrap.cluster.x-k8s.io/v1beta1",
        "infrastructure.cluster.x-k8s.io/v1beta1", "addons.cluster.x-k8s.io/v1beta1"}
    (path := tmp_path / "v1beta1.yaml").write_text(manifest)

    t1 = time.monotonic()
    management.kubectl("apply", "-f", str(path))   # as is, in upstream's document order
    def available_now() -> bool:
        status = management.get("clusters.v1beta2.cluster.x-k8s.io", name).get("status", {})
        return any(c["type"] == "Available" and c["status"] == "True" for c in status.get("conditions", []))
    wait_for(available_now, 600, f"cluster {name} Available", 5)
    available = time.monotonic() - t1

    # read back in v1beta1: upstream v1.10's status layout, converted from what the controllers wrote
    spoke = yaml.safe_load(management.kubectl("get", "clusters.v1beta1.cluster.x-k8s.io", name, "-n", "default",
                                              "-o", "yaml"))
    assert spoke["apiVersion"] == "cluster.x-k8s.io/v1beta1"
    assert spoke["spec"]["controlPlaneRef"]["apiVersion"] == "controlplane.cluster.x-k8s.io/v1beta2"
    assert spoke["status"]["controlPlaneReady"] is True and spoke["status"]["infrastructureReady"] is True
    assert any(c["type"] == "Available" and c["status"] == "True" for c in spoke["status"]["v1beta2"]["conditions"])
    md = yaml.safe_load(management.kubectl("get", "machinedeployments.v1beta1.cluster.x-k8s.io", f"{name}-md-0",
                                           "-n", "default", "-o", "yaml"))
    assert md["spec"]["template"]["spec"]["failureDomain"] == "fd4"
    print(f"\nupstream v1.10 v1beta1 classic flavor (1 CP + 1 worker): Available {available:.0f}s after kubectl apply")

    t2 = time.monotonic()
    management.capd("delete", "cluster", name, "--kubeconfig", str(management.kubeconfig), "--wait", "5m")
    wait_for(lambda: not docker_leftovers(name), 120, "no docker leftovers")
    management.kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait")
    print(f"deleted in {time.monotonic() - t2:.0f}s; whole test {time.monotonic() - t0:.0f}s")
