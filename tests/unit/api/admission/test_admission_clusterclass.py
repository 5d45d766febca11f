"""upstream's ClusterClass webhook rules on a patch's kind: exactly one of definitions/external, an external patch
needs a generate or validate extension and the RuntimeSDK gate (upstream's texts), through the AdmissionReview."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.admission import admit, core

pytestmark = pytest.mark.unit

EXT = {"generatePatchesExtension": "gen.ext"}


def cc(*patches: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "metadata": {"name": "cc"},
            "spec": {"patches": list(patches)}}


def texts(obj: dict[str, Any], gates: dict[str, bool] | None = None) -> list[str]:
    return [str(e) for e in core.validate_clusterclass(None, obj, gates)]


def test_external_patches_need_the_runtime_sdk_gate() -> None:
    assert texts(cc({"name": "p", "external": EXT})) == [
        "spec.patches[0].external: Forbidden: patch.external can be used only if the RuntimeSDK feature flag is "
        "enabled"]
    assert texts(cc({"name": "p", "external": EXT}), {"RuntimeSDK": True}) == []
    assert texts(cc({"name": "p", "definitions": []})) == []


def test_exactly_one_of_definitions_or_external_and_an_extension_to_call() -> None:
    on = {"RuntimeSDK": True}
    assert texts(cc({"name": "p"}), on) == [
        "spec.patches[0]: Required value: one of definitions or external must be defined"]
    [both] = texts(cc({"name": "p", "definitions": [], "external": EXT}), on)
    assert both.startswith("spec.patches[0]: Invalid value: ") and both.endswith(
        "only one of definitions or external can be defined")
    assert texts(cc({"name": "p", "external": {"discoverVariablesExtension": "d.ext"}}), on) == [
        'spec.patches[0].external: Invalid value: {"discoverVariablesExtension":"d.ext"}: one of '
        "validateTopologyExtension and generatePatchesExtension must be defined"]


def test_the_webhook_refuses_as_upstream() -> None:
    review = {"request": {"uid": "u", "operation": "CREATE", "object": cc({"name": "p", "external": EXT}),
                          "resource": {"group": "cluster.x-k8s.io", "version": "v1beta2",
                                       "resource": "clusterclasses"}}}
    out = admit(review, mutate=False)["response"]
    assert out["allowed"] is False
    assert out["status"]["message"] == (
        'ClusterClass.cluster.x-k8s.io "cc" is invalid: spec.patches[0].external: Forbidden: patch.external can be '
        "used only if the RuntimeSDK feature flag is enabled")
    assert admit(review, mutate=False, gates={"RuntimeSDK": True})["response"]["allowed"] is True


def test_an_add_or_replace_json_patch_needs_exactly_one_of_value_or_value_from() -> None:
    """upstream validateJSONPatchValues (the admission oracle's #232: `value: null` and no valueFrom was accepted)."""
    def fields(*jps: dict[str, Any]) -> list[str]:
        obj = cc({"name": "p", "definitions": [{"selector": {}, "jsonPatches": list(jps)}]})
        return [f"{e.field}: {e.detail}" for e in core.validate_clusterclass(None, obj, None)]
    at = "spec.patches[0].definitions[0].jsonPatches"
    assert fields({"op": "add", "path": "/spec/x", "value": None}) == [
        f"{at}[0]: jsonPatch must define one of value or valueFrom"]
    assert fields({"op": "replace", "path": "/spec/x", "value": 1, "valueFrom": {"variable": "v"}}) == [
        f"{at}[0]: jsonPatch can not define both value and valueFrom"]
    assert fields({"op": "remove", "path": "/spec/x"}, {"op": "add", "path": "/spec/y", "value": False},
                  {"op": "add", "path": "/spec/z", "valueFrom": {"template": "t"}}) == []
