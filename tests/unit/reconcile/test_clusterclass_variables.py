"""ClusterClass variables from inline definitions and external patches' DiscoverVariables, merged into
status.variables as upstream's reconcileVariables: `from`, sorted by name, definitionsConflict, VariablesReady with
upstream's reason and messages, status.variables kept when a discovery fails."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as hooks
from capd_py.reconcile import clusterclass as rcc

pytestmark = pytest.mark.unit


def schema(t: str = "string", **more: Any) -> dict[str, Any]:
    return {"openAPIV3Schema": {"type": t, **more}}


def cc(patches: list[dict[str, Any]] | None = None, variables: list[dict[str, Any]] | None = None,
       status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass",
            "metadata": {"name": "cc", "namespace": "ns", "generation": 2},
            "spec": {"variables": variables if variables is not None else [
                {"name": "zeta", "required": True, "schema": schema()}],
                "patches": patches if patches is not None else [
                    {"name": "p1", "external": {"generatePatchesExtension": "gen.ext",
                                                "discoverVariablesExtension": "discover.ext",
                                                "settings": {"k": "v"}}},
                    {"name": "inline-one", "definitions": []}]},
            "status": status or {}}


def found(*variables: dict[str, Any]) -> dict[str, Any]:
    return hooks.response(hooks.DISCOVER_VARIABLES, variables=list(variables))


def test_discovery_calls_only_with_the_gate_on_and_with_the_patch_settings() -> None:
    assert rcc.discovery_calls(cc(), runtime_sdk=False) == []
    [call] = rcc.discovery_calls(cc(), runtime_sdk=True)
    assert (call.patch, call.extension) == ("p1", "discover.ext")
    assert call.request == {"apiVersion": "hooks.runtime.cluster.x-k8s.io/v1alpha1",
                            "kind": "DiscoverVariablesRequest", "settings": {"k": "v"}}


def test_discovered_variables_are_listed_with_their_origin_sorted_by_name() -> None:
    st = rcc.compute_status(cc(), [], [], [rcc.Discovered("p1", found(
        {"name": "alpha", "required": False, "schema": schema("integer")}))])
    assert st["variables"] == [
        {"name": "alpha", "definitionsConflict": False,
         "definitions": [{"from": "p1", "required": False, "schema": schema("integer")}]},
        {"name": "zeta", "definitionsConflict": False,
         "definitions": [{"from": "inline", "required": True, "schema": schema()}]}]
    c = cond.get({"status": st}, rcc.VARIABLES_READY)
    assert c is not None and (c["status"], c["reason"]) == ("True", "VariablesReady")


def test_the_same_definition_from_two_sources_is_no_conflict() -> None:
    # a false boolean and an unset one are the same schema (upstream's dropFalsePtrBool)
    st = rcc.compute_status(cc(), [], [], [rcc.Discovered("p1", found(
        {"name": "zeta", "required": True, "schema": schema(uniqueItems=False)}))])
    [zeta] = st["variables"]
    assert zeta["definitionsConflict"] is False and [d["from"] for d in zeta["definitions"]] == ["inline", "p1"]


def test_conflicting_definitions_are_listed_and_make_variables_not_ready() -> None:
    st = rcc.compute_status(cc(), [], [], [rcc.Discovered("p1", found(
        {"name": "zeta", "required": False, "schema": schema()}))])
    [zeta] = st["variables"]
    assert zeta["definitionsConflict"] is True
    obj = {**cc(), "status": st}
    c = cond.get(obj, rcc.VARIABLES_READY)
    assert c is not None and (c["status"], c["reason"], c["message"]) == (
        "False", "VariableDiscoveryFailed",
        "VariableDiscovery failed: the following variables have conflicting schemas: zeta")
    assert rcc.ready_for_topology(obj) is not None


def test_a_failed_discovery_keeps_the_listed_variables_and_says_why() -> None:
    before = [{"name": "old", "definitionsConflict": False,
               "definitions": [{"from": "p1", "required": False, "schema": schema()}]}]
    st = rcc.compute_status(cc(status={"variables": before}), [], [], [
        rcc.Discovered("p1", error='extension handler "discover.ext" is not registered')])
    assert st["variables"] == before
    c = cond.get({"status": st}, rcc.VARIABLES_READY)
    assert c is not None and (c["status"], c["reason"], c["message"]) == (
        "False", "VariableDiscoveryFailed",
        'VariableDiscovery failed: failed to call DiscoverVariables for patch p1: extension handler "discover.ext" '
        "is not registered")
    st = rcc.compute_status(cc(), [], [], [
        rcc.Discovered("p1", hooks.response(hooks.DISCOVER_VARIABLES, hooks.FAILURE, "nope"))])
    c = cond.get({"status": st}, rcc.VARIABLES_READY)
    assert c is not None and c["message"] == 'VariableDiscovery failed: patch p1 returned status "Failure" with ' \
                                             'message "nope"'


def test_invalid_discovered_schemas_are_named_under_the_patch() -> None:
    st = rcc.compute_status(cc(), [], [], [rcc.Discovered("p1", found(
        {"name": "builtin", "schema": schema()}))])
    c = cond.get({"status": st}, rcc.VARIABLES_READY)
    assert c is not None and c["status"] == "False"
    assert c["message"].startswith("VariableDiscovery failed: p1.variables[builtin].name: Invalid value: ")
    assert "reserved variable name" in c["message"]


def test_inline_only_classes_list_every_variable_from_inline() -> None:
    st = rcc.compute_status(cc(patches=[]), [], [])
    assert [(v["name"], [d["from"] for d in v["definitions"]]) for v in st["variables"]] == [("zeta", ["inline"])]


def test_status_variables_carry_the_crds_default_rule_reason_so_a_second_pass_writes_nothing() -> None:
    """The CRD defaults status.variables[].definitions[].schema.openAPIV3Schema.x-kubernetes-validations[].reason
    (FieldValueInvalid): written without it, every pass differed from what was stored (the test extension's
    kubeadmControlPlaneMaxSurge rule has none) and wrote again. Nested schemas are left alone, as the server does."""
    from capd_py.api import statuspatch
    rule = {"rule": 'self == "" || self != ""', "messageExpression": "'got %s'.format([self])"}
    nested = {"type": "object", "properties": {"n": {"type": "string", "x-kubernetes-validations": [dict(rule)]}}}
    d = [rcc.Discovered("p1", response=found(
        {"name": "surge", "required": False, "schema": schema("string", **{"x-kubernetes-validations": [dict(rule)]})},
        {"name": "nested", "required": False, "schema": {"openAPIV3Schema": nested}},
        {"name": "kept", "required": False, "schema": schema("string", **{"x-kubernetes-validations": [
            {**rule, "reason": "FieldValueForbidden"}]})}))]
    st = rcc.compute_status(cc(), [], [], d)
    by_name = {v["name"]: v["definitions"][0]["schema"]["openAPIV3Schema"] for v in st["variables"]}
    assert by_name["surge"]["x-kubernetes-validations"] == [{**rule, "reason": "FieldValueInvalid"}]
    assert by_name["kept"]["x-kubernetes-validations"][0]["reason"] == "FieldValueForbidden"
    assert by_name["nested"] == nested
    assert not statuspatch.status_patch(st, rcc.compute_status(cc(status=st), [], [], d))
