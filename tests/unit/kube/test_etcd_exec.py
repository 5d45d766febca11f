"""The real etcd client: etcdctl output parsing and the commands it runs (exec faked)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from capd_py.kube import etcd

pytestmark = pytest.mark.unit


class FakeWorkload:
    class api:  # noqa: N801 - mimics Kube.api
        configuration = object()


def test_parse_members_accepts_numeric_and_hex_ids() -> None:
    out = json.dumps({"header": {}, "members": [{"ID": 255, "name": "n1", "clientURLs": ["https://a:2379"]},
                                                {"ID": "1f", "name": "n2"}]})
    assert etcd.parse_members(out) == [etcd.EtcdMember(255, "n1", ("https://a:2379",)), etcd.EtcdMember(31, "n2")]
    assert etcd.parse_members(out)[0].hex_id == "ff"
    assert etcd.parse_members("{}") == []
    with pytest.raises(etcd.EtcdError):
        etcd.parse_members("not json")


def test_parse_status() -> None:
    assert etcd.parse_status(json.dumps([{"Endpoint": "x", "Status": {"leader": 7}}])) == etcd.EtcdStatus(7)
    assert etcd.parse_status("[]") == etcd.EtcdStatus(0)
    for bad in ("", "[{}]", '[{"Status": {"leader": "x"}}]'):
        with pytest.raises(etcd.EtcdError):
            etcd.parse_status(bad)


def test_learners_status_errors_and_alarms() -> None:
    """etcdctl's `-w json` prints Go's encoding of etcd's protobuf types: omitempty fields, enums as numbers."""
    out = json.dumps({"members": [{"ID": 1, "name": "n1"}, {"ID": 2, "name": "n2", "isLearner": True}]})
    assert [m.is_learner for m in etcd.parse_members(out)] == [False, True]
    assert etcd.parse_status(json.dumps([{"Status": {"leader": 7, "errors": ["NOSPACE"]}}])) == \
        etcd.EtcdStatus(7, ("NOSPACE",))
    assert etcd.parse_alarms(json.dumps({"header": {"cluster_id": 5}})) == []
    assert etcd.parse_alarms(json.dumps({"alarms": [{"memberID": 2, "alarm": 1}, {"memberID": 3, "alarm": 2}]})) == [
        etcd.EtcdAlarm(2, "NOSPACE"), etcd.EtcdAlarm(3, "CORRUPT")]
    with pytest.raises(etcd.EtcdError):
        etcd.parse_alarms("nope")


async def test_commands_and_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, list[str]]] = []

    def run(cfg: Any, pod: str, cmd: list[str], timeout: float = 60) -> tuple[int, str, str]:
        calls.append((pod, cmd))
        if "remove" in cmd:
            return 1, "", '{"level":"warn","ts":"2026-12-07T06:00:00Z"}\netcdserver: member not found\n'

        return 0, "", ""
    monkeypatch.setattr(etcd, "_exec_blocking", run)
    c = etcd.ExecEtcdClients().for_node(FakeWorkload(), "cp-1")  # type: ignore[arg-type]
    await c.move_leader(etcd.EtcdMember(2, "cp-2", ("https://10.0.0.2:2379",)), 1)
    pod, cmd = calls[-1]
    assert pod == "etcd-cp-1" and cmd[-2:] == ["move-leader", "1"]
    assert [a for a in cmd if a.startswith("--endpoints=")] == ["--endpoints=https://10.0.0.2:2379"]
    with pytest.raises(etcd.EtcdError, match="no client URL"):
        await c.move_leader(etcd.EtcdMember(2, "cp-2"), 1)
    with pytest.raises(etcd.EtcdError, match=r"member remove ff in etcd-cp-1: exit 1: etcdserver: member not found$"):
        await c.remove_member(255)
    # a failure on the IPv4 loopback is tried on the IPv6 one too (an IPv6 node's etcd listens there only)
    tried = [next(a for a in cmd if a.startswith("--endpoints=")) for _, cmd in calls[-2:]]
    assert tried == ["--endpoints=https://127.0.0.1:2379", "--endpoints=https://[::1]:2379"]


async def test_an_ipv6_nodes_etcd_is_asked_on_its_loopback_and_remembered(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def run(cfg: Any, pod: str, cmd: list[str], timeout: float = 60) -> tuple[int, str, str]:
        calls.append(next(a for a in cmd if a.startswith("--endpoints=")))
        if "127.0.0.1" in calls[-1]:
            return 1, "", "Error: context deadline exceeded\n"
        return 0, json.dumps({"members": [{"ID": 1, "name": "cp-1"}]}), ""
    monkeypatch.setattr(etcd, "_exec_blocking", run)
    clients = etcd.ExecEtcdClients()
    assert [m.name for m in await clients.for_node(FakeWorkload(), "cp-1").members()] == ["cp-1"]  # type: ignore[arg-type]
    assert [m.name for m in await clients.for_node(FakeWorkload(), "cp-1").members()] == ["cp-1"]  # type: ignore[arg-type]
    assert calls == ["--endpoints=https://127.0.0.1:2379", "--endpoints=https://[::1]:2379",
                     "--endpoints=https://[::1]:2379"]


async def test_a_refused_or_broken_exec_is_an_etcd_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """No etcd Pod yet (404), or the stream breaking: an EtcdError the KCP reports in EtcdMemberHealthy, not a
    traceback of the reconcile."""
    from kubernetes.client.exceptions import ApiException
    from websocket import WebSocketConnectionClosedException

    for error, said in ((ApiException(status=404, reason="Not Found"), "the exec failed: 404 Not Found"),
                        (WebSocketConnectionClosedException("gone"), "the exec stream failed: "
                                                                     "WebSocketConnectionClosedException")):
        def run(cfg: Any, pod: str, cmd: list[str], timeout: float = 60, e: Exception = error) -> tuple[int, str, str]:
            raise e
        monkeypatch.setattr(etcd, "_exec_blocking", run)
        with pytest.raises(etcd.EtcdError, match=f"^etcdctl endpoint status -w json in etcd-cp-1: {said}$"):
            await etcd.ExecEtcdClients().for_node(FakeWorkload(), "cp-1").status()  # type: ignore[arg-type]
