"""Issue 11 item 5(c): upstream Cluster API release-1.13's default Docker e2e flavor (`cluster-template`,
vendored rendered by hack/render-upstream-templates.sh as tests/fixtures/upstream/e2e-cluster-template.yaml:
KubeadmControlPlane + MachineDeployment + a ClusterResourceSet whose ConfigMap carries `${CNI_RESOURCES}`)
rendered by upstream clusterctl (`generate cluster --from`), applied unchanged with kubectl, yields an Available
cluster with 2 Ready nodes; deleting it leaves nothing.

Only the variables are ours; the objects are upstream's as rendered. The image-pull-free parts only: of the
values upstream's test/e2e/config/docker.yaml gives, two would need a registry and are replaced:
- CNI_RESOURCES: upstream's is kindnet (image docker.io/kindest/kindnetd, pulled); here it is capd-netd's
  manifest, the one capd-py's default template embeds (its image is preloaded in the node image,
  `imagePullPolicy: Never`).
- DOCKER_PRELOAD_IMAGES: upstream's lists kindest/kindnetd (pulled onto the host, then loaded into the nodes);
  here it is unset, so the template's own default `[]` applies (capd-py accepts preLoadImages and does not act
  on it, docs/docker-provider.md).
Nothing else is left out: the DockerMachineTemplates have no customImage, so capd-py runs its local node image
capd-py/node:<version> (upstream CAPD would use kindest/node:<version>); their extraMounts (the host's docker
socket) and the MachineDeployment's failureDomain fd4 are kept and checked.

What it found: upstream's `-md-0` KubeadmConfigTemplate has no spec, and the MachineSet's clone was sent with
`spec: {}`, which KubeadmConfig's schema rejects (minProperties: 1), so the worker never came (fixed in
capd_py/reconcile/machineset.py). The templates stayed after the Cluster's deletion: upstream's
MachineDeployment and KCP controllers make the Cluster their owner, so the garbage collector removes them;
capd-py's MachineDeployment controller does now, its KCP controller not yet (the control plane's
DockerMachineTemplate stays; the test removes it with `kubectl delete -f`).

Issue 30 item 3: upstream Cluster API v1.14.0's own Docker provider templates with the Dev* kinds
(test/infrastructure/docker/templates/ at tag v1.14.0, vendored unchanged in tests/fixtures/upstream-v1.14),
rendered by upstream clusterctl v1.14 (v1.14.2, the e2e suite's release: `make e2e-suite` builds it), applied
unchanged:
- `cluster-template-development` (a Cluster with `topology.classRef: quick-start`) with its ClusterClass
  `clusterclass-quick-start` (DevClusterTemplate / DevMachineTemplate with `backend.docker`; its customImage patch
  names kindest/node:<version>, which `make images` tags on capd-py's node image; `clusterctl generate yaml --from`):
  Available with 2 Ready nodes on node containers, then deleted leaving nothing. The flavor has no CNI: as
  upstream's quick start tells its users (who install Calico, whose images would be pulled), the CNI is installed
  by hand once the control plane is up; here capd-netd's manifest, the one capd-py's default template embeds.
- `cluster-template-development-mp`, the same with the worker a MachinePool (`workers.machinePools`, the class's
  DevMachinePoolTemplate, its customImage patch for machinePoolClass): Available, the pool's node Ready, deleted
  leaving nothing.
- `cluster-template-in-memory` with `clusterclass-in-memory` (`backend.inMemory`; VMs 10 s, Node / etcd / API
  server 2 s, 20 % jitter, as upstream wrote them): Available with no container, deleted leaving nothing.
Each in a namespace of its own (`--target-namespace`): the v1.13 quick-start class of test_topology.py has the
same name.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.testing import envsubst
from capd_py.testing.e2e import (
    K8S_VERSION,
    Mgmt,
    cluster_objects_left,
    delete_cluster_objects,
    docker_leftovers,
    nodes_ready,
    run,
    upstream_e2e_variables,
    wait_for,
    workload_kubectl,
)

pytestmark = pytest.mark.e2e

TEMPLATE = Path(__file__).resolve().parents[1] / "fixtures" / "upstream" / "e2e-cluster-template.yaml"
NAME = "e2e-upstream"
V1_14 = Path(__file__).resolve().parents[1] / "fixtures" / "upstream-v1.14"


def capd_netd_manifest() -> str:
    """The CNI manifest capd-py's default template delivers through its ClusterResourceSet."""
    cm = next(d for d in parse_documents(generate_cluster("x", env={})) if d["kind"] == "ConfigMap")
    return str(cm["data"]["resources"])


def render(clusterctl: str, tmp: Path) -> str:
    """`clusterctl generate cluster --from` with upstream's docker e2e values, minus the two that pull images."""
    env = upstream_e2e_variables(tmp, capd_netd_manifest())
    return run([clusterctl, "generate", "cluster", NAME, "--from", str(TEMPLATE), "--target-namespace", "default",
                "--kubernetes-version", K8S_VERSION, "--control-plane-machine-count", "1",
                "--worker-machine-count", "1"], env=env, timeout=120).stdout


def test_upstream_default_e2e_flavor_becomes_available(clusterctl: str, mgmt: Mgmt, cluster_cleanup: list[str],
                                                       tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DOCKER_PRELOAD_IMAGES", raising=False)
    manifest = render(clusterctl, tmp_path)
    docs = [d for d in yaml.safe_load_all(manifest) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["Cluster", "ClusterResourceSet", "ConfigMap", "DockerCluster", "DockerMachineTemplate",
                     "DockerMachineTemplate", "KubeadmConfigTemplate", "KubeadmControlPlane", "MachineDeployment"]
    assert "${" not in manifest
    (path := tmp_path / "upstream.yaml").write_text(manifest)

    t0 = time.monotonic()
    cluster_cleanup.append(NAME)
    mgmt.kubectl("apply", "-f", str(path))   # as is, in upstream's document order
    wait_for(lambda: mgmt.condition("cluster", NAME, "Available"), 600, f"cluster {NAME} Available", 5)
    available = time.monotonic() - t0
    kc = tmp_path / f"{NAME}.kubeconfig"
    mgmt.capd("get", "kubeconfig", NAME, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, 2), 180, "2 Ready nodes")
    ready = time.monotonic() - t0

    # upstream's settings took effect: the worker's failure domain, the docker socket mount on every node
    machines = json.loads(mgmt.kubectl("get", "machines", "-n", "default", "-l",
                                       f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "json"))["items"]
    assert len(machines) == 2
    worker = next(m for m in machines if "cluster.x-k8s.io/deployment-name" in m["metadata"]["labels"])
    assert worker["spec"].get("failureDomain") == "fd4"
    for m in machines:
        c = mgmt.get("dockermachine", m["spec"]["infrastructureRef"]["name"])["spec"]["providerID"].rsplit("/", 1)[-1]
        mounts = json.loads(run(["docker", "inspect", "-f", "{{json .Mounts}}", c]).stdout)
        assert any(x.get("Destination") == "/var/run/docker.sock" for x in mounts), (c, mounts)
        image = run(["docker", "inspect", "-f", "{{.Config.Image}}", c]).stdout.strip()
        assert image == f"capd-py/node:{K8S_VERSION}"
    binding = mgmt.get("clusterresourcesetbinding", NAME)
    assert [r["applied"] for b in binding["spec"]["bindings"] for r in b["resources"]] == [True]
    print(f"\nupstream e2e-cluster-template (1 CP + 1 worker): Available after {available:.0f}s, "
          f"2 Ready nodes after {ready:.0f}s")

    t1 = time.monotonic()
    mgmt.capd("delete", "cluster", NAME, "--wait", "--timeout", "300")
    wait_for(lambda: not docker_leftovers(NAME), 120, "no docker leftovers")
    wait_for(lambda: not cluster_objects_left(mgmt, NAME), 60, "no Cluster API objects of the cluster")
    deleted = time.monotonic() - t1
    # the MachineDeployment's templates are the Cluster's (as upstream): the garbage collector removes them
    def left() -> list[str]:
        return mgmt.kubectl("get", "-f", str(path), "--ignore-not-found", "-o", "name").split()
    wait_for(lambda: not [x for x in left() if x.endswith(f"/{NAME}-md-0")], 60,
             "the MachineDeployment's templates collected with their Cluster")
    # what outlives the Cluster: as upstream, the ClusterResourceSet and its ConfigMap; unlike upstream, the
    # control plane's DockerMachineTemplate (capd-py's KCP does not make the Cluster its owner yet).
    # `kubectl delete -f` of the same file removes them
    print(f"deleted in {deleted:.0f}s; left after the Cluster's deletion: {left()}")
    mgmt.kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait")
    assert not mgmt.kubectl("get", "-f", str(path), "--ignore-not-found", "-o", "name").strip()
    delete_cluster_objects(mgmt, NAME)
    assert not docker_leftovers(NAME)
    print(f"whole test {time.monotonic() - t0:.0f}s")


def clusterctl_env(tmp: Path) -> dict[str, str]:
    return {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp / "xdg")}


def render_v1_14(clusterctl: str, tmp: Path, name: str, namespace: str, template: str, clusterclass: str) -> Path:
    """upstream v1.14's ClusterClass (`generate yaml --from`) and cluster template (`generate cluster --from`,
    1 control plane + 1 worker), as clusterctl v1.14 renders them, in one file: class first."""
    env = clusterctl_env(tmp)
    version = run([clusterctl, "version", "-o", "short"], env=env).stdout.strip()
    # the release it was built from (the cache folder it is in: tests/e2e/conftest.py), a v1.14 one
    assert version == Path(clusterctl).parent.name and version.startswith("v1.14."), version
    klass = run([clusterctl, "generate", "yaml", "--from", str(V1_14 / clusterclass)], env=env, timeout=120).stdout
    cluster = run([clusterctl, "generate", "cluster", name, "--from", str(V1_14 / template),
                   "--target-namespace", namespace, "--kubernetes-version", K8S_VERSION,
                   "--control-plane-machine-count", "1", "--worker-machine-count", "1"], env=env, timeout=120).stdout
    manifest = f"{klass.rstrip()}\n---\n{cluster}"
    assert "${" not in manifest
    (path := tmp / f"{name}.yaml").write_text(manifest)
    return path


def _kinds(path: Path) -> list[str]:
    return sorted(d["kind"] for d in yaml.safe_load_all(path.read_text()) if d)


def _class_objects_left(mgmt: Mgmt, path: Path, ns: str) -> list[str]:
    return mgmt.kubectl("get", "-f", str(path), "-n", ns, "--ignore-not-found", "-o", "name").split()


def _topology_copies(mgmt: Mgmt, name: str, ns: str) -> str:
    """The per-cluster copies of the class's templates and its health checks (the Cluster's: collected with it)."""
    kinds = "devmachinetemplates,devmachinepooltemplates,kubeadmconfigtemplates,machinehealthchecks"
    return mgmt.kubectl("get", kinds, "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={name}", "-o", "name").strip()


def _machines(mgmt: Mgmt, name: str, ns: str) -> list[dict[str, Any]]:
    return list(json.loads(mgmt.kubectl("get", "machines", "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={name}",
                                        "-o", "json"))["items"])


@pytest.mark.parametrize(("template", "name"), [("cluster-template-development.yaml", "e2e-up14-dev"),
                                              ("cluster-template-development-mp.yaml", "e2e-up14-mp")],
                         ids=["machinedeployment", "machinepool"])
@pytest.mark.late_build("e2e-suite")  # clusterctl v1.14 builds beside the tests (tests/e2e/conftest.py)
def test_upstream_v1_14_development_template_on_docker(clusterctl_v1_14: str, mgmt: Mgmt, own_namespace: str,
                                                       tmp_path: Path, template: str, name: str) -> None:
    """`cluster-template-development` (the worker a MachineDeployment) and `cluster-template-development-mp` (the
    worker a MachinePool of the class's DevMachinePoolTemplate), both with the quick-start class."""
    ns = own_namespace
    path = render_v1_14(clusterctl_v1_14, tmp_path, name, ns, template, "clusterclass-quick-start.yaml")
    assert _kinds(path) == ["Cluster", "ClusterClass", "DevClusterTemplate", "DevMachinePoolTemplate",
                            "DevMachineTemplate", "DevMachineTemplate", "KubeadmConfigTemplate",
                            "KubeadmControlPlaneTemplate"]

    t0 = time.monotonic()
    mgmt.kubectl("apply", "-n", ns, "-f", str(path))   # as is, class first
    # the control plane comes up; then, as upstream's quick start says, the user installs a CNI (ours, not Calico)
    wait_for(lambda: mgmt.condition("cluster", name, "ControlPlaneInitialized", ns), 420, "control plane initialized",
             3)
    kc = tmp_path / f"{name}.kubeconfig"
    mgmt.capd("get", "kubeconfig", name, "-n", ns, "-o", str(kc))
    workload_kubectl(kc, "apply", "-f", "-", input_=capd_netd_manifest())
    wait_for(lambda: mgmt.condition("cluster", name, "Available", ns), 420, f"cluster {name} Available", 3)
    available = time.monotonic() - t0
    wait_for(lambda: nodes_ready(kc, 2), 180, "2 Ready nodes")
    ready = time.monotonic() - t0

    # the Dev* kinds with the docker backend made it, on capd-py's node image under upstream's kindest/node name
    cluster = mgmt.get("cluster", name, ns)
    assert cluster["spec"]["infrastructureRef"]["kind"] == "DevCluster"
    assert "docker" in mgmt.get("devcluster", cluster["spec"]["infrastructureRef"]["name"], ns)["spec"]["backend"]
    machines = _machines(mgmt, name, ns)
    assert len(machines) == 2 and {m["spec"]["infrastructureRef"]["kind"] for m in machines} == {"DevMachine"}
    for m in machines:
        dm = mgmt.get("devmachine", m["spec"]["infrastructureRef"]["name"], ns)
        assert dm["spec"]["backend"]["docker"]["customImage"] == f"kindest/node:{K8S_VERSION}"
        container = dm["spec"]["providerID"].rsplit("/", 1)[-1]
        assert run(["docker", "inspect", "-f", "{{.Config.Image}}", container]).stdout.strip() == \
            f"kindest/node:{K8S_VERSION}"
    assert mgmt.condition("cluster", name, "TopologyReconciled", ns)
    if "-mp" in template:
        # the worker is the MachinePool's: a DevMachinePool (docker backend, the class's customImage patch for
        # machinePoolClass) whose one instance is the second Ready node
        pools = json.loads(mgmt.kubectl("get", "machinepools", "-n", ns, "-l",
                                        f"cluster.x-k8s.io/cluster-name={name}", "-o", "json"))["items"]
        assert len(pools) == 1 and pools[0]["spec"]["template"]["spec"]["infrastructureRef"]["kind"] == \
            "DevMachinePool"
        assert not mgmt.kubectl("get", "machinedeployments", "-n", ns, "-l",
                                f"cluster.x-k8s.io/cluster-name={name}", "-o", "name").strip()
        dmp = mgmt.get("devmachinepool", pools[0]["spec"]["template"]["spec"]["infrastructureRef"]["name"], ns)
        assert dmp["spec"]["backend"]["docker"]["customImage"] == f"kindest/node:{K8S_VERSION}"
        assert len(dmp["spec"]["providerIDList"]) == 1
        assert sorted(pools[0]["spec"]["providerIDList"]) == sorted(dmp["spec"]["providerIDList"])
        assert (pools[0].get("status") or {}).get("readyReplicas") == 1
        assert sum("cluster.x-k8s.io/pool-name" in m["metadata"]["labels"] for m in machines) == 1
    print(f"\nupstream v1.14 {template.removesuffix('.yaml')} (clusterctl v1.14, docker, 1 CP + 1 W): Available "
          f"after {available:.0f}s, 2 Ready nodes after {ready:.0f}s")

    t1 = time.monotonic()
    mgmt.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
    wait_for(lambda: not docker_leftovers(name), 120, "no docker leftovers")
    wait_for(lambda: not cluster_objects_left(mgmt, name, ns), 60, "no Cluster API objects of the cluster")
    wait_for(lambda: not _topology_copies(mgmt, name, ns), 60, "the template copies collected with their Cluster")
    deleted = time.monotonic() - t1
    # what outlives the Cluster is the class, as upstream: `kubectl delete -f` of the same file removes it
    assert sorted(x.split("/", 1)[0] for x in _class_objects_left(mgmt, path, ns)) == sorted(
        f"{k.lower()}.{g}" for k, g in (
            ("ClusterClass", "cluster.x-k8s.io"), ("DevClusterTemplate", "infrastructure.cluster.x-k8s.io"),
            ("DevMachinePoolTemplate", "infrastructure.cluster.x-k8s.io"),
            ("DevMachineTemplate", "infrastructure.cluster.x-k8s.io"),
            ("DevMachineTemplate", "infrastructure.cluster.x-k8s.io"),
            ("KubeadmConfigTemplate", "bootstrap.cluster.x-k8s.io"),
            ("KubeadmControlPlaneTemplate", "controlplane.cluster.x-k8s.io")))
    mgmt.kubectl("delete", "-n", ns, "-f", str(path), "--ignore-not-found", "--wait")
    assert not _class_objects_left(mgmt, path, ns)
    assert not docker_leftovers(name)
    print(f"deleted in {deleted:.0f}s; whole test {time.monotonic() - t0:.0f}s")


@pytest.mark.late_build("e2e-suite")  # clusterctl v1.14 builds beside the tests (tests/e2e/conftest.py)
def test_upstream_v1_14_in_memory_template(clusterctl_v1_14: str, mgmt: Mgmt, own_namespace: str,
                                           tmp_path: Path) -> None:
    ns, name = own_namespace, "e2e-up14-mem"
    path = render_v1_14(clusterctl_v1_14, tmp_path, name, ns, "cluster-template-in-memory.yaml",
                        "clusterclass-in-memory.yaml")
    assert _kinds(path) == ["Cluster", "ClusterClass", "DevClusterTemplate", "DevMachineTemplate",
                            "DevMachineTemplate", "KubeadmConfigTemplate", "KubeadmControlPlaneTemplate"]

    t0 = time.monotonic()
    mgmt.kubectl("apply", "-n", ns, "-f", str(path))   # as is
    wait_for(lambda: mgmt.condition("cluster", name, "Available", ns), 180, f"cluster {name} Available", 1)
    available = time.monotonic() - t0
    machines = _machines(mgmt, name, ns)
    assert len(machines) == 2 and all((m.get("status") or {}).get("phase") == "Running" for m in machines)
    for m in machines:
        dm = mgmt.get("devmachine", m["spec"]["infrastructureRef"]["name"], ns)
        assert "inMemory" in dm["spec"]["backend"]
        assert dm["spec"]["providerID"] == f"in-memory://{dm['metadata']['name']}"
        assert m["status"]["nodeRef"]["name"] == dm["metadata"]["name"]
    assert not docker_leftovers(name)   # no container, network or volume
    # upstream's startup durations were waited for: the VM's 10 s, then the Node's 2 s
    assert available >= 12, available
    print(f"\nupstream v1.14 cluster-template-in-memory (clusterctl v1.14, 1 CP + 1 W): Available after "
          f"{available:.1f}s")

    t1 = time.monotonic()
    mgmt.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "120")
    wait_for(lambda: not cluster_objects_left(mgmt, name, ns), 60, "no Cluster API objects of the cluster")
    wait_for(lambda: not _topology_copies(mgmt, name, ns), 60, "the template copies collected with their Cluster")
    print(f"deleted in {time.monotonic() - t1:.1f}s")
    mgmt.kubectl("delete", "-n", ns, "-f", str(path), "--ignore-not-found", "--wait")
    assert not _class_objects_left(mgmt, path, ns)


@pytest.mark.late_build("e2e-suite")  # clusterctl v1.14 builds beside the tests (tests/e2e/conftest.py)
def test_upstream_v1_14_in_memory_topology_flavor_renders_as_envsubst_does(clusterctl_v1_14: str,
                                                                           tmp_path: Path) -> None:
    """upstream v1.14 e2e's `in-memory-topology` flavor (e2e-clusterclass-in-memory + e2e-cluster-template-in-
    memory-topology): tests/integration/controllers/test_runtime_sdk_inmemory.py substitutes it with
    capd_py.testing.envsubst (the integration tier builds no clusterctl); clusterctl v1.14.0 renders the same objects
    from the same values."""
    ns, name, ext = "rsdk", "k8s-upgrade-with-runtimesdk-abcdef", "k8s-upgrade-with-runtimesdk"
    values = {**envsubst.E2E_VARIABLES, "EXTENSION_CONFIG_NAME": ext}
    env = {**clusterctl_env(tmp_path), **values}
    klass = run([clusterctl_v1_14, "generate", "yaml", "--from", str(V1_14 / "e2e-clusterclass-in-memory.yaml")],
                env=env, timeout=120).stdout
    cluster = run([clusterctl_v1_14, "generate", "cluster", name, "--from",
                   str(V1_14 / "e2e-cluster-template-in-memory-topology.yaml"), "--target-namespace", ns,
                   "--kubernetes-version", K8S_VERSION, "--control-plane-machine-count", "1",
                   "--worker-machine-count", "1"], env=env, timeout=120).stdout
    ours = {**values, "NAMESPACE": ns, "CLUSTER_NAME": name, "KUBERNETES_VERSION": K8S_VERSION,
            "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1"}

    def docs(text: str) -> list[dict[str, Any]]:
        out = [d for d in yaml.safe_load_all(text) if d]
        for d in out:
            d.setdefault("metadata", {}).pop("namespace", None)   # `generate yaml` leaves it to kubectl's -n
        return out
    assert docs(klass) == docs(yaml.safe_dump_all(envsubst.documents(V1_14 / "e2e-clusterclass-in-memory.yaml",
                                                                     ours)))
    assert docs(cluster) == docs(yaml.safe_dump_all(envsubst.documents(
        V1_14 / "e2e-cluster-template-in-memory-topology.yaml", ours, ns)))
    assert [d["metadata"].get("namespace") for d in yaml.safe_load_all(cluster) if d] == [ns]
