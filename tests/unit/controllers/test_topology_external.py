"""The controllers' half of external patches and variable discovery, over FakeRuntimeSDK (no I/O): the topology's
GeneratePatches / ValidateTopology calls go to the handlers the ClusterClass names, for the Cluster's namespace, and
their output lands in the desired objects; a failing handler or the gate off is a TopologyError; the ClusterClass
controller asks each external patch's DiscoverVariables handler and lists what it returned."""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as hooks
from capd_py.controllers import clusterclass as cc_controller
from capd_py.controllers import topology_external
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.skeleton import Subject
from capd_py.reconcile import clusterclass as rcc
from capd_py.reconcile.topology import desired as D
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.runtime_sdk_fake import FakeRuntimeSDK
from capd_py.testing.topology import blueprint as topology_blueprint

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "upstream" / "docker-clusterclass-quick-start.yaml"


def blueprint() -> D.Blueprint:
    """Upstream's quick-start ClusterClass and its templates (release-1.13, vendored unchanged)."""
    by = {}
    for d in yaml.safe_load_all(FIXTURE.read_text()):
        if d:
            d["metadata"]["namespace"] = "ns"
            by[(d["kind"], d["metadata"]["name"])] = d
    return topology_blueprint(by[("ClusterClass", "quick-start")], by)


def cluster() -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "uid-c1", "generation": 1},
            "spec": {"topology": {"classRef": {"name": "quick-start"}, "version": "v1.34.4",
                                  "controlPlane": {"replicas": 1},
                                  "workers": {"machineDeployments": [
                                      {"class": "default-worker", "name": "md-0", "replicas": 1}]}}}}


def rand_seq() -> Callable[[], str]:
    n = itertools.count()
    return lambda: f"r{next(n):04d}"

GEN, VAL, DISC = "generate-patches.rsdk", "validate-topology.rsdk", "discover-variables.rsdk"
PATCH = {"name": "test-patch", "external": {"generatePatchesExtension": GEN, "validateTopologyExtension": VAL,
                                            "discoverVariablesExtension": DISC}}


def ctx(sdk: Any) -> Ctx:
    return Ctx(kube=None, runtime=FakeRuntime(), settings=Settings(), workload=None,  # type: ignore[arg-type]
               runtime_sdk=sdk)


def set_lb_tag(req: Mapping[str, Any]) -> Mapping[str, Any]:
    items = []
    for it in req["items"]:
        if it["holderReference"]["fieldPath"] == "spec.infrastructureRef":
            ops = [{"op": "add", "path": "/spec/template/spec/loadBalancer", "value": {"imageTag": "from-ext"}}]
            items.append({"uid": it["uid"], "patchType": "JSONPatch",
                          "patch": base64.b64encode(json.dumps(ops).encode()).decode()})
    return hooks.response(hooks.GENERATE_PATCHES, items=items)


def bp() -> D.Blueprint:
    b = blueprint()
    b.clusterclass["spec"]["patches"] = [PATCH]
    return b


async def test_generate_patches_output_lands_in_the_desired_objects() -> None:
    sdk = FakeRuntimeSDK()
    sdk.register(GEN, hooks.GENERATE_PATCHES, set_lb_tag)
    sdk.register(VAL, hooks.VALIDATE_TOPOLOGY)
    plan = await topology_external.compute(ctx(sdk), cluster(), bp(), D.Current(), rand_seq())
    [dc] = [w.obj for w in plan.writes if w.obj["kind"] == "DockerCluster"]
    assert dc["spec"]["loadBalancer"] == {"imageTag": "from-ext"}
    assert [(h, n) for h, n, _ in sdk.calls] == [("GeneratePatches", GEN), ("ValidateTopology", VAL)]


async def test_a_failing_validator_or_an_unselected_namespace_is_a_topology_error() -> None:
    sdk = FakeRuntimeSDK()
    sdk.register(GEN, hooks.GENERATE_PATCHES, set_lb_tag)
    sdk.register(VAL, hooks.VALIDATE_TOPOLOGY,
                 lambda _r: hooks.response(hooks.VALIDATE_TOPOLOGY, hooks.FAILURE, "load balancer tag refused"))
    with pytest.raises(D.TopologyError) as e:
        await topology_external.compute(ctx(sdk), cluster(), bp(), D.Current(), rand_seq())
    # the Runtime SDK's own message (which handler, why) after upstream's prefix
    assert str(e.value).startswith('validation of patch "test-patch" failed: failed to call extension handler ')
    assert str(e.value).endswith("got failure response: load balancer tag refused")
    sdk.namespaces["rsdk"] = {"elsewhere"}
    with pytest.raises(D.TopologyError) as e:
        await topology_external.compute(ctx(sdk), cluster(), bp(), D.Current(), rand_seq())
    assert str(e.value).startswith('failed to generate patches for patch "test-patch": extension handler')


async def test_gate_off_the_topology_names_the_gate() -> None:
    with pytest.raises(D.TopologyError) as e:
        await topology_external.compute(ctx(FakeRuntimeSDK(gate=False)), cluster(), bp(), D.Current(), rand_seq())
    assert "RuntimeSDK feature flag is disabled" in str(e.value)


def _class() -> dict[str, Any]:
    # no templateRefs: the controller reads nothing from the API server
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
            "metadata": {"name": "cc", "namespace": "ns", "generation": 1},
            "spec": {"variables": [{"name": "inlineVar", "required": False, "schema": {
                "openAPIV3Schema": {"type": "string"}}}], "patches": [PATCH]}}


async def test_the_clusterclass_controller_lists_discovered_variables() -> None:
    sdk = FakeRuntimeSDK()
    sdk.register(DISC, hooks.DISCOVER_VARIABLES, lambda _r: hooks.response(hooks.DISCOVER_VARIABLES, variables=[
        {"name": "lbImageRepository", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}}]))
    out = await cc_controller._reconcile(ctx(sdk), Subject(_class(), None))
    assert out.status is not None and out.requeue_after is None
    assert [(v["name"], v["definitions"][0]["from"]) for v in out.status["variables"]] == [
        ("inlineVar", "inline"), ("lbImageRepository", "test-patch")]
    assert [(h, n) for h, n, _ in sdk.calls] == [("DiscoverVariables", DISC)]


async def test_the_clusterclass_controller_requeues_when_discovery_fails_and_skips_it_gate_off() -> None:
    out = await cc_controller._reconcile(ctx(FakeRuntimeSDK()), Subject(_class(), None))  # nothing registered
    assert out.status is not None and out.requeue_after
    c = cond.get({"status": out.status}, rcc.VARIABLES_READY)
    assert c is not None and c["message"].startswith(
        "VariableDiscovery failed: failed to call DiscoverVariables for patch test-patch: ")
    sdk = FakeRuntimeSDK(gate=False)
    out = await cc_controller._reconcile(ctx(sdk), Subject(_class(), None))
    assert out.status is not None and [v["name"] for v in out.status["variables"]] == ["inlineVar"]
    assert sdk.calls == []
