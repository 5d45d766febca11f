"""The CRDs against a real kube-apiserver: they install, accept upstream-style manifests unchanged and
reject bad input (schema + CEL) with a 422 naming the problem, leaving no partial object behind."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import gvk
from capd_py.api.crds import CRD, is_established, load_crds
from capd_py.kube.client import Kube, KubeError

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
Obj = dict[str, Any]


def load_fixture(name: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((FIXTURES / name).read_text()) if d]


def all_fixture_objects() -> list[Obj]:
    return load_fixture("quickstart.yaml") + load_fixture("standalone.yaml")


def kind_of(obj: Obj) -> gvk.GVK:
    g = gvk.by_group_kind(gvk.group_of(obj["apiVersion"]), obj["kind"])
    assert g is not None, obj["kind"]
    return g


def base(kind: str, name: str | None = None) -> Obj:
    """A deep copy of the first fixture object of `kind` (optionally with a given name)."""
    for o in all_fixture_objects():
        if o["kind"] == kind and (name is None or o["metadata"]["name"] == name):
            return copy.deepcopy(o)
    raise KeyError(kind)


def in_ns(obj: Obj, namespace: str) -> Obj:
    obj = copy.deepcopy(obj)
    obj["metadata"]["namespace"] = namespace
    return obj


def drop_nulls(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: drop_nulls(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [drop_nulls(x) for x in v]
    return v


def is_subset(sent: Any, got: Any, path: str = "") -> list[str]:
    """Paths present in `sent` that the server dropped or changed (pruning would show up here)."""
    if isinstance(sent, dict):
        if not isinstance(got, dict):
            return [path or "."]
        out: list[str] = []
        for k, v in sent.items():
            if k not in got:
                out.append(f"{path}.{k}")
            else:
                out += is_subset(v, got[k], f"{path}.{k}")
        return out
    if isinstance(sent, list):
        if not isinstance(got, list) or len(sent) != len(got):
            return [path]
        return [p for i, (a, b) in enumerate(zip(sent, got, strict=True)) for p in is_subset(a, b, f"{path}[{i}]")]
    return [] if sent == got else [path]


def setp(obj: Obj, path: str, value: Any) -> Obj:
    *parents, last = path.split(".")
    cur = obj
    for p in parents:
        cur = cur.setdefault(p, {})
    cur[last] = value
    return obj


def delp(obj: Obj, path: str) -> Obj:
    *parents, last = path.split(".")
    cur = obj
    for p in parents:
        cur = cur[p]
    del cur[last]
    return obj


# --- install ---------------------------------------------------------------------------------------------

async def test_every_crd_is_established(kube: Kube) -> None:
    want = load_crds()
    assert len(want) == 13
    assert {c["spec"]["names"]["kind"] for c in want} == {g.kind for g in gvk.ALL_CAPI}
    for c in want:
        got = await kube.get(CRD, None, c["metadata"]["name"])
        assert got is not None and is_established(got), c["metadata"]["name"]
        names = got["spec"]["names"]
        assert "cluster-api" in names["categories"]
        (ver,) = got["spec"]["versions"]
        assert ver["name"] == "v1beta2" and ver["served"] and ver["storage"]
        assert ver.get("additionalPrinterColumns")
    scaled = {c["spec"]["names"]["kind"] for c in want
              if "scale" in c["spec"]["versions"][0].get("subresources", {})}
    assert scaled == {"MachineSet", "MachineDeployment", "KubeadmControlPlane"}
    short = {c["spec"]["names"]["kind"]: c["spec"]["names"].get("shortNames") for c in want}
    assert short["Cluster"] == ["cl"] and short["KubeadmControlPlane"] == ["kcp"]
    assert short["MachineDeployment"] == ["md"] and short["MachineHealthCheck"] == ["mhc", "mhcs"]


# --- good input ------------------------------------------------------------------------------------------

def test_fixtures_cover_every_kind() -> None:
    assert {o["kind"] for o in all_fixture_objects()} == {g.kind for g in gvk.ALL_CAPI}


@pytest.mark.parametrize("fixture", ["quickstart.yaml", "standalone.yaml"])
async def test_upstream_style_manifests_are_accepted_unchanged(kube: Kube, namespace: str, fixture: str) -> None:
    for obj in load_fixture(fixture):
        g = kind_of(obj)
        created = await kube.create(g, in_ns(obj, namespace))
        missing = is_subset(drop_nulls(obj.get("spec")), created.get("spec"), "spec")
        assert not missing, f"{obj['kind']}/{obj['metadata']['name']}: server dropped or changed {missing}"
        # server-side apply of the same manifest is a no-op (field manager capd-py)
        applied = await kube.apply(g, in_ns(obj, namespace))
        assert applied["metadata"]["generation"] == created["metadata"]["generation"]


async def test_defaults_and_scale_subresource(kube: Kube, namespace: str) -> None:
    md = base("MachineDeployment")
    del md["spec"]["replicas"]
    created = await kube.create(gvk.MACHINE_DEPLOYMENT, in_ns(md, namespace))
    assert created["spec"]["replicas"] == 1
    name = md["metadata"]["name"]
    scale = await kube.acall("GET", gvk.MACHINE_DEPLOYMENT.path(namespace, name, "scale"))
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    await kube.merge_patch(gvk.MACHINE_DEPLOYMENT, namespace, name, {"spec": {"replicas": 3}}, subresource="scale")
    got = await kube.get(gvk.MACHINE_DEPLOYMENT, namespace, name)
    assert got is not None and got["spec"]["replicas"] == 3


async def test_status_subresource_keeps_v1beta2_fields(kube: Kube, namespace: str) -> None:
    dm = await kube.create(gvk.DOCKER_MACHINE, in_ns(base("DockerMachine"), namespace))
    status = {"initialization": {"provisioned": True},
              "addresses": [{"type": "InternalIP", "address": "172.18.0.3"}],
              "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}],
              "deprecated": {"v1beta1": {"ready": True, "conditions": [{"type": "Ready", "status": "True"}]}}}
    got = await kube.update_status(gvk.DOCKER_MACHINE, dm, status)
    assert got is not None and got["status"] == status


async def test_printer_columns_render(kube: Kube, namespace: str) -> None:
    await kube.create(gvk.KUBEADM_CONTROL_PLANE, in_ns(base("KubeadmControlPlane"), namespace))
    t = await _get_table(kube, gvk.KUBEADM_CONTROL_PLANE.path(namespace))
    cols = [c["name"] for c in t["columnDefinitions"]]
    assert cols[:4] == ["Name", "Cluster", "Available", "Desired"] and "Version" in cols
    row = t["rows"][0]["cells"]
    assert row[cols.index("Desired")] == 1 and row[cols.index("Version")] == "v1.34.4"


async def _get_table(kube: Kube, path: str) -> Any:
    import asyncio
    import json

    def call() -> Any:
        req = kube.api.param_serialize("GET", path, header_params={
            "Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}, auth_settings=["BearerToken"])
        resp = kube.api.call_api(*req)
        resp.read()
        return json.loads(resp.data)

    return await asyncio.to_thread(call)


# --- bad input -------------------------------------------------------------------------------------------

@dataclass
class Bad:
    id: str
    kind: str
    mutate: Callable[[Obj], Obj]
    message: str


def long_name(o: Obj) -> Obj:
    o["metadata"]["name"] = "c" * 64
    return o


BAD: list[Bad] = [
    # replicas
    Bad("md-negative-replicas", "MachineDeployment", lambda o: setp(o, "spec.replicas", -1),
        "replicas must be greater than or equal to 0"),
    Bad("ms-negative-replicas", "MachineSet", lambda o: setp(o, "spec.replicas", -3),
        "replicas must be greater than or equal to 0"),
    Bad("kcp-zero-replicas", "KubeadmControlPlane", lambda o: setp(o, "spec.replicas", 0),
        "a control plane cannot be scaled to 0"),
    Bad("kcp-negative-replicas", "KubeadmControlPlane", lambda o: setp(o, "spec.replicas", -1),
        "replicas must be greater than or equal to 1"),
    # versions
    Bad("kcp-version-without-v", "KubeadmControlPlane", lambda o: setp(o, "spec.version", "1.34.4"),
        "must be a valid semantic version"),
    Bad("kcp-version-too-old", "KubeadmControlPlane", lambda o: setp(o, "spec.version", "v1.33.9"),
        "supported range is v1.34.0 to v1.37.x"),
    Bad("kcp-version-too-new", "KubeadmControlPlane", lambda o: setp(o, "spec.version", "v1.38.0"),
        "Kubernetes version is not supported"),
    Bad("machine-version-two-parts", "Machine", lambda o: setp(o, "spec.version", "v1.34"),
        "spec.version: Invalid value"),
    Bad("md-version-major-2", "MachineDeployment", lambda o: setp(o, "spec.template.spec.version", "v2.0.0"),
        "spec.template.spec.version: Invalid value: \"string\": Kubernetes version is not supported"),
    Bad("ms-version-garbage", "MachineSet", lambda o: setp(o, "spec.template.spec.version", "latest"),
        "must be a valid semantic version"),
    Bad("topology-version-too-old", "Cluster", lambda o: setp(o, "spec.topology", {
        "classRef": {"name": "quick-start"}, "version": "v1.30.0"}), "Kubernetes version is not supported"),
    # required references
    Bad("machine-bootstrap-empty", "Machine", lambda o: setp(o, "spec.bootstrap", {}),
        "expected either spec.bootstrap.dataSecretName or spec.bootstrap.configRef to be populated"),
    Bad("machine-no-infrastructureRef", "Machine", lambda o: delp(o, "spec.infrastructureRef"),
        "spec.infrastructureRef: Required value"),
    Bad("machine-no-clusterName", "Machine", lambda o: delp(o, "spec.clusterName"),
        "spec.clusterName: Required value"),
    Bad("md-template-no-infrastructureRef", "MachineDeployment",
        lambda o: delp(o, "spec.template.spec.infrastructureRef"), "spec.template.spec.infrastructureRef: Required"),
    Bad("ms-template-no-infrastructureRef", "MachineSet",
        lambda o: delp(o, "spec.template.spec.infrastructureRef"), "spec.template.spec.infrastructureRef: Required"),
    Bad("md-template-bootstrap-empty", "MachineDeployment", lambda o: setp(o, "spec.template.spec.bootstrap", {}),
        "expected either spec.bootstrap.dataSecretName or spec.bootstrap.configRef"),
    Bad("kcp-no-infrastructureRef", "KubeadmControlPlane",
        lambda o: delp(o, "spec.machineTemplate.spec.infrastructureRef"),
        "spec.machineTemplate.spec.infrastructureRef: Required value"),
    Bad("kcp-no-version", "KubeadmControlPlane", lambda o: delp(o, "spec.version"), "spec.version: Required value"),
    Bad("ref-without-kind", "Cluster", lambda o: delp(o, "spec.infrastructureRef.kind"),
        "spec.infrastructureRef.kind: Required value"),
    Bad("ref-bad-apigroup", "Cluster", lambda o: setp(o, "spec.controlPlaneRef.apiGroup", "Control_Plane"),
        "spec.controlPlaneRef.apiGroup: Invalid value"),
    Bad("cluster-without-refs", "Cluster",
        lambda o: delp(delp(o, "spec.infrastructureRef"), "spec.controlPlaneRef"),
        "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set"),
    Bad("md-template-clusterName-mismatch", "MachineDeployment",
        lambda o: setp(o, "spec.template.spec.clusterName", "other"), "must match spec.clusterName"),
    # MachineHealthCheck thresholds
    Bad("mhc-max-unhealthy-no-percent", "MachineHealthCheck",
        lambda o: setp(o, "spec.remediation.triggerIf.unhealthyLessThanOrEqualTo", "40"),
        "unhealthyLessThanOrEqualTo must be either a non-negative int or a percentage"),
    Bad("mhc-max-unhealthy-garbage", "MachineHealthCheck",
        lambda o: setp(o, "spec.remediation.triggerIf.unhealthyLessThanOrEqualTo", "many%"),
        "unhealthyLessThanOrEqualTo must be either a non-negative int or a percentage"),
    Bad("mhc-max-unhealthy-negative", "MachineHealthCheck",
        lambda o: setp(o, "spec.remediation.triggerIf.unhealthyLessThanOrEqualTo", -1),
        "unhealthyLessThanOrEqualTo must be either a non-negative int or a percentage"),
    Bad("mhc-unhealthy-range", "MachineHealthCheck",
        lambda o: setp(o, "spec.remediation.triggerIf.unhealthyInRange", "1-3"),
        "spec.remediation.triggerIf.unhealthyInRange: Invalid value"),
    Bad("mhc-node-startup-too-short", "MachineHealthCheck",
        lambda o: setp(o, "spec.checks.nodeStartupTimeoutSeconds", 10), "at least 30 seconds"),
    Bad("mhc-no-clusterName", "MachineHealthCheck", lambda o: delp(o, "spec.clusterName"),
        "spec.clusterName: Required value"),
    # names
    Bad("cluster-name-with-dot", "Cluster", lambda o: setp(o, "metadata.name", "my.cluster"),
        "Cluster name must be a valid DNS label"),
    Bad("cluster-name-too-long", "Cluster", long_name, "at most 63"),
    # misc shapes
    Bad("kubeadm-extraargs-duplicate", "KubeadmControlPlane",
        lambda o: setp(o, "spec.kubeadmConfigSpec.clusterConfiguration.controllerManager.extraArgs",
                       [{"name": "v", "value": "1"}, {"name": "v", "value": "2"}]), "extraArgs names must be unique"),
    Bad("kubeadm-extraargs-map-form", "KubeadmConfig",
        lambda o: setp(o, "spec.joinConfiguration.nodeRegistration.kubeletExtraArgs", {"v": "1"}),
        "kubeletExtraArgs in body must be of type array"),
    Bad("kubeadmconfig-bad-format", "KubeadmConfig", lambda o: setp(o, "spec.format", "yaml"),
        "spec.format: Unsupported value: \"yaml\""),
    Bad("dockercluster-bad-port", "DockerCluster",
        lambda o: setp(o, "spec.controlPlaneEndpoint", {"host": "1.2.3.4", "port": 70000}),
        "spec.controlPlaneEndpoint.port: Invalid value: 70000"),
    Bad("cluster-pods-without-cidrs", "Cluster", lambda o: setp(o, "spec.clusterNetwork.pods", {}),
        "spec.clusterNetwork.pods.cidrBlocks: Required value"),
]


def test_enough_bad_cases() -> None:
    assert len(BAD) >= 20
    assert len({b.id for b in BAD}) == len(BAD)


@pytest.mark.parametrize("case", BAD, ids=[b.id for b in BAD])
async def test_bad_input_is_rejected(kube: Kube, namespace: str, case: Bad) -> None:
    obj = in_ns(case.mutate(base(case.kind)), namespace)
    g = kind_of(obj)
    with pytest.raises(KubeError) as ei:
        await kube.create(g, obj)
    assert ei.value.status == 422, ei.value
    assert case.message in ei.value.message, ei.value.message
    assert await kube.get(g, namespace, obj["metadata"]["name"]) is None  # no partial object


# --- immutable fields --------------------------------------------------------------------------------------

@dataclass
class Change:
    id: str
    kind: str
    patch: Obj  # JSON merge patch (None deletes)
    message: str
    subresource: str | None = None


IMMUTABLE: list[Change] = [
    Change("machine-clusterName", "Machine", {"spec": {"clusterName": "other"}}, "clusterName is immutable"),
    Change("machineset-clusterName", "MachineSet",
           {"spec": {"clusterName": "other", "template": {"spec": {"clusterName": "other"}}}},
           "spec.clusterName: Invalid value: \"string\": clusterName is immutable"),
    Change("machinedeployment-clusterName", "MachineDeployment",
           {"spec": {"clusterName": "other", "template": {"spec": {"clusterName": "other"}}}},
           "clusterName is immutable"),
    Change("mhc-clusterName", "MachineHealthCheck", {"spec": {"clusterName": "other"}}, "clusterName is immutable"),
    Change("machine-infrastructureRef-kind", "Machine",
           {"spec": {"infrastructureRef": {"kind": "OtherMachine"}}},
           "infrastructureRef.apiGroup and infrastructureRef.kind are immutable"),
    Change("machine-bootstrap-configRef-apiGroup", "Machine",
           {"spec": {"bootstrap": {"configRef": {"apiGroup": "bootstrap.example.com"}}}},
           "bootstrap.configRef.apiGroup and bootstrap.configRef.kind are immutable"),
    Change("dockermachine-customImage", "DockerMachine", {"spec": {"customImage": "kindest/node:v1.34.4"}},
           "spec.customImage is immutable (only spec.providerID may change)"),
    Change("dockermachine-extraMounts-removed", "DockerMachine", {"spec": {"extraMounts": None}},
           "spec.extraMounts is immutable"),
    Change("dockermachinetemplate-spec", "DockerMachineTemplate",
           {"spec": {"template": {"spec": {"customImage": "x:y"}}}},
           "DockerMachineTemplate spec.template.spec is immutable"),
    Change("dockerclustertemplate-spec", "DockerClusterTemplate",
           {"spec": {"template": {"spec": {"loadBalancer": {"imageTag": "v2"}}}}},
           "DockerClusterTemplate spec.template.spec is immutable"),
    Change("kcp-certificatesDir", "KubeadmControlPlane",
           {"spec": {"kubeadmConfigSpec": {"clusterConfiguration": {"certificatesDir": "/tmp/pki"}}}},
           "clusterConfiguration.certificatesDir cannot be modified"),
    Change("cluster-remove-infrastructureRef", "Cluster", {"spec": {"infrastructureRef": None}},
           "spec.infrastructureRef cannot be removed"),
    Change("cluster-remove-controlPlaneRef", "Cluster", {"spec": {"controlPlaneRef": None}},
           "spec.controlPlaneRef cannot be removed"),
    Change("kcp-scale-to-zero", "KubeadmControlPlane", {"spec": {"replicas": 0}},
           "a control plane cannot be scaled to 0", subresource="scale"),
    Change("kcp-update-to-zero", "KubeadmControlPlane", {"spec": {"replicas": 0}},
           "a control plane cannot be scaled to 0"),
    Change("md-scale-negative", "MachineDeployment", {"spec": {"replicas": -1}},
           "greater than or equal to 0", subresource="scale"),
    Change("kcp-version-downgrade-out-of-range", "KubeadmControlPlane", {"spec": {"version": "v1.33.0"}},
           "Kubernetes version is not supported"),
]


@pytest.mark.parametrize("case", IMMUTABLE, ids=[c.id for c in IMMUTABLE])
async def test_update_is_rejected_and_object_unchanged(kube: Kube, namespace: str, case: Change) -> None:
    obj = in_ns(base(case.kind), namespace)
    g = kind_of(obj)
    created = await kube.create(g, obj)
    name = obj["metadata"]["name"]
    with pytest.raises(KubeError) as ei:
        await kube.merge_patch(g, namespace, name, case.patch, subresource=case.subresource)
    assert ei.value.status == 422, ei.value
    assert case.message in ei.value.message, ei.value.message
    after = await kube.get(g, namespace, name)
    assert after is not None
    assert after["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert after["spec"] == created["spec"]


ALLOWED: list[Change] = [
    Change("dockermachine-providerID", "DockerMachine", {"spec": {"providerID": "docker:////capi-quickstart-w"}}, ""),
    Change("dockermachine-bootstrapped", "DockerMachine", {"spec": {"bootstrapped": True}}, ""),
    Change("kcp-version-upgrade", "KubeadmControlPlane", {"spec": {"version": "v1.35.1"}}, ""),
    Change("kcp-scale-to-three", "KubeadmControlPlane", {"spec": {"replicas": 3}}, "", subresource="scale"),
    Change("kcp-infrastructureRef-name", "KubeadmControlPlane",
           {"spec": {"machineTemplate": {"spec": {"infrastructureRef": {"name": "cp-v2"}}}}}, ""),
    Change("md-template-infrastructureRef-name", "MachineDeployment",
           {"spec": {"template": {"spec": {"infrastructureRef": {"name": "md-0-v2"}}}}}, ""),
    Change("cluster-clusterNetwork", "Cluster", {"spec": {"clusterNetwork": {"serviceDomain": "example.local"}}}, ""),
    Change("cluster-paused", "Cluster", {"spec": {"paused": True}}, ""),
    Change("md-scale-to-zero", "MachineDeployment", {"spec": {"replicas": 0}}, "", subresource="scale"),
    Change("machine-providerID-set", "Machine", {"spec": {"providerID": "docker:////x"}}, ""),
]


@pytest.mark.parametrize("case", ALLOWED, ids=[c.id for c in ALLOWED])
async def test_allowed_updates(kube: Kube, namespace: str, case: Change) -> None:
    obj = in_ns(base(case.kind), namespace)
    g = kind_of(obj)
    await kube.create(g, obj)
    await kube.merge_patch(g, namespace, obj["metadata"]["name"], case.patch, subresource=case.subresource)
