"""The DockerMachineTemplate controller writes status.capacity (the docker host's CPUs and memory, as upstream CAPD's
controller) once; reconciling a stable template writes nothing; a host change is written."""

from __future__ import annotations

import pytest

from capd_py.api.containers import HostCapacity
from capd_py.api.gvk import DOCKER_MACHINE_TEMPLATE
from capd_py.controllers import dockermachinetemplate as c_dmt
from capd_py.kube.client import Kube
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


async def test_capacity_is_written_once_and_follows_the_host(kube: Kube, namespace: str) -> None:
    ctx = direct_ctx(kube)
    assert isinstance(ctx.runtime, FakeRuntime)
    ctx.runtime.capacity = HostCapacity(cpus=2, memory_bytes=24 * 1024 ** 3)
    await kube.create(DOCKER_MACHINE_TEMPLATE, {
        "apiVersion": DOCKER_MACHINE_TEMPLATE.api_version, "kind": "DockerMachineTemplate",
        "metadata": {"name": "workers", "namespace": namespace}, "spec": {"template": {"spec": {}}}})
    await c_dmt.reconcile(ctx, namespace, "workers")
    got = await kube.get(DOCKER_MACHINE_TEMPLATE, namespace, "workers")
    assert got is not None and got["status"]["capacity"] == {"cpu": "2", "memory": "24Gi"}
    version = got["metadata"]["resourceVersion"]
    await c_dmt.reconcile(ctx, namespace, "workers")
    again = await kube.get(DOCKER_MACHINE_TEMPLATE, namespace, "workers")
    assert again is not None and again["metadata"]["resourceVersion"] == version  # a stable template: no write
    ctx.runtime.capacity = HostCapacity(cpus=4, memory_bytes=8 * 1024 ** 3)
    await c_dmt.reconcile(ctx, namespace, "workers")
    moved = await kube.get(DOCKER_MACHINE_TEMPLATE, namespace, "workers")
    assert moved is not None and moved["status"]["capacity"] == {"cpu": "4", "memory": "8Gi"}
    await c_dmt.reconcile(ctx, namespace, "gone")  # a template deleted meanwhile: nothing to do
