"""Issue 12, moved to the inMemory backend by issue 40 (as upstream v1.14 runs its ClusterClass specs,
clusterclass_changes / clusterclass_rollout, on its in-memory flavors): upstream Cluster API release-1.13's
`clusterclass-quick-start.yaml` and `cluster-template-development.yaml` (vendored unchanged under
tests/fixtures/upstream), the Cluster rendered by upstream clusterctl (`generate cluster --from`) and applied
unchanged with kubectl, become an Available topology cluster with Ready Nodes;
`spec.topology.workers.machineDeployments[0].replicas` scales it; changing a variable a patch uses
(podSecurityStandard.enforce -> the KubeadmControlPlane's admission file) rolls the control-plane machine;
`spec.topology.version` (with the class's coreDNSImageTag variable) upgrades the control plane first, then the
workers, the workload API answering at its endpoint throughout; the stable topology then writes nothing (the
controllers' write counter, no fixed sleep); deleting the Cluster leaves nothing, the topology's template copies
collected.

What runs here is the controllers' logic: the e2e tier's management plane (a real kube-apiserver, `capd-py
controllers` as its own process) with the class's infrastructure templates swapped for in-memory ones (below),
so every machine is an in-memory VM + Node served over HTTPS at the cluster's endpoint (docs/in-memory.md), the
real kubectl reading it. One cluster's whole story takes seconds instead of the ~200 s it took on node
containers (measured in docs/topology.md).

The class: upstream's quick-start as is, except its DockerClusterTemplate and two DockerMachineTemplates, which
become a DevClusterTemplate / DevMachineTemplates of the same names with `backend.inMemory` (VMs 1 s so that the
upgrade order can be sampled, the rest at once), the refs naming them, and its `customImage` patch (a docker node
image, for DockerMachineTemplates only) left out. What needed real nodes and where it is now:
- the class's customImage patch putting kindest/node:<version> on every node container, the CNI installed by
  hand, Available with Ready nodes on docker, deletion leaving no docker object: tests/e2e/test_upstream_templates.py
  (`test_upstream_v1_14_development_template_on_docker`, upstream v1.14's quick-start class, the same patches);
- the customImage patch following `spec.topology.version` on every new machine (the containers of the upgraded
  machines run kindest/node:<new version>): tests/integration/controllers/test_dev_kinds_operator.py
  (`test_upstream_v1_14_development_template_is_available`, fake runtime);
- kubelets actually running the new version after kubeadm's upgrade, CoreDNS at the new tag, the API answering
  through the haproxy load balancer while control-plane nodes are replaced: tests/e2e/test_upgrade.py (the same
  KubeadmControlPlane then MachineDeployment upgrade the topology drives, on node containers).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.testing.e2e import (
    K8S_VERSION,
    UPGRADE_TO_VERSION,
    LBProbe,
    Mgmt,
    cluster_objects_left,
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
COREDNS_V1_35 = "v1.13.1"  # kubeadm's CoreDNS for v1.35 (tests/e2e/test_upgrade.py COREDNS_TAG)
INFRA = "infrastructure.cluster.x-k8s.io/v1beta2"
# swapped for in-memory templates of the same names (the class's refs follow)
IN_MEMORY_KINDS = {"DockerClusterTemplate": "DevClusterTemplate", "DockerMachineTemplate": "DevMachineTemplate"}
IN_MEMORY_MACHINE = {"vm": {"provisioning": {"startupDuration": "1s"}},
                     **{part: {"provisioning": {"startupDuration": "0s"}} for part in ("node", "etcd", "apiServer")}}


def in_memory_quick_start() -> list[dict[str, Any]]:
    """Upstream v1.13's quick-start ClusterClass and templates with the in-memory infrastructure (module docstring)."""
    docs = [d for d in yaml.safe_load_all((UPSTREAM / "docker-clusterclass-quick-start.yaml").read_text()) if d]
    out = []
    for d in docs:
        kind = d["kind"]
        if kind == "ClusterClass":
            spec = d["spec"]
            refs = [spec["infrastructure"]["templateRef"], spec["controlPlane"]["machineInfrastructure"]["templateRef"],
                    *(md["infrastructure"]["templateRef"] for md in spec["workers"]["machineDeployments"])]
            for ref in refs:
                ref["kind"] = IN_MEMORY_KINDS[ref["kind"]]
            spec["patches"] = [p for p in spec["patches"] if p["name"] != "customImage"]
        elif kind == "DockerClusterTemplate":
            d = {"apiVersion": INFRA, "kind": "DevClusterTemplate", "metadata": d["metadata"],
                 "spec": {"template": {"spec": {"backend": {"inMemory": {}}}}}}
        elif kind == "DockerMachineTemplate":
            d = {"apiVersion": INFRA, "kind": "DevMachineTemplate", "metadata": d["metadata"],
                 "spec": {"template": {"spec": {"backend": {"inMemory": IN_MEMORY_MACHINE}}}}}
        out.append(d)
    return out


def _machines(mgmt: Mgmt, ns: str) -> list[dict[str, Any]]:
    return list(json.loads(mgmt.kubectl("get", "machines", "-n", ns, "-l",
                                        f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "json"))["items"])


def _control_planes(mgmt: Mgmt, ns: str) -> set[str]:
    return {m["metadata"]["name"] for m in _machines(mgmt, ns)
            if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]}


def _versions(mgmt: Mgmt, ns: str) -> dict[str, str]:
    """kind/name -> resourceVersion of every Cluster API object of the cluster (and the Cluster)."""
    kinds = ("kubeadmcontrolplanes", "machinedeployments", "machinesets", "machines", "devmachines", "devclusters",
             "kubeadmconfigs", "devmachinetemplates", "kubeadmconfigtemplates", "machinehealthchecks")
    items = json.loads(mgmt.kubectl("get", ",".join(kinds), "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={NAME}",
                                    "-o", "json"))["items"]
    out = {f"{i['kind']}/{i['metadata']['name']}": i["metadata"]["resourceVersion"] for i in items}
    out["cluster"] = mgmt.get("cluster", NAME, ns)["metadata"]["resourceVersion"]
    return out


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def test_upstream_quick_start_class_and_development_cluster(clusterctl: str, mgmt: Mgmt, own_namespace: str,
                                                            tmp_path: Path) -> None:
    ns = own_namespace
    t0 = time.monotonic()
    (cls := tmp_path / "class.yaml").write_text(yaml.safe_dump_all(in_memory_quick_start()))
    mgmt.kubectl("apply", "-n", ns, "-f", str(cls))
    wait_for(lambda: mgmt.condition("clusterclass", "quick-start", "VariablesReady", ns), 60, "ClusterClass ready", 0.5)
    env = {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "NAMESPACE": ns}
    manifest = run([clusterctl, "generate", "cluster", NAME, "--from",
                    str(UPSTREAM / "docker-cluster-template-development.yaml"), "--target-namespace", ns,
                    "--kubernetes-version", K8S_VERSION, "--control-plane-machine-count", "1",
                    "--worker-machine-count", "1"], env=env, timeout=120).stdout
    assert [d["kind"] for d in yaml.safe_load_all(manifest) if d] == ["Cluster"]
    (path := tmp_path / "cluster.yaml").write_text(manifest)
    t_apply = time.monotonic()
    mgmt.kubectl("apply", "-f", str(path))
    wait_for(lambda: mgmt.condition("cluster", NAME, "Available", ns), 120, f"cluster {NAME} Available", 0.5)
    kc = tmp_path / f"{NAME}.kubeconfig"
    mgmt.capd("get", "kubeconfig", NAME, "-n", ns, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, 2), 60, "2 Ready nodes", 0.5)
    available = time.monotonic() - t_apply
    assert mgmt.condition("cluster", NAME, "TopologyReconciled", ns)

    # what the topology made: objects from the class, patched; in-memory machines, no container
    cluster = mgmt.get("cluster", NAME, ns)
    kcp = mgmt.get("kubeadmcontrolplane", cluster["spec"]["controlPlaneRef"]["name"], ns)
    assert kcp["metadata"]["labels"]["topology.cluster.x-k8s.io/owned"] == ""
    assert 'enforce: "baseline"' in kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
    for m in _machines(mgmt, ns):
        dm = mgmt.get("devmachine", m["spec"]["infrastructureRef"]["name"], ns)
        assert "inMemory" in dm["spec"]["backend"] and dm["spec"]["providerID"] == f"in-memory://{dm['metadata']['name']}"
    dc = mgmt.get("devcluster", cluster["spec"]["infrastructureRef"]["name"], ns)
    port = int(dc["spec"]["controlPlaneEndpoint"]["port"])
    assert cluster["spec"]["controlPlaneEndpoint"] == dc["spec"]["controlPlaneEndpoint"]
    print(f"\ntopology cluster (quick-start, 1 CP + 1 worker, in-memory): Available with Ready nodes "
          f"{available:.1f}s after apply")

    # scale through the topology
    t1 = time.monotonic()
    mgmt.kubectl("patch", "cluster", NAME, "-n", ns, "--type", "json", "-p",
                 json.dumps([{"op": "replace", "path": "/spec/topology/workers/machineDeployments/0/replicas",
                              "value": 2}]))
    wait_for(lambda: nodes_ready(kc, 3), 60, "3 Ready nodes", 0.5)
    print(f"scaled md-0 1 -> 2 in {time.monotonic() - t1:.1f}s")

    # a variable a patch uses: the control plane's admission configuration changes -> its machine rolls
    t2 = time.monotonic()
    old_cp = _control_planes(mgmt, ns)
    variables = cluster["spec"]["topology"]["variables"]
    i = next(n for n, v in enumerate(variables) if v["name"] == "podSecurityStandard")
    mgmt.kubectl("patch", "cluster", NAME, "-n", ns, "--type", "json", "-p", json.dumps(
        [{"op": "replace", "path": f"/spec/topology/variables/{i}/value/enforce", "value": "restricted"}]))

    def rolled() -> bool:
        cps = _control_planes(mgmt, ns)
        return bool(cps) and not (cps & old_cp) and mgmt.condition("cluster", NAME, "Available", ns) \
            and nodes_ready(kc, 3)
    wait_for(rolled, 120, "control-plane machine replaced, cluster Available", 0.5)
    kcp = mgmt.get("kubeadmcontrolplane", kcp["metadata"]["name"], ns)
    assert 'enforce: "restricted"' in kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
    print(f"variable change rolled the control plane in {time.monotonic() - t2:.1f}s")

    # upgrade through the topology: the control plane first, the workers once it runs the new version; the
    # class's coreDNSImageTag variable gives the control plane CoreDNS's tag for the new version
    t3 = time.monotonic()
    j = next(n for n, v in enumerate(variables) if v["name"] == "coreDNSImageTag")
    samples: list[tuple[str, str, str]] = []
    with LBProbe(kc) as api:
        mgmt.kubectl("patch", "cluster", NAME, "-n", ns, "--type", "json", "-p", json.dumps([
            {"op": "replace", "path": "/spec/topology/version", "value": UPGRADE_TO_VERSION},
            {"op": "replace", "path": f"/spec/topology/variables/{j}/value", "value": COREDNS_V1_35}]))

        def upgraded() -> bool:
            got = json.loads(mgmt.kubectl("get", "kubeadmcontrolplanes,machinedeployments", "-n", ns, "-l",
                                          f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "json"))["items"]
            k = next(o for o in got if o["kind"] == "KubeadmControlPlane")
            md = next(o for o in got if o["kind"] == "MachineDeployment")
            samples.append((k["spec"]["version"], (k.get("status") or {}).get("version", ""),
                            md["spec"]["template"]["spec"]["version"]))
            if samples[-1] != (UPGRADE_TO_VERSION,) * 3:
                return False
            nodes = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
            return nodes_ready(kc, 3) and all(n["status"]["nodeInfo"]["kubeletVersion"] == UPGRADE_TO_VERSION
                                              for n in nodes) \
                and mgmt.condition("cluster", NAME, "TopologyReconciled", ns)
        wait_for(upgraded, 300, f"every node at {UPGRADE_TO_VERSION} through spec.topology.version", 0.2)
    for _kcp_spec, kcp_status, md_version in samples:
        if md_version == UPGRADE_TO_VERSION:
            assert kcp_status == UPGRADE_TO_VERSION, f"workers moved before the control plane: {samples}"
    assert any(s[2] != UPGRADE_TO_VERSION for s in samples), samples
    assert api.ok > 0 and not api.failures, \
        f"the workload API unreachable at its endpoint during the topology upgrade: {api.failures}"
    kcp = mgmt.get("kubeadmcontrolplane", kcp["metadata"]["name"], ns)
    assert kcp["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["dns"]["imageTag"] == COREDNS_V1_35
    version = json.loads(workload_kubectl(kc, "version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == UPGRADE_TO_VERSION
    print(f"topology upgrade {K8S_VERSION} -> {UPGRADE_TO_VERSION} (1 CP + 2 workers) in "
          f"{time.monotonic() - t3:.1f}s ({len(samples)} samples); API probes ok={api.ok} failed=0")

    # stable: once the controllers wrote nothing in this namespace for 12 s (their write counter: longer than the
    # 5 s poll and the 10 s Node-watch poll), nothing of the cluster changed in those 12 s
    wait_for(lambda: mgmt.condition("cluster", NAME, "TopologyReconciled", ns), 60, "TopologyReconciled", 0.5)
    assert mgmt.activity is not None
    before, after = quiet_versions_sync(mgmt.activity, lambda: _versions(mgmt, ns), window=12, timeout=120,
                                        what="the topology cluster converged", namespace=ns, interval=0.5)
    changed = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    assert not changed, f"a stable topology cluster wrote: {changed}"

    t4 = time.monotonic()
    mgmt.capd("delete", "cluster", NAME, "-n", ns, "--wait", "--timeout", "120")
    wait_for(lambda: not cluster_objects_left(mgmt, NAME, ns), 60, "no Cluster API objects of the cluster", 0.5)
    # the per-cluster template copies and health checks are the Cluster's: collected with it
    wait_for(lambda: not mgmt.kubectl("get", "devmachinetemplates,kubeadmconfigtemplates,machinehealthchecks",
                                      "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={NAME}",
                                      "-o", "name").strip(), 60, "template copies collected", 0.5)
    assert _refused(port), "the in-memory cluster's endpoint still listens after its deletion"
    assert docker_leftovers(NAME) == {}  # it never had any
    print(f"deleted in {time.monotonic() - t4:.1f}s; whole test {time.monotonic() - t0:.1f}s")
