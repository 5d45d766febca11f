"""ClusterResourceSets with the whole controllers process in-process against a real kube-apiserver, the
"workload cluster" being that same API server (objects land in a namespace of their own): applied once
the control plane is initialized, recorded in a binding with hashes, ApplyOnce vs Reconcile on a change,
a Cluster that starts matching later, bad input (a missing ConfigMap, an object the API server rejects)
leaving nothing half-created, and deleting a ClusterResourceSet keeping what it applied."""

from __future__ import annotations

import base64
import secrets
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from capd_py.api import conditions as cond
from capd_py.api.gvk import CLUSTER, CLUSTER_RESOURCE_SET, CLUSTER_RESOURCE_SET_BINDING, CONFIG_MAP, GVK, SECRET
from capd_py.api.labels import CLUSTER_NAME, FINALIZER_CLUSTER_RESOURCE_SET
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.reconcile import clusterresourceset as rcrs
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import eventually, in_process_operator
from capd_py.testing.quiet import wait_quiet

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
SERVICE = GVK("", "v1", "Service", "services")


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[Manager]:
    """The envtest API server is every Cluster's workload cluster."""
    async with in_process_operator(envtest, workloads="envtest") as op:
        yield op.manager


@pytest.fixture
async def wl_ns(kube: Kube) -> AsyncIterator[str]:
    """The namespace of the 'workload cluster' the ClusterResourceSets' objects go to."""
    name = f"wl-{secrets.token_hex(4)}"
    await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        await kube.delete(NAMESPACE, None, name)


def cm_doc(name: str, ns: str, value: str) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns},
                           "data": {"v": value}})


def source_cm(name: str, ns: str, docs: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": docs}


def source_secret(name: str, ns: str, docs: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": rcrs.SECRET_TYPE, "metadata": {"name": name, "namespace": ns},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in docs.items()}}


def crs_obj(name: str, ns: str, resources: list[tuple[str, str]], strategy: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterSelector": {"matchLabels": {"addons": "on"}},
                            "resources": [{"kind": k, "name": n} for k, n in resources]}
    if strategy:
        spec["strategy"] = strategy
    return {"apiVersion": CLUSTER_RESOURCE_SET.api_version, "kind": "ClusterResourceSet",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}


def cluster_obj(name: str, ns: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
                                         "name": f"{name}-cp"}}}


async def initialize(kube: Kube, ns: str, name: str) -> None:
    """What the control plane provider reports once `kubeadm init` is done (the Cluster controller keeps it)."""
    await kube.merge_patch(CLUSTER, ns, name, {"status": {"initialization": {"controlPlaneInitialized": True}}},
                           subresource="status")


async def wl_value(kube: Kube, ns: str, name: str) -> str | None:
    o = await kube.get(CONFIG_MAP, ns, name)
    return None if o is None else (o.get("data") or {}).get("v")


def entry(binding: dict[str, Any] | None, crs: str) -> dict[tuple[str, str], dict[str, Any]] | None:
    e = rcrs.binding_entry(binding, crs)
    return None if e is None else {(r["kind"], r["name"]): r for r in e.get("resources") or []}


def applied_condition(crs: dict[str, Any] | None) -> dict[str, Any]:
    return cond.get(crs or {}, rcrs.RESOURCES_APPLIED) or {}


async def test_clusterresourcesets_apply_record_and_survive_deletion(operator: Manager, kube: Kube, namespace: str,
                                                                     wl_ns: str) -> None:
    ns = namespace
    await kube.create(CONFIG_MAP, source_cm("addons", ns, {"a.yaml": cm_doc("from-cm", wl_ns, "1")}))
    await kube.create(SECRET, source_secret("addons-secret", ns, {"s.yaml": cm_doc("from-secret", wl_ns, "1")}))
    await kube.create(CONFIG_MAP, source_cm("rec", ns, {"r.yaml": cm_doc("from-rec", wl_ns, "1")}))
    await kube.create(CLUSTER, cluster_obj("c1", ns, {"addons": "on"}))
    await kube.create(CLUSTER_RESOURCE_SET, crs_obj("once", ns, [("ConfigMap", "addons"), ("Secret", "addons-secret")]))
    await kube.create(CLUSTER_RESOURCE_SET, crs_obj("reconcile", ns, [("ConfigMap", "rec")], "Reconcile"))

    # the control plane is not initialized: nothing applied, no binding, a condition saying why
    async def waiting() -> bool:
        c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, "once"))
        return c.get("status") == "False" and "Waiting for the control plane of Cluster(s) c1" in c.get("message", "")
    await eventually(waiting, 30, "ResourcesApplied=False while c1 is not initialized")
    got = await kube.get(CLUSTER_RESOURCE_SET, ns, "once")
    assert got is not None and FINALIZER_CLUSTER_RESOURCE_SET in got["metadata"]["finalizers"]
    assert got["spec"]["strategy"] == "ApplyOnce"  # defaulted by the CRD
    assert await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1") is None
    assert await wl_value(kube, wl_ns, "from-cm") is None

    # initialized: every object from the ConfigMaps and the Secret lands, the binding records it with hashes
    await initialize(kube, ns, "c1")

    async def applied() -> bool:
        b = await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1")
        once, rec = entry(b, "once"), entry(b, "reconcile")
        return bool(once and rec and len(once) == 2 and all(r["applied"] for r in [*once.values(), *rec.values()])
                    and await wl_value(kube, wl_ns, "from-cm") == "1"
                    and await wl_value(kube, wl_ns, "from-secret") == "1"
                    and await wl_value(kube, wl_ns, "from-rec") == "1")
    await eventually(applied, 60, "objects applied to c1 and recorded in its binding",
                     lambda: kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"))
    b = await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1")
    assert b is not None and b["spec"]["clusterName"] == "c1" and b["metadata"]["labels"][CLUSTER_NAME] == "c1"
    # owned by its ClusterResourceSets only, as upstream's (its e2e asserts exactly these owners)
    assert {(o["kind"], o["name"]) for o in b["metadata"]["ownerReferences"]} == {
        ("ClusterResourceSet", "once"), ("ClusterResourceSet", "reconcile")}
    src = await kube.get(CONFIG_MAP, ns, "addons")
    assert src is not None
    once = entry(b, "once")
    assert once is not None
    assert once[("ConfigMap", "addons")]["hash"] == rcrs.load_resource("ConfigMap", "addons", src).hash
    assert once[("ConfigMap", "addons")]["hash"].startswith("sha256:")
    assert once[("Secret", "addons-secret")]["lastAppliedTime"]
    for name in ("once", "reconcile"):
        c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, name))
        assert (c.get("status"), c.get("reason")) == ("True", "Applied"), (name, c)
    # as upstream, a ClusterResourceSet owns the resources it lists
    assert any(o["kind"] == "ClusterResourceSet" and o["name"] == "once" for o in src["metadata"]["ownerReferences"])

    # stable: an event that changes nothing the sets care about brings no writes
    await wait_quiet(operator, window=1, timeout=30, what="converged before the poke", namespace=ns)
    before = {n: (await kube.get(CLUSTER_RESOURCE_SET, ns, n))["metadata"]["resourceVersion"]  # type: ignore[index]
              for n in ("once", "reconcile")}
    before["binding"] = b["metadata"]["resourceVersion"]
    reconciles = operator.reconciles
    await kube.merge_patch(CLUSTER, ns, "c1", {"metadata": {"annotations": {"poke": "1"}}})

    async def poke_handled() -> bool:
        return operator.reconciles > reconciles
    await eventually(poke_handled, 10, "the poke reconciled")
    await wait_quiet(operator, window=1.5, timeout=30, what="after the poke", namespace=ns)
    after = {n: (await kube.get(CLUSTER_RESOURCE_SET, ns, n))["metadata"]["resourceVersion"]  # type: ignore[index]
             for n in ("once", "reconcile")}
    after["binding"] = (await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"))["metadata"]["resourceVersion"]  # type: ignore[index]
    assert after == before

    # a change: Reconcile applies it again, ApplyOnce does not
    rec_hash = entry(b, "reconcile")[("ConfigMap", "rec")]["hash"]  # type: ignore[index]
    once_hash = once[("ConfigMap", "addons")]["hash"]
    await kube.merge_patch(CONFIG_MAP, ns, "addons", {"data": {"a.yaml": cm_doc("from-cm", wl_ns, "2")}})
    await kube.merge_patch(CONFIG_MAP, ns, "rec", {"data": {"r.yaml": cm_doc("from-rec", wl_ns, "2")}})

    async def reapplied() -> bool:
        e = entry(await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"), "reconcile") or {}
        r = e.get(("ConfigMap", "rec")) or {}
        return await wl_value(kube, wl_ns, "from-rec") == "2" and r.get("hash") not in (None, rec_hash)
    await eventually(reapplied, 30, "the Reconcile strategy re-applied the changed ConfigMap")
    # both changes were seen together; once the controllers are quiet ApplyOnce had every chance to (wrongly) act
    await wait_quiet(operator, window=1.5, timeout=30, what="after the ConfigMap changes", namespace=ns)
    assert await wl_value(kube, wl_ns, "from-cm") == "1"
    once = entry(await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"), "once")
    assert once is not None and once[("ConfigMap", "addons")]["hash"] == once_hash

    # a Cluster that starts matching later gets them too
    await kube.create(CLUSTER, cluster_obj("c2", ns, {}))
    await initialize(kube, ns, "c2")
    await wait_quiet(operator, window=1.5, timeout=30, what="after c2 was initialized", namespace=ns)
    assert await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c2") is None
    await kube.delete(CONFIG_MAP, wl_ns, "from-cm")  # so that c2's ApplyOnce visibly creates it again
    await kube.merge_patch(CLUSTER, ns, "c2", {"metadata": {"labels": {"addons": "on"}}})

    async def c2_applied() -> bool:
        b2 = await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c2")
        once2, rec2 = entry(b2, "once"), entry(b2, "reconcile")
        return bool(once2 and rec2 and len(once2) == 2 and all(r["applied"] for r in once2.values())
                    and await wl_value(kube, wl_ns, "from-cm") == "2")
    await eventually(c2_applied, 30, "c2 got the resources once it matched")

    # deleting a ClusterResourceSet takes it out of the bindings, never what it applied
    await kube.delete(CLUSTER_RESOURCE_SET, ns, "once")

    async def unbound() -> bool:
        bs = [await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, c) for c in ("c1", "c2")]
        return (await kube.get(CLUSTER_RESOURCE_SET, ns, "once") is None
                and all(b is not None and entry(b, "once") is None and entry(b, "reconcile") for b in bs)
                and all(not any(o["name"] == "once" for o in b["metadata"]["ownerReferences"])
                        for b in bs if b is not None))
    await eventually(unbound, 30, "'once' removed from both bindings")
    await kube.delete(CLUSTER_RESOURCE_SET, ns, "reconcile")

    async def bindings_gone() -> bool:
        return not await kube.list(CLUSTER_RESOURCE_SET_BINDING, ns)
    await eventually(bindings_gone, 30, "empty bindings deleted")
    for name, value in (("from-cm", "2"), ("from-secret", "1"), ("from-rec", "2")):
        assert await wl_value(kube, wl_ns, name) == value, name

    # a Cluster being deleted loses its binding (upstream's binding controller)
    await kube.create(CLUSTER_RESOURCE_SET, crs_obj("again", ns, [("Secret", "addons-secret")]))
    await eventually(lambda: _has_binding(kube, ns, "c1"), 30, "c1 bound again")
    await kube.delete(CLUSTER, ns, "c1")
    await eventually(lambda: _no_binding(kube, ns, "c1"), 30, "the binding of a deleted Cluster is deleted")


async def _has_binding(kube: Kube, ns: str, name: str) -> bool:
    return await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, name) is not None


async def _no_binding(kube: Kube, ns: str, name: str) -> bool:
    return await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, name) is None


async def test_bad_input_gets_a_clear_condition_and_leaves_nothing_half_created(operator: Manager, kube: Kube,
                                                                                namespace: str, wl_ns: str) -> None:
    ns = namespace
    await kube.create(CLUSTER, cluster_obj("c1", ns, {"addons": "on"}))
    await initialize(kube, ns, "c1")
    await kube.create(CONFIG_MAP, source_cm("present", ns, {"p.yaml": cm_doc("from-present", wl_ns, "1")}))

    # a ConfigMap that does not exist: nothing of the set is applied and no binding entry is written
    await kube.create(CLUSTER_RESOURCE_SET, crs_obj("missing", ns, [("ConfigMap", "present"),
                                                                   ("ConfigMap", "absent")]))

    async def missing_reported() -> bool:
        c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, "missing"))
        return c.get("status") == "False" and "ConfigMap 'absent' does not exist" in c.get("message", "")
    await eventually(missing_reported, 30, "ResourcesApplied=False naming the missing ConfigMap")
    c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, "missing"))
    assert c["reason"] == rcrs.R_NOT_APPLIED
    await wait_quiet(operator, window=1, timeout=30, what="after ResourcesApplied=False", namespace=ns)
    assert entry(await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"), "missing") is None
    assert await wl_value(kube, wl_ns, "from-present") is None

    # creating it lets the set apply (the ConfigMap's event brings the ClusterResourceSet back)
    await kube.create(CONFIG_MAP, source_cm("absent", ns, {"x.yaml": cm_doc("from-absent", wl_ns, "1")}))

    async def then_applied() -> bool:
        e = entry(await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"), "missing") or {}
        return (len(e) == 2 and all(r["applied"] for r in e.values())
                and await wl_value(kube, wl_ns, "from-absent") == "1")
    await eventually(then_applied, 30, "applied once the ConfigMap exists")

    # a Secret of the wrong type
    await kube.create(SECRET, {**source_secret("opaque", ns, {"o.yaml": cm_doc("from-opaque", wl_ns, "1")}),
                               "type": "Opaque"})
    await kube.create(CLUSTER_RESOURCE_SET, crs_obj("wrongtype", ns, [("Secret", "opaque")]))

    async def wrong_type() -> bool:
        c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, "wrongtype"))
        return c.get("reason") == rcrs.R_WRONG_SECRET_TYPE and "'Opaque'" in c.get("message", "")
    await eventually(wrong_type, 30, "WrongSecretType")

    # one object the API server rejects: none of the resource's objects is created, the binding says
    # applied: false, the condition names the object and the server's answer
    bad = cm_doc("ok-before-bad", wl_ns, "1") + "---\n" + yaml.safe_dump({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "bad-svc", "namespace": wl_ns},
        "spec": {"ports": [{"port": 99999}]}})
    await kube.create(CONFIG_MAP, source_cm("rejected", ns, {"b.yaml": bad}))
    await kube.create(CLUSTER_RESOURCE_SET, crs_obj("fails", ns, [("ConfigMap", "rejected")]))

    async def failed() -> bool:
        c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, "fails"))
        e = entry(await kube.get(CLUSTER_RESOURCE_SET_BINDING, ns, "c1"), "fails") or {}
        r = e.get(("ConfigMap", "rejected")) or {}
        return (c.get("reason") == rcrs.R_NOT_APPLIED and "Service" in c.get("message", "")
                and "bad-svc" in c.get("message", "") and r.get("applied") is False and bool(r.get("hash")))
    await eventually(failed, 30, "NotApplied naming the rejected Service; binding applied: false",
                     lambda: kube.get(CLUSTER_RESOURCE_SET, ns, "fails"))
    assert await wl_value(kube, wl_ns, "ok-before-bad") is None
    assert await kube.get(SERVICE, wl_ns, "bad-svc") is None

    # fixing the data applies it
    await kube.merge_patch(CONFIG_MAP, ns, "rejected", {"data": {"b.yaml": bad.replace("99999", "8080")}})

    async def fixed() -> bool:
        c = applied_condition(await kube.get(CLUSTER_RESOURCE_SET, ns, "fails"))
        return c.get("status") == "True" and await kube.get(SERVICE, wl_ns, "bad-svc") is not None
    await eventually(fixed, 60, "applied after the fix")
    assert await wl_value(kube, wl_ns, "ok-before-bad") == "1"


async def test_admission_defaults_and_rejects(kube: Kube, namespace: str) -> None:
    from capd_py.kube.client import KubeError

    # what the CRD itself refuses and defaults (as upstream's CRD); the selector's parsing, an empty selector and the
    # immutable fields are upstream's webhook's, capd-py's admission webhook's here: validate_clusterresourceset,
    # checked against upstream in tests/integration/test_upstream_admission.py (crs-*)
    ns = namespace
    bad = crs_obj("nores", ns, [])
    with pytest.raises(KubeError, match="resources"):
        await kube.create(CLUSTER_RESOURCE_SET, bad)
    bad = crs_obj("kind", ns, [("Deployment", "x")])
    with pytest.raises(KubeError, match="Unsupported value"):
        await kube.create(CLUSTER_RESOURCE_SET, bad)
    bad = crs_obj("nulllabels", ns, [("ConfigMap", "x")])
    bad["spec"]["clusterSelector"] = {"matchLabels": None,
                                      "matchExpressions": [{"key": "cni", "operator": "Exists"}]}
    await kube.apply(CLUSTER_RESOURCE_SET, bad)  # upstream-style `matchLabels:` (null) next to expressions
    got = await kube.create(CLUSTER_RESOURCE_SET, crs_obj("ok", ns, [("ConfigMap", "x")]))
    assert got["spec"]["strategy"] == "ApplyOnce"
    await kube.merge_patch(CLUSTER_RESOURCE_SET, ns, "ok", {"spec": {"resources": [{"kind": "Secret", "name": "y"}]}})
    b = {"apiVersion": CLUSTER_RESOURCE_SET_BINDING.api_version, "kind": "ClusterResourceSetBinding",
         "metadata": {"name": "c", "namespace": ns},
         "spec": {"clusterName": "c", "bindings": [{"clusterResourceSetName": "ok", "resources": [
             {"kind": "ConfigMap", "name": "x", "applied": True, "hash": "sha256:0",
              "lastAppliedTime": "2026-01-01T00:00:00Z"}]}]}}
    await kube.create(CLUSTER_RESOURCE_SET_BINDING, b)
    with pytest.raises(KubeError, match="clusterName is immutable"):
        await kube.merge_patch(CLUSTER_RESOURCE_SET_BINDING, ns, "c", {"spec": {"clusterName": "d"}})
    with pytest.raises(KubeError, match="applied"):
        await kube.create(CLUSTER_RESOURCE_SET_BINDING, {**b, "metadata": {"name": "e", "namespace": ns},
                                                         "spec": {"clusterName": "e", "bindings": [
                                                             {"clusterResourceSetName": "ok",
                                                              "resources": [{"kind": "ConfigMap", "name": "x"}]}]}})
