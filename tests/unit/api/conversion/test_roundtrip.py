"""v1beta2 -> v1beta1 -> v1beta2 gives the same object, for fully populated objects of every kind (status
included) and for every v1beta2 manifest we have: upstream release-1.13's templates, capd-py's fixtures and
templates. The v1beta1 form fits upstream's v1beta1 schema (what a v1beta1 client decodes)."""

from __future__ import annotations

import json

import pytest

from capd_py.api.conversion import CONVERTIBLE_KINDS, DATA_ANNOTATION, from_hub, spoke_version, to_hub

try:
    from conversion_fixtures import ROOT, Obj, load, objects, v1beta2_files
    from schema_check import check_object
except ImportError:  # pragma: no cover - package-style collection
    from .conversion_fixtures import ROOT, Obj, load, objects, v1beta2_files  # type: ignore[no-redef]
    from .schema_check import check_object  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

POPULATED_FILE = ROOT / "tests" / "fixtures" / "conversion" / "populated-v1beta2.yaml"
POPULATED = [(f"{o['kind']}/{o['metadata']['name']}", o) for o in load(POPULATED_FILE)]
MANIFESTS = objects(v1beta2_files(), "v1beta2")
# Upstream stores no conversion data for these (their v1beta1 says everything v1beta2 does).
NOT_PRESERVED = {"MachineSet", "ClusterResourceSet", "ClusterResourceSetBinding", "DockerClusterTemplate",
                 "DockerMachinePoolTemplate", "DevClusterTemplate", "MachineDrainRule", "ExtensionConfig"}


def test_every_convertible_kind_is_populated() -> None:
    assert {(o["apiVersion"].rsplit("/", 1)[0], o["kind"]) for _, o in POPULATED} == CONVERTIBLE_KINDS


@pytest.mark.parametrize(("name", "obj"), POPULATED, ids=[n for n, _ in POPULATED])
def test_populated_objects_round_trip(name: str, obj: Obj) -> None:
    assert check_object(obj) == [], "the fixture fits capd-py's v1beta2 schema"
    spoke = from_hub(obj)
    group = obj["apiVersion"].rsplit("/", 1)[0]
    assert spoke["apiVersion"] == f"{group}/{spoke_version(group, obj['kind'])}"  # v1alpha1 for ExtensionConfig
    assert check_object(spoke) == []
    assert to_hub(spoke) == obj
    annotations = spoke["metadata"].get("annotations", {})
    assert (DATA_ANNOTATION in annotations) == (obj["kind"] not in NOT_PRESERVED)
    if DATA_ANNOTATION in annotations:
        stored = json.loads(annotations[DATA_ANNOTATION])
        assert "metadata" not in stored and stored["spec"] == obj.get("spec")


@pytest.mark.parametrize(("name", "obj"), MANIFESTS, ids=[n for n, _ in MANIFESTS])
def test_v1beta2_manifests_round_trip(name: str, obj: Obj) -> None:
    spoke = from_hub(obj)
    assert check_object(spoke) == []
    assert to_hub(spoke) == obj


def test_the_manifests_cover_the_template_kinds() -> None:
    kinds = {o["kind"] for _, o in MANIFESTS}
    assert len(MANIFESTS) > 100
    assert kinds >= {"Cluster", "ClusterClass", "KubeadmControlPlane", "MachineDeployment", "MachinePool",
                     "MachineHealthCheck", "DockerMachineTemplate", "KubeadmConfigTemplate", "ClusterResourceSet"}

