"""ClusterClass patches written for v1beta1 templates: upstream v1.10's quick-start ClusterClass (v1beta1,
tests/fixtures/upstream/v1beta1/development.yaml), stored as v1beta2 as the API server stores it, patches its
templates in the apiVersion its templateRefs name (v1beta1 shapes: `apiServer.extraArgs` as a map) and gives
v1beta2 desired objects."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import conversion
from capd_py.reconcile.topology import desired as D
from capd_py.reconcile.topology import patches as P
from capd_py.testing.topology import blueprint as topology_blueprint

try:
    from test_desired import World, kinds
except ImportError:  # pragma: no cover - package-style import
    from .test_desired import World, kinds  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "upstream" / "v1beta1" / "development.yaml"
PSS_FILE = "/etc/kubernetes/kube-apiserver-admission-pss.yaml"


def _stored() -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of the fixture as the API server stores it (converted to the hub, v1beta2)."""
    out = {}
    for d in yaml.safe_load_all(FIXTURE.read_text()):
        if not d:
            continue
        d["metadata"]["namespace"] = "ns"
        d["metadata"]["uid"] = f"uid-{d['kind']}-{d['metadata']['name']}"
        hub = conversion.to_hub(d)
        out[(hub["kind"], hub["metadata"]["name"])] = hub
    return out


def blueprint(class_edit: Any = None) -> D.Blueprint:
    by = _stored()
    cc = by[("ClusterClass", "quick-start")]
    if class_edit:
        class_edit(cc)
    return topology_blueprint(cc, by)


def cluster(**variables: Any) -> dict[str, Any]:
    c = _stored()[("Cluster", "capi-v1beta1")]
    c["metadata"].update(name="c1", generation=1, uid="uid-c1")
    for v in c["spec"]["topology"]["variables"]:
        if v["name"] in variables:
            v["value"] = variables[v["name"]]
    return c


class V1Beta1World(World):
    def __init__(self, class_edit: Any = None) -> None:
        super().__init__()
        self.class_edit = class_edit

    def step(self, c: dict[str, Any]) -> D.Plan:
        c = copy.deepcopy(c)
        c["spec"].update(self.cluster_refs)
        plan = D.compute(c, blueprint(self.class_edit), self.current(), self.rand)
        self.apply(plan)
        return plan


def test_the_stored_class_keeps_v1beta1_template_refs_and_selectors() -> None:
    cc = _stored()[("ClusterClass", "quick-start")]
    assert cc["apiVersion"] == "cluster.x-k8s.io/v1beta2"
    assert cc["spec"]["controlPlane"]["templateRef"]["apiVersion"] == "controlplane.cluster.x-k8s.io/v1beta1"
    assert cc["spec"]["patches"][0]["definitions"][0]["selector"]["apiVersion"] == \
        "controlplane.cluster.x-k8s.io/v1beta1"
    assert _stored()[("KubeadmControlPlaneTemplate", "quick-start-control-plane")]["apiVersion"] == \
        "controlplane.cluster.x-k8s.io/v1beta2"


def test_v1beta1_patches_apply_to_v1beta1_templates_and_give_v1beta2_objects() -> None:
    w = V1Beta1World()
    plan = w.step(cluster())
    assert plan.reconciled, plan.message
    assert sorted(kinds(plan)) == sorted(["DockerCluster", "DockerMachineTemplate", "KubeadmControlPlane",
                                          "KubeadmConfigTemplate", "DockerMachineTemplate", "MachineDeployment",
                                          "MachineHealthCheck", "MachineHealthCheck"])
    for x in plan.writes:
        assert x.obj["apiVersion"].endswith("/v1beta2"), x.obj["apiVersion"]
        assert conversion.DATA_ANNOTATION not in (x.obj["metadata"].get("annotations") or {})
    kcp = w.of("KubeadmControlPlane")[0]
    ccfg = kcp["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]
    # the v1beta1 map {admission-control-config-file: ...} became v1beta2's list of {name, value}
    assert ccfg["apiServer"]["extraArgs"] == [{"name": "admission-control-config-file", "value": PSS_FILE}]
    assert ccfg["apiServer"]["extraVolumes"] == [{"name": "admission-pss", "hostPath": PSS_FILE,
                                                  "mountPath": PSS_FILE, "readOnly": True, "pathType": "File"}]
    assert ccfg["apiServer"]["certSANs"] == ["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"]
    files = kcp["spec"]["kubeadmConfigSpec"]["files"]
    assert files[0]["path"] == PSS_FILE and 'enforce: "baseline"' in files[0]["content"]
    assert "imageRepository" not in ccfg and "etcd" not in ccfg  # enabledIf false for empty values
    cpi = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]
    assert cpi["apiGroup"] == "infrastructure.cluster.x-k8s.io"
    cp_tpl = w.objs[("DockerMachineTemplate", cpi["name"])]
    assert cp_tpl["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"
    md = w.of("MachineDeployment")[0]
    md_tpl = w.objs[("DockerMachineTemplate", md["spec"]["template"]["spec"]["infrastructureRef"]["name"])]
    assert md_tpl["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"


def test_v1beta1_variable_patches_etcd_and_dns_and_image_repository() -> None:
    w = V1Beta1World()
    w.step(cluster(imageRepository="registry.example/k8s", etcdImageTag="3.5.99-0", coreDNSImageTag="v1.99.0"))
    ccfg = w.of("KubeadmControlPlane")[0]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]
    assert ccfg["imageRepository"] == "registry.example/k8s"
    assert ccfg["etcd"] == {"local": {"imageTag": "3.5.99-0"}}
    assert ccfg["dns"] == {"imageTag": "v1.99.0"}


def test_a_stable_v1beta1_class_topology_computes_no_writes() -> None:
    w = V1Beta1World()
    w.step(cluster())
    plan = w.step(cluster())
    assert plan.writes == [] and plan.deletes == [] and plan.cluster_refs is None
    # a variable change rotates through the conversion too
    plan = w.step(cluster(podSecurityStandard={"enabled": True, "enforce": "restricted", "audit": "restricted",
                                               "warn": "restricted"}))
    assert "KubeadmControlPlane" in kinds(plan)
    files = w.of("KubeadmControlPlane")[0]["spec"]["kubeadmConfigSpec"]["files"]
    assert 'enforce: "restricted"' in files[0]["content"]


def test_v1beta1_selectors_do_not_match_templates_referenced_as_v1beta2() -> None:
    """As upstream: a selector matches the template in the version its templateRef names, nothing else."""
    def refs_to_v1beta2(cc: dict[str, Any]) -> None:
        ref = cc["spec"]["controlPlane"]["templateRef"]
        ref["apiVersion"] = ref["apiVersion"].replace("v1beta1", "v1beta2")
    w = V1Beta1World(refs_to_v1beta2)
    w.step(cluster())
    ccfg = w.of("KubeadmControlPlane")[0]["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]
    assert "extraArgs" not in ccfg["apiServer"]


def test_a_patched_v1beta1_template_that_does_not_convert_fails_naming_the_template() -> None:
    """v1beta1 `apiServer.timeoutForControlPlane` is a Go duration; a patch writing something else cannot be
    converted to the hub (the API server would refuse that v1beta1 write): TopologyReconciled names the template."""
    def bad_timeout(cc: dict[str, Any]) -> None:
        jp = cc["spec"]["patches"][4]["definitions"][0]["jsonPatches"][0]
        assert jp["path"].endswith("/extraArgs")
        cc["spec"]["patches"][4]["definitions"][0]["jsonPatches"].append(
            {"op": "add", "path": jp["path"].replace("extraArgs", "timeoutForControlPlane"), "value": "soon"})
    w = V1Beta1World(bad_timeout)
    with pytest.raises(D.TopologyError, match=r"KubeadmControlPlaneTemplate quick-start-control-plane .*"
                                              r"does not convert.*invalid duration 'soon'"):
        w.step(cluster())


def test_items_without_a_ref_version_or_of_an_unconvertible_kind_are_patched_as_they_are() -> None:
    obj: dict[str, Any]
    obj = {"apiVersion": "example.com/v1beta2", "kind": "Thing", "metadata": {"name": "t"},
           "spec": {"template": {"spec": {}}}}
    item = P.Item("Cluster", P.INFRA_CLUSTER, obj, ref_api_version="example.com/v1beta1")
    patch = {"name": "p", "definitions": [{
        "selector": {"apiVersion": "example.com/v1beta2", "kind": "Thing", "matchResources": {
            "infrastructureCluster": True}},
        "jsonPatches": [{"op": "add", "path": "/spec/template/spec/x", "value": 1}]}]}
    P.apply_patches([patch], [item], {"builtin": {}})
    assert item.obj is obj and obj["spec"]["template"]["spec"] == {"x": 1}
