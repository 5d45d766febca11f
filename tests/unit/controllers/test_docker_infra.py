"""The Docker infrastructure service over the fake runtime (no I/O)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from typing import Any

import pytest

from capd_py.api.labels import CONTAINER_ROLE
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.services.docker_infra import DockerInfra, create_or_adopt
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile import haproxy
from capd_py.reconcile.dockercluster import deleting_machines
from capd_py.runtime import networks
from capd_py.runtime.protocol import ContainerInfo, ContainerSpec, NetworkInfo, RuntimeError_
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


def _spec(name: str = "c1-m1", labels: dict[str, str] | None = None) -> ContainerSpec:
    return ContainerSpec(name=name, image="img", network="net", labels=labels or {"owner": "us"})


def test_ctx_holds_one_service_over_its_runtime() -> None:
    rt = FakeRuntime()
    ctx = Ctx(kube=None, runtime=rt, settings=Settings(), workload=None)  # type: ignore[arg-type]
    assert isinstance(ctx.infra, DockerInfra) and ctx.infra is ctx.infra and ctx.infra.runtime is rt
    fresh = DockerInfra(rt)
    ctx.infra = fresh  # what a restarted process has
    assert ctx.infra is fresh


async def test_a_failed_creation_raises_for_its_caller_and_leaves_no_failed_task() -> None:
    """The error goes to whoever awaits the creation; the task that ran it ends without one, since kopf re-raises
    every task that ended in an error while the operator stops (the controllers exited with a container create's
    error that way)."""
    rt = FakeRuntime()  # no network "net": the create fails
    infra = DockerInfra(rt)
    before = asyncio.all_tasks()
    with pytest.raises(RuntimeError_, match="network net not found"):
        await infra.create_container(_spec())
    await asyncio.sleep(0)
    ran = [t for t in asyncio.all_tasks() | set(infra._inflight.values()) if t not in before]
    assert not infra.creating("c1-m1") and ran == []
    # the task itself: re-run one and look at how it ended
    task = asyncio.ensure_future(infra._create_outcome(_spec()))
    info, error = await task
    assert info is None and isinstance(error, RuntimeError_) and task.exception() is None


async def test_concurrent_creates_make_one_container_and_survive_cancellation() -> None:
    rt = FakeRuntime()
    networks.ensure_network(rt, "net", {})
    gate = threading.Event()
    run = rt.run_container

    def slow_run(spec: ContainerSpec) -> ContainerInfo:
        gate.wait(5)
        return run(spec)
    rt.run_container = slow_run  # type: ignore[method-assign]
    infra = DockerInfra(rt)
    first = asyncio.ensure_future(infra.create_container(_spec()))
    await asyncio.sleep(0.05)
    assert infra.creating("c1-m1")
    first.cancel()  # the reconcile that asked goes away; the creation carries on
    second = asyncio.ensure_future(infra.create_container(_spec()))
    gate.set()
    info = await second
    await infra.settle_all()
    assert info.name == "c1-m1" and rt.created == ["c1-m1"] and not infra.creating("c1-m1")
    assert await infra.remove_container("c1-m1") and rt.get_container("c1-m1") is None


def test_create_or_adopt_adopts_only_a_container_with_our_labels() -> None:
    rt = FakeRuntime()
    networks.ensure_network(rt, "net", {})
    rt.run_container(_spec())
    rt.set_status("c1-m1", "exited")
    got = create_or_adopt(rt, _spec())
    assert got.running and rt.created == ["c1-m1", "c1-m1"]
    rt.run_container(_spec("c1-m2", {"owner": "someone-else"}))
    with pytest.raises(RuntimeError_, match="already in use"):
        create_or_adopt(rt, _spec("c1-m2"))


def _cp(rt: FakeRuntime, ns: str, cluster: str, machine: str) -> None:
    labels = {**dcr.cluster_labels(ns, cluster), "io.x-k8s.capd-py.machine": machine,
              "io.x-k8s.capd-py.role": dcr.ROLE_CONTROL_PLANE}
    rt.run_container(ContainerSpec(name=f"{cluster}-{machine}", image="img", network="net", labels=labels))


async def test_sync_lb_writes_backends_once_and_drains_deleting_machines() -> None:
    rt = FakeRuntime()
    networks.ensure_network(rt, "net", {})
    infra = DockerInfra(rt)
    assert not (await infra.sync_lb("ns", "c1", "net", set())).ok  # no LB yet
    await infra.create_container(dcr.lb_spec("ns", "c1", "lb-img", "net"))
    _cp(rt, "ns", "c1", "m1")
    _cp(rt, "ns", "c1", "m2")
    _cp(rt, "ns", "c2", "m9")  # another cluster: not a backend
    state = await infra.sync_lb("ns", "c1", "net", set())
    cfg = rt.files("c1-lb")[haproxy.CONFIG_PATH].decode()
    assert state.ok and "c1-m1" in cfg and "c1-m2" in cfg and "c2-m9" not in cfg
    assert rt.signals("c1-lb") == ["SIGHUP"]
    assert (await infra.sync_lb("ns", "c1", "net", set())).ok and rt.signals("c1-lb") == ["SIGHUP"]  # unchanged
    await infra.sync_lb("ns", "c1", "net", {"m2"})
    assert rt.signals("c1-lb") == ["SIGHUP", "SIGHUP"]
    assert "weight 0" in rt.files("c1-lb")[haproxy.CONFIG_PATH].decode()
    infra.forget_cluster("ns", "c1")

    # a controller killed between writing the configuration and the SIGHUP: the file is right, haproxy never
    # loaded it; the next process reloads once, then leaves it alone
    restarted = DockerInfra(rt)
    assert (await restarted.sync_lb("ns", "c1", "net", {"m2"})).ok
    assert rt.signals("c1-lb") == ["SIGHUP"] * 3
    assert (await restarted.sync_lb("ns", "c1", "net", {"m2"})).ok and rt.signals("c1-lb") == ["SIGHUP"] * 3


async def test_sync_lb_holds_the_reload_until_haproxy_handles_it() -> None:
    """A SIGHUP sent before haproxy's master installs its handler is dropped by the kernel (PID 1 of the
    container): the configuration is written, the reload waits for the next pass."""
    rt = FakeRuntime()
    networks.ensure_network(rt, "net", {})
    infra = DockerInfra(rt)
    await infra.create_container(dcr.lb_spec("ns", "c1", "lb-img", "net"))
    _cp(rt, "ns", "c1", "m1")
    rt.write_file("c1-lb", haproxy.MASTER_STATUS_PATH, b"Name:\thaproxy\nSigCgt:\t0000000000000000\n")
    state = await infra.sync_lb("ns", "c1", "net", set())
    assert not state.ok and "starting" in state.message and rt.signals("c1-lb") == []
    assert "c1-m1" in rt.files("c1-lb")[haproxy.CONFIG_PATH].decode()
    rt.write_file("c1-lb", haproxy.MASTER_STATUS_PATH, b"Name:\thaproxy\nSigCgt:\t0000000000014003\n")
    assert (await infra.sync_lb("ns", "c1", "net", set())).ok and rt.signals("c1-lb") == ["SIGHUP"]
    assert (await infra.sync_lb("ns", "c1", "net", set())).ok and rt.signals("c1-lb") == ["SIGHUP"]


async def test_remove_network_if_ours_leaves_foreign_networks() -> None:
    rt = FakeRuntime()
    infra = DockerInfra(rt)
    networks.ensure_network(rt, "mine", {"a": "1"})
    networks.ensure_network(rt, "theirs", {"a": "2"})
    await infra.remove_network_if_ours("mine", {"a": "1"})
    await infra.remove_network_if_ours("theirs", {"a": "1"})
    await infra.remove_network_if_ours("absent", {"a": "1"})
    assert sorted(rt.networks) == ["theirs"]


def test_deleting_machines() -> None:
    def obj(name: str, deleting: bool, owner: str | None = None) -> dict[str, Any]:
        md: dict[str, Any] = {"name": name}
        if deleting:
            md["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if owner:
            md["ownerReferences"] = [{"kind": "Machine", "name": owner, "controller": True}]
        return {"metadata": md}
    machines = [obj("m1", True), obj("m2", False), obj("m3", False)]
    dms = [obj("dm2", True, "m2"), obj("dm3", False, "m3"), obj("dm4", True)]
    assert deleting_machines(machines, dms) == {"m1", "m2"}


async def test_static_addresses_distinct_under_concurrency_and_kept_for_stopped_containers() -> None:
    rt = FakeRuntime()
    net = networks.ensure_network(rt, "net", {})
    infra = DockerInfra(rt)
    infos = await asyncio.gather(*(infra.create_container(_spec(f"c1-m{i}")) for i in range(5)))
    ips = [i.ipv4["net"] for i in infos]
    assert len(set(ips)) == 5 and sorted(ips) == [f"172.{net.subnet.split('.')[1]}.0.{n}" for n in range(2, 7)]
    assert all(i.static_ipv4 == {"net": i.ipv4["net"]} for i in infos)
    # a stopped container keeps its address: a new container does not take it
    rt.set_status("c1-m0", "exited")
    new = await infra.create_container(_spec("c1-m9"))
    assert new.ipv4["net"] not in ips
    # an address asked for (the load balancer's recorded endpoint) is used when it is free
    want = ips[0].rsplit(".", 1)[0] + ".77"
    lb = await infra.create_container(replace(_spec("c1-lb"), ipv4=want))
    assert lb.ipv4["net"] == want


async def test_network_without_static_addresses_gets_dynamic_ones() -> None:
    rt = FakeRuntime()
    rt.networks["theirs"] = NetworkInfo("theirs", "id", "172.30.0.0/16", "172.30.0.1", {})  # made by someone else
    infra = DockerInfra(rt)
    info = await infra.create_container(replace(_spec("c1-m1"), network="theirs", ipv4="172.30.0.9"))
    assert info.static_ipv4 == {} and info.ipv4["theirs"] != "172.30.0.9"


async def test_controllers_container_joins_cluster_networks_and_leaves_before_removal() -> None:
    """In-cluster controllers run in the management node container: it joins each workload cluster's
    network (idempotently) and leaves it before the network is removed (docker refuses while it is on it)."""
    rt = FakeRuntime()
    networks.ensure_network(rt, "capd-py", {})
    rt.run_container(ContainerSpec(name="mgmt-control-plane", image="img", network="capd-py"))
    labels = dcr.cluster_labels("ns", "c1")
    networks.ensure_network(rt, "capd-py-ns-c1", labels)
    infra = DockerInfra(rt, controllers_container="mgmt-control-plane")
    await infra.connect_controllers("capd-py-ns-c1")
    await infra.connect_controllers("capd-py-ns-c1")
    info = rt.get_container("mgmt-control-plane")
    assert info is not None and set(info.ipv4) == {"capd-py", "capd-py-ns-c1"}
    await infra.remove_network_if_ours("capd-py-ns-c1", labels)
    info = rt.get_container("mgmt-control-plane")
    assert rt.get_network("capd-py-ns-c1") is None and info is not None and set(info.ipv4) == {"capd-py"}

    on_host = DockerInfra(rt)  # a host process reaches every bridge: it joins nothing
    networks.ensure_network(rt, "capd-py-ns-c2", labels)
    await on_host.connect_controllers("capd-py-ns-c2")
    info = rt.get_container("mgmt-control-plane")
    assert info is not None and set(info.ipv4) == {"capd-py"}


async def test_network_removal_also_detaches_a_previous_management_node() -> None:
    """After `capd-py move` from a management cluster with in-cluster controllers, its node is still on the
    cluster's network; the new management cluster's controllers detach it before removing the network."""
    rt = FakeRuntime()
    labels = dcr.cluster_labels("ns", "c1")
    networks.ensure_network(rt, "capd-py-ns-c1", labels)
    rt.run_container(ContainerSpec(name="old-mgmt-control-plane", image="img", network="capd-py-ns-c1",
                                   labels={CONTAINER_ROLE: dcr.ROLE_MANAGEMENT}))
    rt.run_container(ContainerSpec(name="c1-worker", image="img", network="capd-py-ns-c1"))
    rt.remove_container("c1-worker")
    await DockerInfra(rt).remove_network_if_ours("capd-py-ns-c1", labels)  # a host process
    assert rt.get_network("capd-py-ns-c1") is None
    info = rt.get_container("old-mgmt-control-plane")
    assert info is not None and info.ipv4 == {}
