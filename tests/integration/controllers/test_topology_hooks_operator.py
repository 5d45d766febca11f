"""Runtime SDK lifecycle hooks through the whole controllers process, in-process, against a real kube-apiserver, with
an in-memory extension (FakeRuntimeSDK on the Manager's context), the fake container runtime and fake workload
clusters: capd-py's `development` flavor is held by BeforeClusterCreate until the extension lets go; an upgrade
through spec.topology.version stops at each hook in upstream's order (BeforeClusterUpgrade, BeforeControlPlaneUpgrade,
AfterControlPlaneUpgrade, BeforeWorkersUpgrade, AfterWorkersUpgrade, AfterClusterUpgrade) with the control plane and
workers where upstream's e2e (test/e2e/cluster_upgrade_runtimesdk.go) expects them and the pending-hooks annotation
saying what is still due; deletion waits for BeforeClusterDelete (the Cluster's Deleting condition says so)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as RH
from capd_py.api.gvk import CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE, MACHINE_DEPLOYMENT
from capd_py.api.labels import CLUSTER_NAME
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadEtcd, FakeWorkloads
from capd_py.testing.inprocess import eventually, operator_in_thread
from capd_py.testing.runtime_sdk_fake import FakeRuntimeSDK

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

NAME = "hooks"
OLD, NEW = "v1.34.4", "v1.35.0"
LIFECYCLE = [h for h in RH.HOOKS.values() if h.family == "lifecycle"]
UPGRADE_ORDER = ["BeforeClusterUpgrade", "BeforeControlPlaneUpgrade", "AfterControlPlaneUpgrade",
                 "BeforeWorkersUpgrade", "AfterWorkersUpgrade", "AfterClusterUpgrade"]


class Extension:
    """One extension serving every lifecycle hook: blocking (retryAfterSeconds 1) while the hook is in `holding`."""

    def __init__(self) -> None:
        self.sdk = FakeRuntimeSDK()
        self.holding: set[str] = set()
        self.namespace = ""  # the test's, once known
        for h in LIFECYCLE:
            self.sdk.register(f"{h.name.lower()}.test-extension", h, self._responder(h))

    def _responder(self, hook: RH.Hook) -> Any:
        def answer(_req: Mapping[str, Any]) -> Mapping[str, Any]:
            if hook.blocking and hook.name in self.holding:
                return RH.response(hook, message="held by the test", retryAfterSeconds=1)
            return RH.response(hook)
        return answer

    def called(self, hook: str) -> list[dict[str, Any]]:
        return [req for h, _, req in self.sdk.calls if h == hook and self._ours(req)]

    def first_calls(self) -> list[str]:
        out: list[str] = []
        for h, _, req in self.sdk.calls:
            if self._ours(req) and h not in out:
                out.append(h)
        return out

    def _ours(self, req: Mapping[str, Any]) -> bool:
        """A call about this test's Cluster: the session's envtest is shared, and this operator also reconciles
        Clusters earlier tests left being deleted (it called their BeforeClusterDelete first in a loaded run)."""
        md = (req.get("cluster") or {}).get("metadata") or {}
        return not self.namespace or md.get("namespace") == self.namespace


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[tuple[Manager, Extension]]:
    ext = Extension()
    runtime = FakeRuntime()

    def on_manager(m: Manager) -> None:
        fakes = FakeWorkloads(m.ctx.kube, runtime)
        m.ctx.workload = fakes
        m.ctx.etcd = FakeWorkloadEtcd(fakes)
        m.ctx.runtime_sdk = ext.sdk
    async with operator_in_thread(str(envtest.kubeconfig_path), runtime, on_manager=on_manager) as m:
        yield m, ext


async def _objs(kube: Kube, ns: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, dict[str, Any] | None]:
    c = await kube.get(CLUSTER, ns, NAME)
    ref = ((c or {}).get("spec") or {}).get("controlPlaneRef")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, ref["name"]) if ref else None
    mds = await kube.list(MACHINE_DEPLOYMENT, ns, labels={CLUSTER_NAME: NAME})
    return c, kcp, mds[0] if mds else None


def _pending(c: dict[str, Any] | None) -> str:
    return ((c or {}).get("metadata", {}).get("annotations") or {}).get(RH.PENDING_HOOKS_ANNOTATION, "")


def _topology(c: dict[str, Any] | None) -> tuple[str, str, str]:
    tc = cond.get(c or {}, "TopologyReconciled") or {}
    return tc.get("status", ""), tc.get("reason", ""), tc.get("message", "")


async def test_lifecycle_hooks_gate_creation_each_upgrade_step_and_deletion(
        operator: tuple[Manager, Extension], kube: Kube, namespace: str) -> None:
    _, ext = operator
    ext.namespace = namespace
    ext.holding = {"BeforeClusterCreate"}
    docs = parse_documents(generate_cluster(NAME, namespace=namespace, flavor="development",
                                            control_plane_machine_count=1, worker_machine_count=1, env={}))
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def state() -> Any:
        c, kcp, md = await _objs(kube, namespace)
        return {"pending": _pending(c), "topology": _topology(c), "calls": ext.sdk.hook_calls()[-12:],
                "kcp": kcp and (kcp["spec"]["version"], (kcp.get("status") or {}).get("version")),
                "md": md and md["spec"]["template"]["spec"]["version"]}

    # --- creation waits for BeforeClusterCreate -------------------------------------------------------------------
    async def creation_held() -> bool:
        c, _, _ = await _objs(kube, namespace)
        st, reason, msg = _topology(c)
        return len(ext.called("BeforeClusterCreate")) >= 2 and (st, reason) == ("False", "ClusterCreating") \
            and "BeforeClusterCreate: held by the test" in msg
    await eventually(creation_held, 30, "BeforeClusterCreate asked again after retryAfterSeconds, creation held",
                     state)
    c, kcp, _ = await _objs(kube, namespace)
    assert c is not None and not c["spec"].get("controlPlaneRef") and not c["spec"].get("infrastructureRef")
    assert _topology(c)[2] == "Following hooks are blocking Cluster topology creation: BeforeClusterCreate: " \
        "held by the test"
    req = ext.called("BeforeClusterCreate")[0]
    assert req["kind"] == "BeforeClusterCreateRequest" and req["cluster"]["metadata"]["name"] == NAME
    assert "status" not in req["cluster"]

    ext.holding = set()

    async def available() -> bool:
        c, _, _ = await _objs(kube, namespace)
        return c is not None and cond.is_true(c, "Available") and cond.is_true(c, "TopologyReconciled") \
            and bool(ext.called("AfterControlPlaneInitialized")) and _pending(c) == ""
    await eventually(available, 120, "created, AfterControlPlaneInitialized called and no hook pending", state)
    assert ext.first_calls() == ["BeforeClusterCreate", "AfterControlPlaneInitialized"]

    # --- the upgrade stops at each hook, in upstream's order --------------------------------------------------------
    ext.holding = set(UPGRADE_ORDER)
    await kube.merge_patch(CLUSTER, namespace, NAME, {"spec": {"topology": {"version": NEW}}})
    # (hook, control plane spec/status version, MachineDeployment version, pending-hooks while it blocks)
    expect = [
        ("BeforeClusterUpgrade", (OLD, OLD), OLD, ""),
        ("BeforeControlPlaneUpgrade", (OLD, OLD), OLD, "AfterClusterUpgrade"),
        ("AfterControlPlaneUpgrade", (NEW, NEW), OLD,
         "AfterClusterUpgrade,AfterControlPlaneUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade"),
        ("BeforeWorkersUpgrade", (NEW, NEW), OLD, "AfterClusterUpgrade,AfterWorkersUpgrade,BeforeWorkersUpgrade"),
        ("AfterWorkersUpgrade", (NEW, NEW), NEW, "AfterClusterUpgrade,AfterWorkersUpgrade"),
        ("AfterClusterUpgrade", (NEW, NEW), NEW, "AfterClusterUpgrade"),
    ]
    for hook, cp, mdv, pending in expect:
        async def held(hook: str = hook, pending: str = pending) -> bool:
            c, _, _ = await _objs(kube, namespace)
            st, reason, msg = _topology(c)
            return bool(ext.called(hook)) and (st, reason) == ("False", "ClusterUpgrading") \
                and f"Following hooks are blocking upgrade: {hook}: held by the test" in msg \
                and _pending(c) == pending
        await eventually(held, 120, f"the upgrade held by {hook}", state)
        calls = len(ext.called(hook))
        # held: still there once the hook was asked again (its retryAfterSeconds passed)
        await eventually(functools.partial(_more, ext, hook, calls), 30, f"{hook} asked again", state)
        c, kcp, md = await _objs(kube, namespace)
        assert kcp is not None and md is not None
        assert (kcp["spec"]["version"], (kcp.get("status") or {}).get("version")) == cp, (hook, await state())
        assert md["spec"]["template"]["spec"]["version"] == mdv, (hook, await state())
        assert _pending(c) == pending
        if hook == "AfterWorkersUpgrade":
            machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: NAME})
            assert machines and all(m["spec"].get("version") == NEW for m in machines)
        ext.holding.discard(hook)

    async def upgraded() -> bool:
        c, _, _ = await _objs(kube, namespace)
        return c is not None and _pending(c) == "" and cond.is_true(c, "TopologyReconciled")
    await eventually(upgraded, 60, "the upgrade finished, nothing pending", state)
    assert ext.first_calls() == ["BeforeClusterCreate", "AfterControlPlaneInitialized", *UPGRADE_ORDER]
    bcu = ext.called("BeforeClusterUpgrade")[0]
    assert (bcu["fromKubernetesVersion"], bcu["toKubernetesVersion"]) == (OLD, NEW)
    assert bcu["controlPlaneUpgrades"] == [{"version": NEW}] and bcu["workersUpgrades"] == [{"version": NEW}]
    bwu = ext.called("BeforeWorkersUpgrade")[0]
    assert (bwu["fromKubernetesVersion"], bwu["toKubernetesVersion"]) == (OLD, NEW)
    assert ext.called("AfterClusterUpgrade")[-1]["kubernetesVersion"] == NEW

    # --- deletion waits for BeforeClusterDelete -------------------------------------------------------------------
    ext.holding = {"BeforeClusterDelete"}
    await kube.delete(CLUSTER, namespace, NAME)

    async def deletion_held() -> bool:
        c, kcp, _ = await _objs(kube, namespace)
        dc = cond.get(c or {}, cond.DELETING) or {}
        st, reason, msg = _topology(c)
        return len(ext.called("BeforeClusterDelete")) >= 2 and dc.get("reason") == "WaitingForBeforeDeleteHook" \
            and dc.get("message") == "Waiting for BeforeClusterDelete hook" and (st, reason) == ("False", "Deleting") \
            and msg == "Cluster is deleting. Following hooks are blocking delete: BeforeClusterDelete: held by the test"
    await eventually(deletion_held, 30, "deletion held by BeforeClusterDelete", state)
    c, kcp, md = await _objs(kube, namespace)
    assert kcp is not None and md is not None and not kcp["metadata"].get("deletionTimestamp") \
        and not md["metadata"].get("deletionTimestamp"), "nothing is deleted while the hook blocks"
    assert RH.OK_TO_DELETE_ANNOTATION not in (c or {})["metadata"].get("annotations", {})

    ext.holding = set()

    async def gone() -> bool:
        return await kube.get(CLUSTER, namespace, NAME) is None
    await eventually(gone, 120, "the Cluster deleted once BeforeClusterDelete let go", state)


async def _more(ext: Extension, hook: str, n: int) -> bool:
    return len(ext.called(hook)) > n
