"""An in-memory DevCluster that goes without its deletion running here (a move: paused, then deleted with its
finalizer removed by the mover) takes its in-memory workload cluster and its port out of this process, so the
target's controllers can bind the same endpoint; other clusters stay."""

from __future__ import annotations

import socket

import pytest

from capd_py.controllers import inmemory_backend_cluster
from capd_py.controllers.context import Ctx, Settings
from capd_py.kube.workload import WorkloadClients
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_moved_devcluster_releases_its_store_and_port_only() -> None:
    s = Settings()
    s.in_memory_host = "127.0.0.1"
    ctx = Ctx(kube=None, runtime=FakeRuntime(), settings=s, workload=WorkloadClients(None))  # type: ignore[arg-type]
    server = ctx.workload.in_memory_server(s.in_memory_host, s.in_memory_ports)
    ports = {}
    for ns, cluster, dc in (("a", "c1", "c1-xyz"), ("a", "c2", "c2-xyz"), ("b", "c1", "c1-xyz")):
        ctx.workload.in_memory_cluster(ns, cluster).infrastructure = dc
        ports[(ns, cluster)] = server.assign(ns, cluster, _free_port())
    ctx.workload.in_memory_cluster("a", "c3")  # no DevCluster recorded (only its machines reconciled so far)

    await inmemory_backend_cluster.gone(ctx, "a", "c1-xyz")
    assert ctx.workload.in_memory.get("a", "c1") is None and server.port("a", "c1") is None
    # the port is free again: another process (the move's target) can bind it
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", ports[("a", "c1")]))
    assert {(api.namespace, api.cluster) for api in ctx.workload.in_memory.all()} == {("a", "c2"), ("b", "c1"),
                                                                                      ("a", "c3")}
    assert server.port("a", "c2") == ports[("a", "c2")] and server.port("b", "c1") == ports[("b", "c1")]
    await inmemory_backend_cluster.gone(ctx, "a", "nosuch")  # nothing of this process: nothing happens
    assert len(ctx.workload.in_memory) == 3
    await server.close()
