"""External patches (ClusterClass `spec.patches[].external`) in the pure patch engine, over upstream's quick-start
class: the order with inline patches (the class's list, each on the previous one's result), the GeneratePatches
request (holder references, uids, variables per patch, settings), JSONPatch and JSONMergePatch responses (base64
`patch`), ValidateTopology after the last patch, failures named as upstream names them, and the RuntimeSDK gate."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from capd_py.api import runtime_hooks as hooks
from capd_py.reconcile.topology import desired as D
from capd_py.reconcile.topology import patches as P

try:
    from test_desired import blueprint, cluster, rand_seq
except ImportError:  # pragma: no cover - package-style import
    from .test_desired import blueprint, cluster, rand_seq  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

EXT = {"name": "ext", "external": {"generatePatchesExtension": "generate-patches.ext-config",
                                   "validateTopologyExtension": "validate-topology.ext-config",
                                   "settings": {"answer": "42"}}}
INFRA_SPEC = "/spec/template/spec"


def b64(obj: Any) -> str:
    return base64.b64encode(json.dumps(obj).encode()).decode()


def inline(name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": name, "definitions": [{
        "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerClusterTemplate",
                     "matchResources": {"infrastructureCluster": True}},
        "jsonPatches": ops}]}


def bp_with(patches: list[dict[str, Any]], status_variables: list[dict[str, Any]] | None = None) -> D.Blueprint:
    bp = blueprint()
    bp.clusterclass["spec"]["patches"] = patches
    if status_variables is not None:
        bp.clusterclass["status"] = {"variables": status_variables}
    return bp


def status_var(name: str, origin: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"name": name, "definitionsConflict": False, "definitions": [
        {"from": origin, "required": False, "schema": {"openAPIV3Schema": schema or {"type": "string"}}}]}


def inline_status_variables() -> list[dict[str, Any]]:
    """The quick-start class's own variables as the ClusterClass controller lists them."""
    return [{"name": v["name"], "definitionsConflict": False,
             "definitions": [{"from": "inline", "required": bool(v.get("required", False)),
                              "schema": v["schema"]}]}
            for v in blueprint().clusterclass["spec"]["variables"]]


Answer = Callable[[P.ExternalCall], Mapping[str, Any]]


def run(bp: D.Blueprint, answer: Answer | None, c: dict[str, Any] | None = None,
        runtime_sdk: bool = True) -> tuple[D.Plan, list[P.ExternalCall]]:
    calls: list[P.ExternalCall] = []

    def record(call: P.ExternalCall) -> Mapping[str, Any]:
        calls.append(copy.deepcopy(call))
        assert answer is not None
        return answer(call)
    plan = P.drive(D.compute_steps(c or cluster(), bp, D.Current(), rand_seq(), runtime_sdk=runtime_sdk), record)
    return plan, calls


def item_of(request: Mapping[str, Any], kind: str, field_path: str) -> dict[str, Any]:
    [it] = [i for i in request["items"] if i["holderReference"]["kind"] == kind
            and i["holderReference"]["fieldPath"] == field_path]
    return dict(it)


def generated(patches_for: Callable[[Mapping[str, Any]], list[dict[str, Any]]]) -> Answer:
    """An extension answering GeneratePatches with `patches_for(request)` and ValidateTopology with Success."""
    def answer(call: P.ExternalCall) -> Mapping[str, Any]:
        if call.hook is hooks.GENERATE_PATCHES:
            return hooks.response(hooks.GENERATE_PATCHES, items=patches_for(call.request))
        return hooks.response(hooks.VALIDATE_TOPOLOGY)
    return answer


def infra_cluster(plan: D.Plan) -> dict[str, Any]:
    [w] = [w for w in plan.writes if w.obj["kind"] == "DockerCluster"]
    return w.obj


def test_gate_off_an_external_patch_fails_naming_the_gate() -> None:
    with pytest.raises(D.TopologyError) as e:
        D.compute(cluster(), bp_with([EXT]), D.Current(), rand_seq())
    assert str(e.value) == 'can not use external patch "ext" if RuntimeSDK feature flag is disabled'


def test_external_and_inline_patches_run_in_the_class_order_each_on_the_previous_result() -> None:
    bp = bp_with([inline("first", [{"op": "add", "path": f"{INFRA_SPEC}/customA", "value": "inline-1"}]),
                  EXT,
                  inline("last", [{"op": "replace", "path": f"{INFRA_SPEC}/customB", "value": "inline-3"}])])
    seen: list[Any] = []

    def patches_for(req: Mapping[str, Any]) -> list[dict[str, Any]]:
        it = item_of(req, "Cluster", P.INFRA_CLUSTER)
        seen.append(copy.deepcopy(it["object"]["spec"]["template"]["spec"]))
        return [{"uid": it["uid"], "patchType": "JSONPatch", "patch": b64([
            {"op": "add", "path": f"{INFRA_SPEC}/customB", "value": "external"},
            {"op": "copy", "from": f"{INFRA_SPEC}/customA", "path": f"{INFRA_SPEC}/customC"}])}]
    plan, calls = run(bp, generated(patches_for))
    assert seen[0]["customA"] == "inline-1" and "customB" not in seen[0]  # the external patch ran second
    spec = infra_cluster(plan)["spec"]
    assert (spec["customA"], spec["customB"], spec["customC"]) == ("inline-1", "inline-3", "inline-1")
    assert [(c.hook.name, c.extension) for c in calls] == [
        ("GeneratePatches", "generate-patches.ext-config"), ("ValidateTopology", "validate-topology.ext-config")]
    # ValidateTopology sees the final templates (after the inline patch listed after the external one)
    validated = item_of(calls[1].request, "Cluster", P.INFRA_CLUSTER)
    assert validated["object"]["spec"]["template"]["spec"]["customB"] == "inline-3"
    assert "uid" not in validated and calls[1].request["kind"] == "ValidateTopologyRequest"
    assert calls[1].request["settings"] == {"answer": "42"}


def test_the_request_carries_holder_references_uids_the_patch_variables_and_settings() -> None:
    sv = [*inline_status_variables(), status_var("extVar", "ext")]
    c = cluster(extVar="from-the-cluster")
    plan, calls = run(bp_with([EXT], sv), generated(lambda _req: []), c)
    req = calls[0].request
    assert (req["apiVersion"], req["kind"], req["settings"]) == (
        "hooks.runtime.cluster.x-k8s.io/v1alpha1", "GeneratePatchesRequest", {"answer": "42"})
    holders = [(i["holderReference"]["apiVersion"], i["holderReference"]["kind"], i["holderReference"]["name"],
                i["holderReference"]["fieldPath"]) for i in req["items"]]
    kcp = next(w.obj for w in plan.writes if w.obj["kind"] == "KubeadmControlPlane")["metadata"]["name"]
    md = next(w.obj for w in plan.writes if w.obj["kind"] == "MachineDeployment")["metadata"]["name"]
    assert holders == [
        ("cluster.x-k8s.io/v1beta2", "Cluster", "c1", "spec.infrastructureRef"),
        ("cluster.x-k8s.io/v1beta2", "Cluster", "c1", "spec.controlPlaneRef"),
        ("controlplane.cluster.x-k8s.io/v1beta2", "KubeadmControlPlane", kcp,
         "spec.machineTemplate.spec.infrastructureRef"),
        ("cluster.x-k8s.io/v1beta2", "MachineDeployment", md, "spec.template.spec.bootstrap.configRef"),
        ("cluster.x-k8s.io/v1beta2", "MachineDeployment", md, "spec.template.spec.infrastructureRef")]
    assert all(i["holderReference"]["namespace"] == "ns" for i in req["items"])
    assert len({i["uid"] for i in req["items"]}) == 5
    # only the variables defined by this patch (status.variables `from: ext`), builtin last
    assert [v["name"] for v in req["variables"]] == ["extVar", "builtin"]
    assert req["variables"][0]["value"] == "from-the-cluster"
    assert req["variables"][1]["value"]["cluster"]["name"] == "c1"
    # per-item variables: the control plane's and the MachineDeployment's builtins; none on the InfrastructureCluster
    assert "variables" not in req["items"][0]
    assert req["items"][1]["variables"][-1]["value"]["controlPlane"]["name"] == kcp
    assert req["items"][3]["variables"][-1]["value"]["machineDeployment"]["topologyName"] == "md-0"
    # the same input gives the same request (uids from the holder, no randomness)
    _, again = run(bp_with([EXT], sv), generated(lambda _req: []), c)
    assert again[0].request == req


def test_a_json_merge_patch_response_sets_and_removes_fields_of_the_spec_only() -> None:
    def patches_for(req: Mapping[str, Any]) -> list[dict[str, Any]]:
        it = item_of(req, "Cluster", P.INFRA_CLUSTER)
        return [{"uid": it["uid"], "patchType": "JSONMergePatch", "patch": b64({
            "metadata": {"name": "renamed"},
            "spec": {"template": {"spec": {"loadBalancer": {"imageTag": "v1"}, "failureDomains": None}}}})},
            {"uid": it["uid"], "patchType": "JSONMergePatch", "patch": b64({})}]
    plan, _ = run(bp_with([EXT]), generated(patches_for))
    obj = infra_cluster(plan)
    assert obj["spec"]["loadBalancer"] == {"imageTag": "v1"} and "failureDomains" not in obj["spec"]
    assert obj["metadata"]["name"] != "renamed"


def test_a_patch_for_an_unknown_uid_or_undecodable_fails_naming_the_patch() -> None:
    bp = bp_with([EXT])
    with pytest.raises(D.TopologyError) as e:
        run(bp, generated(lambda _r: [{"uid": "nope", "patchType": "JSONPatch", "patch": b64([])}]))
    assert str(e.value) == ('failed to apply patches for patch "ext": unable to find corresponding request item '
                            'for patch')
    with pytest.raises(D.TopologyError) as e:
        run(bp, generated(lambda r: [{"uid": item_of(r, "Cluster", P.INFRA_CLUSTER)["uid"],
                                      "patchType": "JSONPatch", "patch": "not base64!"}]))
    assert str(e.value).startswith('failed to apply patches for patch "ext": failed to apply patch: error decoding '
                                   "json patch (RFC6902)")
    with pytest.raises(D.TopologyError) as e:
        run(bp, generated(lambda r: [{"uid": item_of(r, "Cluster", P.INFRA_CLUSTER)["uid"], "patchType": "JSONPatch",
                                      "patch": b64([{"op": "remove", "path": "/spec/nothing/here"}])}]))
    assert "error applying json patch (RFC6902)" in str(e.value)


def test_failed_calls_are_named_as_upstream() -> None:
    def fail_generate(call: P.ExternalCall) -> Mapping[str, Any]:
        raise P.ExtensionCallError("failed to call extension handler \"generate-patches.ext-config\": boom")
    with pytest.raises(D.TopologyError) as e:
        run(bp_with([EXT]), fail_generate)
    assert str(e.value) == ('failed to generate patches for patch "ext": failed to call extension handler '
                            '"generate-patches.ext-config": boom')

    def fail_validate(call: P.ExternalCall) -> Mapping[str, Any]:
        if call.hook is hooks.VALIDATE_TOPOLOGY:
            raise P.ExtensionCallError("got failure response: too big")
        return hooks.response(hooks.GENERATE_PATCHES)
    with pytest.raises(D.TopologyError) as e:
        run(bp_with([EXT]), fail_validate)
    assert str(e.value) == 'validation of patch "ext" failed: got failure response: too big'


def test_every_external_validator_runs_after_every_patch_in_class_order() -> None:
    second = {"name": "second", "external": {"generatePatchesExtension": "gen.other",
                                             "validateTopologyExtension": "val.other"}}
    _, calls = run(bp_with([EXT, second]), generated(lambda _r: []))
    assert [c.extension for c in calls] == [
        "generate-patches.ext-config", "gen.other", "validate-topology.ext-config", "val.other"]
    assert "settings" not in calls[1].request and "settings" not in calls[3].request


def test_as_upstream_an_external_patch_without_a_generate_extension_fails_and_enabled_if_is_not_evaluated() -> None:
    validate_only = {"name": "v", "external": {"validateTopologyExtension": "val.ext"}}
    with pytest.raises(D.TopologyError) as e:
        run(bp_with([validate_only]), generated(lambda _r: []))
    assert str(e.value) == 'failed to create patch generator for patch "v"'
    never = {**EXT, "enabledIf": "false"}
    _, calls = run(bp_with([never]), generated(lambda _r: []))
    assert [c.hook.name for c in calls] == ["GeneratePatches", "ValidateTopology"]


def test_each_patch_sees_only_the_variables_defined_for_it() -> None:
    sv = [*inline_status_variables(), status_var("extVar", "ext")]
    uses_ext_var = inline("uses", [{"op": "add", "path": f"{INFRA_SPEC}/x", "valueFrom": {"variable": "extVar"}}])
    with pytest.raises(D.TopologyError) as e:
        run(bp_with([EXT, uses_ext_var], sv), generated(lambda _r: []), cluster(extVar="v"))
    assert "variable 'extVar' not found" in str(e.value)
    # a variable defined both inline and by the extension is seen by both
    both = [*inline_status_variables()[:-1], {**inline_status_variables()[-1], "definitions": [
        *inline_status_variables()[-1]["definitions"], {**inline_status_variables()[-1]["definitions"][0],
                                                        "from": "ext"}]}]
    _, calls = run(bp_with([EXT], both), generated(lambda _r: []))
    assert [v["name"] for v in calls[0].request["variables"]] == ["podSecurityStandard", "builtin"]


def test_cluster_variables_are_checked_against_the_discovered_definitions() -> None:
    c = cluster(extVar=7)
    with pytest.raises(D.TopologyError) as e:  # without status.variables only spec.variables define variables
        run(bp_with([EXT]), generated(lambda _r: []), c)
    assert "extVar" in str(e.value)
    with pytest.raises(D.TopologyError) as e:  # discovered: a string
        run(bp_with([EXT], [*inline_status_variables(), status_var("extVar", "ext")]), generated(lambda _r: []), c)
    assert "spec.topology.variables[extVar].value" in str(e.value)
    plan, _ = run(bp_with([EXT], [*inline_status_variables(), status_var("extVar", "ext", {"type": "integer"})]),
                  generated(lambda _r: []), c)
    assert plan.writes


def test_json_patch_move_copy_and_test_for_extensions() -> None:
    doc = {"spec": {"a": {"b": 1}, "l": [1, 2]}}
    out = P.apply_json_patch(doc, [{"op": "move", "from": "/spec/a/b", "path": "/spec/c"},
                                   {"op": "copy", "from": "/spec/l", "path": "/spec/m"},
                                   {"op": "add", "path": "/spec/m/-", "value": 3},
                                   {"op": "test", "path": "/spec/c", "value": 1},
                                   {"op": "replace", "path": "/spec/l/0", "value": 9}])
    assert out == {"spec": {"a": {}, "l": [9, 2], "c": 1, "m": [1, 2, 3]}}
    assert doc == {"spec": {"a": {"b": 1}, "l": [1, 2]}}
    with pytest.raises(P.PatchError, match="test failed"):
        P.apply_json_patch(doc, [{"op": "test", "path": "/spec/a/b", "value": 2}])
    with pytest.raises(P.PatchError, match="into itself"):
        P.apply_json_patch(doc, [{"op": "move", "from": "/spec/a", "path": "/spec/a/x"}])


def test_merge_patch_is_rfc_7386() -> None:
    assert P.apply_merge_patch({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": None, "e": 3}, "d": [2]}) == \
        {"a": {"c": 2, "e": 3}, "d": [2]}
    assert P.apply_merge_patch({"a": 1}, [1]) == [1]
