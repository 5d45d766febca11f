"""capd_py.api.statuspatch: a status write carries what the reconcile changed and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import statuspatch as sp

pytestmark = pytest.mark.unit


def c(t: str, status: str = "True", reason: str = "R") -> dict[str, Any]:
    return {"type": t, "status": status, "reason": reason, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}


@pytest.mark.parametrize(("before", "after", "patch"), [
    ({}, {}, {}),
    ({"a": 1}, {"a": 1}, {}),
    ({"a": 1}, {"a": 2}, {"a": 2}),
    ({"a": 1}, {}, {"a": None}),
    ({}, {"a": {"b": 1}}, {"a": {"b": 1}}),
    ({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}, {"a": {"c": 3}}),
    ({"a": {"b": 1}}, {"a": {}}, {"a": {"b": None}}),
    ({"a": [1, 2]}, {"a": [1]}, {"a": [1]}),  # lists are replaced whole, as merge patch does
    ({"a": 1}, {"a": {"b": 1}}, {"a": {"b": 1}}),
])
def test_merge_diff(before: dict[str, Any], after: dict[str, Any], patch: dict[str, Any]) -> None:
    assert sp.merge_diff(before, after) == patch


def test_equal_status_writes_nothing_whatever_the_condition_order() -> None:
    before = {"phase": "Running", "conditions": [c("Ready"), c("Available")]}
    after = {"phase": "Running", "conditions": [c("Available"), c("Ready")]}
    assert not sp.status_patch(before, after)


def test_fields_the_reconcile_did_not_change_are_not_sent() -> None:
    before: dict[str, Any] = {"phase": "Provisioned", "replicas": 1, "conditions": [c("Ready")]}
    after = {"phase": "Running", "replicas": 1, "conditions": [c("Ready")]}
    p = sp.status_patch(before, after)
    assert p.fields == {"phase": "Running"} and p.conditions == {}
    assert p.body(before["conditions"]) == {"phase": "Running"}  # no list: nothing to collide on


def test_condition_changes_apply_onto_the_newest_list() -> None:
    before = {"conditions": [c("Ready", "False"), c("Gone")]}
    after = {"conditions": [c("Ready", "True"), c("New")]}
    p = sp.status_patch(before, after)
    assert p.conditions == {"Ready": c("Ready", "True"), "New": c("New"), "Gone": None}
    # meanwhile another writer set TopologyReconciled and changed Other: both survive ours
    newest = [c("TopologyReconciled"), c("Ready", "False"), c("Gone"), c("Other", "False")]
    assert p.body(newest)["conditions"] == [c("TopologyReconciled"), c("Ready", "True"), c("Other", "False"),
                                            c("New")]


def test_owned_conditions_limit_what_is_written() -> None:
    before = {"conditions": [c("Ready", "False"), c("TopologyReconciled", "False")]}
    after = {"conditions": [c("Ready", "True"), c("TopologyReconciled", "True")]}
    p = sp.status_patch(before, after, owned_conditions=["TopologyReconciled"])
    assert p.conditions == {"TopologyReconciled": c("TopologyReconciled", "True")}
    assert p.body([c("Ready", "Unknown"), c("TopologyReconciled", "False")])["conditions"] == [
        c("Ready", "Unknown"), c("TopologyReconciled", "True")]


def test_removing_every_condition() -> None:
    p = sp.status_patch({"conditions": [c("Ready")]}, {})
    assert p.conditions == {"Ready": None} and p.body([c("Ready"), c("X")]) == {"conditions": [c("X")]}
