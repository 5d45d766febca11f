"""MachineSet preflight checks against a real API server (upstream v1.13 behaviour, on by default): a scale up
waits while the control plane provisions or upgrades and says why in ScalingUp; a remediation waits with
OwnerRemediated=False RemediationDeferred on the Machine; the skip annotation lets both through."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import gvk
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE, MACHINE_SET
from capd_py.controllers import machineset as c_ms
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube
from capd_py.reconcile import preflight
from capd_py.testing.core_objects import cluster_obj, machineset_obj, templates
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]


@pytest.fixture
def ctx(kube: Kube) -> Ctx:
    c = direct_ctx(kube)
    return c


async def _setup(kube: Kube, ns: str) -> None:
    await kube.create(CLUSTER, cluster_obj(ns, cp=True))
    await kube.create(DOCKER_CLUSTER, {"apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster",
                                       "metadata": {"name": "c1", "namespace": ns}, "spec": {}})
    for g, o in templates(ns):
        await kube.create(g, o)
    await kube.create(KUBEADM_CONTROL_PLANE, {
        "apiVersion": KUBEADM_CONTROL_PLANE.api_version, "kind": "KubeadmControlPlane",
        "metadata": {"name": "c1-cp", "namespace": ns},
        "spec": {"version": "v1.34.4", "replicas": 1,
                 "machineTemplate": {"spec": {"infrastructureRef": {
                     "apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachineTemplate", "name": "workers"}}}}})


async def _live_machines(kube: Kube, ns: str) -> list[Obj]:
    return [m for m in await kube.list(MACHINE, ns) if not m["metadata"].get("deletionTimestamp")]


async def _kcp_status(kube: Kube, ns: str, version: str) -> None:
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    await kube.patch_status(KUBEADM_CONTROL_PLANE, kcp, {**(kcp.get("status") or {}), "version": version})


async def test_scale_up_and_remediation_wait_for_a_stable_control_plane(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await _setup(kube, ns)
    await kube.create(MACHINE_SET, machineset_obj(ns, 2))

    # the control plane has no status.version yet: provisioning, no Machine, ScalingUp says why
    res = await c_ms.reconcile(ctx, ns, "ms1")
    assert res is not None and res.requeue_after == preflight.REQUEUE_SECONDS
    assert await _live_machines(kube, ns) == []
    ms = await kube.get(MACHINE_SET, ns, "ms1")
    assert ms is not None
    up = cond.get(ms, "ScalingUp")
    assert up and up["status"] == "True" and up["message"] == (
        "Scaling up from 0 to 2 replicas is blocked because:\n"
        f'* KubeadmControlPlane {ns}/c1-cp is provisioning ("ControlPlaneIsStable" preflight check failed)'), up
    # held and unchanged: no write on the next pass
    rv = ms["metadata"]["resourceVersion"] if ms else ""
    await c_ms.reconcile(ctx, ns, "ms1")
    again = await kube.get(MACHINE_SET, ns, "ms1")
    assert again is not None and again["metadata"]["resourceVersion"] == rv

    # provisioned: the Machines come
    await _kcp_status(kube, ns, "v1.34.4")
    assert await c_ms.reconcile(ctx, ns, "ms1") is None
    made = await _live_machines(kube, ns)
    assert len(made) == 2
    ms = await kube.get(MACHINE_SET, ns, "ms1")
    assert ms is not None
    up = cond.get(ms, "ScalingUp")
    assert up and up["status"] == "False"

    # the control plane upgrades (spec ahead of status): an unhealthy Machine is not remediated meanwhile
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp", {"spec": {"version": "v1.35.4"}})
    sick = made[0]
    st = copy.deepcopy(sick.get("status") or {})
    st["conditions"] = cond.set_condition(st.get("conditions"), "OwnerRemediated", False, "WaitingForRemediation")
    await kube.patch_status(MACHINE, sick, st)
    res = await c_ms.reconcile(ctx, ns, "ms1")
    assert res is not None and res.requeue_after == preflight.REQUEUE_SECONDS
    assert len(await _live_machines(kube, ns)) == 2
    m = await kube.get(MACHINE, ns, sick["metadata"]["name"])
    assert m is not None
    rem = cond.get(m, "OwnerRemediated")
    assert rem and rem["status"] == "False" and rem["reason"] == "RemediationDeferred", rem
    assert f"* KubeadmControlPlane {ns}/c1-cp is upgrading" in rem["message"]
    assert '"KubeadmVersionSkew" preflight check failed' in rem["message"]  # v1.34 workers, v1.35 control plane

    # the skip annotation on the MachineSet lets it through
    await kube.merge_patch(MACHINE_SET, ns, "ms1",
                           {"metadata": {"annotations": {preflight.SKIP_ANNOTATION: "ControlPlaneIsStable, "
                                                                                    "KubeadmVersionSkew"}}})
    await c_ms.reconcile(ctx, ns, "ms1")
    gone = await kube.get(MACHINE, ns, sick["metadata"]["name"])
    assert gone is None or gone["metadata"].get("deletionTimestamp"), "the unhealthy Machine was not remediated"


async def test_skip_annotation_on_the_bootstrap_template_and_the_checks_flag(kube: Kube, namespace: str,
                                                                             ctx: Ctx) -> None:
    ns = namespace
    await _setup(kube, ns)  # control plane provisioning (no status.version)
    await kube.merge_patch(gvk.KUBEADM_CONFIG_TEMPLATE, ns, "workers",
                           {"metadata": {"annotations": {preflight.SKIP_ANNOTATION: "All"}}})
    await kube.create(MACHINE_SET, machineset_obj(ns, 1))
    assert await c_ms.reconcile(ctx, ns, "ms1") is None
    assert len(await _live_machines(kube, ns)) == 1

    # no checks enabled at all (--machineset-preflight-checks ""): nothing held either
    await kube.merge_patch(gvk.KUBEADM_CONFIG_TEMPLATE, ns, "workers",
                           {"metadata": {"annotations": {preflight.SKIP_ANNOTATION: None}}})
    await kube.merge_patch(MACHINE_SET, ns, "ms1", {"spec": {"replicas": 2}})
    ctx.settings.machineset_preflight_checks = frozenset()
    assert await c_ms.reconcile(ctx, ns, "ms1") is None
    assert len(await _live_machines(kube, ns)) == 2
