"""The in-memory workload store (capd_py/kube/inmemory_api.py) tells its watchers of every write, as the HTTPS server's
watches need (capd_py/kube/inmemory_api_server.py)."""

from __future__ import annotations

import pytest

from capd_py.kube.inmemory_api import InMemoryAPI

pytestmark = pytest.mark.unit


def test_the_store_tells_watchers_of_every_write() -> None:
    api = InMemoryAPI("ns", "c")
    seen: list[tuple[str, str, str, str]] = []
    api.watchers.append(lambda res, kind, obj: seen.append((res, kind, obj["metadata"]["name"],
                                                            obj["metadata"]["resourceVersion"])))
    api.add_node("n1", "in-memory://n1", control_plane=True, version="v1.34.4")
    api.add_static_pods("n1", ["etcd"])
    api.call("PATCH", "/api/v1/nodes/n1", {"metadata": {"labels": {"a": "b"}}},
             content_type="application/merge-patch+json")
    api.remove_object("nodes", None, "n1")          # takes its Pods with it
    kinds = [(r, k, n) for r, k, n, _ in seen]
    assert kinds[0] == ("nodes", "ADDED", "n1")
    assert ("pods", "ADDED", "etcd-n1") in kinds and ("nodes", "MODIFIED", "n1") in kinds
    assert kinds[-2:] == [("nodes", "DELETED", "n1"), ("pods", "DELETED", "etcd-n1")]
    rvs = [int(rv) for *_, rv in seen]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)    # a deletion carries a new resourceVersion too
    api.add_kubeadm_objects("v1.35.4")
    assert api.call("GET", "/version")["gitVersion"] == "v1.35.4"


def test_lists_read_label_selectors_as_kube_apiserver_does() -> None:
    from capd_py.kube.client import KubeError
    api = InMemoryAPI("ns", "c")
    api.add_node("cp", "in-memory://cp", control_plane=True, version="v1.34.4")
    api.add_node("w1", "in-memory://w1", control_plane=False, version="v1.34.4")

    def names(selector: str) -> list[str]:
        return [n["metadata"]["name"] for n in api.call("GET", "/api/v1/nodes", None,
                                                        [("labelSelector", selector)])["items"]]
    assert names("node-role.kubernetes.io/control-plane") == ["cp"]
    assert names("!node-role.kubernetes.io/control-plane") == ["w1"]
    assert names("kubernetes.io/hostname in (w1,other)") == ["w1"]  # set-based, as every other layer reads it
    assert names("") == ["cp", "w1"]
    with pytest.raises(KubeError) as e:  # refused even where nothing would match, with 400
        api.call("GET", "/api/v1/namespaces/none/pods", None, [("labelSelector", "a in (b")])
    assert e.value.status == 400


def test_static_pods_are_mirror_pods_a_drain_skips() -> None:
    """A Machine's deletion drains its Node: the control-plane static Pods stay (as a kubelet's mirror pods), so the
    machine does not make them (and its etcd member) again before its infrastructure goes."""
    import datetime as dt

    from capd_py.reconcile import drain
    api = InMemoryAPI("ns", "c")
    api.add_node("cp", "in-memory://cp", control_plane=True, version="v1.34.4")
    api.add_static_pods("cp", ["etcd", "kube-apiserver"])
    pods = api.call("GET", "/api/v1/namespaces/kube-system/pods")["items"]
    namespaces = {n["metadata"]["name"]: n for n in api.call("GET", "/api/v1/namespaces")["items"]}
    assert len(pods) == 2
    for p in pods:
        assert p["metadata"]["annotations"]["kubernetes.io/config.mirror"]
        got = drain.classify(p, rules=[], namespaces=namespaces, daemonsets=set(), now=dt.datetime.now(dt.UTC))
        assert got.behavior == drain.SKIP, got
