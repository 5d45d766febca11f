"""The workload Node watch against a real kube-apiserver (envtest standing in for a workload cluster): every
add, change and deletion reaches the listener and the mirrored `nodes`; an API server that does not answer
leaves it unsynced and retrying, and a cluster whose kubeconfig is gone ends it; WorkloadClients starts one
watch per cluster with its client once a listener is set, starts it anew when the cluster's probe fails, and
`forget` stops it."""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import Callable
from typing import Any

import kubernetes.client
import pytest

from capd_py.api.gvk import NODE, SECRET
from capd_py.kube import nodewatch
from capd_py.kube.client import Kube
from capd_py.kube.workload import WorkloadClients
from capd_py.testing.envtest import EnvTest

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

Seen = list[tuple[str, str, str, bool]]


def _recorder() -> tuple[Seen, nodewatch.Listener]:
    seen: Seen = []

    def listen(ns: str, cluster: str, node: dict[str, Any], deleted: bool) -> None:
        seen.append((ns, cluster, node["metadata"]["name"], deleted))
    return seen, listen


async def _until(check: Callable[[], bool], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"t": "nodewatch"}}}


async def test_watch_mirrors_nodes_and_tells_every_change(kube: Kube) -> None:
    a, b = f"nw-{secrets.token_hex(3)}", f"nw-{secrets.token_hex(3)}"
    await kube.create(NODE, _node(a))  # exists before the watch: told by the first list
    seen, listen = _recorder()
    w = nodewatch.NodeWatch("ns", "c1", kube, listen)
    w.start()
    try:
        await _until(lambda: w.synced and a in w.nodes)
        assert ("ns", "c1", a, False) in seen
        assert "managedFields" not in w.nodes[a]["metadata"]
        await kube.create(NODE, _node(b))
        await _until(lambda: b in w.nodes)
        await kube.merge_patch(NODE, None, b, {"spec": {"providerID": "docker:////x"}})
        await _until(lambda: w.nodes[b].get("spec", {}).get("providerID") == "docker:////x")
        await kube.delete(NODE, None, a)
        await _until(lambda: a not in w.nodes)
        assert ("ns", "c1", a, True) in seen
        assert len([s for s in seen if s[2] == b and not s[3]]) >= 2  # created, then patched
        assert w.synced
    finally:
        w.stop()
        await kube.delete(NODE, None, b)


async def test_unanswered_api_server_leaves_it_unsynced_and_unwanted_ends_it() -> None:
    cfg = kubernetes.client.Configuration()
    cfg.host = "http://127.0.0.1:9"  # discard port: connection refused
    dead = Kube(kubernetes.client.ApiClient(cfg))
    asks = {"n": 0}

    async def wanted() -> bool:
        asks["n"] += 1
        return asks["n"] < 3
    seen, listen = _recorder()
    w = nodewatch.NodeWatch("ns", "gone", dead, listen, wanted=wanted)
    w.start()
    try:
        await _until(lambda: not w.running, timeout=10)  # asked after each failure, ended on the third
        assert asks["n"] == 3 and not w.synced and seen == []
    finally:
        w.stop()
        dead.close()


async def test_workload_clients_watch_each_cluster_until_forgotten(envtest: EnvTest, kube: Kube,
                                                                   namespace: str) -> None:
    name = f"nw-{secrets.token_hex(3)}"
    await kube.create(NODE, _node(name))
    text = envtest.kubeconfig_path.read_bytes()
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "c1-kubeconfig", "namespace": namespace},
                               "data": {"value": base64.b64encode(text).decode()}})
    wl = WorkloadClients(kube)
    seen, listen = _recorder()
    try:
        assert await wl.get(namespace, "c1") is not None
        assert wl._watches == {}  # no listener yet: no watch
        wl.watch_nodes(listen)
        client = await wl.get(namespace, "c1")
        await _until(lambda: wl.nodes(namespace, "c1") is not None)
        assert name in (wl.nodes(namespace, "c1") or {})
        assert (namespace, "c1", name, False) in seen
        assert await wl.get(namespace, "c1") is client and len(wl._watches) == 1  # one watch per cluster
        # a failed probe (a partitioned network hangs a watch silently): a new watch, out of sync until it lists
        w = wl._watches[(namespace, "c1")]
        probe = await wl.probe(namespace, "c1", max_age=0, timeout=1e-6)
        assert probe is not None and not probe.ok
        assert not w.running and wl.nodes(namespace, "c1") is None
        await _until(lambda: wl.nodes(namespace, "c1") is not None)
        w = wl._watches[(namespace, "c1")]
        wl.forget(namespace, "c1")
        assert not w.running and wl.nodes(namespace, "c1") is None
    finally:
        wl.stop_watches()
        await kube.delete(NODE, None, name)
