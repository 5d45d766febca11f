"""The whole controllers process, in-process, against a real kube-apiserver: kopf watch events in, objects
out, every read served by the watch-fed cache. The container runtime is the in-memory fake (no dockerd
needed for what this tier checks: the event -> cache -> queue -> reconcile -> write path)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

from capd_py.api.gvk import DOCKER_CLUSTER, DOCKER_MACHINE, KUBEADM_CONFIG, MACHINE, MACHINE_DEPLOYMENT, MACHINE_SET
from capd_py.api.labels import CLUSTER_NAME, CONTAINER_CLUSTER, CONTAINER_ROLE, FINALIZER_MACHINE
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.kube.cached import CachedKube
from capd_py.kube.client import Kube
from capd_py.reconcile.dockercluster import ROLE_LB
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import LAUNCH_TAG, FakeRuntime
from capd_py.testing.inprocess import eventually, in_process_operator

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[tuple[Manager, FakeRuntime]]:
    """Fake containers have no API server behind them."""
    async with in_process_operator(envtest, workloads="none") as op:
        yield op.manager, op.runtime


async def test_cluster_objects_out_of_events_in(operator: tuple[Manager, FakeRuntime], kube: Kube,
                                                namespace: str) -> None:
    mgr, runtime = operator
    docs = parse_documents(generate_cluster("op", namespace=namespace, control_plane_machine_count=1,
                                            worker_machine_count=2, env={}))
    assert all(o.ok for o in await apply_objects(kube, docs))
    sel = {CLUSTER_NAME: "op"}

    async def count(g: Any) -> int:
        return len(await kube.list(g, namespace, labels=sel))

    async def machines_built() -> bool:
        return (await count(MACHINE) == 3 and await count(DOCKER_MACHINE) == 3
                and await count(KUBEADM_CONFIG) == 3)
    await eventually(machines_built, 90, "3 Machines, 3 DockerMachines and 3 KubeadmConfigs")
    # Every node container is created and booted at once (workers boot while they wait for bootstrap data),
    # but only the control plane gets bootstrap data here: workers wait for an initialised control plane,
    # which needs a workload API server the fake containers do not have.
    await eventually(lambda: _containers(runtime, "op", 3), 60, "three node containers")

    async def bootstrapped_once() -> bool:
        return len({c for c, argv in runtime.execs if LAUNCH_TAG in " ".join(argv)}) == 1
    await eventually(bootstrapped_once, 60, "the bootstrap launched in the control-plane container only")
    assert len(await kube.list(MACHINE_SET, namespace, labels=sel)) == 1

    # The controllers read through the cache: it holds what the API server holds.
    ck = mgr.ctx.kube
    assert isinstance(ck, CachedKube)
    for g in (MACHINE, DOCKER_MACHINE, KUBEADM_CONFIG):
        live = {o["metadata"]["name"] for o in await kube.list(g, namespace)}
        await eventually(functools.partial(_cached_names, mgr, g, namespace, live), 10, f"cache of {g.kind}")
    assert ck.cache_reads > 10 * sum(ck.api_reads.values()), (ck.cache_reads, ck.api_reads)

    # A finalizer a user strips is put back (the MODIFIED event reaches the Machine controller).
    m = (await kube.list(MACHINE, namespace, labels=sel))[0]
    await kube.merge_patch(MACHINE, namespace, m["metadata"]["name"], {"metadata": {"finalizers": None}})

    async def finalizer_back() -> bool:
        got = await kube.get(MACHINE, namespace, m["metadata"]["name"])
        return got is not None and FINALIZER_MACHINE in (got["metadata"].get("finalizers") or [])
    await eventually(finalizer_back, 30, "Machine finalizer restored")

    # Scaling the MachineDeployment: the event reaches MachineDeployment -> MachineSet -> Machine.
    md = (await kube.list(MACHINE_DEPLOYMENT, namespace, labels=sel))[0]
    await kube.merge_patch(MACHINE_DEPLOYMENT, namespace, md["metadata"]["name"], {"spec": {"replicas": 3}})

    async def scaled() -> bool:
        return await count(MACHINE) == 4 and await count(DOCKER_MACHINE) == 4
    await eventually(scaled, 60, "a fourth Machine after scaling to 3 workers")

    # Deleting the Cluster takes everything with it, containers included (no garbage collector runs here:
    # the controllers themselves delete what they own).
    from capd_py.api.gvk import CLUSTER
    await kube.delete(CLUSTER, namespace, "op")

    async def gone() -> bool:
        left = [await count(g) for g in (MACHINE, DOCKER_MACHINE, MACHINE_SET)]
        return (sum(left) == 0 and await kube.get(CLUSTER, namespace, "op") is None
                and not await kube.list(DOCKER_CLUSTER, namespace) and await _containers(runtime, "op", 0))
    async def left() -> Any:
        return {g.kind: [(o["metadata"]["name"], o["metadata"].get("finalizers"), (o.get("status") or {}).get(
            "conditions")) for o in await kube.list(g, namespace)] for g in (CLUSTER, MACHINE, DOCKER_MACHINE,
                                                                            MACHINE_SET, DOCKER_CLUSTER)}
    await eventually(gone, 120, "cluster, machines and containers gone", left)


async def _containers(runtime: FakeRuntime, cluster: str, n: int) -> bool:
    nodes = [c for c in runtime.list_containers({CONTAINER_CLUSTER: cluster})
             if c.labels.get(CONTAINER_ROLE) != ROLE_LB]
    return len(nodes) == n


async def _cached_names(mgr: Manager, g: Any, namespace: str, live: set[str]) -> bool:
    return {o["metadata"]["name"] for o in mgr.store.list(g, namespace)} == live
