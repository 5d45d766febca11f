"""cli/power.py's loop against an in-memory API and the fake runtime: what it writes and which containers it
stops or freezes (the decisions themselves: tests/unit/reconcile/test_powerstate.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from capd_py.api.labels import (
    CONTAINER_CLUSTER,
    CONTAINER_NAMESPACE,
    CONTAINER_ROLE,
    POWER_STATE_ANNOTATION,
    POWER_USER_PAUSED_ANNOTATION,
)
from capd_py.cli import power
from capd_py.cli.steps import Steps
from capd_py.runtime import networks
from capd_py.runtime.protocol import ContainerSpec
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadKube

pytestmark = pytest.mark.unit

ROLES = {"c1-lb": "load-balancer", "c1-control-plane-a": "control-plane", "c1-md-0-a": "worker"}


def _setup(spec_paused: bool = False) -> tuple[FakeRuntime, FakeWorkloadKube]:
    rt = FakeRuntime()
    networks.ensure_network(rt, "net", {})
    for name, role in ROLES.items():
        rt.run_container(ContainerSpec(name=name, image="img", network="net", labels={
            CONTAINER_CLUSTER: "c1", CONTAINER_NAMESPACE: "ns", CONTAINER_ROLE: role}))
    kube = FakeWorkloadKube(rt, "mgmt", "mgmt")
    # the controllers are not running here: the Cluster already says Paused=True, as they would once paused
    kube.put_object("clusters", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                 "metadata": {"name": "c1", "namespace": "ns"},
                                 "spec": {"paused": True} if spec_paused else {},
                                 "status": {"conditions": [{"type": "Paused", "status": "True"}]}})
    return rt, kube


def _run(rt: FakeRuntime, kube: FakeWorkloadKube, verb: str) -> str:
    r = power.Run(kube, rt, "ns", "c1", Steps(plain=True, quiet=True), time.monotonic() + 30)
    return asyncio.run(power.drive(r, verb))


def _cluster(kube: FakeWorkloadKube) -> dict:
    c = kube.object("clusters", "ns", "c1")
    assert c is not None
    return c


def test_stop_records_pauses_and_stops_every_container() -> None:
    rt, kube = _setup()
    assert _run(rt, kube, "stop") == "stopped (3 containers)"
    assert {n: rt.get_container(n).status for n in ROLES} == dict.fromkeys(ROLES, "exited")  # type: ignore[union-attr]
    c = _cluster(kube)
    assert c["spec"]["paused"] is True
    assert c["metadata"]["annotations"] == {POWER_STATE_ANNOTATION: "stopped"}
    assert _run(rt, kube, "stop") == "stopped (3 containers)"  # again: nothing left to do
    with pytest.raises(power.PowerError, match="stopped: `capd-py start cluster` first"):
        _run(rt, kube, "pause")


def test_a_stop_cut_after_the_pause_finishes_when_run_again() -> None:
    rt, kube = _setup()
    # what a stop killed after its pause step leaves: the intent and spec.paused, every container running
    kube.call("PATCH", "/apis/cluster.x-k8s.io/v1beta2/namespaces/ns/clusters/c1", {
        "metadata": {"annotations": {POWER_STATE_ANNOTATION: "stopping"}}, "spec": {"paused": True}},
        content_type="application/merge-patch+json")
    rt.stop_container("c1-md-0-a")  # ... and the worker already stopped
    assert _run(rt, kube, "stop") == "stopped (3 containers)"
    assert all(rt.get_container(n).status == "exited" for n in ROLES)  # type: ignore[union-attr]


def test_pause_freezes_and_keeps_a_users_pause_on_record() -> None:
    rt, kube = _setup(spec_paused=True)
    assert _run(rt, kube, "pause") == "paused (3 containers frozen)"
    assert all(rt.get_container(n).status == "paused" for n in ROLES)  # type: ignore[union-attr]
    assert _cluster(kube)["metadata"]["annotations"] == {POWER_STATE_ANNOTATION: "paused",
                                                          POWER_USER_PAUSED_ANNOTATION: "true"}
    with pytest.raises(power.PowerError, match="resume cluster"):
        _run(rt, kube, "start")


def test_missing_cluster() -> None:
    rt, kube = _setup()
    r = power.Run(kube, rt, "ns", "nope", Steps(plain=True, quiet=True), time.monotonic() + 5)
    with pytest.raises(power.PowerError, match="cluster ns/nope not found"):
        asyncio.run(power.drive(r, "stop"))


def test_controllers_that_never_report_paused_are_waited_for_then_warned_about(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rt, kube = _setup()
    c = _cluster(kube)
    c["status"] = {}  # no controller ever wrote a Paused condition (they are not running)
    kube.put_object("clusters", c)
    monkeypatch.setattr(power, "PAUSE_REPORT_SECONDS", 0.5)
    lines: list[str] = []

    class Capture(Steps):
        def info(self, line: str) -> None:
            lines.append(line)
    r = power.Run(kube, rt, "ns", "c1", Capture(plain=True, quiet=True), time.monotonic() + 30)
    t0 = time.monotonic()
    assert asyncio.run(power.drive(r, "stop")) == "stopped (3 containers)"
    assert 0.5 <= time.monotonic() - t0 < 5
    assert any("did not report Paused within" in x for x in lines), lines
