"""In-memory workload clusters (the DevCluster inMemory backend's): WorkloadClients serves a registered cluster from
memory once its kubeconfig Secret exists, its Nodes are always "in sync" and every Node write reaches the listener
(as a Node watch's events); etcd clients of an in-memory cluster are its FakeEtcd, others pass through."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.gvk import NODE, POD, SECRET
from capd_py.kube.inmemory_api import InMemoryAPI, InMemoryEtcdClients
from capd_py.kube.workload import WorkloadClients

pytestmark = pytest.mark.unit


def management_with_kubeconfig(ns: str, cluster: str) -> InMemoryAPI:
    """A management API (an in-memory store is a Kube too) holding the cluster's kubeconfig Secret."""
    mgmt = InMemoryAPI("", "management")
    mgmt.put_object("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": f"{cluster}-kubeconfig", "namespace": ns}, "data": {"value": "YQ=="}})
    return mgmt


async def test_a_registered_cluster_is_served_from_memory_once_its_kubeconfig_exists() -> None:
    wc = WorkloadClients(InMemoryAPI("", "management"))
    api = wc.in_memory_cluster("ns", "c1")
    assert await wc.get("ns", "c1") is None, "no kubeconfig yet: not reachable, as a real cluster"
    wc = WorkloadClients(management_with_kubeconfig("ns", "c1"))
    api = wc.in_memory_cluster("ns", "c1")
    assert await wc.get("ns", "c1") is api and wc.in_memory_cluster("ns", "c1") is api
    probe = await wc.probe("ns", "c1")
    assert probe is not None and probe.ok
    wc.in_memory.remove("ns", "c1")
    assert wc.in_memory.get("ns", "c1") is None


async def test_nodes_are_in_sync_and_their_writes_reach_the_listener() -> None:
    wc = WorkloadClients(management_with_kubeconfig("ns", "c1"))
    heard: list[tuple[str, str, str, bool]] = []

    def listener(ns: str, cluster: str, node: dict[str, Any], deleted: bool) -> None:
        heard.append((ns, cluster, node["metadata"]["name"], deleted))
    wc.watch_nodes(listener)
    api = wc.in_memory_cluster("ns", "c1")
    assert wc.nodes("ns", "c1") == {}
    api.add_node("n1", "in-memory://n1", True, "v1.34.4", taints=[{"key": "k", "effect": "NoSchedule"}])
    api.add_static_pods("n1", ["etcd"])
    assert heard == [("ns", "c1", "n1", False)]
    nodes = wc.nodes("ns", "c1")
    assert nodes is not None and nodes["n1"]["spec"] == {"providerID": "in-memory://n1",
                                                         "taints": [{"key": "k", "effect": "NoSchedule"}]}
    got = await api.get(NODE, None, "n1")
    assert got is not None and got["status"]["nodeInfo"]["kubeletVersion"] == "v1.34.4"
    api.remove_object("nodes", None, "n1")
    assert heard[-1] == ("ns", "c1", "n1", True)
    assert await api.list(POD, "kube-system") == [], "a Node's Pods go with it"
    assert wc.nodes("ns", "c1") == {}


async def test_etcd_of_in_memory_clusters_and_others() -> None:
    class Other:
        def for_node(self, workload: Any, node: str) -> Any:
            return ("other", node)
    clients = InMemoryEtcdClients(Other())
    api = InMemoryAPI("ns", "c1")
    api.etcd.add("n1")
    members = await clients.for_node(api, "n1").members()
    assert [m.name for m in members] == ["n1"]
    assert clients.for_node(object(), "n2") == ("other", "n2")  # type: ignore[arg-type]


async def test_the_kubeadm_objects_are_made_once() -> None:
    api = InMemoryAPI("ns", "c1")
    api.add_kubeadm_objects("v1.34.4")
    api.add_kubeadm_objects("v1.34.4")
    cm = api.object("configmaps", "kube-system", "kubeadm-config")
    assert cm is not None and "kubernetesVersion: v1.34.4" in cm["data"]["ClusterConfiguration"]
    assert api.object("daemonsets", "kube-system", "kube-proxy") is not None
    assert api.object("deployments", "kube-system", "coredns") is not None
    assert await api.get(SECRET, "ns", "nope") is None


async def test_a_client_made_before_the_store_existed_here_is_dropped_with_it() -> None:
    """A cluster moved in: before its store is made here the controllers reach its endpoint through the kubeconfig
    (another process served it); once the store exists it is the cluster, and the HTTPS client goes."""
    import base64

    kubeconfig = ("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                  "users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                  "current-context: x\n")
    mgmt = InMemoryAPI("", "management")
    mgmt.put_object("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {
        "name": "c1-kubeconfig", "namespace": "ns"}, "data": {"value": base64.b64encode(kubeconfig.encode()).decode()}})
    wc = WorkloadClients(mgmt)
    client = await wc.get("ns", "c1")
    assert client is not None and not isinstance(client, InMemoryAPI) and ("ns", "c1") in wc._cache
    api = wc.in_memory_cluster("ns", "c1")
    assert ("ns", "c1") not in wc._cache
    assert await wc.get("ns", "c1") is api
