from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.cli.generate import (
    TemplateError,
    TemplateValueError,
    default_template_path,
    expand,
    flavor_template_path,
    flavors,
    generate_cluster,
    parse_documents,
    variables,
)

pytestmark = pytest.mark.unit

EXPECTED = [
    ("cluster.x-k8s.io/v1beta2", "Cluster"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerCluster"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachineTemplate"),
    ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane"),
    ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachineTemplate"),
    ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfigTemplate"),
    ("cluster.x-k8s.io/v1beta2", "MachineDeployment"),
    ("v1", "ConfigMap"),
    ("addons.cluster.x-k8s.io/v1beta2", "ClusterResourceSet"),
]
ROOT = Path(__file__).resolve().parents[3]


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def test_expand_required_default_and_escape() -> None:
    assert expand("a ${X} b", {"X": "1"}) == "a 1 b"
    assert expand("${X:=d}", {}) == "d"
    assert expand("${X:=d}", {"X": ""}) == "d"
    assert expand("${X=d}", {"X": ""}) == ""
    assert expand("${X:-d}", {}) == "d"
    assert expand("${X:=d}", {"X": "v"}) == "v"
    assert expand("$${X}", {}) == "${X}"
    assert expand("$X stays", {}) == "$X stays"


def test_missing_variables_named_once_each() -> None:
    with pytest.raises(TemplateError) as e:
        expand("${A} ${B} ${A} ${C:=x}", {})
    msg = str(e.value)
    assert "A, B" in msg and "C" not in msg.split(":", 1)[1].split("(")[0]


def test_variables_of_default_template() -> None:
    vs = {v.name: v for v in variables(default_template_path().read_text())}
    assert set(vs) >= {"CLUSTER_NAME", "NAMESPACE", "KUBERNETES_VERSION", "CONTROL_PLANE_MACHINE_COUNT",
                       "WORKER_MACHINE_COUNT", "POD_CIDR", "SERVICE_CIDR"}
    assert vs["CLUSTER_NAME"].required
    assert vs["KUBERNETES_VERSION"].default == "v1.34.4"
    assert vs["NAMESPACE"].default == "default"


def test_defaults() -> None:
    docs = parse_documents(generate_cluster("demo", env={}))
    assert [(d["apiVersion"], d["kind"]) for d in docs] == EXPECTED
    assert all(d["metadata"]["namespace"] == "default" for d in docs)
    cluster = by_kind(docs, "Cluster")[0]
    assert cluster["metadata"]["name"] == "demo"
    net = cluster["spec"]["clusterNetwork"]
    assert net["pods"]["cidrBlocks"] == ["10.244.0.0/16"]
    assert net["services"]["cidrBlocks"] == ["10.96.0.0/12"]
    assert cluster["spec"]["controlPlaneRef"] == {"apiGroup": "controlplane.cluster.x-k8s.io",
                                                  "kind": "KubeadmControlPlane", "name": "demo-control-plane"}
    assert cluster["spec"]["infrastructureRef"] == {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                    "kind": "DockerCluster", "name": "demo"}
    kcp = by_kind(docs, "KubeadmControlPlane")[0]
    assert kcp["spec"]["replicas"] == 1 and kcp["spec"]["version"] == "v1.34.4"
    md = by_kind(docs, "MachineDeployment")[0]
    assert md["spec"]["replicas"] == 1 and md["spec"]["template"]["spec"]["version"] == "v1.34.4"
    assert md["spec"]["clusterName"] == "demo"


def test_all_variables() -> None:
    out = generate_cluster("c1", namespace="team-a", kubernetes_version="v1.34.2", control_plane_machine_count=3,
                           worker_machine_count=5, pod_cidr="192.168.0.0/16", service_cidr="10.128.0.0/12",
                           env={})
    assert "${" not in out
    docs = parse_documents(out)
    assert all(d["metadata"]["namespace"] == "team-a" for d in docs)
    kcp = by_kind(docs, "KubeadmControlPlane")[0]
    assert kcp["spec"]["replicas"] == 3 and kcp["spec"]["version"] == "v1.34.2"
    assert isinstance(kcp["spec"]["replicas"], int)
    md = by_kind(docs, "MachineDeployment")[0]
    assert md["spec"]["replicas"] == 5 and isinstance(md["spec"]["replicas"], int)
    cl = by_kind(docs, "Cluster")[0]["spec"]["clusterNetwork"]
    assert cl["pods"]["cidrBlocks"] == ["192.168.0.0/16"] and cl["services"]["cidrBlocks"] == ["10.128.0.0/12"]
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("DockerMachineTemplate", "c1-control-plane") in names and ("DockerMachineTemplate", "c1-md-0") in names


def test_kubeadm_config_spec_fields() -> None:
    docs = parse_documents(generate_cluster("demo", env={}))
    spec = by_kind(docs, "KubeadmControlPlane")[0]["spec"]["kubeadmConfigSpec"]
    assert spec["clusterConfiguration"]["apiServer"]["certSANs"] == [
        "localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"]
    for section in ("initConfiguration", "joinConfiguration"):
        args = {a["name"]: a["value"] for a in spec[section]["nodeRegistration"]["kubeletExtraArgs"]}
        assert "cgroup-driver" not in args  # kubeadm's default (systemd) matches the node image's containerd
        assert args["fail-cgroupv1"] == "false"
        assert args["eviction-hard"].startswith("nodefs.available<0%")
    # the CNI arrives through the ClusterResourceSet, not from a command on the nodes
    assert "postKubeadmCommands" not in spec
    kct = by_kind(docs, "KubeadmConfigTemplate")[0]["spec"]["template"]["spec"]
    args = kct["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    assert {"name": "fail-cgroupv1", "value": "false"} in args
    md = by_kind(docs, "MachineDeployment")[0]["spec"]["template"]["spec"]
    assert md["bootstrap"]["configRef"] == {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                            "kind": "KubeadmConfigTemplate", "name": "demo-md-0"}
    assert md["infrastructureRef"]["kind"] == "DockerMachineTemplate"


def node_image_cni_manifest() -> str:
    """/kind/manifests/default-cni.yaml as images/build.sh writes it into the node image."""
    netd = ROOT / "images" / "netd"
    tag = hashlib.sha256((netd / "capd-netd").read_bytes()).hexdigest()[:12]
    return (netd / "default-cni.yaml.in").read_text().replace("@NETD_IMAGE@", f"capd-py/netd:{tag}")


def test_cni_is_delivered_by_a_cluster_resource_set() -> None:
    docs = parse_documents(generate_cluster("demo", namespace="team-a", env={}))
    cluster = by_kind(docs, "Cluster")[0]
    assert cluster["metadata"]["labels"] == {"cni": "demo-crs-0"}
    crs = by_kind(docs, "ClusterResourceSet")[0]
    assert crs["metadata"] == {"name": "demo-crs-0", "namespace": "team-a"}
    assert crs["spec"] == {"strategy": "ApplyOnce", "clusterSelector": {"matchLabels": {"cni": "demo-crs-0"}},
                           "resources": [{"name": "cni-demo-crs-0", "kind": "ConfigMap"}]}
    cm = by_kind(docs, "ConfigMap")[0]
    assert cm["metadata"] == {"name": "cni-demo-crs-0", "namespace": "team-a"}
    assert list(cm["data"]) == ["resources"]
    # exactly the manifest the node image carries (what postKubeadmCommands used to apply)
    assert cm["data"]["resources"] == node_image_cni_manifest(), "run python hack/gen_cni_template.py"
    objs = [o for o in yaml.safe_load_all(cm["data"]["resources"]) if o]
    assert [(o["apiVersion"], o["kind"]) for o in objs] == [
        ("v1", "ServiceAccount"), ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ("apps/v1", "DaemonSet")]
    ds = objs[-1]
    assert ds["metadata"]["namespace"] == "kube-system"
    pod = ds["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["tolerations"] == [{"operator": "Exists"}]
    (c,) = pod["containers"]
    assert c["image"].startswith("capd-py/netd:") and c["imagePullPolicy"] == "Never"
    # no node runs a command that applies a CNI
    for d in docs:
        if d["kind"] != "ConfigMap":
            text = yaml.safe_dump(d)
            assert "postKubeadmCommands" not in text and "default-cni" not in text, d["kind"]


def test_environment_is_used_and_flags_win() -> None:
    env = {"WORKER_MACHINE_COUNT": "4", "KUBERNETES_VERSION": "v1.34.1", "UNRELATED": "x"}
    docs = parse_documents(generate_cluster("demo", kubernetes_version="v1.34.3", env=env))
    assert by_kind(docs, "MachineDeployment")[0]["spec"]["replicas"] == 4
    assert by_kind(docs, "KubeadmControlPlane")[0]["spec"]["version"] == "v1.34.3"


@pytest.mark.parametrize("kw", [
    {"name": "Bad_Name"}, {"name": "x" * 41}, {"kubernetes_version": "1.34"},
    {"control_plane_machine_count": 0}, {"worker_machine_count": -1}, {"pod_cidr": "10.0.0.0"},
    {"namespace": "NS"},
])
def test_bad_values(kw: dict) -> None:
    name = kw.pop("name", "demo")
    with pytest.raises(TemplateValueError):
        generate_cluster(name, env={}, **kw)


def test_custom_template_missing_variable(tmp_path: Path) -> None:
    t = tmp_path / "t.yaml"
    t.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: '${CLUSTER_NAME}', namespace: '${MY_NS}'}\n")
    with pytest.raises(TemplateError, match="MY_NS"):
        generate_cluster("demo", template=t, env={})
    out = generate_cluster("demo", template=t, env={"MY_NS": "x"})
    assert yaml.safe_load(out)["metadata"] == {"name": "demo", "namespace": "x"}


def test_missing_template_file(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match="cannot read template"):
        generate_cluster("demo", template=tmp_path / "nope.yaml", env={})


def test_invalid_yaml_reported() -> None:
    with pytest.raises(TemplateError, match="invalid YAML"):
        parse_documents("a: [1\n")
    with pytest.raises(TemplateError, match="not a mapping"):
        parse_documents("- 1\n")
    assert parse_documents("---\n---\na: 1\n") == [{"a": 1}]


# -- flavors (clusterctl: --flavor NAME selects cluster-template-NAME.yaml) --------------------------------

def test_flavors_are_the_templates_next_to_the_default() -> None:
    assert "machinepool" in flavors()
    assert flavor_template_path("machinepool") == ROOT / "templates" / "cluster-template-machinepool.yaml"
    assert flavor_template_path(None) == flavor_template_path("") == default_template_path()


def test_machinepool_flavor() -> None:
    out = generate_cluster("demo", namespace="team-a", control_plane_machine_count=3, worker_machine_count=2,
                           flavor="machinepool", env={})
    assert "${" not in out
    docs = parse_documents(out)
    kinds = [(d["apiVersion"], d["kind"]) for d in docs]
    assert kinds == [
        ("cluster.x-k8s.io/v1beta2", "Cluster"),
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerCluster"),
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachineTemplate"),
        ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane"),
        ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig"),
        ("infrastructure.cluster.x-k8s.io/v1beta2", "DockerMachinePool"),
        ("cluster.x-k8s.io/v1beta2", "MachinePool"),
        ("v1", "ConfigMap"),
        ("addons.cluster.x-k8s.io/v1beta2", "ClusterResourceSet"),
    ]
    assert not by_kind(docs, "MachineDeployment") and not by_kind(docs, "KubeadmConfigTemplate")
    assert all(d["metadata"]["namespace"] == "team-a" for d in docs)
    assert by_kind(docs, "KubeadmControlPlane")[0]["spec"]["replicas"] == 3
    (mp,) = by_kind(docs, "MachinePool")
    assert mp["metadata"]["name"] == "demo-mp-0"
    assert mp["spec"]["replicas"] == 2 and isinstance(mp["spec"]["replicas"], int)
    assert mp["spec"]["clusterName"] == mp["spec"]["template"]["spec"]["clusterName"] == "demo"
    spec = mp["spec"]["template"]["spec"]
    assert spec["version"] == "v1.34.4"
    assert spec["bootstrap"]["configRef"] == {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                              "name": "demo-mp-0-config"}
    assert spec["infrastructureRef"] == {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool",
                                         "name": "demo-dmp-0"}
    (kc,) = by_kind(docs, "KubeadmConfig")
    assert kc["metadata"]["name"] == "demo-mp-0-config"
    # the same worker join as the default template's KubeadmConfigTemplate
    default = parse_documents(generate_cluster("demo", namespace="team-a", control_plane_machine_count=3,
                                               worker_machine_count=2, env={}))
    kct = by_kind(default, "KubeadmConfigTemplate")[0]["spec"]["template"]["spec"]
    assert kc["spec"] == kct
    (dmp,) = by_kind(docs, "DockerMachinePool")
    assert dmp["metadata"]["name"] == "demo-dmp-0" and dmp["spec"] == {"template": {}}
    # everything else is the default template's, the CNI (filled by hack/gen_cni_template.py) included
    same = ("Cluster", "DockerCluster", "DockerMachineTemplate", "KubeadmControlPlane", "ConfigMap",
            "ClusterResourceSet")
    default = [d for d in default if d["metadata"]["name"] != "demo-md-0"]  # the MachineDeployment's workers
    assert [d for d in docs if d["kind"] in same] == [d for d in default if d["kind"] in same]
    assert by_kind(docs, "ConfigMap")[0]["data"]["resources"] == node_image_cni_manifest()


def test_machinepool_flavor_defaults_and_environment() -> None:
    docs = parse_documents(generate_cluster("demo", flavor="machinepool", env={}))
    assert by_kind(docs, "MachinePool")[0]["spec"]["replicas"] == 1
    docs = parse_documents(generate_cluster("demo", flavor="machinepool", env={"WORKER_MACHINE_COUNT": "0",
                                                                               "KUBERNETES_VERSION": "v1.34.1"}))
    mp = by_kind(docs, "MachinePool")[0]
    assert mp["spec"]["replicas"] == 0 and mp["spec"]["template"]["spec"]["version"] == "v1.34.1"


def test_unknown_flavor_lists_the_available_ones(tmp_path: Path) -> None:
    with pytest.raises(TemplateValueError, match=r"unknown flavor 'nope': available flavors are .*machinepool"):
        generate_cluster("demo", flavor="nope", env={})
    with pytest.raises(TemplateValueError, match="not both"):
        generate_cluster("demo", flavor="machinepool", template=tmp_path / "t.yaml", env={})


def test_cni_generator_fills_every_template() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_cni_template", ROOT / "hack" / "gen_cni_template.py")
    assert spec and spec.loader
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    paths = gen.templates()
    assert paths[0] == default_template_path()
    assert ROOT / "templates" / "cluster-template-machinepool.yaml" in paths
    assert len(paths) == 1 + len(flavors())
    for p in paths:
        text = p.read_text()
        assert gen.render(text, p) == text, f"{p.name} is stale: run python hack/gen_cni_template.py"
        # an emptied block is filled again
        emptied = gen.BLOCK.sub(lambda m: m.group(1), text)
        assert emptied != text and gen.render(emptied, p) == text


def _as_dev(doc: dict[str, Any], backend: dict[str, Any] | None = None) -> dict[str, Any]:
    """A default-template document as the `dev` flavor writes it: upstream v1.14's Dev* kinds, the Docker* fields
    moved under spec.backend.docker."""
    d = copy.deepcopy(doc)
    if d["kind"] == "DockerCluster":
        d["kind"], d["spec"] = "DevCluster", {"backend": backend or {"docker": d["spec"]}}
    elif d["kind"] == "DockerMachineTemplate":
        d["kind"] = "DevMachineTemplate"
        d["spec"]["template"]["spec"] = {"backend": backend or {"docker": d["spec"]["template"]["spec"]}}
    text = json.dumps(d).replace('"kind": "DockerCluster"', '"kind": "DevCluster"').replace(
        '"kind": "DockerMachineTemplate"', '"kind": "DevMachineTemplate"')
    return dict(json.loads(text))


def test_dev_flavor_is_the_default_template_with_dev_kinds() -> None:
    """`--flavor dev`: the same cluster with DevCluster / DevMachineTemplate and their docker backend."""
    assert {"dev", "in-memory"} <= set(flavors())
    kw: dict[str, Any] = {"namespace": "team-a", "control_plane_machine_count": 3, "worker_machine_count": 2,
                          "env": {}}
    default = parse_documents(generate_cluster("demo", **kw))
    dev = parse_documents(generate_cluster("demo", flavor="dev", **kw))
    assert dev == [_as_dev(d) for d in default]
    assert "Docker" not in json.dumps([d for d in dev if d["kind"] != "ConfigMap"])


def test_in_memory_flavor() -> None:
    docs = parse_documents(generate_cluster("demo", flavor="in-memory", worker_machine_count=3,
                                            env={"IN_MEMORY_VM_STARTUP_DURATION": "10s"}))
    (dc,) = by_kind(docs, "DevCluster")
    assert dc["spec"] == {"backend": {"inMemory": {}}} and "annotations" not in dc["metadata"]
    templates = by_kind(docs, "DevMachineTemplate")
    assert len(templates) == 2
    for t in templates:
        mem = t["spec"]["template"]["spec"]["backend"]["inMemory"]
        assert mem["vm"]["provisioning"] == {"startupDuration": "10s", "startupJitter": "0.2"}
        assert {p: mem[p]["provisioning"]["startupDuration"] for p in ("node", "apiServer", "etcd")} == {
            "node": "0s", "apiServer": "0s", "etcd": "0s"}
    assert by_kind(docs, "MachineDeployment")[0]["spec"]["replicas"] == 3
    assert not by_kind(docs, "DockerCluster") and not by_kind(docs, "DockerMachineTemplate")
