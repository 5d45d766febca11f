"""A workload cluster's Node change reaches the Machine controller's queue with no poll: WorkloadClients
(kubeconfig Secret -> client -> Node watch) -> Manager.dispatch_node -> the Machine controller's node mapper ->
a reconcile of the Machine the Node carries the providerID of. The envtest API server plays the workload."""

from __future__ import annotations

import asyncio
import base64
import secrets

import pytest

from capd_py.api.gvk import MACHINE, NODE, SECRET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import machine
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Controller, Manager
from capd_py.controllers.queue import Result
from capd_py.kube.client import Kube
from capd_py.kube.workload import WorkloadClients
from capd_py.testing.envtest import EnvTest

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


async def test_workload_node_event_reconciles_its_machine(envtest: EnvTest, kube: Kube, namespace: str) -> None:
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "c1-kubeconfig", "namespace": namespace},
                               "data": {"value": base64.b64encode(envtest.kubeconfig_path.read_bytes()).decode()}})
    reconciled: list[tuple[str, str]] = []

    async def record(ctx: Ctx, ns: str, name: str) -> Result | None:
        reconciled.append((ns, name))
        return None
    # the Machine controller's mappers, a recording reconcile: what reaches the queue is what is tested
    c = Controller(gvk=MACHINE, reconcile=record, node_watches=machine.controller().node_watches)
    wl = WorkloadClients(kube)
    mgr = Manager(Ctx(kube=kube, runtime=None, settings=Settings(workers=2), workload=wl),  # type: ignore[arg-type]
                  [c])
    pid = f"docker:////nw-{secrets.token_hex(3)}"
    node_name = pid.rsplit("/", 1)[1]
    mgr.store.observe(MACHINE, {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                "metadata": {"name": "m1", "namespace": namespace, "resourceVersion": "1",
                                             "labels": {CLUSTER_NAME: "c1"}},
                                "spec": {"clusterName": "c1", "providerID": pid}})
    mgr.queue.start()
    try:
        assert await wl.get(namespace, "c1") is not None  # the first client of a cluster starts its watch
        async with asyncio.timeout(15):
            while wl.nodes(namespace, "c1") is None:
                await asyncio.sleep(0.05)
        assert reconciled == []
        await kube.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node_name},
                                 "spec": {"providerID": pid}})
        async with asyncio.timeout(5):
            while (namespace, "m1") not in reconciled:
                await asyncio.sleep(0.05)
        assert node_name in (wl.nodes(namespace, "c1") or {})
    finally:
        await mgr.stop()
        await kube.delete(NODE, None, node_name)
