"""Issue 12: upstream Cluster API release-1.13's `clusterclass-quick-start.yaml` and
`cluster-template-development.yaml` (vendored unchanged under tests/fixtures/upstream), the second rendered by
upstream clusterctl (`generate cluster --from`), applied unchanged with kubectl, become an Available cluster
with Ready nodes; `spec.topology.workers.machineDeployments[0].replicas` scales it; changing a variable a
patch uses (podSecurityStandard.enforce -> the KubeadmControlPlane's admission file) rolls the control-plane
machine; `spec.topology.version` upgrades the control plane first, then the workers (the API answering through
the load balancer throughout); the stable topology then writes nothing; deleting the Cluster leaves nothing.

As upstream's quick start tells its users, the CNI is installed by hand once the control plane is up (the
development flavor has none): capd-netd's manifest, the one capd-py's default template delivers by CRS.
The class's customImage patch names kindest/node:<version>; `make images` tags the capd-py node image so.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.testing.e2e import (
    K8S_VERSION,
    UPGRADE_TO_VERSION,
    LBProbe,
    Mgmt,
    cluster_objects_left,
    delete_cluster_objects,
    docker_leftovers,
    nodes_ready,
    run,
    wait_for,
    workload_kubectl,
)
from capd_py.testing.quiet import quiet_versions_sync

pytestmark = pytest.mark.e2e

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
NAME = "e2e-topology"


def _machines(mgmt: Mgmt) -> list[dict[str, Any]]:
    return list(json.loads(mgmt.kubectl("get", "machines", "-n", "default", "-l",
                                        f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "json"))["items"])


def _versions(mgmt: Mgmt) -> dict[str, str]:
    """name -> resourceVersion of every Cluster API object of the cluster (and the Cluster)."""
    out = {}
    for kind in ("cluster", "kubeadmcontrolplanes", "machinedeployments", "machinesets", "machines",
                 "dockermachines", "dockerclusters", "kubeadmconfigs", "dockermachinetemplates",
                 "kubeadmconfigtemplates", "machinehealthchecks"):
        items = json.loads(mgmt.kubectl("get", kind, "-n", "default", "-l", f"cluster.x-k8s.io/cluster-name={NAME}",
                                        "-o", "json"))["items"]
        out.update({f"{kind}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in items})
    c = mgmt.get("cluster", NAME)
    out["cluster"] = c["metadata"]["resourceVersion"]
    return out


def test_upstream_quick_start_class_and_development_cluster(clusterctl: str, mgmt: Mgmt, cluster_cleanup: list[str],
                                                            tmp_path: Path) -> None:
    t0 = time.monotonic()
    mgmt.kubectl("apply", "-f", str(UPSTREAM / "docker-clusterclass-quick-start.yaml"))
    wait_for(lambda: mgmt.condition("clusterclass", "quick-start", "VariablesReady"), 60, "ClusterClass ready")
    env = {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
           "NAMESPACE": "default"}
    manifest = run([clusterctl, "generate", "cluster", NAME, "--from",
                    str(UPSTREAM / "docker-cluster-template-development.yaml"), "--target-namespace", "default",
                    "--kubernetes-version", K8S_VERSION, "--control-plane-machine-count", "1",
                    "--worker-machine-count", "1"], env=env, timeout=120).stdout
    assert [d["kind"] for d in yaml.safe_load_all(manifest) if d] == ["Cluster"]
    (path := tmp_path / "cluster.yaml").write_text(manifest)
    cluster_cleanup.append(NAME)
    mgmt.kubectl("apply", "-f", str(path))

    # the control plane comes up; then, as upstream's quick start says, the user installs a CNI
    wait_for(lambda: mgmt.condition("cluster", NAME, "ControlPlaneInitialized"), 300, "control plane initialized", 3)
    kc = tmp_path / f"{NAME}.kubeconfig"
    mgmt.capd("get", "kubeconfig", NAME, "-o", str(kc))
    cni = next(d for d in parse_documents(generate_cluster("x", env={})) if d["kind"] == "ConfigMap")
    workload_kubectl(kc, "apply", "-f", "-", input_=str(cni["data"]["resources"]))
    wait_for(lambda: mgmt.condition("cluster", NAME, "Available"), 300, f"cluster {NAME} Available", 3)
    wait_for(lambda: nodes_ready(kc, 2), 180, "2 Ready nodes")
    available = time.monotonic() - t0
    assert mgmt.condition("cluster", NAME, "TopologyReconciled")

    # what the topology made: objects from the class, patched
    cluster = mgmt.get("cluster", NAME)
    kcp = mgmt.get("kubeadmcontrolplane", cluster["spec"]["controlPlaneRef"]["name"])
    assert kcp["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"] == ""
    files = kcp["spec"]["kubeadmConfigSpec"]["files"]
    assert 'enforce: "baseline"' in files[0]["content"]
    for m in _machines(mgmt):
        c = mgmt.get("dockermachine", m["spec"]["infrastructureRef"]["name"])["spec"]["providerID"].rsplit("/", 1)[-1]
        assert run(["docker", "inspect", "-f", "{{.Config.Image}}", c]).stdout.strip() == f"kindest/node:{K8S_VERSION}"
    print(f"\ntopology cluster (quick-start, 1 CP + 1 worker): Available with Ready nodes after {available:.0f}s")

    # scale through the topology
    t1 = time.monotonic()
    mgmt.kubectl("patch", "cluster", NAME, "--type", "json", "-p",
                 json.dumps([{"op": "replace", "path": "/spec/topology/workers/machineDeployments/0/replicas",
                              "value": 2}]))
    wait_for(lambda: nodes_ready(kc, 3), 240, "3 Ready nodes")
    print(f"scaled md-0 1 -> 2 in {time.monotonic() - t1:.0f}s")

    # a variable a patch uses: the control plane's admission configuration changes -> its machine rolls
    t2 = time.monotonic()
    old_cp = {m["metadata"]["name"] for m in _machines(mgmt)
              if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]}
    variables = cluster["spec"]["topology"]["variables"]
    i = next(n for n, v in enumerate(variables) if v["name"] == "podSecurityStandard")
    mgmt.kubectl("patch", "cluster", NAME, "--type", "json", "-p", json.dumps(
        [{"op": "replace", "path": f"/spec/topology/variables/{i}/value/enforce", "value": "restricted"}]))

    def rolled() -> bool:
        cps = {m["metadata"]["name"] for m in _machines(mgmt)
               if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]}
        return bool(cps) and not (cps & old_cp) and mgmt.condition("cluster", NAME, "Available") \
            and nodes_ready(kc, 3)
    wait_for(rolled, 420, "control-plane machine replaced, cluster Available", 5)
    kcp = mgmt.get("kubeadmcontrolplane", kcp["metadata"]["name"])
    assert 'enforce: "restricted"' in kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
    print(f"variable change rolled the control plane in {time.monotonic() - t2:.0f}s")

    # upgrade through the topology: the control plane first, the workers once it runs the new version; the
    # class's coreDNSImageTag variable gives CoreDNS the new version's tag (kubeadm's for v1.35)
    t3 = time.monotonic()
    j = next(n for n, v in enumerate(variables) if v["name"] == "coreDNSImageTag")
    samples: list[tuple[str, str, str]] = []
    with LBProbe(kc) as api:
        mgmt.kubectl("patch", "cluster", NAME, "--type", "json", "-p", json.dumps([
            {"op": "replace", "path": "/spec/topology/version", "value": UPGRADE_TO_VERSION},
            {"op": "replace", "path": f"/spec/topology/variables/{j}/value", "value": "v1.13.1"}]))

        def upgraded() -> bool:
            k = mgmt.get("kubeadmcontrolplane", kcp["metadata"]["name"])
            md = json.loads(mgmt.kubectl("get", "machinedeployments", "-n", "default", "-l",
                                         f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "json"))["items"][0]
            samples.append((k["spec"]["version"], (k.get("status") or {}).get("version", ""),
                            md["spec"]["template"]["spec"]["version"]))
            nodes = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
            return samples[-1] == (UPGRADE_TO_VERSION,) * 3 and nodes_ready(kc, 3) and all(
                n["status"]["nodeInfo"]["kubeletVersion"] == UPGRADE_TO_VERSION for n in nodes) \
                and mgmt.condition("cluster", NAME, "TopologyReconciled")
        wait_for(upgraded, 900, f"every node at {UPGRADE_TO_VERSION} through spec.topology.version", 3)
    for _kcp_spec, kcp_status, md_version in samples:
        if md_version == UPGRADE_TO_VERSION:
            assert kcp_status == UPGRADE_TO_VERSION, f"workers moved before the control plane: {samples}"
    assert any(s[2] != UPGRADE_TO_VERSION for s in samples), samples
    assert not api.failures, f"API unreachable through the LB during the topology upgrade: {api.failures}"
    print(f"topology upgrade {K8S_VERSION} -> {UPGRADE_TO_VERSION} (1 CP + 2 workers) in "
          f"{time.monotonic() - t3:.0f}s; API probes ok={api.ok} failed=0")

    # stable: once the controllers wrote nothing for 20 s (their write counter), nothing of it changed in those 20 s
    wait_for(lambda: mgmt.condition("cluster", NAME, "TopologyReconciled"), 60, "TopologyReconciled")
    assert mgmt.activity is not None
    before, after = quiet_versions_sync(mgmt.activity, lambda: _versions(mgmt), window=20, timeout=300,
                                        what="the topology cluster converged")
    changed = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    assert not changed, f"a stable topology cluster wrote: {changed}"

    t4 = time.monotonic()
    mgmt.capd("delete", "cluster", NAME, "--wait", "--timeout", "300")
    wait_for(lambda: not docker_leftovers(NAME), 120, "no docker leftovers")
    wait_for(lambda: not cluster_objects_left(mgmt, NAME), 60, "no Cluster API objects of the cluster")
    # the per-cluster template copies and health checks are the Cluster's: collected with it
    wait_for(lambda: not mgmt.kubectl("get", "dockermachinetemplates,kubeadmconfigtemplates,machinehealthchecks",
                                      "-n", "default", "-l", f"cluster.x-k8s.io/cluster-name={NAME}",
                                      "-o", "name").strip(), 60, "template copies collected")
    print(f"deleted in {time.monotonic() - t4:.0f}s; whole test {time.monotonic() - t0:.0f}s")
    delete_cluster_objects(mgmt, NAME)
