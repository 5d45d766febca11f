"""The admission differential's inputs (capd_py.testing.admission_inputs): reproducible from their seed, every kind
of upstream's templates about equally often, creates and updates, and the objects the cases refer to."""

from __future__ import annotations

import json

import pytest

from capd_py.testing.admission_inputs import cases, fixtures, pool

pytestmark = pytest.mark.unit


def test_the_same_seed_gives_the_same_cases_and_another_seed_others() -> None:
    a, b, c = cases(7, 60, "ns"), cases(7, 60, "ns"), cases(8, 60, "ns")
    dump = [json.dumps([x.name, x.obj, x.base], sort_keys=True) for x in a]
    assert dump == [json.dumps([x.name, x.obj, x.base], sort_keys=True) for x in b]
    assert dump != [json.dumps([x.name, x.obj, x.base], sort_keys=True) for x in c]


def test_cases_cover_the_kinds_and_both_operations() -> None:
    todo = cases(42, 500, "ns")
    kinds = {c.obj["kind"] for c in todo}
    assert kinds == {o["kind"] for _, o in pool("ns")} and len(kinds) >= 15
    updates = [c for c in todo if c.base is not None]
    assert 50 < len(updates) < 200
    # an update keeps the base's name; a create gets a name of its own (nothing it could collide with)
    assert all(c.obj["metadata"]["name"] == c.base["metadata"]["name"] for c in updates if c.base)
    assert len({c.obj["metadata"]["name"] for c in todo if c.base is None and "name=" not in c.name}) > 300
    assert all(c.obj["metadata"]["namespace"] == "ns" for c in todo)


def test_fixtures_are_the_classes_both_sides_can_reconcile_and_every_template() -> None:
    objs = fixtures("ns")
    classes = {o["metadata"]["name"] for o in objs if o["kind"] == "ClusterClass"}
    assert "quick-start" in classes and "capd-quick-start" in classes  # CAPD's own class renamed beside e2e's
    assert "quick-start-runtimesdk" not in classes  # external patches: no extension answers here
    assert all(o["kind"] == "ClusterClass" or o["kind"].endswith("Template") for o in objs)
    referenced = {(o.get("spec") or {}).get("topology", {}).get("classRef", {}).get("name")
                  for _, o in pool("ns") if o["kind"] == "Cluster"} - {None}
    assert referenced <= classes
