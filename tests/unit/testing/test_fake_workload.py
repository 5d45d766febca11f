"""The fake workload clusters (capd_py.testing.fake_workload): an in-memory REST store behind `Kube`, Nodes and
control-plane static pods synthesised from bootstrapped FakeRuntime containers, etcd members per cluster."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.containers import ContainerSpec
from capd_py.api.gvk import CONFIG_MAP, NODE, POD, SECRET
from capd_py.api.versions import DEFAULT_VERSION
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile.cloudinit import BOOTSTRAP_SENTINEL
from capd_py.reconcile.dockermachine import node_spec
from capd_py.reconcile.kcp.observe import CONTROL_PLANE_POD_SELECTOR, machine_view, pod_ready
from capd_py.runtime import networks
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadEtcd, FakeWorkloadKube, FakeWorkloads, kubeconfig_secret_value

pytestmark = pytest.mark.unit


def _node(rt: FakeRuntime, cluster: str, machine: str, cp: bool, bootstrapped: bool = True,
          image: str = "capd-py/node:v1.35.1", ns: str = "default") -> str:
    networks.ensure_network(rt, f"net-{cluster}", {})
    spec = node_spec(ns, cluster, machine, {}, image, f"net-{cluster}", cp, "restricted")
    rt.run_container(spec)
    if bootstrapped:
        rt.files(spec.name)[BOOTSTRAP_SENTINEL] = b"success\n"
    return spec.name


@pytest.fixture
def rt() -> FakeRuntime:
    return FakeRuntime()


async def test_nodes_appear_once_bootstrapped(rt: FakeRuntime) -> None:
    cp = _node(rt, "c1", "c1-cp-a", cp=True)
    w = _node(rt, "c1", "c1-md-x", cp=False, bootstrapped=False)
    _node(rt, "c2", "c2-cp-a", cp=True)  # another cluster
    wl = FakeWorkloadKube(rt, "default", "c1")
    assert [n["metadata"]["name"] for n in await wl.list(NODE)] == [cp]
    rt.files(w)[BOOTSTRAP_SENTINEL] = b"success\n"
    nodes = {n["metadata"]["name"]: n for n in await wl.list(NODE)}
    assert set(nodes) == {cp, w}
    n = nodes[cp]
    assert n["kind"] == "Node"
    assert n["spec"]["providerID"] == f"docker:////{cp}"
    assert "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]
    assert "node-role.kubernetes.io/control-plane" not in nodes[w]["metadata"]["labels"]
    assert n["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.1"
    assert {"type": "Ready", "status": "True"}.items() <= next(
        c for c in n["status"]["conditions"] if c["type"] == "Ready").items()
    assert any(a["type"] == "InternalIP" and a["address"] for a in n["status"]["addresses"])


async def test_version_falls_back_to_default(rt: FakeRuntime) -> None:
    cp = _node(rt, "c1", "c1-cp-a", cp=True, image="kindest/node")
    wl = FakeWorkloadKube(rt, "default", "c1")
    node = await wl.get(NODE, None, cp)
    assert node is not None and node["status"]["nodeInfo"]["kubeletVersion"] == DEFAULT_VERSION


async def test_static_pods_of_control_plane_nodes(rt: FakeRuntime) -> None:
    cp = _node(rt, "c1", "c1-cp-a", cp=True)
    w = _node(rt, "c1", "c1-md-x", cp=False)
    wl = FakeWorkloadKube(rt, "default", "c1")
    res = await wl.acall("GET", POD.path("kube-system"), query=[("labelSelector", CONTROL_PLANE_POD_SELECTOR)])
    pods = {p["metadata"]["name"]: p for p in res["items"]}
    assert set(pods) == {f"{c}-{cp}" for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd")}
    assert all(pod_ready(p) for p in pods.values())
    assert not any(w in p for p in pods)
    # what the KCP computes from it: the machine's node and all its static pods are ready
    machine: dict[str, Any] = {"metadata": {"name": "c1-cp-a", "creationTimestamp": "2026-01-01T00:00:00Z"},
                               "spec": {"providerID": f"docker:////{cp}"}}
    kcp: dict[str, Any] = {"metadata": {"name": "kcp"}, "spec": {}}
    import datetime as dt
    view = machine_view(kcp, machine, None, None, (await wl.acall("GET", NODE.path()))["items"], pods,
                        dt.datetime.now(dt.UTC))
    assert view.node_name == cp and view.node_ready and all(view.pods_ready.values())
    cm = await wl.get(CONFIG_MAP, "kube-system", "kubeadm-config")
    assert cm is not None and "ClusterConfiguration" in cm["data"]


async def test_field_selector_and_eviction(rt: FakeRuntime) -> None:
    cp = _node(rt, "c1", "c1-cp-a", cp=True)
    wl = FakeWorkloadKube(rt, "default", "c1")
    await wl.create(POD, {"metadata": {"name": "app", "namespace": "default"}, "spec": {"nodeName": cp}})
    await wl.create(POD, {"metadata": {"name": "other", "namespace": "default"}, "spec": {"nodeName": "elsewhere"}})
    res = await wl.acall("GET", POD.path(None), query=[("fieldSelector", f"spec.nodeName={cp}")])
    names = {p["metadata"]["name"] for p in res["items"]}
    assert "app" in names and "other" not in names and f"etcd-{cp}" in names
    await wl.acall("POST", POD.path("default", "app", "eviction"), body={"metadata": {"name": "app"}})
    assert await wl.get(POD, "default", "app") is None
    with pytest.raises(KubeError) as e:
        await wl.acall("POST", POD.path("default", "app", "eviction"), body={})
    assert e.value.not_found


async def test_crud_merge_conflicts(rt: FakeRuntime) -> None:
    wl = FakeWorkloadKube(rt, "default", "c1")
    s = await wl.create(SECRET, {"apiVersion": "v1", "kind": "Secret",
                                 "metadata": {"name": "bootstrap-token-abc", "namespace": "kube-system",
                                              "labels": {"a": "b"}}, "data": {"x": "1"}})
    assert s["metadata"]["resourceVersion"] and s["metadata"]["uid"]
    with pytest.raises(KubeError) as e:
        await wl.create(SECRET, {"metadata": {"name": "bootstrap-token-abc", "namespace": "kube-system"}})
    assert e.value.conflict
    p = await wl.merge_patch(SECRET, "kube-system", "bootstrap-token-abc", {"data": {"expiration": "t", "x": None}})
    assert p["data"] == {"expiration": "t"} and p["metadata"]["uid"] == s["metadata"]["uid"]
    with pytest.raises(KubeError) as e:
        await wl.merge_patch(SECRET, "kube-system", "bootstrap-token-abc",
                             {"metadata": {"resourceVersion": s["metadata"]["resourceVersion"]}, "data": {}})
    assert e.value.conflict
    a = await wl.apply(SECRET, {"metadata": {"name": "bootstrap-token-abc", "namespace": "kube-system"},
                                "data": {"y": "2"}})
    assert a["data"] == {"expiration": "t", "y": "2"}
    assert [o["metadata"]["name"] for o in await wl.list(SECRET, "kube-system", labels={"a": "b"})] == [
        "bootstrap-token-abc"]
    assert await wl.list(SECRET, "kube-system", selector="a!=b") == []
    assert await wl.list(SECRET, "default") == []
    r = await wl.replace(SECRET, {**a, "data": {"z": "3"}})
    assert r["data"] == {"z": "3"}
    assert await wl.delete(SECRET, "kube-system", "bootstrap-token-abc")
    assert not await wl.delete(SECRET, "kube-system", "bootstrap-token-abc")
    assert await wl.get(SECRET, "kube-system", "bootstrap-token-abc") is None
    assert (await wl.acall("GET", "/version"))["gitVersion"]


async def test_node_patch_delete_and_container_removal(rt: FakeRuntime) -> None:
    cp = _node(rt, "c1", "c1-cp-a", cp=True)
    w = _node(rt, "c1", "c1-md-x", cp=False)
    wl = FakeWorkloadKube(rt, "default", "c1")
    n = await wl.merge_patch(NODE, None, w, {"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}},
                                             "spec": {"unschedulable": True}})
    assert n["spec"]["unschedulable"] and n["metadata"]["labels"]["node-role.kubernetes.io/worker"] == ""
    assert n["status"]["nodeInfo"]["kubeletVersion"]
    assert await wl.delete(NODE, None, w)
    assert await wl.get(NODE, None, w) is None  # deleted through the API: not brought back
    rt.remove_container(cp)
    assert await wl.list(NODE) == []
    res = await wl.acall("GET", POD.path("kube-system"))
    assert res["items"] == []


async def test_status_subresource_put(rt: FakeRuntime) -> None:
    cp = _node(rt, "c1", "c1-cp-a", cp=True)
    wl = FakeWorkloadKube(rt, "default", "c1")
    node = await wl.get(NODE, None, cp)
    assert node is not None
    out = await wl.patch_status(NODE, node, {**node["status"], "phase": "x"})
    assert out is not None and out["status"]["phase"] == "x" and out["spec"] == node["spec"]


async def test_workloads_need_the_kubeconfig_secret(rt: FakeRuntime) -> None:
    class Mgmt(Kube):
        def __init__(self) -> None:
            super().__init__(None)  # type: ignore[arg-type]
            self.secrets: dict[str, dict[str, Any]] = {}

        async def get(self, gvk: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
            return self.secrets.get(name)

    mgmt = Mgmt()
    wls = FakeWorkloads(mgmt, rt)
    assert await wls.get("default", "c1") is None
    mgmt.secrets["c1-kubeconfig"] = {"data": {"value": kubeconfig_secret_value()}}
    a = await wls.get("default", "c1")
    assert isinstance(a, FakeWorkloadKube) and a is await wls.get("default", "c1")
    assert await wls.get("default", "c2") is None  # no kubeconfig for c2
    wls.forget("default", "c1")
    assert await wls.get("default", "c1") is not a


async def test_etcd_members_are_control_plane_nodes(rt: FakeRuntime) -> None:
    cp1 = _node(rt, "c1", "c1-cp-a", cp=True)
    _node(rt, "c1", "c1-md-x", cp=False)
    wls = FakeWorkloads(None, rt, require_kubeconfig=False)  # type: ignore[arg-type]
    etcd = FakeWorkloadEtcd(wls)
    wl = await wls.get("default", "c1")
    assert wl is not None
    assert [m.name for m in await etcd.for_node(wl, cp1).members()] == [cp1]
    cp2 = _node(rt, "c1", "c1-cp-b", cp=True)
    client = etcd.for_node(wl, cp1)
    members = await client.members()
    assert [m.name for m in members] == [cp1, cp2]
    assert (await client.status()).leader == members[0].id
    await client.remove_member(members[1].id)
    assert [m.name for m in await etcd.for_node(wl, cp1).members()] == [cp1]  # removed stays removed
    other = await wls.get("default", "c2")
    assert other is not None and other is not wl


def test_container_spec_hostname_names_the_node(rt: FakeRuntime) -> None:
    networks.ensure_network(rt, "n", {})
    spec = ContainerSpec(name="ctr", image="capd-py/node:v1.34.4", hostname="host-a", network="n",
                         labels={"io.x-k8s.capd-py.cluster": "c1", "io.x-k8s.capd-py.namespace": "default",
                                 "io.x-k8s.capd-py.role": "worker"}, node=True)
    rt.run_container(spec)
    rt.files("ctr")[BOOTSTRAP_SENTINEL] = b""
    wl = FakeWorkloadKube(rt, "default", "c1")
    node = wl.object("nodes", None, "host-a")
    assert node is not None and node["spec"]["providerID"] == "docker:////ctr"


async def test_discovery_dry_run_and_server_side_apply(rt: FakeRuntime) -> None:
    """What a ClusterResourceSet needs of a workload API: discovery, dry runs that store nothing, SSA creates."""
    k = FakeWorkloadKube(rt, "default", "c1")
    apps = await k.acall("GET", "/apis/apps/v1")
    assert {(r["kind"], r["name"], r["namespaced"]) for r in apps["resources"]} >= {("DaemonSet", "daemonsets", True)}
    with pytest.raises(KubeError) as e:
        await k.acall("GET", "/apis/example.com/v1")
    assert e.value.not_found
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "kube-system"}}
    await k.acall("POST", "/api/v1/namespaces/kube-system/configmaps", body=cm, query=[("dryRun", "All")])
    assert await k.get(CONFIG_MAP, "kube-system", "a") is None
    await k.acall("PATCH", "/api/v1/namespaces/kube-system/configmaps/a", body=cm,
                  query=[("fieldManager", "x"), ("force", "true")], content_type="application/apply-patch+yaml")
    assert await k.get(CONFIG_MAP, "kube-system", "a") is not None
