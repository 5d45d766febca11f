"""The KCP scale-down step against the in-memory etcd (Ctx.etcd) and a recording management API."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.kcp import scale
from capd_py.kube.etcd import EtcdError
from capd_py.kube.inmemory_etcd import FakeEtcd
from capd_py.reconcile import kcp as rk
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit

KCP: dict[str, Any] = {"metadata": {"name": "c1-cp", "namespace": "ns"}}


class RecordingKube:
    """Just what scale_down and run_cleanup_hooks use: get / merge_patch / delete of Machines."""

    def __init__(self, *names: str):
        self.machines: dict[str, dict[str, Any]] = {n: {"metadata": {"name": n, "uid": f"uid-{n}"}} for n in names}
        self.deleted: list[tuple[str, str | None]] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.events: list[dict[str, Any]] = []

    async def merge_patch(self, g: Any, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((name, patch))
        return self.machines[name]

    async def get(self, g: Any, ns: str, name: str) -> dict[str, Any] | None:
        return self.machines.get(name)

    async def delete(self, g: Any, ns: str, name: str, uid: str | None = None) -> None:
        self.deleted.append((name, uid))

    async def create(self, g: Any, obj: dict[str, Any]) -> dict[str, Any]:
        self.events.append(obj)  # Events only
        return obj

    async def list(self, g: Any, ns: str | None = None, **_kw: Any) -> list[dict[str, Any]]:
        return []


def ctx(kube: RecordingKube, etcd: FakeEtcd) -> Ctx:
    return Ctx(kube=kube, runtime=FakeRuntime(), settings=Settings(), workload=None, etcd=etcd)  # type: ignore[arg-type]


def views(*names: str, healthy: bool = True) -> list[rk.MachineView]:
    import datetime as dt
    return [rk.MachineView(name=n, created=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), node_name=n, node_ready=healthy,
                           pods_ready={p: healthy for p in rk.STATIC_PODS}) for n in names]


HOOK = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup"


def deleting(kube: RecordingKube, name: str, reason: str = "WaitingForPreTerminateHook") -> dict[str, Any]:
    """A Machine of `kube` as the Machine controller leaves it: deleting, drained, waiting on our hook."""
    m = kube.machines[name]
    m["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z", resourceVersion="7",
                         annotations={HOOK: ""})
    m["status"] = {"conditions": [{"type": "Deleting", "status": "True", "reason": reason}]}
    return m


async def test_scale_down_deletes_the_machine_with_the_hook_and_leaves_etcd_alone() -> None:
    etcd = FakeEtcd.with_members("m1", "m2", "m3")
    kube = RecordingKube("m1", "m2", "m3")
    problem = await scale.scale_down(ctx(kube, etcd), KCP, views("m1", "m2", "m3"),
                                     rk.Action("scale-down", machine="m1"), workload=object())  # type: ignore[arg-type]
    assert problem is None
    assert kube.patches == [("m1", {"metadata": {"annotations": {HOOK: ""}}})]  # a Machine older than the hook
    assert kube.deleted == [("m1", "uid-m1")] and etcd.names() == ["m1", "m2", "m3"]


async def test_the_hook_removes_the_member_through_a_healthy_other_once_drained() -> None:
    etcd = FakeEtcd.with_members("m1", "m2", "m3")  # m1 leads
    kube = RecordingKube("m1", "m2", "m3")
    m1 = deleting(kube, "m1", reason="DrainingNode")
    vs = views("m1", "m2", "m3")
    vs[0].deleting = True
    c = ctx(kube, etcd)
    assert await scale.run_cleanup_hooks(c, KCP, [m1], vs, object(), kcp_deleting=False) is None  # type: ignore[arg-type]
    assert etcd.names() == ["m1", "m2", "m3"] and kube.patches == []  # still draining: wait
    deleting(kube, "m1")
    assert await scale.run_cleanup_hooks(c, KCP, [m1], vs, object(), kcp_deleting=False) is None  # type: ignore[arg-type]
    # through the newest other Machine (upstream's leader candidate; equal ages: the last name)
    assert etcd.removed == [("m3", "m1")] and etcd.names() == ["m2", "m3"]
    assert etcd.leader == etcd.by_name("m3").id  # type: ignore[union-attr]  # moved before the removal
    assert [op for _, op, _ in etcd.calls] == ["members", "status", "move_leader", "remove_member"]
    assert kube.patches == [("m1", {"metadata": {"resourceVersion": "7", "annotations": {HOOK: None}}})]


async def test_an_etcd_failure_keeps_the_hook() -> None:
    etcd = FakeEtcd.with_members("m1", "m2")
    etcd.fail["remove_member"] = EtcdError("etcdserver: request timed out")
    kube = RecordingKube("m1", "m2")
    m2 = deleting(kube, "m2")
    problem = await scale.run_cleanup_hooks(ctx(kube, etcd), KCP, [m2], views("m1", "m2"), object(),  # type: ignore[arg-type]
                                            kcp_deleting=False)
    assert problem == "Cannot remove the etcd member of Machine m2: etcdserver: request timed out"
    assert kube.patches == [] and etcd.names() == ["m1", "m2"]
    assert [e.get("reason") for e in kube.events] == ["EtcdMemberRemovalFailed"]


async def test_status_and_move_leader_failures_do_not_block_the_removal() -> None:
    etcd = FakeEtcd.with_members("m1", "m2")
    etcd.fail["status"] = EtcdError("no answer")
    out = await scale.remove_etcd_member(etcd.for_node(None, "m2"), "m2", "m1")
    assert out.startswith("removed etcd member") and etcd.names() == ["m2"]
    etcd = FakeEtcd.with_members("m1", "m2")
    etcd.fail["move_leader"] = EtcdError("not now")
    await scale.remove_etcd_member(etcd.for_node(None, "m2"), "m2", "m1")
    assert etcd.names() == ["m2"]


async def test_no_member_or_a_deleting_kcp_release_the_hook_no_carrier_or_no_workload_keep_it() -> None:
    etcd = FakeEtcd.with_members("m1", "m2")
    kube = RecordingKube("m1", "m2", "m9")
    c = ctx(kube, etcd)
    m9 = deleting(kube, "m9")
    assert await scale.run_cleanup_hooks(c, KCP, [m9], views("m9", "m1"), object(),  # type: ignore[arg-type]
                                         kcp_deleting=False) is None
    assert etcd.names() == ["m1", "m2"]  # m9 had no member
    # the other member does not carry etcd yet (its static pods not Ready), or the workload API is away: the
    # member and the hook stay (dropping the hook there lost etcd quorum in session 16's rollout e2e)
    m1 = deleting(kube, "m1")
    problem = await scale.run_cleanup_hooks(c, KCP, [m1], views("m1") + views("m2", healthy=False), object(),  # type: ignore[arg-type]
                                            kcp_deleting=False)
    assert problem is not None and "waiting for m2 to be healthy" in problem
    problem = await scale.run_cleanup_hooks(c, KCP, [m1], views("m1", "m2"), None, kcp_deleting=False)
    assert problem is not None and "not reachable" in problem
    assert etcd.names() == ["m1", "m2"] and [n for n, _ in kube.patches] == ["m9"]
    m2 = deleting(kube, "m2", reason="DrainingNode")
    assert await scale.run_cleanup_hooks(c, KCP, [m2], views("m1", "m2"), None, kcp_deleting=True) is None
    assert etcd.removed == [] and [n for n, _ in kube.patches] == ["m9", "m2"]
