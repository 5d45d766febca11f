"""Machine deletion as upstream v1.13 against a real kube-apiserver (the envtest is also the "workload cluster"):
MachineDrainRules and the `cluster.x-k8s.io/drain` label decide the order of evictions, WaitCompleted Pods are
waited for and never evicted, skipped Pods stay; then the Machine waits for the Node's volumes (a VolumeAttachment)
to detach before its infrastructure is deleted."""

from __future__ import annotations

import time
from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.api.gvk import DOCKER_MACHINE, MACHINE, MACHINE_DRAIN_RULE, NODE, POD
from capd_py.controllers import machine as c_machine
from capd_py.kube.client import Kube, KubeError
from capd_py.testing.core_objects import (
    machine_with_node,
    meta,
)
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]


def pod(ns: str, name: str, node: str, labels: dict[str, str] | None = None, claim: str | None = None) -> Obj:
    spec: Obj = {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]}
    if claim:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta(name, ns, labels=labels or {},
                                                                ownerReferences=[{
                                                                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                                    "name": f"{name}-rs", "controller": True,
                                                                    "uid": "0d5e0d5e-0000-4000-8000-000000000002"}]),
            "spec": spec}


def drain_rule(ns: str, name: str, behavior: str, order: int | None = None, **spec: Any) -> Obj:
    drain: Obj = {"behavior": behavior}
    if order is not None:
        drain["order"] = order
    return {"apiVersion": MACHINE_DRAIN_RULE.api_version, "kind": "MachineDrainRule", "metadata": meta(name, ns),
            "spec": {"drain": drain, **spec}}


def app(label: str) -> list[Obj]:
    return [{"selector": {"matchLabels": {"app": label}}}]


async def terminating(kube: Kube, ns: str) -> set[str]:
    return {p["metadata"]["name"] for p in await kube.list(POD, ns) if p["metadata"].get("deletionTimestamp")}


async def kubelet_removes(kube: Kube, ns: str, *names: str) -> None:
    for n in names:
        await kube.acall("DELETE", POD.path(ns, n), body={"gracePeriodSeconds": 0})


async def deleting(kube: Kube, ns: str, name: str) -> Obj:
    m = await kube.get(MACHINE, ns, name)
    assert m is not None
    return {c["type"]: c for c in m["status"]["conditions"]}["Deleting"] | {"deletion": m["status"].get("deletion")}


async def test_rules_order_the_evictions_and_volumes_hold_the_infrastructure(kube: Kube, envtest: Any,
                                                                               namespace: str) -> None:
    t0 = time.monotonic()
    ns, ctx = namespace, direct_ctx(kube)
    name, node_name, pid = await machine_with_node(kube, ctx, envtest, ns)

    # the admission rules upstream's webhook has (CEL here)
    with pytest.raises(KubeError) as bad:
        await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "bad", "Skip", 3))
    assert bad.value.invalid and 'order must not be set if drain behavior is "Skip" or "WaitCompleted"' in \
        bad.value.message
    with pytest.raises(KubeError) as bad:
        await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "bad", "Drain", pods=[
            {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}]))
    assert bad.value.invalid and "values set can't be empty" in bad.value.message
    with pytest.raises(KubeError) as bad:
        await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "bad", "Drain", pods=app("x") + app("x")))
    assert bad.value.invalid and "entries in pods must be unique" in bad.value.message

    # first the -5 group, then order 0 (the unlabelled Pod; WaitCompleted Pods belong to it), then order 10 (a Pod
    # matched by selector AND namespaceSelector); Pods of app=db are skipped; a rule for other Machines is ignored
    await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "a-first", "Drain", -5, pods=app("first")))
    await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "b-last", "Drain", 10, pods=[{
        "selector": {"matchLabels": {"app": "last"}},
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}]))
    await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "c-skip-db", "Skip", pods=app("db")))
    await kube.create(MACHINE_DRAIN_RULE, drain_rule(ns, "0-other-machines", "Skip", machines=[
        {"clusterSelector": {"matchLabels": {"stage": "dev"}}}]))
    for p in (pod(ns, "f1", node_name, {"app": "first"}), pod(ns, "f2", node_name, {"app": "first"}),
              pod(ns, "mid", node_name), pod(ns, "l1", node_name, {"app": "last"}),
              pod(ns, "db", node_name, {"app": "db"}, claim="db-data"),
              pod(ns, "keep", node_name, {"app": "first", "cluster.x-k8s.io/drain": "skip"}),
              pod(ns, "job", node_name, {"cluster.x-k8s.io/drain": "wait-completed"})):
        await kube.create(POD, p)

    await kube.delete(MACHINE, ns, name)
    evicted: list[set[str]] = []

    async def step() -> set[str]:
        await c_machine.reconcile(ctx, ns, name)
        now = await terminating(kube, ns)
        evicted.append(now)
        return now

    assert await step() == {"f1", "f2"}
    d = await deleting(kube, ns, name)
    started = d["deletion"]["nodeDrainStartTime"]
    assert d["reason"] == "DrainingNode"
    assert d["message"] == (
        f"Drain not completed yet (started at {started}):\n"
        f"* Pods {ns}/f1, {ns}/f2: deletionTimestamp set, but still not removed from the Node\n"
        f"After above Pods have been removed from the Node, the following Pods will be evicted: {ns}/l1, {ns}/mid\n"
        f"After above Pods have been removed from the Node, waiting for the following Pods to complete without "
        f"eviction: {ns}/job")
    assert await step() == {"f1", "f2"}, "nothing more while the first group is on the Node"
    await kubelet_removes(kube, ns, "f1")
    assert await step() == {"f2"}
    await kubelet_removes(kube, ns, "f2")
    assert await step() == {"mid"}
    d = await deleting(kube, ns, name)
    assert f"* Pod {ns}/job: waiting for completion" in d["message"]
    await kubelet_removes(kube, ns, "mid")
    assert await step() == set(), "the WaitCompleted Pod holds the next group and is never evicted"
    await kubelet_removes(kube, ns, "job")   # it completed and went away
    assert await step() == {"l1"}
    assert await kube.get(DOCKER_MACHINE, ns, name) is not None, "the infrastructure waits for the drain"

    # volumes: one attached for a drained Pod's claim (waited for) and one for the skipped db Pod's (not counted)
    for pv_name, claim in (("pv-data", "data"), ("pv-db", "db-data")):
        await kube.create(gvk.PERSISTENT_VOLUME, {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{ns}-{pv_name}"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                     "csi": {"driver": "csi.example.com", "volumeHandle": f"{ns}-{pv_name}"},
                     "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": claim}}})
        va = await kube.create(gvk.VOLUME_ATTACHMENT, {
            "apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": f"{ns}-{pv_name}"},
            "spec": {"attacher": "csi.example.com", "nodeName": node_name,
                     "source": {"persistentVolumeName": f"{ns}-{pv_name}"}}})
        await kube.patch_status(gvk.VOLUME_ATTACHMENT, va, {"attached": True})
    await kubelet_removes(kube, ns, "l1")
    assert await step() == set()
    d = await deleting(kube, ns, name)
    assert d["deletion"]["nodeDrainStartTime"] == started
    waiting_since = d["deletion"]["waitForNodeVolumeDetachStartTime"]
    assert (d["reason"], d["message"]) == ("WaitingForVolumeDetach",
                                           f"Waiting for Node volumes to be detached (started at {waiting_since})\n"
                                           f"* PersistentVolumeClaims: {ns}/data")
    await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(DOCKER_MACHINE, ns, name) is not None, "the infrastructure waits for the volumes"

    await kube.delete(gvk.VOLUME_ATTACHMENT, None, f"{ns}-pv-data")
    await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(DOCKER_MACHINE, ns, name) is None
    for _ in range(3):
        await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(NODE, None, node_name) is None and await kube.get(MACHINE, ns, name) is None
    for pod_name in ("db", "keep"):   # skipped: never evicted
        got = await kube.get(POD, ns, pod_name)
        assert got is not None and not got["metadata"].get("deletionTimestamp")
    # evictions in order: f1+f2 (order -5), mid (0), l1 (10)
    firsts = [sorted(e - set().union(*evicted[:i])) for i, e in enumerate(evicted) if e - set().union(*evicted[:i])]
    assert firsts == [["f1", "f2"], ["mid"], ["l1"]]
    for pv_name in ("pv-data", "pv-db"):
        await kube.delete(gvk.PERSISTENT_VOLUME, None, f"{ns}-{pv_name}")
    await kube.delete(gvk.VOLUME_ATTACHMENT, None, f"{ns}-pv-db")
    print(f"drain + volume wait through the Machine controller: {time.monotonic() - t0:.1f} s")
