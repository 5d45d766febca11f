from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest

from capd_py.api.labels import CLUSTER_NAME
from capd_py.reconcile import clusterresourceset as rcrs

pytestmark = pytest.mark.unit

CM_DATA = {"b.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: x}\n---\n"
                     "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
           "a.yaml": "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa}\n"}


def crs(strategy: str | None = None, selector: dict[str, Any] | None = None,
        resources: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "clusterSelector": {"matchLabels": {"cni": "calico"}} if selector is None else selector,
        "resources": resources if resources is not None else [{"kind": "ConfigMap", "name": "cm"},
                                                              {"kind": "Secret", "name": "sec"}],
    }
    if strategy:
        spec["strategy"] = strategy
    return {"apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet",
            "metadata": {"name": "crs", "namespace": "ns", "uid": "crs-uid", "generation": 2}, "spec": spec}


def cluster(name: str = "c1", labels: dict[str, str] | None = None, initialized: bool = True,
            ns: str = "ns", deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name, "namespace": ns, "uid": f"{name}-uid",
                          "labels": {"cni": "calico"} if labels is None else labels}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": md,
            "status": {"initialization": {"controlPlaneInitialized": True}} if initialized else {}}


def configmap(data: dict[str, str] | None = None) -> dict[str, Any]:
    return {"kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": data or dict(CM_DATA)}


def secret(typ: str = rcrs.SECRET_TYPE, text: str = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n") -> dict:
    return {"kind": "Secret", "type": typ, "metadata": {"name": "sec", "namespace": "ns"},
            "data": {"s.yaml": base64.b64encode(text.encode()).decode()}}


def loaded(c: dict[str, Any] | None = None, **found: Any) -> list[rcrs.Resource]:
    f = {("ConfigMap", "cm"): found.get("cm", configmap()), ("Secret", "sec"): found.get("sec", secret())}
    return rcrs.load_resources(c or crs(), f)


# --- selection ----------------------------------------------------------------------------------------------

def test_selects_by_labels_in_the_same_namespace_and_never_with_an_empty_selector() -> None:
    assert rcrs.selects(crs(), cluster())
    assert not rcrs.selects(crs(), cluster(labels={"cni": "cilium"}))
    assert not rcrs.selects(crs(), cluster(ns="other"))
    assert not rcrs.selects(crs(selector={}), cluster())
    assert not rcrs.selects(crs(selector={"matchLabels": {}}), cluster())
    expr = {"matchExpressions": [{"key": "cni", "operator": "In", "values": ["calico", "cilium"]}]}
    assert rcrs.selects(crs(selector=expr), cluster())
    got = rcrs.matching_clusters(crs(), [cluster("b"), cluster("a"), cluster("gone", deleting=True),
                                         cluster("other", labels={})])
    assert [c["metadata"]["name"] for c in got] == ["a", "b"]


def test_control_plane_initialized_from_status_or_condition() -> None:
    assert rcrs.control_plane_initialized(cluster())
    assert not rcrs.control_plane_initialized(cluster(initialized=False))
    c = cluster(initialized=False)
    c["status"] = {"conditions": [{"type": "ControlPlaneInitialized", "status": "True"}]}
    assert rcrs.control_plane_initialized(c)


def test_uses_and_refs() -> None:
    c = crs(resources=[{"kind": "ConfigMap", "name": "a"}, {"kind": "Secret", "name": "a"},
                       {"kind": "ConfigMap", "name": "a"}])
    assert rcrs.refs(c) == [("ConfigMap", "a"), ("Secret", "a")]
    assert rcrs.uses(c, "Secret", "a") and not rcrs.uses(c, "Secret", "b")
    assert rcrs.strategy(crs()) == rcrs.APPLY_ONCE and rcrs.strategy(crs("Reconcile")) == rcrs.RECONCILE


# --- resources ----------------------------------------------------------------------------------------------

def test_hash_is_upstreams_sha256_over_values_in_key_order() -> None:
    (cm, sec) = loaded()
    want = hashlib.sha256((CM_DATA["a.yaml"] + CM_DATA["b.yaml"]).encode()).hexdigest()
    assert cm.hash == f"sha256:{want}" and not cm.problem
    # a Secret's values are decoded before hashing
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n"
    assert sec.hash == f"sha256:{hashlib.sha256(text.encode()).hexdigest()}"
    assert [o["metadata"]["name"] for o in sec.objects] == ["s"]


def test_objects_in_key_order_sorted_for_creation_within_a_value() -> None:
    (cm, _) = loaded()
    assert [(o["kind"], o["metadata"]["name"]) for o in cm.objects] == [
        ("ServiceAccount", "sa"), ("Namespace", "x"), ("Deployment", "d")]


def test_json_list_and_empty_documents() -> None:
    value = json.dumps([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "j"}}])
    (cm, _) = loaded(cm=configmap({"x": value}))
    assert [o["metadata"]["name"] for o in cm.objects] == ["j"] and not cm.problem
    (cm, _) = loaded(cm=configmap({"x": "---\n\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\n---\n"}))
    assert [o["metadata"]["name"] for o in cm.objects] == ["k"]


@pytest.mark.parametrize("found, reason, text", [
    ({"cm": None}, rcrs.R_NOT_APPLIED, "ConfigMap 'cm' does not exist"),
    ({"sec": secret(typ="Opaque")}, rcrs.R_WRONG_SECRET_TYPE, "of type 'Opaque'"),
    ({"cm": configmap({"x": "kind: [unclosed"})}, rcrs.R_NOT_APPLIED, "ConfigMap 'cm' cannot be read"),
    ({"cm": configmap({"x": "apiVersion: v1\nkind: ConfigMap\n"})}, rcrs.R_NOT_APPLIED, "lacks metadata.name"),
    ({"cm": configmap({"x": "- just\n- a list\n"})}, rcrs.R_NOT_APPLIED, "document 1 is not an object"),
    ({"sec": {**secret(), "data": {"k": "not base64!"}}}, rcrs.R_NOT_APPLIED, "is not base64"),
])
def test_bad_resources_block_everything_with_a_clear_condition(found: dict[str, Any], reason: str,
                                                               text: str) -> None:
    res = loaded(**found)
    bad = rcrs.problems(res)
    assert len(bad) == 1 and text in (bad[0].problem or "")
    assert rcrs.to_apply(crs(), None, res) == []  # nothing applied, to no Cluster
    st = rcrs.compute_status(crs(), rcrs.Outcome(resources=res, clusters=["c1"]))
    (applied,) = [c for c in st["conditions"] if c["type"] == rcrs.RESOURCES_APPLIED]
    assert applied["status"] == "False" and applied["reason"] == reason and text in applied["message"]
    assert st["observedGeneration"] == 2


# --- what to apply ------------------------------------------------------------------------------------------

def binding(entries: list[dict[str, Any]], crs_name: str = "crs") -> dict[str, Any]:
    return {"metadata": {"name": "c1", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"clusterName": "c1", "bindings": [{"clusterResourceSetName": crs_name, "resources": entries}]}}


def test_apply_once_applies_until_applied_then_never_again() -> None:
    res = loaded()
    assert [r.key for r in rcrs.to_apply(crs(), None, res)] == [("ConfigMap", "cm"), ("Secret", "sec")]
    b = binding([{"kind": "ConfigMap", "name": "cm", "hash": "sha256:old", "applied": True},
                 {"kind": "Secret", "name": "sec", "hash": res[1].hash, "applied": False}])
    assert [r.key for r in rcrs.to_apply(crs(), b, res)] == [("Secret", "sec")]  # a changed hash is ignored
    # another ClusterResourceSet's entry does not count
    assert len(rcrs.to_apply(crs(), binding(b["spec"]["bindings"][0]["resources"], "other"), res)) == 2


def test_reconcile_applies_again_when_the_hash_changes() -> None:
    res = loaded()
    b = binding([{"kind": "ConfigMap", "name": "cm", "hash": "sha256:old", "applied": True},
                 {"kind": "Secret", "name": "sec", "hash": res[1].hash, "applied": True}])
    assert [r.key for r in rcrs.to_apply(crs("Reconcile"), b, res)] == [("ConfigMap", "cm")]
    b["spec"]["bindings"][0]["resources"][0]["hash"] = res[0].hash
    assert rcrs.to_apply(crs("Reconcile"), b, res) == []


def test_binding_records_results_with_owners_and_label() -> None:
    res = loaded()
    results = [rcrs.Applied("ConfigMap", "cm", res[0].hash, True, "2026-01-01T00:00:00Z"),
               rcrs.Applied("Secret", "sec", res[1].hash, False, "2026-01-01T00:00:00Z", "boom")]
    d = rcrs.binding_after(None, crs(), cluster(), results)
    assert d["metadata"]["name"] == "c1" and d["metadata"]["labels"] == {CLUSTER_NAME: "c1"}
    # owned by the ClusterResourceSet only (upstream's e2e asserts it): the Cluster is spec.clusterName
    assert [(o["kind"], o["uid"], o.get("controller")) for o in d["metadata"]["ownerReferences"]] == [
        ("ClusterResourceSet", "crs-uid", None)]
    assert d["spec"] == {"clusterName": "c1", "bindings": [{"clusterResourceSetName": "crs", "resources": [
        {"name": "cm", "kind": "ConfigMap", "applied": True, "lastAppliedTime": "2026-01-01T00:00:00Z",
         "hash": res[0].hash},
        {"name": "sec", "kind": "Secret", "applied": False, "lastAppliedTime": "2026-01-01T00:00:00Z",
         "hash": res[1].hash}]}]}
    # a later result replaces the entry in place; another ClusterResourceSet's entry and owner stay
    other: dict[str, Any]
    other = {"metadata": {"name": "c1", "namespace": "ns", "labels": {CLUSTER_NAME: "c1"},
                          "ownerReferences": [{"kind": "ClusterResourceSet", "name": "other", "uid": "o"}]},
             "spec": {"clusterName": "c1", "bindings": [{"clusterResourceSetName": "other", "resources": []}]}}
    d2 = rcrs.binding_after({**other, "spec": {**other["spec"], "bindings": other["spec"]["bindings"]
                                               + d["spec"]["bindings"]}},
                            crs(), cluster(), [rcrs.Applied("Secret", "sec", "sha256:n", True, "t2")])
    assert [b["clusterResourceSetName"] for b in d2["spec"]["bindings"]] == ["other", "crs"]
    assert [r["applied"] for r in d2["spec"]["bindings"][1]["resources"]] == [True, True]
    assert [o["name"] for o in d2["metadata"]["ownerReferences"]] == ["other", "crs"]
    assert rcrs.binding_changed(other, d2) and not rcrs.binding_changed({**d2}, d2)


def test_deleting_a_crs_removes_its_entry_and_empty_bindings() -> None:
    b = binding([{"kind": "ConfigMap", "name": "cm", "applied": True}])
    b["metadata"]["ownerReferences"] = [{"kind": "ClusterResourceSet", "name": "crs", "uid": "u"},
                                        {"kind": "Cluster", "name": "c1", "uid": "c"}]
    assert rcrs.without_crs(b, "crs") is None
    b["spec"]["bindings"].append({"clusterResourceSetName": "other", "resources": []})
    rest = rcrs.without_crs(b, "crs")
    assert rest == {"metadata": {"ownerReferences": [{"kind": "Cluster", "name": "c1", "uid": "c"}]},
                    "spec": {"bindings": [{"clusterResourceSetName": "other", "resources": []}]}}


def test_binding_obsolete_when_the_cluster_is_gone_or_deleting() -> None:
    b = binding([])
    assert rcrs.binding_obsolete(b, None) and rcrs.binding_obsolete(b, cluster(deleting=True))
    assert not rcrs.binding_obsolete(b, cluster())


def test_a_bindings_old_cluster_owner_reference_is_removed() -> None:
    """Bindings written before (capd-py's, upstream's before v1.4) had the Cluster as an owner; it goes, as
    upstream's binding controller removes it."""
    old = binding([])
    old["metadata"]["ownerReferences"] = [
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "c1-uid"},
        {"apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet", "name": "crs",
         "uid": "crs-uid"}]
    d = rcrs.binding_after(old, crs(), cluster(), [])
    assert [o["kind"] for o in d["metadata"]["ownerReferences"]] == ["ClusterResourceSet"]
    assert rcrs.binding_changed(old, d)


def test_a_topology_bindings_deletion_waits_for_ok_to_delete_with_runtime_sdk() -> None:
    b = binding([])
    deleting = cluster(deleting=True)
    deleting["spec"] = {"topology": {"classRef": {"name": "cc"}}}
    assert rcrs.binding_obsolete(b, deleting) and not rcrs.binding_obsolete(b, deleting, hooks_gate=True)
    deleting["metadata"]["annotations"] = {"runtime.cluster.x-k8s.io/ok-to-delete": ""}
    assert rcrs.binding_obsolete(b, deleting, hooks_gate=True)


# --- objects ------------------------------------------------------------------------------------------------

def test_prepare_defaults_namespace_and_drops_server_fields() -> None:
    o = {"apiVersion": "v1", "kind": "ConfigMap", "status": {},
         "metadata": {"name": "a", "resourceVersion": "1", "uid": "u", "labels": {"x": "y"}}}
    p = rcrs.prepare(o, namespaced=True)
    assert p["metadata"] == {"name": "a", "labels": {"x": "y"}, "namespace": "default"} and "status" not in p
    assert "resourceVersion" in o["metadata"]  # the input is left alone
    assert rcrs.prepare({**o, "metadata": {"name": "n", "namespace": "x"}}, namespaced=False)["metadata"] == {
        "name": "n"}


def test_checkable_skips_objects_whose_kind_or_namespace_the_batch_creates() -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Widget"}}}
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    w = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "default"}}
    d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "x"}}
    d2 = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"}}
    batch = [crd, ns, w, d, d2]
    assert [rcrs.checkable(o, batch) for o in batch] == [True, True, False, False, True]


# --- status -------------------------------------------------------------------------------------------------

def _applied(out: rcrs.Outcome) -> dict[str, Any]:
    st = rcrs.compute_status(crs(), out)
    assert not any(c["type"] == "Paused" for c in st["conditions"])  # the reconcile skeleton's
    return next(c for c in st["conditions"] if c["type"] == rcrs.RESOURCES_APPLIED)


def test_status_conditions() -> None:
    res = loaded()
    c = _applied(rcrs.Outcome(resources=res, clusters=["c1"]))
    assert (c["status"], c["reason"], c["message"]) == ("True", "Applied", "")
    c = _applied(rcrs.Outcome(resources=res, clusters=[]))
    assert c["status"] == "True" and "No Cluster matches" in c["message"]
    c = _applied(rcrs.Outcome(resources=res, clusters=["c1", "c2"], waiting=["c2"]))
    assert (c["status"], c["reason"]) == ("False", "NotApplied") and "control plane of Cluster(s) c2" in c["message"]
    c = _applied(rcrs.Outcome(resources=res, clusters=["c1"], failed=["Cluster c1: ConfigMap cm: 422 Invalid: x"]))
    assert c["reason"] == "NotApplied" and "Failed to apply to Cluster c1: ConfigMap cm: 422 Invalid" in c["message"]
    c = _applied(rcrs.Outcome(resources=res, clusters=["c1"], unreachable={"c1": "refused"}))
    assert "Cannot reach the API server of Cluster c1: refused" in c["message"]


def test_status_is_stable() -> None:
    c = crs()
    out = rcrs.Outcome(resources=loaded(), clusters=["c1"])
    c["status"] = rcrs.compute_status(c, out)
    assert rcrs.compute_status(c, out) == c["status"]


def test_parsed_objects_are_copies_callers_may_change() -> None:
    value = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n"
    first = rcrs.parse_objects(value)
    first[0]["metadata"]["namespace"] = "changed"
    assert rcrs.parse_objects(value)[0]["metadata"] == {"name": "a"}


def test_a_repeated_failure_leaves_the_binding_unchanged() -> None:
    crs = {"metadata": {"name": "crs", "namespace": "ns", "uid": "u-crs"},
           "apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet"}
    cluster = {"metadata": {"name": "c", "namespace": "ns", "uid": "u-c"},
               "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster"}
    first = rcrs.binding_after(None, crs, cluster, [rcrs.Applied("ConfigMap", "cm", "sha256:1", applied=False,
                                                                 time="2026-01-01T00:00:00Z", error="boom")])
    again = rcrs.binding_after(first, crs, cluster, [rcrs.Applied("ConfigMap", "cm", "sha256:1", applied=False,
                                                                  time="2026-01-01T00:00:10Z", error="boom")])
    assert not rcrs.binding_changed(first, again)
    ok = rcrs.binding_after(first, crs, cluster, [rcrs.Applied("ConfigMap", "cm", "sha256:1", applied=True,
                                                               time="2026-01-01T00:00:20Z")])
    assert rcrs.binding_changed(first, ok)


def test_a_configmaps_unquoted_date_stays_a_string_as_kubectl_reads_it() -> None:
    """Issue 42: `released: 2024-01-01` in a resource failed with "unmarshallable object" (a PyYAML date)."""
    value = b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: info\ndata:\n  released: 2024-01-01\n  at: 12:30\n"
    [obj] = rcrs.parse_objects(value)
    assert obj["data"] == {"released": "2024-01-01", "at": "12:30"}
