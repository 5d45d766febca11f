"""KubeadmControlPlane remediation against a real API server, as upstream: a first control-plane Machine that
never initializes is replaced (the MachineHealthCheck marked it), its replacement carries the remediation
(`remediation-for`), a failing replacement is a retry, and `spec.remediation.maxRetry` stops the retries with
OwnerRemediated=False CannotBeRemediated on the Machine; `status.lastRemediation` follows each step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import KUBEADM_CONTROL_PLANE, MACHINE
from capd_py.api.labels import KCP_REMEDIATION_FOR, KCP_REMEDIATION_IN_PROGRESS
from capd_py.controllers import kcp as c_kcp
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube
from capd_py.testing.core_objects import make_cluster, make_kcp
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]


@pytest.fixture
def ctx(kube: Kube) -> Ctx:
    c = direct_ctx(kube)
    return c


async def _live(kube: Kube, ns: str) -> list[Obj]:
    return [m for m in await kube.list(MACHINE, ns) if not m["metadata"].get("deletionTimestamp")]


async def _mark_unhealthy(kube: Kube, m: Obj) -> None:
    """What a MachineHealthCheck does to a Machine its owner should remediate."""
    st = dict(m.get("status") or {})
    st["conditions"] = cond.set_condition(st.get("conditions"), "HealthCheckSucceeded", False, "NodeStartupTimeout")
    st["conditions"] = cond.set_condition(st["conditions"], "OwnerRemediated", False, "WaitingForRemediation")
    await kube.patch_status(MACHINE, m, st)


async def _kcp(kube: Kube, ns: str) -> Obj:
    k = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert k is not None
    return k


async def test_first_machine_remediated_then_retries_stop_at_max_retry(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True)
    await make_kcp(kube, ns, cluster, replicas=1)
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp",
                           {"spec": {"remediation": {"maxRetry": 1, "retryPeriodSeconds": 0}}})
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m1] = await _live(kube, ns)
    first = m1["metadata"]["name"]

    # the init machine never comes up; the MHC marks it: remediated although the control plane is not initialized
    await _mark_unhealthy(kube, m1)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await _live(kube, ns) == []
    k = await _kcp(kube, ns)
    started = json.loads(k["metadata"]["annotations"][KCP_REMEDIATION_IN_PROGRESS])
    assert started["machine"] == first and started["retryCount"] == 0
    assert k["status"]["lastRemediation"]["machine"] == first and k["status"]["lastRemediation"]["retryCount"] == 0

    # the replacement: a new init machine carrying the remediation; the KCP's annotation goes
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m2] = await _live(kube, ns)
    assert json.loads(m2["metadata"]["annotations"][KCP_REMEDIATION_FOR])["machine"] == first
    k = await _kcp(kube, ns)
    assert KCP_REMEDIATION_IN_PROGRESS not in (k["metadata"].get("annotations") or {})
    assert k["status"]["lastRemediation"]["machine"] == first

    # it fails too: a retry (1 of maxRetry 1)
    await _mark_unhealthy(kube, m2)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await _live(kube, ns) == []
    retry = json.loads((await _kcp(kube, ns))["metadata"]["annotations"][KCP_REMEDIATION_IN_PROGRESS])
    assert retry["machine"] == m2["metadata"]["name"] and retry["retryCount"] == 1
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m3] = await _live(kube, ns)
    assert json.loads(m3["metadata"]["annotations"][KCP_REMEDIATION_FOR])["retryCount"] == 1

    # and again: maxRetry reached, the Machine stays and says why; nothing else changes on the next pass
    await _mark_unhealthy(kube, m3)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [still] = await _live(kube, ns)
    assert still["metadata"]["name"] == m3["metadata"]["name"]
    c = cond.get(still, "OwnerRemediated")
    assert c and (c["status"], c["reason"]) == ("False", "CannotBeRemediated"), c
    assert c["message"] == "KubeadmControlPlane can't remediate this machine because the operation already failed " \
                           "1 times (MaxRetry)"
    k = await _kcp(kube, ns)
    assert k["status"]["lastRemediation"]["retryCount"] == 1
    rvs = (k["metadata"]["resourceVersion"], still["metadata"]["resourceVersion"])
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [again] = await _live(kube, ns)
    assert ((await _kcp(kube, ns))["metadata"]["resourceVersion"], again["metadata"]["resourceVersion"]) == rvs
