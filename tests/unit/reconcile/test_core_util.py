from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import selectors
from capd_py.reconcile import coreutil

pytestmark = pytest.mark.unit


def obj(**md: object) -> dict:
    return {"metadata": {"name": "x", "resourceVersion": "7", **md}}


def test_metadata_patch_noop() -> None:
    o = obj(finalizers=["f"], labels={"a": "1"}, ownerReferences=[{"uid": "u", "kind": "K", "name": "n"}])
    assert coreutil.metadata_patch(o, finalizer="f", labels={"a": "1"}, owner={"uid": "u", "kind": "K",
                                                                              "name": "n"}) is None


def test_metadata_patch_adds_with_resource_version() -> None:
    p = coreutil.metadata_patch(obj(finalizers=["other"]), finalizer="f", labels={"a": "1", "skip": None},
                                owner={"uid": "u", "kind": "K", "name": "n"})
    assert p == {"metadata": {"finalizers": ["other", "f"], "labels": {"a": "1"},
                              "ownerReferences": [{"uid": "u", "kind": "K", "name": "n"}], "resourceVersion": "7"}}


def test_metadata_patch_replaces_stale_owner_and_removes_finalizer() -> None:
    o = obj(finalizers=["f", "g"], ownerReferences=[{"uid": "old", "kind": "K", "name": "n"},
                                                    {"uid": "z", "kind": "Z", "name": "z"}])
    p = coreutil.metadata_patch(o, owner={"uid": "new", "kind": "K", "name": "n"}, remove_finalizer="f")
    assert p is not None
    assert p["metadata"]["finalizers"] == ["g"]
    assert [r["uid"] for r in p["metadata"]["ownerReferences"]] == ["new", "z"]  # in place, as upstream's


@pytest.mark.parametrize("sel,labels,ok", [
    ({}, {"a": "1"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "1", "b": "2"}, True),
    ({"matchLabels": {"a": "2"}}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]}, {"a": "2"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
])
def test_selector_matches(sel: dict, labels: dict, ok: bool) -> None:
    assert selectors.selector_matches(sel, labels) is ok


def test_selector_string() -> None:
    sel = {"matchLabels": {"b": "2", "a": "1"},
           "matchExpressions": [{"key": "c", "operator": "In", "values": ["y", "x"]},
                                {"key": "d", "operator": "Exists"}, {"key": "e", "operator": "DoesNotExist"}]}
    assert selectors.selector_string(sel) == "a=1,b=2,c in (x,y),d,!e"


@pytest.mark.parametrize("v,total,up,want", [(3, 10, True, 3), ("25%", 10, True, 3), ("25%", 10, False, 2),
                                             ("0%", 5, True, 0), (None, 4, True, 0), ("2", 4, True, 2)])
def test_scaled_value(v: int | str | None, total: int, up: bool, want: int) -> None:
    assert coreutil.scaled_value(v, total, up) == want


def test_stable_hash() -> None:
    assert coreutil.stable_hash({"a": 1, "b": [1, 2]}) == coreutil.stable_hash({"b": [1, 2], "a": 1})
    assert coreutil.stable_hash({"a": 1}) != coreutil.stable_hash({"a": 2})


def test_paused() -> None:
    assert coreutil.is_paused(obj(annotations={"cluster.x-k8s.io/paused": ""}), None)
    assert coreutil.is_paused(obj(), {"spec": {"paused": True}})
    assert not coreutil.is_paused(obj(), {"spec": {}})


def test_merge_patches_is_one_patch_doing_both() -> None:
    meta = coreutil.metadata_patch({"metadata": {"name": "a", "resourceVersion": "7"}}, finalizer="f")
    assert meta is not None
    spec = {"spec": {"selector": {"matchLabels": {"k": "v"}}}, "metadata": {"labels": {"l": "1"}}}
    assert coreutil.merge_patches(meta, spec) == {
        "metadata": {"finalizers": ["f"], "resourceVersion": "7", "labels": {"l": "1"}},
        "spec": {"selector": {"matchLabels": {"k": "v"}}}}
    assert coreutil.merge_patches({"spec": {"a": {"b": 1}}}, {"spec": {"a": None}}) == {"spec": {"a": None}}


def test_replicas_of_unset_reads_as_the_defaulting_webhook_would() -> None:
    """CRDs installed without the webhook leave replicas unset (no schema default, as upstream's)."""
    lo, hi = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size", \
        "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
    assert coreutil.replicas_of({"spec": {}}) == 1
    assert coreutil.replicas_of({"spec": {}}, 0) == 0
    assert coreutil.replicas_of({"metadata": {"annotations": {lo: "0", hi: "2"}}, "spec": {}}) == 0
    assert coreutil.replicas_of({"metadata": {"annotations": {lo: "x", hi: "2"}}, "spec": {}}) == 1
    assert coreutil.replicas_of({"metadata": {"annotations": {lo: "0", hi: "2"}}, "spec": {"replicas": 2}}) == 2


def test_ensure_owner_ref_brings_a_reference_to_the_current_version_in_place() -> None:
    """upstream's e2e rewrites every owner reference to <group>/v1alpha1 and expects the controllers to bring them
    back to the served version (util.EnsureOwnerRef matches group, kind and name, any version)."""
    cluster: dict[str, Any] = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c", "uid": "u"}
    old: list[dict[str, Any]] = [{"apiVersion": "cluster.x-k8s.io/v1alpha1", "kind": "Cluster", "name": "c", "uid": "u",
            "controller": True, "blockOwnerDeletion": True},
           {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "Cluster", "name": "c", "uid": "i"}]
    got = coreutil.ensure_owner_ref(old, cluster)
    assert got[0] == {**cluster, "controller": True, "blockOwnerDeletion": True}  # the controller claim stays
    assert got[1] == old[1]  # another group's kind of the same name is another object
    assert coreutil.ensure_owner_ref(got, cluster) == got
    assert coreutil.metadata_patch(obj(ownerReferences=got), owner=cluster) is None
    assert coreutil.ensure_owner_ref([], cluster) == [cluster]
