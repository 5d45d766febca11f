"""What the in-memory API server answers (capd_py/reconcile/inmemory_api.py): upstream's routes and discovery,
kubectl's tables, watch events, ports and certificate names."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from capd_py.reconcile import inmemory_api as ia

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def req(method: str, path: str, **query: str) -> ia.Request:
    r = ia.route(method, path, query, "v1.34.4")
    assert isinstance(r, ia.Request), r
    return r


def answer(method: str, path: str, **query: str) -> ia.Answer:
    r = ia.route(method, path, query, "v1.34.4")
    assert isinstance(r, ia.Answer), r
    return r


@pytest.mark.parametrize(("method", "path", "query", "want"), [
    ("GET", "/api/v1/nodes", {}, ("list", "v1", "nodes", "Node", None, None)),
    ("GET", "/api/v1/nodes", {"watch": "true"}, ("watch", "v1", "nodes", "Node", None, None)),
    ("GET", "/api/v1/nodes/n1", {}, ("get", "v1", "nodes", "Node", None, "n1")),
    ("PATCH", "/api/v1/nodes/n1", {}, ("patch", "v1", "nodes", "Node", None, "n1")),   # served whatever discovery says
    ("GET", "/api/v1/pods", {}, ("list", "v1", "pods", "Pod", None, None)),            # every namespace
    ("GET", "/api/v1/namespaces/kube-system/pods", {}, ("list", "v1", "pods", "Pod", "kube-system", None)),
    ("DELETE", "/api/v1/namespaces/kube-system/pods/etcd-a", {}, ("delete", "v1", "pods", "Pod", "kube-system",
                                                                  "etcd-a")),
    ("GET", "/api/v1/namespaces/kube-system", {}, ("get", "v1", "namespaces", "Namespace", None, "kube-system")),
    ("POST", "/api/v1/namespaces", {}, ("create", "v1", "namespaces", "Namespace", None, None)),
    ("PUT", "/apis/rbac.authorization.k8s.io/v1/clusterroles/x", {},
     ("update", "rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", None, "x")),
    ("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings", {},
     ("create", "rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", "kube-system", None)),
    ("GET", "/apis/apps/v1/namespaces/kube-system/deployments/coredns/", {},
     ("get", "apps/v1", "deployments", "Deployment", "kube-system", "coredns")),
])
def test_resource_routes(method: str, path: str, query: dict[str, str], want: tuple[Any, ...]) -> None:
    r = req(method, path, **query)
    assert (r.verb, r.group_version, r.resource, r.kind, r.namespace, r.name) == want


@pytest.mark.parametrize(("method", "path", "code"), [
    ("GET", "/api/v1/persistentvolumes", 404),                        # not one of upstream's resources
    ("GET", "/apis/cluster.x-k8s.io/v1beta2/clusters", 404),
    ("GET", "/api/v1/namespaces/kube-system/nodes", 404),             # Nodes are not namespaced
    ("GET", "/openapi/v2", 404),
    ("POST", "/api/v1/namespaces/kube-system/pods/etcd-a/portforward", 405),   # upstream's; not served here
    ("POST", "/api/v1/namespaces/kube-system/pods/etcd-a/exec", 405),
    ("DELETE", "/api/v1/nodes", 405),                                 # deletecollection
    ("POST", "/api/v1/nodes/n1", 405),
])
def test_what_is_not_served_says_so(method: str, path: str, code: int) -> None:
    a = answer(method, path)
    assert a.status == code and a.body["kind"] == "Status" and a.body["code"] == code
    assert a.body["reason"] == {404: "NotFound", 405: "MethodNotAllowed"}[code]


def test_health_version_and_discovery() -> None:
    assert answer("GET", "/") == ia.Answer(200, "ok") == answer("GET", "/healthz")
    v = answer("GET", "/version").body
    assert (v["major"], v["minor"], v["gitVersion"]) == ("1", "34", "v1.34.4")
    assert answer("GET", "/api").body["versions"] == ["v1"]
    groups = answer("GET", "/apis").body
    assert groups["kind"] == "APIGroupList"
    assert [g["name"] for g in groups["groups"]] == ["rbac.authorization.k8s.io", "apps", "storage.k8s.io",
                                                     "apiextensions.k8s.io", "policy"]     # upstream's, in order
    core = answer("GET", "/api/v1").body
    assert core["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in core["resources"]}
    assert sorted(by_name) == sorted(["configmaps", "endpoints", "nodes", "pods", "secrets", "services", "namespaces",
                                      "serviceaccounts"])
    assert by_name["nodes"]["verbs"] == ["get", "list", "watch"] and not by_name["nodes"]["namespaced"]
    assert by_name["pods"]["shortNames"] == ["po"] and by_name["pods"]["namespaced"]
    assert "deletecollection" not in by_name["namespaces"]["verbs"]
    rbac = answer("GET", "/apis/rbac.authorization.k8s.io/v1").body
    assert {r["kind"] for r in rbac["resources"]} == {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    assert answer("GET", "/apis/example.com/v1").status == 404


def test_bodies_the_server_reads() -> None:
    for ct in ("", "application/json", "application/json; charset=utf-8", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"):
        assert ia.unreadable(ct) is None, ct
    refused = ia.unreadable("application/vnd.kubernetes.protobuf")
    assert refused is not None and refused.status == 415 and refused.body["reason"] == "UnsupportedMediaType"


def node(name: str, ready: str = "True", cp: bool = False, created: str = "2026-01-01T11:58:00Z",
         rv: str = "5", unschedulable: bool = False) -> dict[str, Any]:
    labels = {"node-role.kubernetes.io/control-plane": ""} if cp else {}
    return {"metadata": {"name": name, "labels": labels, "creationTimestamp": created, "resourceVersion": rv},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": ready}], "nodeInfo": {"kubeletVersion": "v1.34.4"}}}


def test_typed_lists_and_objects() -> None:
    r = req("GET", "/api/v1/nodes")
    out = ia.typed(r, {"kind": "List", "metadata": {"resourceVersion": "9"}, "items": [node("a")]})
    assert (out["apiVersion"], out["kind"]) == ("v1", "NodeList")
    assert (out["items"][0]["apiVersion"], out["items"][0]["kind"]) == ("v1", "Node")
    got = ia.typed(req("GET", "/apis/apps/v1/namespaces/kube-system/deployments/coredns"), {"metadata": {}})
    assert (got["apiVersion"], got["kind"]) == ("apps/v1", "Deployment")


def test_node_table_as_kubectl_get_nodes() -> None:
    assert ia.wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
                          "g=meta.k8s.io,application/json")
    assert not ia.wants_table("application/json") and not ia.wants_table("")
    listed = {"kind": "List", "metadata": {"resourceVersion": "9"},
              "items": [node("cp", cp=True), node("w1", ready="False", created="2026-01-01T09:00:00Z"),
                        node("w2", ready="Unknown", unschedulable=True)]}
    t = ia.table(req("GET", "/api/v1/nodes"), listed, NOW)
    assert (t["kind"], t["apiVersion"], t["metadata"]["resourceVersion"]) == ("Table", "meta.k8s.io/v1", "9")
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Status", "Roles", "Age", "Version"]
    assert [r["cells"] for r in t["rows"]] == [["cp", "Ready", "control-plane", "2m", "v1.34.4"],
                                              ["w1", "NotReady", "<none>", "3h", "v1.34.4"],
                                              ["w2", "Unknown,SchedulingDisabled", "<none>", "2m", "v1.34.4"]]
    assert t["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert t["rows"][0]["object"]["metadata"]["name"] == "cp"
    one = ia.table(req("GET", "/api/v1/nodes/cp"), node("cp", cp=True), NOW)
    assert [r["cells"][0] for r in one["rows"]] == ["cp"]


def test_pod_and_generic_tables() -> None:
    static = {"metadata": {"name": "etcd-cp", "creationTimestamp": "2026-01-01T11:00:00Z"},   # as the store makes them
              "spec": {"nodeName": "cp", "containers": [{"name": "etcd"}]},
              "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    t = ia.table(req("GET", "/api/v1/namespaces/kube-system/pods"), {"items": [static]}, NOW)
    assert [c["name"] for c in t["columnDefinitions"]] == ["Name", "Ready", "Status", "Restarts", "Age"]
    assert [r["cells"] for r in t["rows"]] == [["etcd-cp", "1/1", "Running", 0, "60m"]]
    pending = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
               "status": {"containerStatuses": [{"ready": True, "restartCount": 2}, {"ready": False,
                                                                                  "restartCount": 1}]}}
    assert ia.table(req("GET", "/api/v1/namespaces/x/pods/p"), pending, NOW)["rows"][0]["cells"] == [
        "p", "1/2", "Pending", 3, "<unknown>"]
    cm = ia.table(req("GET", "/api/v1/namespaces/x/configmaps/c"),
                  {"metadata": {"name": "c", "creationTimestamp": "2026-01-01T11:59:30Z"}}, NOW)
    assert [c["name"] for c in cm["columnDefinitions"]] == ["Name", "Age"]
    assert cm["rows"][0]["cells"] == ["c", "30s"]


@pytest.mark.parametrize(("seconds", "want"), [
    (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"), (3 * 3600 - 1, "179m"), (3 * 3600, "3h"),
    (3 * 3600 + 300, "3h5m"), (8 * 3600, "8h"), (47 * 3600, "47h"), (50 * 3600, "2d2h"), (9 * 86400, "9d"),
    (800 * 86400, "2y"),
])
def test_human_duration(seconds: int, want: str) -> None:
    assert ia.human_duration(seconds) == want


def test_watch_events() -> None:
    r = req("GET", "/api/v1/namespaces/kube-system/pods", watch="true")
    listed = {"metadata": {"resourceVersion": "10"},
              "items": [{"metadata": {"name": "a", "resourceVersion": "3"}},
                        {"metadata": {"name": "b", "resourceVersion": "8"}}]}
    first = ia.initial_events(r, listed, "")
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in first] == [
        ("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None)]
    assert first[0]["object"]["kind"] == "Pod"
    assert first[-1]["object"]["metadata"] == {"resourceVersion": "10",
                                               "annotations": {"k8s.io/initial-events-end": "true"}}
    since = ia.initial_events(r, listed, "5")     # a client resuming from resourceVersion 5 (upstream: MODIFIED)
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in since] == [("MODIFIED", "b"), ("BOOKMARK", None)]

    meta: dict[str, Any] = {"name": "x", "namespace": "kube-system", "resourceVersion": "11",
                            "labels": {"component": "etcd"}}
    pod = {"metadata": meta, "spec": {"nodeName": "cp"}}
    q = {"labelSelector": "component=etcd", "fieldSelector": "spec.nodeName=cp"}
    ev = ia.watch_event(r, q, "pods", "ADDED", pod, after=10)
    assert ev is not None and ev["type"] == "ADDED" and ev["object"]["kind"] == "Pod"
    assert ia.watch_event(r, q, "pods", "ADDED", pod, after=11) is None            # not newer than the list
    assert ia.watch_event(r, q, "nodes", "ADDED", pod, after=10) is None           # another resource
    assert ia.watch_event(r, {"labelSelector": "component=kube-apiserver"}, "pods", "ADDED", pod, after=10) is None
    assert ia.watch_event(r, {"fieldSelector": "spec.nodeName!=cp"}, "pods", "ADDED", pod, after=10) is None
    other_ns = {"metadata": {**meta, "namespace": "default"}}
    assert ia.watch_event(r, {}, "pods", "ADDED", other_ns, after=10) is None
    every_ns = req("GET", "/api/v1/pods", watch="true")
    assert ia.watch_event(every_ns, {}, "pods", "DELETED", other_ns, after=10) is not None


@pytest.mark.parametrize(("selector", "want"), [
    ("metadata.name=n1", True), ("metadata.name==n1", True), ("metadata.name!=n1", False),
    ("metadata.name=n2", False), ("spec.nodeName=", True), ("metadata.name=n1,spec.nodeName=x", False),
])
def test_field_selectors(selector: str, want: bool) -> None:
    assert ia.field_match({"metadata": {"name": "n1"}}, selector) is want


def test_ports_and_certificate_names() -> None:
    assert ia.parse_port_range("20000-30000") == range(20000, 30001)
    for bad in ("20000", "a-b", "30000-20000", "0-10", "1-70000"):
        with pytest.raises(ValueError, match="in-memory port range"):
            ia.parse_port_range(bad)
    ports = range(20000, 20004)
    assert ia.next_port(ports, [], 20000) == 20000
    assert ia.next_port(ports, [20000, 20001], 20000) == 20002
    assert ia.next_port(ports, [20002], 20002) == 20003                      # in order from the last one given
    assert ia.next_port(ports, [20003], 20003) == 20000                      # then round again
    assert ia.next_port(ports, [20000, 20001, 20002, 20003], 20001) is None
    assert ia.serving_hosts("127.0.0.1") == ["localhost", "127.0.0.1", "::1"]
    assert ia.serving_hosts("10.244.0.7") == ["10.244.0.7", "localhost", "127.0.0.1", "::1"]
