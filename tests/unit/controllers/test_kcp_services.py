"""The services the KCP controller uses from Ctx, against an in-memory management API: the cluster
certificates service (also the KubeadmConfig controller's) and the certificate-expiry probe."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api.gvk import GVK, KUBEADM_CONFIG, SECRET
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.kcp import observe
from capd_py.controllers.services.certificates import ClusterCertificates
from capd_py.kube.client import KubeError
from capd_py.reconcile import certs
from capd_py.reconcile import kcp as rk
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit

OWNER = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "name": "c1-cp",
         "uid": "kcp-uid", "controller": True, "blockOwnerDeletion": True}
CLUSTER: dict[str, Any] = {"metadata": {"name": "c1", "namespace": "ns"}}


class MemKube:
    """get / create / replace / merge_patch over a dict, recording writes."""

    def __init__(self) -> None:
        self.objs: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.rv = 0

    def _key(self, g: GVK, ns: str | None, name: str) -> tuple[str, str, str]:
        return (g.kind, ns or "", name)

    async def get(self, g: GVK, ns: str | None, name: str) -> dict[str, Any] | None:
        o = self.objs.get(self._key(g, ns, name))
        return copy.deepcopy(o) if o is not None else None

    async def create(self, g: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        k = self._key(g, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if k in self.objs:
            raise KubeError(409, "AlreadyExists", obj["metadata"]["name"])
        self.rv += 1
        self.objs[k] = {**copy.deepcopy(obj), "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self.writes.append(("create", obj["metadata"]["name"]))
        return copy.deepcopy(self.objs[k])

    async def replace(self, g: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        k = self._key(g, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        self.rv += 1
        self.objs[k] = {**copy.deepcopy(obj), "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}
        self.writes.append(("replace", obj["metadata"]["name"]))
        return copy.deepcopy(self.objs[k])

    async def merge_patch(self, g: GVK, ns: str | None, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        o = self.objs[self._key(g, ns, name)]
        for k, v in (patch.get("metadata") or {}).items():
            o["metadata"][k] = {**(o["metadata"].get(k) or {}), **v} if isinstance(v, dict) else v
        self.writes.append(("patch", name))
        return copy.deepcopy(o)


async def test_lookup_or_generate_creates_each_missing_secret_once() -> None:
    kube, svc = MemKube(), ClusterCertificates()
    found, missing = await svc.lookup(kube, "ns", "c1")  # type: ignore[arg-type]
    assert found == {} and missing == list(certs.PURPOSES)
    made = await svc.lookup_or_generate(kube, "ns", "c1", OWNER)  # type: ignore[arg-type]
    assert sorted(made) == sorted(certs.PURPOSES)
    sec = await kube.get(SECRET, "ns", certs.secret_name("c1", certs.CLUSTER_CA))
    assert sec is not None and sec["metadata"]["ownerReferences"] == [OWNER]
    again = await svc.lookup_or_generate(kube, "ns", "c1", OWNER)  # type: ignore[arg-type]
    assert again == made and len(kube.writes) == len(certs.PURPOSES)
    found, missing = await svc.lookup(kube, "ns", "c1", (certs.CLUSTER_CA,))  # type: ignore[arg-type]
    assert list(found) == [certs.CLUSTER_CA] and missing == []


async def test_a_secret_created_meanwhile_wins() -> None:
    kube, svc = MemKube(), ClusterCertificates()
    theirs = certs.generate(certs.CLUSTER_CA)
    real_create = kube.create

    async def racing_create(g: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] == certs.secret_name("c1", certs.CLUSTER_CA) and not kube.objs:
            await real_create(g, certs.certificate_secret("c1", "ns", certs.CLUSTER_CA, theirs, OWNER))
        return await real_create(g, obj)
    kube.create = racing_create  # type: ignore[method-assign]
    made = await svc.lookup_or_generate(kube, "ns", "c1", OWNER)  # type: ignore[arg-type]
    assert made[certs.CLUSTER_CA] == theirs


async def test_kubeconfig_created_left_alone_then_regenerated_for_a_new_endpoint() -> None:
    kube, svc = MemKube(), ClusterCertificates()
    ca = certs.generate(certs.CLUSTER_CA)
    await svc.ensure_kubeconfig(kube, CLUSTER, OWNER, ca, {"host": "10.0.0.1", "port": 6443})  # type: ignore[arg-type]
    name = certs.secret_name("c1", certs.KUBECONFIG)
    assert kube.writes == [("create", name)]
    await svc.ensure_kubeconfig(kube, CLUSTER, OWNER, ca, {"host": "10.0.0.1", "port": 6443})  # type: ignore[arg-type]
    assert len(kube.writes) == 1
    await svc.ensure_kubeconfig(kube, CLUSTER, OWNER, ca, {"host": "10.0.0.2", "port": 6443})  # type: ignore[arg-type]
    assert kube.writes[-1] == ("replace", name)
    sec = await kube.get(SECRET, "ns", name)
    assert sec is not None and sec["metadata"]["ownerReferences"] == [OWNER]


class FakeProbe:
    def __init__(self, answer: str | None):
        self.answer = answer
        self.asked: list[tuple[str, int]] = []

    async def serving_cert_not_after(self, host: str, port: int, timeout: float = 3.0) -> str | None:
        self.asked.append((host, port))
        return self.answer


async def test_certificate_expiry_noted_once_through_the_probe_on_ctx() -> None:
    kube = MemKube()
    await kube.create(KUBEADM_CONFIG, {"metadata": {"name": "m1", "namespace": "ns", "annotations": {}}})
    probe = FakeProbe("2027-01-01T00:00:00Z")
    ctx = Ctx(kube=kube, runtime=FakeRuntime(), settings=Settings(), workload=None,  # type: ignore[arg-type]
              probe=probe)
    kcp = {"metadata": {"name": "c1-cp", "namespace": "ns"},
           "spec": {"rollout": {"before": {"certificatesExpiryDays": 7}}}}
    m = {"metadata": {"name": "m1"}, "spec": {"bootstrap": {"configRef": {
        "apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "m1"}}}}
    w = observe.Workload(reachable=True, nodes=[{"metadata": {"name": "m1"}, "status": {"addresses": [
        {"type": "InternalIP", "address": "172.18.0.5"}]}}])
    await observe.record_certificate_expiries(ctx, kcp, [m], w)
    cfg = await kube.get(KUBEADM_CONFIG, "ns", "m1")
    assert cfg is not None
    assert cfg["metadata"]["annotations"] == {rk.CERTIFICATES_EXPIRY_ANNOTATION: "2027-01-01T00:00:00Z"}
    assert probe.asked == [("172.18.0.5", 6443)]
    await observe.record_certificate_expiries(ctx, kcp, [m], w)  # noted: not asked again
    assert len(probe.asked) == 1
    # not asked for, or the workload unreachable: no probing
    await observe.record_certificate_expiries(ctx, {**kcp, "spec": {}}, [m], w)
    await observe.record_certificate_expiries(ctx, kcp, [m], observe.Workload())
    assert len(probe.asked) == 1
