"""The watch-fed Store: resourceVersion ordering, indexes, listings that replace, selectors."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.gvk import MACHINE, MACHINE_SET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.kube.cache import Store, rv_newer

pytestmark = pytest.mark.unit


def m(name: str, rv: str, cluster: str | None = "c1", owner: str | None = None, ns: str = "ns",
      **labels: str) -> dict[str, Any]:
    lab = dict(labels)
    if cluster:
        lab[CLUSTER_NAME] = cluster
    md: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv, "labels": lab}
    if owner:
        md["ownerReferences"] = [{"kind": "MachineSet", "name": owner, "uid": f"uid-{owner}"}]
    return {"metadata": md}


def test_unlisted_kind_is_not_served_until_replaced() -> None:
    s = Store()
    s.serve(MACHINE)
    assert not s.serves(MACHINE)
    s.replace(MACHINE, [m("a", "5")], "5")
    assert s.serves(MACHINE)
    assert not s.serves(MACHINE_SET)
    got = s.get(MACHINE, "ns", "a")
    assert got is not None and got["kind"] == "Machine"  # listings lack kind; the store puts it back


def test_older_copy_never_replaces_newer() -> None:
    s = Store()
    s.replace(MACHINE, [], "1")
    assert s.observe(MACHINE, m("a", "10"))
    assert not s.observe(MACHINE, m("a", "9"))  # an event that was on its way before our write
    got = s.get(MACHINE, "ns", "a")
    assert got is not None and got["metadata"]["resourceVersion"] == "10"
    assert s.observe(MACHINE, m("a", "11"))
    # a DELETED event older than what we hold (the object was recreated) leaves the new one alone
    s.observe(MACHINE, m("a", "10"), deleted=True)
    assert s.get(MACHINE, "ns", "a") is not None
    s.observe(MACHINE, m("a", "12"), deleted=True)
    assert s.get(MACHINE, "ns", "a") is None


def test_rv_comparison() -> None:
    assert rv_newer("10", "9") and rv_newer("9", "9") and not rv_newer("9", "10")
    assert rv_newer("opaque", "10")  # not an etcd revision: take the newer-arriving copy
    assert rv_newer(None, "3") and rv_newer("3", None)


def test_indexes_follow_label_and_owner_changes() -> None:
    s = Store()
    s.replace(MACHINE, [m("a", "1", owner="ms1"), m("b", "2", owner="ms1"), m("c", "3", cluster="c2")], "3")
    assert [o["metadata"]["name"] for o in s.list(MACHINE, "ns", labels={CLUSTER_NAME: "c1"})] == ["a", "b"]
    assert [o["metadata"]["name"] for o in s.owned_by(MACHINE, "uid-ms1")] == ["a", "b"]
    s.observe(MACHINE, m("b", "4", cluster="c2", owner=None))  # relabelled and orphaned
    assert [o["metadata"]["name"] for o in s.list(MACHINE, "ns", labels={CLUSTER_NAME: "c1"})] == ["a"]
    assert [o["metadata"]["name"] for o in s.list(MACHINE, "ns", labels={CLUSTER_NAME: "c2"})] == ["b", "c"]
    assert [o["metadata"]["name"] for o in s.owned_by(MACHINE, "uid-ms1")] == ["a"]
    s.forget(MACHINE, "ns", "a")
    assert s.owned_by(MACHINE, "uid-ms1") == []
    assert s.count() == 2


def test_list_by_namespace_labels_and_selector() -> None:
    s = Store()
    s.replace(MACHINE, [m("a", "1", role="cp"), m("b", "2"), m("x", "3", ns="other", role="cp")], "3")
    assert [o["metadata"]["name"] for o in s.list(MACHINE)] == ["a", "b", "x"]
    assert [o["metadata"]["name"] for o in s.list(MACHINE, "other")] == ["x"]
    assert [o["metadata"]["name"] for o in s.list(MACHINE, "ns", labels={"role": "cp"})] == ["a"]
    assert [o["metadata"]["name"] for o in s.list(MACHINE, None, selector="role")] == ["a", "x"]
    assert [o["metadata"]["name"] for o in s.list(MACHINE, "ns", selector=f"{CLUSTER_NAME}=c1,!role")] == ["b"]


def test_replace_drops_what_the_listing_lacks_but_keeps_newer_writes() -> None:
    s = Store()
    s.replace(MACHINE, [m("a", "1"), m("b", "2")], "2")
    s.observe(MACHINE, m("new", "9"))  # recorded from our own create after the listing was taken
    s.replace(MACHINE, [m("a", "1")], "5")  # b was deleted during a watch gap
    assert s.get(MACHINE, "ns", "b") is None
    assert s.get(MACHINE, "ns", "new") is not None
    assert s.get(MACHINE, "ns", "a") is not None


def test_a_write_answer_arriving_after_the_deleted_event_does_not_resurrect() -> None:
    s = Store()
    s.replace(MACHINE, [m("a", "5")], "5")
    s.observe(MACHINE, m("a", "7"), deleted=True)  # the watch was faster than our PATCH's answer
    assert not s.observe(MACHINE, m("a", "6"))  # the answer (older than the deletion) is dropped
    assert s.get(MACHINE, "ns", "a") is None
    assert s.observe(MACHINE, m("a", "9"))  # created again later: accepted
    assert s.get(MACHINE, "ns", "a") is not None


def test_copies_are_deep_and_follow_new_versions() -> None:
    s = Store()
    s.replace(MACHINE, [m("a", "1")], "1")
    held = s.get(MACHINE, "ns", "a")
    assert held is not None
    c1 = s.copy(MACHINE, held)
    assert c1 == held and c1 is not held and c1["metadata"] is not held["metadata"]
    c1["metadata"]["labels"]["x"] = "changed"  # a reader's change never reaches the Store
    c2 = s.copy(MACHINE, held)
    assert c2 is not None and "x" not in c2["metadata"]["labels"] and "x" not in held["metadata"]["labels"]
    s.observe(MACHINE, m("a", "2", cluster="c2"))  # a new version: copies are of it, not of the old one
    new = s.get(MACHINE, "ns", "a")
    assert new is not None and s.copy(MACHINE, new)["metadata"]["resourceVersion"] == "2"  # type: ignore[index]
    assert s.copy(MACHINE, held) is None  # no longer the stored object: the caller copies it another way
    s.forget(MACHINE, "ns", "a")
    assert s.copy(MACHINE, new) is None
