"""The Dev* kinds between v1beta1 and v1beta2, as upstream v1.14.0's test/infrastructure/docker/api/v1beta1/
conversion.go converts them: the docker backend's failure domains map <-> list, `ready` <->
initialization.provisioned, conditions as for the Docker* kinds, and what only one side can say (a DevMachine's
status.failureDomain, a DevMachineTemplate's status.capacity) kept through the conversion-data annotation."""

from __future__ import annotations

import copy
import json

import pytest

from capd_py.api.conversion import CONVERTIBLE_KINDS, DATA_ANNOTATION, ConversionError, convert, from_hub, to_hub

try:
    from conversion_fixtures import ROOT, UPSTREAM, Obj, load
    from schema_check import check_object
except ImportError:  # pragma: no cover - package-style collection
    from .conversion_fixtures import ROOT, UPSTREAM, Obj, load  # type: ignore[no-redef]
    from .schema_check import check_object  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

GROUP = "infrastructure.cluster.x-k8s.io"
HUB = f"{GROUP}/v1beta2"
SPOKE = f"{GROUP}/v1beta1"
POPULATED = {f"{o['kind']}/{o['metadata']['name']}": o
             for o in load(ROOT / "tests" / "fixtures" / "conversion" / "populated-v1beta2.yaml")}
# upstream-shaped v1beta1 objects: the docker backend (written from upstream's v1beta1 types) and upstream
# v1.10.10's in-memory ClusterClass templates
SPOKES = [o for o in load(ROOT / "tests" / "fixtures" / "conversion" / "dev-v1beta1.yaml")
          + load(UPSTREAM / "v1beta1" / "in-memory.yaml") if o["kind"].startswith("Dev")]


def _without_data(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    annotations = out["metadata"].get("annotations") or {}
    annotations.pop(DATA_ANNOTATION, None)
    if not annotations:
        out["metadata"].pop("annotations", None)
    return out


def test_the_four_kinds_upstream_serves_in_v1beta1_convert_and_the_pools_do_not() -> None:
    assert {k for g, k in CONVERTIBLE_KINDS if g == GROUP and k.startswith("Dev")} == {
        "DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate"}
    pool = {"apiVersion": HUB, "kind": "DevMachinePool", "metadata": {"name": "p"}, "spec": {}}
    with pytest.raises(ConversionError, match="no conversion for DevMachinePool"):
        convert(pool, SPOKE)


def test_spokes_cover_both_backends_and_every_kind() -> None:
    assert {o["kind"] for o in SPOKES} == {"DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate"}
    backends = {b for o in SPOKES for b in (o["spec"].get("backend") or o["spec"]["template"]["spec"]["backend"])}
    assert backends == {"docker", "inMemory"}


@pytest.mark.parametrize("spoke", SPOKES, ids=[f"{o['kind']}/{o['metadata']['name']}" for o in SPOKES])
def test_spoke_hub_spoke_is_lossless(spoke: Obj) -> None:
    assert check_object(spoke) == [], "the fixture fits upstream v1.14.0's v1beta1 schema"
    hub = to_hub(spoke)
    assert hub["apiVersion"] == HUB and check_object(hub) == [], "and converts to a valid capd-py v1beta2 object"
    back = from_hub(hub)
    assert check_object(back) == []
    assert _without_data(back) == spoke
    assert to_hub(back) == hub


@pytest.mark.parametrize("name", [n for n in POPULATED if n.startswith("Dev")])
def test_hub_spoke_hub_is_lossless(name: str) -> None:
    hub = POPULATED[name]
    spoke = from_hub(hub)
    assert spoke["apiVersion"] == SPOKE and check_object(spoke) == []
    assert to_hub(spoke) == hub
    # what a v1beta1 client sees never has the v1beta2-only fields
    status = spoke.get("status") or {}
    assert not {"initialization", "failureDomain", "capacity", "deprecated"} & set(status)


def test_devcluster_docker_fields_and_status_go_down_as_upstreams() -> None:
    hub = POPULATED["DevCluster/devc1"]
    spoke = from_hub(hub)
    assert spoke["spec"]["backend"]["docker"]["failureDomains"] == {
        "fd1": {"controlPlane": True}, "fd2": {"controlPlane": False, "attributes": {"rack": "2"}}}
    assert spoke["spec"]["backend"]["docker"]["loadBalancer"] == hub["spec"]["backend"]["docker"]["loadBalancer"]
    assert spoke["spec"]["controlPlaneEndpoint"] == {"host": "127.0.0.1", "port": 40124}
    status = spoke["status"]
    assert status["ready"] is True
    assert status["failureDomains"] == {"fd1": {"controlPlane": True}, "fd2": {"controlPlane": False,
                                                                              "attributes": {"rack": "2"}}}
    # v1beta2 conditions under status.v1beta2, the deprecated v1beta1 ones back at status.conditions
    assert [c["type"] for c in status["v1beta2"]["conditions"]] == ["Ready", "LoadBalancerAvailable"]
    assert [c["type"] for c in status["conditions"]] == ["LoadBalancerAvailable"]
    stored = json.loads(spoke["metadata"]["annotations"][DATA_ANNOTATION])
    assert stored["spec"] == hub["spec"] and stored["status"] == hub["status"]


def test_a_v1beta1_devcluster_goes_up_with_sorted_domains_and_provisioned() -> None:
    spoke = next(o for o in SPOKES if o["kind"] == "DevCluster")
    hub = to_hub(spoke)
    assert hub["spec"]["backend"]["docker"]["failureDomains"] == [
        {"name": "fd1", "controlPlane": True}, {"name": "fd2", "controlPlane": False, "attributes": {"rack": "2"}}]
    assert hub["status"]["initialization"] == {"provisioned": True}
    assert hub["status"]["conditions"] == spoke["status"]["v1beta2"]["conditions"]
    assert hub["status"]["deprecated"]["v1beta1"]["conditions"] == spoke["status"]["conditions"]
    assert "ready" not in hub["status"] and "v1beta2" not in hub["status"]


def test_the_in_memory_backend_is_kept_when_empty() -> None:
    """`backend.inMemory: {}` names the backend (a pointer to an empty struct upstream): never dropped."""
    for kind, spec in (("DevCluster", {"backend": {"inMemory": {}}}),
                       ("DevClusterTemplate", {"template": {"spec": {"backend": {"inMemory": {}}}}}),
                       ("DevMachine", {"backend": {"inMemory": {}}}),
                       ("DevMachineTemplate", {"template": {"spec": {"backend": {"docker": {}}}}})):
        hub = {"apiVersion": HUB, "kind": kind, "metadata": {"name": "x"}, "spec": spec}
        spoke = from_hub(hub)
        assert spoke["spec"] == spec, kind
        assert to_hub(spoke)["spec"] == spec, kind
        assert to_hub({**copy.deepcopy(spoke), "metadata": {"name": "x"}})["spec"] == spec, kind


def test_provisioned_unset_stays_unset_through_v1beta1() -> None:
    """Upstream's Convert_bool_To_Pointer_bool: v1beta1 `ready: false` does not become provisioned: false when the
    stored object had no initialization."""
    hub = {"apiVersion": HUB, "kind": "DevMachine", "metadata": {"name": "m"},
           "spec": {"backend": {"docker": {}}},
           "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}}
    spoke = from_hub(hub)
    assert spoke["status"].get("ready", False) is False
    assert to_hub(spoke) == hub


def test_a_v1beta1_edit_keeps_the_devmachines_failure_domain_and_takes_the_edit() -> None:
    hub = POPULATED["DevMachine/devm1"]
    spoke = from_hub(hub)
    assert "failureDomain" not in spoke["status"]
    spoke["spec"]["backend"]["docker"]["preLoadImages"] = ["a:b"]
    restored = to_hub(spoke)
    assert restored["status"]["failureDomain"] == "fd1"
    assert restored["status"]["initialization"] == {"provisioned": True}
    assert restored["spec"]["backend"]["docker"]["preLoadImages"] == ["a:b"]
    assert restored["spec"]["backend"]["docker"]["bootstrapTimeout"] == "3m0s"
    # without the annotation (a v1beta1 client that dropped it), the v1beta2-only field is gone, as upstream's
    plain = to_hub(_without_data(spoke))
    assert "failureDomain" not in plain["status"]


def test_devmachinetemplate_capacity_lives_only_in_the_annotation() -> None:
    hub = POPULATED["DevMachineTemplate/devmt1"]
    spoke = from_hub(hub)
    assert "status" not in spoke  # v1beta1 DevMachineTemplate has no status
    assert json.loads(spoke["metadata"]["annotations"][DATA_ANNOTATION])["status"] == {
        "capacity": {"cpu": "2", "memory": "4Gi"}}
    assert to_hub(spoke)["status"] == {"capacity": {"cpu": "2", "memory": "4Gi"}}


def test_devclustertemplate_stores_no_conversion_data() -> None:
    """Upstream's DevClusterTemplate ConvertFrom calls no MarshalData: both versions say the same."""
    spoke = from_hub(POPULATED["DevClusterTemplate/devct1"])
    assert DATA_ANNOTATION not in (spoke["metadata"].get("annotations") or {})
    assert spoke["spec"]["template"]["metadata"] == {"labels": {"a": "b"}, "annotations": {"c": "d"}}
