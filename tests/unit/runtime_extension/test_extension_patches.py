"""Patch and variable helpers for topology-mutation handlers; the JSON patches are checked by applying them with the
core's own patch engine (capd_py.reconcile.topology.patches.apply_json_patch)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.reconcile.topology.patches import apply_json_patch
from capd_py.runtime_extension import patches
from capd_py.runtime_extension.patches import VariableError, VariableNotFound

pytestmark = pytest.mark.unit

ORIGINAL: dict[str, Any] = {
    "apiVersion": "x/v1", "kind": "T",
    "spec": {"template": {"spec": {"a": 1, "gone": True, "list": [{"n": 1}], "other": [1, 2, 3], "t": True,
                                   "k/with~slash": "x"}}}}


@pytest.mark.parametrize("change", [
    lambda o: o["spec"]["template"]["spec"].update(new={"deep": [1]}),
    lambda o: o["spec"]["template"]["spec"].pop("gone"),
    lambda o: o["spec"]["template"]["spec"]["list"].append({"n": 2}),
    lambda o: o["spec"]["template"]["spec"].update(other=[3]),
    lambda o: o["spec"]["template"]["spec"].update(a="1"),
    lambda o: o["spec"]["template"]["spec"].update(t=1),  # not the same JSON value as true
    lambda o: o["spec"]["template"]["spec"].update({"k/with~slash": "y"}),
    lambda o: o.pop("spec"),
])
def test_json_patch_ops_turn_the_original_into_the_modified(change: Any) -> None:
    modified = copy.deepcopy(ORIGINAL)
    change(modified)
    ops = patches.json_patch_ops(ORIGINAL, modified)
    assert ops, "something changed"
    assert apply_json_patch(copy.deepcopy(ORIGINAL), ops) == modified


def test_an_append_is_an_add_at_the_new_index_and_equal_objects_give_an_empty_patch() -> None:
    modified = copy.deepcopy(ORIGINAL)
    modified["spec"]["template"]["spec"]["list"].append({"n": 2})
    assert patches.json_patch_ops(ORIGINAL, modified) == [
        {"op": "add", "path": "/spec/template/spec/list/1", "value": {"n": 2}}]
    assert patches.json_patch_ops(ORIGINAL, copy.deepcopy(ORIGINAL)) == []


def test_patch_items_are_base64_json_as_upstreams_byte_field() -> None:
    modified = copy.deepcopy(ORIGINAL)
    modified["spec"]["template"]["spec"]["a"] = 2
    item = patches.patch_item("uid-1", ORIGINAL, modified)
    assert item["uid"] == "uid-1" and item["patchType"] == "JSONPatch"
    assert patches.decode_patch(item["patch"]) == [{"op": "replace", "path": "/spec/template/spec/a", "value": 2}]
    merge = patches.patch_item("uid-1", ORIGINAL, modified, patch_type=patches.JSON_MERGE_PATCH)
    assert patches.decode_patch(merge["patch"]) == {"spec": {"template": {"spec": {"a": 2}}}}
    removed = copy.deepcopy(ORIGINAL)
    del removed["spec"]["template"]["spec"]["gone"]
    assert patches.merge_patch(ORIGINAL, removed) == {"spec": {"template": {"spec": {"gone": None}}}}
    with pytest.raises(ValueError, match="unknown patch type"):
        patches.patch_item("u", ORIGINAL, modified, patch_type="StrategicMergePatch")


def test_template_variables_merge_builtin_field_by_field_and_item_variables_win() -> None:
    request: dict[str, Any]
    request = {"variables": [{"name": "builtin", "value": {"cluster": {"name": "c1"}}},
                             {"name": "imageRepository", "value": "global"}]}
    item = {"variables": [{"name": "builtin", "value": {"controlPlane": {"version": "v1.35.4"}}},
                          {"name": "imageRepository", "value": "item"}]}
    merged = patches.template_variables(request, item)
    assert merged == {"builtin": {"cluster": {"name": "c1"}, "controlPlane": {"version": "v1.35.4"}},
                      "imageRepository": "item"}
    assert request["variables"][0]["value"] == {"cluster": {"name": "c1"}}  # inputs untouched


def test_variable_lookups_follow_upstreams_paths_and_messages() -> None:
    variables = {"builtin": {"controlPlane": {"version": "v1.34.4"}}, "files": [{"path": "/a"}], "n": 3,
                 "flag": True}
    assert patches.get_string_variable(variables, "builtin.controlPlane.version") == "v1.34.4"
    assert patches.get_variable(variables, "files[0].path") == "/a"
    assert patches.get_bool_variable(variables, "flag") is True
    with pytest.raises(VariableNotFound, match='variable "missing" does not exist'):
        patches.get_variable(variables, "missing")
    with pytest.raises(VariableNotFound, match='failed to lookup segment "machineDeployment"'):
        patches.get_variable(variables, "builtin.machineDeployment.version")
    with pytest.raises(VariableError, match="invalid syntax"):
        patches.get_string_variable(variables, "n")
    with pytest.raises(VariableError, match="array does not have index 3"):
        patches.get_variable(variables, "files[3]")
