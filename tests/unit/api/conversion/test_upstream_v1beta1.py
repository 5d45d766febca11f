"""Upstream's v1beta1 manifests (v1.10.10's CAPD templates, release-1.13's runtime-SDK v1beta1 flavors) become
valid v1beta2 objects for capd-py's CRDs, field by field as upstream converts them."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.conversion import DATA_ANNOTATION, from_hub, to_hub

try:
    from conversion_fixtures import UPSTREAM, Obj, load, objects, upstream_v1beta1_files
    from schema_check import check_object
except ImportError:  # pragma: no cover - package-style collection
    from .conversion_fixtures import UPSTREAM, Obj, load, objects, upstream_v1beta1_files  # type: ignore[no-redef]
    from .schema_check import check_object  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

V1BETA1 = objects(upstream_v1beta1_files(), "v1beta1")


def test_the_default_capd_flavors_are_all_there() -> None:
    kinds = {obj["kind"] for _, obj in V1BETA1}
    assert kinds >= {"Cluster", "ClusterClass", "DockerCluster", "DockerClusterTemplate", "DockerMachineTemplate",
                     "DockerMachinePool", "DockerMachinePoolTemplate", "KubeadmControlPlane",
                     "KubeadmControlPlaneTemplate", "KubeadmConfigTemplate", "KubeadmConfig", "MachineDeployment",
                     "MachinePool", "ClusterResourceSet"}


@pytest.mark.parametrize(("name", "obj"), V1BETA1, ids=[n for n, _ in V1BETA1])
def test_upstream_v1beta1_converts_to_a_valid_v1beta2_object(name: str, obj: Obj) -> None:
    assert check_object(obj) == [], "the fixture itself fits upstream's v1beta1 schema"
    hub = to_hub(obj)
    assert hub["apiVersion"].endswith("/v1beta2")
    assert check_object(hub) == []
    assert hub["metadata"] == obj["metadata"]


@pytest.mark.parametrize(("name", "obj"), V1BETA1, ids=[n for n, _ in V1BETA1])
def test_converted_v1beta1_objects_round_trip(name: str, obj: Obj) -> None:
    hub = to_hub(obj)
    spoke = from_hub(hub)
    assert check_object(spoke) == []
    assert to_hub(spoke) == hub
    # Reading the object back as v1beta1 gives the manifest applied, apart from what v1beta1 has no way to
    # keep (empty objects, which upstream drops too) and the conversion-data annotation.
    annotations = spoke["metadata"].pop("annotations", {})
    annotations.pop(DATA_ANNOTATION, None)
    if annotations:
        spoke["metadata"]["annotations"] = annotations
    assert to_hub(spoke) == hub


def _doc(file: str, kind: str, name: str | None = None) -> Obj:
    path = UPSTREAM / "v1beta1" / file
    return next(o for o in load(path) if o["kind"] == kind and (name is None or o["metadata"]["name"] == name))


def _at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


# (file, kind, name, path in the v1beta2 object, expected value)
EXPECTED: list[tuple[str, str, str | None, str, Any]] = [
    ("e2e-bases.yaml", "Cluster", None, "spec.infrastructureRef",
     {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "capi-v1beta1"}),
    ("e2e-bases.yaml", "Cluster", None, "spec.controlPlaneRef",
     {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
      "name": "capi-v1beta1-control-plane"}),
    ("e2e-bases.yaml", "KubeadmControlPlane", None, "spec.machineTemplate",
     {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate",
                                     "name": "capi-v1beta1-control-plane"}}}),
    # `nodeRegistration: {}` is an empty struct: gone in v1beta2 (minProperties: 1 there), as upstream drops it.
    ("e2e-bases.yaml", "KubeadmControlPlane", None, "spec.kubeadmConfigSpec",
     {"clusterConfiguration": {"apiServer": {
         "certSANs": ["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"]}}}),
    ("e2e-bases.yaml", "KubeadmConfigTemplate", None, "spec", {"template": {}}),
    ("e2e-bases.yaml", "MachineDeployment", None, "spec.template.spec.bootstrap.configRef",
     {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfigTemplate", "name": "capi-v1beta1-md-0"}),
    ("e2e-bases.yaml", "MachineDeployment", None, "spec.template.spec.failureDomain", "fd4"),
    ("e2e-bases.yaml", "MachinePool", None, "spec.template.spec.infrastructureRef",
     {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachinePool", "name": "capi-v1beta1-dmp-0"}),
    ("development.yaml", "Cluster", None, "spec.topology.classRef", {"name": "quick-start"}),
    ("development.yaml", "ClusterClass", None, "spec.controlPlane.templateRef",
     {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlaneTemplate",
      "name": "quick-start-control-plane"}),
    ("development.yaml", "ClusterClass", None, "spec.controlPlane.machineInfrastructure.templateRef.kind",
     "DockerMachineTemplate"),
    ("development.yaml", "ClusterClass", None, "spec.controlPlane.healthCheck",
     {"checks": {"unhealthyNodeConditions": [{"type": "Ready", "status": "Unknown", "timeoutSeconds": 300},
                                             {"type": "Ready", "status": "False", "timeoutSeconds": 300}]}}),
    ("development.yaml", "ClusterClass", None, "spec.workers.machineDeployments.0.bootstrap.templateRef.name",
     "quick-start-default-worker-bootstraptemplate"),
    ("development.yaml", "ClusterClass", None, "spec.workers.machinePools.0.infrastructure.templateRef.kind",
     "DockerMachinePoolTemplate"),
]


@pytest.mark.parametrize(("file", "kind", "name", "path", "expected"), EXPECTED,
                         ids=[f"{e[1]}:{e[3]}" for e in EXPECTED])
def test_upstream_fields_land_where_upstream_puts_them(file: str, kind: str, name: str | None, path: str,
                                                       expected: Any) -> None:
    assert _at(to_hub(_doc(file, kind, name)), path) == expected
