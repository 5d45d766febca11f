"""The topology controller's hook call points with an in-memory extension (FakeRuntimeSDK) on an in-memory API:
BeforeClusterDelete through the skeleton (TopologyReconciled Deleting, ok-to-delete once it lets go, a blocking
answer not asked again before retryAfterSeconds), a failing extension, the pending-hooks annotation written as a
metadata patch, and nothing at all with the gate off."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as RH
from capd_py.api.gvk import CLUSTER
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers import topology, topology_hooks
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.skeleton import run
from capd_py.reconcile.topology import desired as D
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadKube
from capd_py.testing.runtime_sdk_fake import FakeRuntimeSDK

pytestmark = pytest.mark.unit


def setup(deleting: bool = True, annotations: dict[str, str] | None = None,
          sdk: FakeRuntimeSDK | None = None) -> tuple[Ctx, FakeWorkloadKube]:
    kube = FakeWorkloadKube(FakeRuntime(), "ns", "c1")
    md: dict[str, Any] = {"name": "c1", "namespace": "ns", "generation": 1, "annotations": annotations or {},
                          "finalizers": ["cluster.cluster.x-k8s.io"]}
    if deleting:
        md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    kube.put_object("clusters", {"apiVersion": CLUSTER.api_version, "kind": "Cluster", "metadata": md,
                                 "spec": {"topology": {"version": "v1.35.0", "classRef": {"name": "cc"}}}})
    ctx = Ctx(kube=kube, runtime=FakeRuntime(), settings=Settings(), workload=None)  # type: ignore[arg-type]
    if sdk is not None:
        ctx.runtime_sdk = sdk
    return ctx, kube


def cluster(kube: FakeWorkloadKube) -> dict[str, Any]:
    c = kube.object("clusters", "ns", "c1")
    assert c is not None
    return c


def extension(hook: RH.Hook, holding: set[str]) -> FakeRuntimeSDK:
    sdk = FakeRuntimeSDK()

    def answer(_req: Mapping[str, Any]) -> Mapping[str, Any]:
        if "block" in holding:
            return RH.response(hook, message="cleaning up", retryAfterSeconds=30)
        if "fail" in holding:
            return RH.response(hook, status=RH.FAILURE, message="boom")
        return RH.response(hook)
    sdk.register(f"{hook.name.lower()}.ext", hook, answer)
    return sdk


async def test_before_cluster_delete_blocks_then_marks_ok_to_delete() -> None:
    holding = {"block"}
    sdk = extension(RH.BEFORE_CLUSTER_DELETE, holding)
    ctx, kube = setup(sdk=sdk)
    res = await run(ctx, topology.KIND, "ns", "c1")
    assert res is not None and res.requeue_after == 30
    tc = cond.get(cluster(kube), "TopologyReconciled")
    assert tc is not None and (tc["status"], tc["reason"], tc["message"]) == (
        "False", "Deleting",
        "Cluster is deleting. Following hooks are blocking delete: BeforeClusterDelete: cleaning up")
    assert RH.OK_TO_DELETE_ANNOTATION not in cluster(kube)["metadata"]["annotations"]
    assert sdk.hook_calls() == ["BeforeClusterDelete"]
    assert sdk.calls[0][2]["kind"] == "BeforeClusterDeleteRequest" and sdk.calls[0][2]["cluster"]["metadata"][
        "name"] == "c1"

    # within retryAfterSeconds: not asked again, still blocked
    holding.clear()
    res = await run(ctx, topology.KIND, "ns", "c1")
    assert res is not None and 0 < (res.requeue_after or 0) <= 30 and sdk.hook_calls() == ["BeforeClusterDelete"]

    ctx.hook_cache.entries.clear()  # its retryAfterSeconds passed
    res = await run(ctx, topology.KIND, "ns", "c1")
    assert res is None and sdk.hook_calls() == ["BeforeClusterDelete"] * 2
    assert cluster(kube)["metadata"]["annotations"][RH.OK_TO_DELETE_ANNOTATION] == ""
    tc = cond.get(cluster(kube), "TopologyReconciled")
    assert tc is not None and (tc["reason"], tc["message"]) == ("Deleting", "Cluster is deleting")

    await run(ctx, topology.KIND, "ns", "c1")  # marked: never asked again
    assert sdk.hook_calls() == ["BeforeClusterDelete"] * 2


async def test_before_cluster_delete_failure_is_a_reconcile_failure() -> None:
    sdk = extension(RH.BEFORE_CLUSTER_DELETE, {"fail"})
    ctx, kube = setup(sdk=sdk)
    await run(ctx, topology.KIND, "ns", "c1")
    tc = cond.get(cluster(kube), "TopologyReconciled")
    assert tc is not None and tc["reason"] == D.R_FAILED and "boom" in tc["message"]
    assert RH.OK_TO_DELETE_ANNOTATION not in cluster(kube)["metadata"]["annotations"]


async def test_gate_off_deletion_is_todays() -> None:
    ctx, kube = setup()
    before = copy.deepcopy(cluster(kube))
    assert await run(ctx, topology.KIND, "ns", "c1") is None
    assert cluster(kube) == before  # no condition, no annotation, no call


async def test_pending_hooks_written_as_a_metadata_patch() -> None:
    sdk = FakeRuntimeSDK()
    ctx, kube = setup(deleting=False, annotations={RH.PENDING_HOOKS_ANNOTATION: "AfterControlPlaneInitialized"},
                      sdk=sdk)
    c = cluster(kube)
    c["spec"]["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster",
                                      "name": "x"}
    c["status"] = {"conditions": [{"type": "ControlPlaneInitialized", "status": "True", "reason": "Initialized"}]}
    kube.put_object("clusters", c)
    sdk.register("acpi.ext", RH.AFTER_CONTROL_PLANE_INITIALIZED)
    d, out = await topology_hooks.lifecycle_hooks(ctx, cluster(kube), D.Current())
    assert sdk.hook_calls() == ["AfterControlPlaneInitialized"] and d.pending == frozenset()
    assert RH.PENDING_HOOKS_ANNOTATION not in (cluster(kube)["metadata"].get("annotations") or {})
    assert RH.PENDING_HOOKS_ANNOTATION not in (out["metadata"].get("annotations") or {})


async def test_a_failing_hook_fails_the_pass_but_keeps_earlier_answers() -> None:
    sdk = FakeRuntimeSDK()
    sdk.register("awu.ext", RH.AFTER_WORKERS_UPGRADE)
    sdk.register("acu.ext", RH.AFTER_CLUSTER_UPGRADE,
                 lambda _req: RH.response(RH.AFTER_CLUSTER_UPGRADE, status=RH.FAILURE, message="boom"))
    ctx, kube = setup(deleting=False, sdk=sdk,
                      annotations={RH.PENDING_HOOKS_ANNOTATION: "AfterClusterUpgrade,AfterWorkersUpgrade"})
    c = cluster(kube)
    c["spec"]["controlPlaneRef"] = {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
                                    "name": "cp"}
    kube.put_object("clusters", c)
    up = {"replicas": 1, "upToDateReplicas": 1, "observedGeneration": 1}
    cp = {"kind": "KubeadmControlPlane", "metadata": {"name": "cp", "generation": 1},
          "spec": {"version": "v1.35.0", "replicas": 1}, "status": {"version": "v1.35.0", **up}}
    md = {"kind": "MachineDeployment", "metadata": {"name": "md", "generation": 1},
          "spec": {"replicas": 1, "template": {"spec": {"version": "v1.35.0"}}}, "status": up}
    cur = D.Current(control_plane=cp, machine_deployments={"md-0": D.CurrentMD(md, None, None)})
    with pytest.raises(RuntimeSDKError, match="boom"):
        await topology_hooks.lifecycle_hooks(ctx, cluster(kube), cur)
    assert sdk.hook_calls() == ["AfterWorkersUpgrade", "AfterClusterUpgrade"]
    assert cluster(kube)["metadata"]["annotations"][RH.PENDING_HOOKS_ANNOTATION] == "AfterClusterUpgrade"


class ColdRuntimeSDK(FakeRuntimeSDK):
    """The real service before its registry is warmed up: registered() fails rather than say "none"."""

    def registered(self, hook: str) -> list[str]:
        raise RuntimeSDKError(f"failed to get extension handlers for hook {hook}: not been warmed up")


async def test_deletion_waits_for_the_registry() -> None:
    ctx, kube = setup(sdk=ColdRuntimeSDK())
    res = await run(ctx, topology.KIND, "ns", "c1")
    assert res is not None and res.requeue_after == ctx.settings.poll_seconds
    tc = cond.get(cluster(kube), "TopologyReconciled")
    assert tc is not None and tc["reason"] == D.R_FAILED and "warmed up" in tc["message"]
    assert RH.OK_TO_DELETE_ANNOTATION not in cluster(kube)["metadata"]["annotations"]


def test_a_rolling_machine_pool_counts_as_workers_upgrading() -> None:
    """AfterWorkersUpgrade / AfterClusterUpgrade wait for MachinePools as for MachineDeployments (upstream: no
    MachineDeployment and no MachinePool upgrading): one still replacing an instance is upgrading, not settled."""
    ctx, kube = setup(deleting=False)
    cp = {"metadata": {"name": "cp", "generation": 2},
          "spec": {"version": "v1.35.0", "replicas": 1},
          "status": {"version": "v1.35.0", "replicas": 1, "upToDateReplicas": 1, "observedGeneration": 2}}

    def pool(replicas: int, up_to_date: int) -> D.CurrentMP:
        return D.CurrentMP(mp={"metadata": {"name": "mp", "generation": 3}, "spec": {
            "replicas": 1, "template": {"spec": {"version": "v1.35.0"}}}, "status": {
            "replicas": replicas, "upToDateReplicas": up_to_date, "observedGeneration": 3}},
            bootstrap_config=None, infra_pool=None)

    rolling = D.Current(control_plane=cp, machine_pools={"mp-0": pool(2, 1)})
    view = topology_hooks.hook_view(ctx, cluster(kube), rolling)
    assert view.workers_upgrading and not view.settled
    done = D.Current(control_plane=cp, machine_pools={"mp-0": pool(1, 1)})
    view = topology_hooks.hook_view(ctx, cluster(kube), done)
    assert not view.workers_upgrading and view.settled
