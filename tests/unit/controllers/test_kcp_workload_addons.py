"""The KCP controller's kube-proxy / CoreDNS step against the in-memory workload cluster (what kubeadm init
installs is synthesised there): patches only when out of step, missing add-ons and skip annotations honoured."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from capd_py.api.gvk import CONFIG_MAP
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.kcp.addons import update_workload_addons as update_addons
from capd_py.reconcile.cloudinit import BOOTSTRAP_SENTINEL
from capd_py.reconcile.dockermachine import node_spec
from capd_py.reconcile.kcp import workload_upgrade as wu
from capd_py.runtime import networks
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadKube

pytestmark = pytest.mark.unit

CLUSTER: dict[str, Any] = {"metadata": {"name": "c1", "namespace": "ns"}, "spec": {}, "status": {}}


def kcp(version: str = "v1.34.4", annotations: dict[str, str] | None = None, **cc: Any) -> dict[str, Any]:
    return {"metadata": {"name": "c1-cp", "namespace": "ns", "annotations": annotations or {}},
            "spec": {"version": version, "replicas": 1,
                     "kubeadmConfigSpec": {"clusterConfiguration": cc or {"apiServer": {}}}}}


@pytest.fixture
def wl() -> FakeWorkloadKube:
    rt = FakeRuntime()
    networks.ensure_network(rt, "net-c1", {})
    spec = node_spec("ns", "c1", "c1-cp-a", {}, "capd-py/node:v1.34.4", "net-c1", True, "restricted")
    rt.run_container(spec)
    rt.files(spec.name)[BOOTSTRAP_SENTINEL] = b"success\n"
    k = FakeWorkloadKube(rt, "ns", "c1")
    k.sync()
    return k


def ctx() -> Ctx:
    return Ctx(kube=None, runtime=FakeRuntime(), settings=Settings(), workload=None)  # type: ignore[arg-type]


def image(wl: FakeWorkloadKube, resource: str, name: str) -> str:
    obj = wl.object(resource, "kube-system", name)
    assert obj is not None
    return str(obj["spec"]["template"]["spec"]["containers"][0]["image"])


async def test_in_step_writes_nothing(wl: FakeWorkloadKube) -> None:
    assert image(wl, "daemonsets", "kube-proxy") == "registry.k8s.io/kube-proxy:v1.34.4"
    assert image(wl, "deployments", "coredns") == "registry.k8s.io/coredns/coredns:v1.12.1"
    before = dict(wl.requests)
    assert await update_addons(ctx(), wl, kcp(), CLUSTER) is None
    assert wl.requests["PATCH"] == before.get("PATCH", 0) and wl.requests["PUT"] == before.get("PUT", 0)


async def test_upgrade_moves_kube_proxy_and_coredns_when_asked(wl: FakeWorkloadKube) -> None:
    # v1.35.4 without dns settings: kube-proxy follows, CoreDNS stays (as upstream)
    assert await update_addons(ctx(), wl, kcp("v1.35.4"), CLUSTER) is None
    assert image(wl, "daemonsets", "kube-proxy") == "registry.k8s.io/kube-proxy:v1.35.4"
    assert image(wl, "deployments", "coredns") == "registry.k8s.io/coredns/coredns:v1.12.1"
    # with kubeadm v1.35's CoreDNS asked for: the kubeadm-config first, then the Deployment
    want = kcp("v1.35.4", dns={"imageTag": "v1.13.1"})
    assert await update_addons(ctx(), wl, want, CLUSTER) is None
    assert image(wl, "deployments", "coredns") == "registry.k8s.io/coredns/coredns:v1.13.1"
    cm = wl.object("configmaps", "kube-system", "kubeadm-config")
    assert cm is not None
    cc = yaml.safe_load(cm["data"]["ClusterConfiguration"])
    assert cc["dns"] == {"imageTag": "v1.13.1"} and cc["kubernetesVersion"] == "v1.35.4"
    # now in step: another pass writes nothing
    patches = wl.requests["PATCH"]
    assert await update_addons(ctx(), wl, want, CLUSTER) is None
    assert wl.requests["PATCH"] == patches


async def test_skip_annotations_and_missing_addons(wl: FakeWorkloadKube) -> None:
    skip = {wu.SKIP_KUBE_PROXY_ANNOTATION: "", wu.SKIP_COREDNS_ANNOTATION: ""}
    k = kcp("v1.35.4", annotations=skip, dns={"imageTag": "v1.13.1"})
    assert await update_addons(ctx(), wl, k, CLUSTER) is None
    assert image(wl, "daemonsets", "kube-proxy").endswith(":v1.34.4")
    assert image(wl, "deployments", "coredns").endswith(":v1.12.1")
    # a cluster without kube-proxy / CoreDNS (e.g. another CNI replaces kube-proxy): not an error
    await wl.acall("DELETE", "/apis/apps/v1/namespaces/kube-system/daemonsets/kube-proxy")
    await wl.delete(CONFIG_MAP, "kube-system", "coredns")
    before = wl.requests["PATCH"]
    assert await update_addons(ctx(), wl, kcp("v1.35.4", dns={"imageTag": "v1.13.1"}),
                                                    CLUSTER) is None
    assert wl.requests["PATCH"] == before


async def test_a_move_that_cannot_be_made_is_reported(wl: FakeWorkloadKube) -> None:
    k = copy.deepcopy(kcp("v1.34.4", dns={"imageTag": "v1.11.3"}))
    problem = await update_addons(ctx(), wl, k, CLUSTER)
    assert problem is not None and "greater than or equal" in problem
    assert image(wl, "deployments", "coredns").endswith(":v1.12.1")
