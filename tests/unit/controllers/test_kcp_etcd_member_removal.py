"""The etcdctl conversation KCP has with a remaining etcd member before deleting a Machine: the real
exec client (capd_py.kube.etcd, exec faked) driven by the KCP scale-down step."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capd_py.controllers.kcp import scale as c_scale
from capd_py.kube import etcd as k_etcd

pytestmark = pytest.mark.unit

MEMBERS = {"members": [
    {"ID": 11, "name": "n1", "clientURLs": ["https://10.0.0.1:2379"]},
    {"ID": 255, "name": "n2", "clientURLs": ["https://10.0.0.2:2379"]},
]}


class FakeWorkload:
    class api:  # noqa: N801 - mimics Kube.api
        configuration = object()


def _client(node: str) -> k_etcd.EtcdClient:
    return k_etcd.ExecEtcdClients().for_node(FakeWorkload(), node)  # type: ignore[arg-type]


def fake_exec(calls: list[tuple[str, list[str]]], leader: int) -> Any:
    def run(cfg: Any, pod: str, cmd: list[str], timeout: float = 60) -> tuple[int, str, str]:
        calls.append((pod, cmd))
        args = [a for a in cmd if not a.startswith("--")]
        if args[1:3] == ["member", "list"]:
            return 0, json.dumps(MEMBERS), ""
        if args[1:3] == ["endpoint", "status"]:
            return 0, json.dumps([{"Endpoint": "x", "Status": {"leader": leader}}]), ""
        return 0, "", ""
    return run


async def test_removes_member_through_another_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(k_etcd, "_exec_blocking", fake_exec(calls, leader=11))
    out = await c_scale.remove_etcd_member(_client("n1"), "n1", "n2")
    assert out == "removed etcd member ff (n2)"
    assert all(pod == "etcd-n1" for pod, _ in calls)
    assert calls[-1][1][-3:] == ["member", "remove", "ff"]
    assert not any("move-leader" in cmd for _, cmd in calls)
    assert "--cacert=/etc/kubernetes/pki/etcd/ca.crt" in calls[0][1]


async def test_moves_leadership_off_the_member_first(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(k_etcd, "_exec_blocking", fake_exec(calls, leader=255))
    await c_scale.remove_etcd_member(_client("n1"), "n1", "n2")
    move = next(cmd for _, cmd in calls if "move-leader" in cmd)
    assert "--endpoints=https://10.0.0.2:2379" in move and move[-1] == "b"
    assert calls[-1][1][-3:] == ["member", "remove", "ff"]


async def test_unknown_member_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []
    monkeypatch.setattr(k_etcd, "_exec_blocking", fake_exec(calls, leader=11))
    assert "no etcd member" in await c_scale.remove_etcd_member(_client("n1"), "n1", "n9")
    assert not any("remove" in cmd for _, cmd in calls)
