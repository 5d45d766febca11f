"""The in-memory clusters' HTTPS server (capd_py/kube/inmemory_api_server.py) with the real kubectl and capd-py's own
API client: a kubeconfig made from the cluster's CA reaches the store at the port given to the cluster (the serving
certificate verifies against that CA), `kubectl get nodes` / `get pods -A` / `version` / `api-resources` show
what the store holds, watches follow its writes (kubectl wait, capd-py's Node watch), two clusters on two ports
answer each their own, and a stopped listener refuses connections. No management API server here: the DevCluster
path is tests/integration/controllers/test_dev_kinds_operator.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.kube import nodewatch
from capd_py.kube.client import Kube
from capd_py.kube.inmemory_api import InMemoryClusters
from capd_py.kube.inmemory_api_server import InMemoryServer
from capd_py.reconcile import certs
from capd_py.testing.e2e import kubectl_async, kubectl_bin

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

HOST = "127.0.0.1"
# a range of each test worker's own (`make test` runs two): the tests read which port of it a cluster gets
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
PORTS = range(21000 + 200 * _WORKER, 21100 + 200 * _WORKER)


@pytest.fixture
async def server() -> AsyncIterator[InMemoryServer]:
    srv = InMemoryServer(InMemoryClusters(), HOST, PORTS)
    yield srv
    await srv.close()


async def _cluster(srv: InMemoryServer, tmp: Path, name: str, nodes: list[str]) -> tuple[Path, certs.KeyPair]:
    """A served cluster with a control-plane Node (and its static pods and kubeadm's objects) and worker Nodes;
    its admin kubeconfig (as KCP writes it) in tmp."""
    api = srv.clusters.ensure("ns", name)
    for i, n in enumerate(nodes):
        api.add_node(n, f"in-memory://{n}", control_plane=i == 0, version="v1.34.4")
    api.add_static_pods(nodes[0], ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"])
    api.add_kubeadm_objects("v1.34.4")
    ca = certs.new_ca()
    port = srv.assign("ns", name)
    await srv.serve("ns", name, ca)
    kc = tmp / f"{name}.kubeconfig"
    kc.write_text(certs.admin_kubeconfig(name, {"host": HOST, "port": port}, ca))
    return kc, ca


@contextlib.contextmanager
def _busy_port_before_a_free_one() -> Iterator[tuple[socket.socket, int]]:
    """A socket holding a port whose next port is free (checked: other test workers open connections meanwhile,
    and an ephemeral port's neighbour is often someone's)."""
    for _ in range(50):
        busy = socket.socket()
        busy.bind((HOST, 0))
        taken = busy.getsockname()[1]
        with socket.socket() as probe:
            try:
                probe.bind((HOST, taken + 1))
            except OSError:
                busy.close()
                continue
        try:
            yield busy, taken
        finally:
            busy.close()
        return
    raise AssertionError("no port with a free neighbour in 50 tries")


async def kubectl(kc: Path, *args: str) -> str:
    return (await kubectl_async(kc, *args))[1]


async def test_kubectl_reads_the_in_memory_cluster(server: InMemoryServer, tmp_path: Path) -> None:
    kc, _ = await _cluster(server, tmp_path, "c1", ["c1-cp-abc", "c1-md-1", "c1-md-2"])
    assert server.port("ns", "c1") == PORTS.start

    table = (await kubectl(kc, "get", "nodes")).splitlines()
    assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = {r.split()[0]: r.split() for r in table[1:]}
    assert sorted(rows) == ["c1-cp-abc", "c1-md-1", "c1-md-2"]
    assert rows["c1-cp-abc"][1:3] == ["Ready", "control-plane"] and rows["c1-md-1"][1:3] == ["Ready", "<none>"]
    assert all(r[-1] == "v1.34.4" for r in rows.values())

    nodes = json.loads(await kubectl(kc, "get", "nodes", "-o", "json"))
    assert len(nodes["items"]) == 3
    for n in nodes["items"]:
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert n["kind"] == "Node" and ready and ready[0]["status"] == "True"
        assert n["spec"]["providerID"] == f"in-memory://{n['metadata']['name']}"

    pods = [line.split() for line in (await kubectl(kc, "get", "pods", "-A")).splitlines()]
    assert pods[0] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert {p[1] for p in pods[1:]} == {f"{c}-c1-cp-abc" for c in ("etcd", "kube-apiserver",
                                                                    "kube-controller-manager", "kube-scheduler")}
    assert all(p[0] == "kube-system" and p[2] == "1/1" and p[3] == "Running" for p in pods[1:])
    assert (await kubectl(kc, "get", "pod", "-n", "kube-system", "etcd-c1-cp-abc", "-o",
                          "jsonpath={.spec.nodeName}")) == "c1-cp-abc"
    cm = json.loads(await kubectl(kc, "get", "configmap", "-n", "kube-system", "kubeadm-config", "-o", "json"))
    assert "kubernetesVersion: v1.34.4" in cm["data"]["ClusterConfiguration"]
    assert "coredns" in await kubectl(kc, "get", "deployments", "-n", "kube-system")

    version = json.loads(await kubectl(kc, "version", "-o", "json"))
    assert version["serverVersion"]["gitVersion"] == "v1.34.4"
    resources = await kubectl(kc, "api-resources", "--no-headers", "-o", "name")
    assert {"nodes", "pods", "namespaces", "configmaps", "secrets", "clusterroles.rbac.authorization.k8s.io",
            "deployments.apps", "daemonsets.apps"} <= set(resources.split())

    # writes: create from a manifest (JSON on the wire), label (a merge patch), delete. `kubectl create namespace`
    # sends protobuf, which the server cannot read: refused with 415 as kube-apiserver would; no OpenAPI is served
    # (upstream serves none either): client-side validation off
    ns = tmp_path / "ns.json"
    ns.write_text(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}))
    await kubectl(kc, "create", "--validate=false", "-f", str(ns))
    await kubectl(kc, "label", "node", "c1-md-1", "tier=gold")
    assert (await kubectl(kc, "get", "nodes", "-l", "tier=gold", "-o", "name")).split() == ["node/c1-md-1"]
    await kubectl(kc, "delete", "namespace", "team-a")
    assert "team-a" not in await kubectl(kc, "get", "namespaces", "-o", "name")

    # what is not served says so, as a real API server does
    code, _, err = await kubectl_async(kc, "get", "persistentvolumes", check=False)
    assert code != 0 and "persistentvolumes" in err


async def test_watches_follow_the_store(server: InMemoryServer, tmp_path: Path) -> None:
    kc, _ = await _cluster(server, tmp_path, "c2", ["c2-cp", "c2-w"])
    api = server.clusters.ensure("ns", "c2")
    # kubectl wait watches the Node by name until it is deleted
    waiter = await asyncio.create_subprocess_exec(kubectl_bin(), "--kubeconfig", str(kc), "wait", "--for=delete",
                                                  "node/c2-w", "--timeout=20s",
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    await asyncio.sleep(1.0)
    assert waiter.returncode is None
    api.remove_object("nodes", None, "c2-w")
    out, err = await asyncio.wait_for(waiter.communicate(), 20)
    assert waiter.returncode == 0, err.decode()
    assert out.decode().strip() == "node/c2-w condition met"

    # capd-py's own Node watch (list, then watch from the list's resourceVersion) over HTTPS
    seen: list[tuple[str, bool]] = []

    def listen(ns: str, cluster: str, node: dict[str, Any], deleted: bool) -> None:
        seen.append((node["metadata"]["name"], deleted))
    client = Kube.from_kubeconfig_text(kc.read_bytes())
    w = nodewatch.NodeWatch("ns", "c2", client, listen)
    w.start()
    try:
        async with asyncio.timeout(10):
            while not w.synced:
                await asyncio.sleep(0.05)
        assert sorted(w.nodes) == ["c2-cp"]
        api.add_node("c2-w2", "in-memory://c2-w2", control_plane=False, version="v1.34.4")
        async with asyncio.timeout(10):
            while ("c2-w2", False) not in seen:
                await asyncio.sleep(0.05)
        api.remove_object("nodes", None, "c2-w2")
        async with asyncio.timeout(10):
            while ("c2-w2", True) not in seen:
                await asyncio.sleep(0.05)
        assert sorted(w.nodes) == ["c2-cp"]
    finally:
        w.stop()
        client.close()


async def test_each_cluster_on_its_own_port_and_a_stopped_listener_refuses(server: InMemoryServer,
                                                                         tmp_path: Path) -> None:
    kc_a, _ = await _cluster(server, tmp_path, "a", ["a-cp"])
    kc_b, _ = await _cluster(server, tmp_path, "b", ["b-cp", "b-w"])
    port_a, port_b = server.port("ns", "a"), server.port("ns", "b")
    assert port_a is not None and port_b is not None and port_a != port_b
    assert (await kubectl(kc_a, "get", "nodes", "-o", "name")).split() == ["node/a-cp"]
    assert (await kubectl(kc_b, "get", "nodes", "-o", "name")).split() == ["node/b-cp", "node/b-w"]
    # a kubeconfig with another CA is refused by kubectl (the serving certificate is the cluster CA's)
    other = tmp_path / "other.kubeconfig"
    other.write_text(certs.admin_kubeconfig("a", {"host": HOST, "port": port_a}, certs.new_ca()))
    code, _, err = await kubectl_async(other, "get", "nodes", check=False)
    assert code != 0 and "certificate" in err

    await server.stop("ns", "a")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((HOST, port_a), timeout=2).close()
    assert server.port("ns", "a") == port_a          # the port stays the cluster's until it is released
    assert (await kubectl(kc_b, "get", "nodes", "-o", "name")).split() == ["node/b-cp", "node/b-w"]
    await server.release("ns", "a")
    assert server.port("ns", "a") is None
    # a port another process holds is skipped
    with _busy_port_before_a_free_one() as (busy, taken):
        srv = InMemoryServer(InMemoryClusters(), HOST, range(taken, taken + 2))
        assert srv.assign("ns", "c") == taken + 1
        with pytest.raises(OSError):
            srv.assign("ns", "d", taken)
        await srv.close()


async def test_a_port_another_process_reserved_is_skipped(tmp_path: Path) -> None:
    """Two controllers processes on one host, one range: the port the first reserved (bound, not listening yet)
    is not the second's too (with SO_REUSEADDR on both, Linux let both bind it and the second failed at listen)."""
    first, second = InMemoryServer(InMemoryClusters(), HOST, PORTS), InMemoryServer(InMemoryClusters(), HOST, PORTS)
    try:
        p1 = first.assign("ns", "one")
        p2 = second.assign("ns", "two")
        assert p1 != p2
        kc, _ = await _cluster(second, tmp_path, "two", ["two-cp"])
        assert (await kubectl(kc, "get", "nodes", "-o", "name")).split() == ["node/two-cp"]
    finally:
        await first.close()
        await second.close()
