"""DockerMachine pre-loading images before its bootstrap, against a real kube-apiserver with the fake runtime
(whose node containers have a containerd stand-in): spec.preLoadImages and the images `capd-py load image`
recorded on the Cluster go into the node first; a spec image missing from the local docker daemon is a clear
condition (no bootstrap, retried) until it exists; a recorded image gone from the daemon is an Event only."""

from __future__ import annotations

import asyncio
import base64
import secrets
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE, EVENT, INFRA_GROUP, MACHINE, SECRET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import dockercluster as dcc
from capd_py.controllers import dockermachine as dmc
from capd_py.controllers.context import Ctx, Settings
from capd_py.kube.client import Kube
from capd_py.kube.workload import WorkloadClients
from capd_py.reconcile import dockermachine as dmr
from capd_py.reconcile.cloudinit import LAUNCH_TAG
from capd_py.reconcile.imageload import RECORDED_ANNOTATION, normalize
from capd_py.runtime.protocol import ExecResult
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120), pytest.mark.docker_free]

CLOUD_CONFIG = "#cloud-config\nruncmd:\n- echo kubeadm join\n"


async def _until(fn: Any, ctx: Ctx, gvk: Any, ns: str, name: str, pred: Any, timeout: float = 30) -> dict[str, Any]:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        await fn(ctx, ns, name)
        obj = await ctx.kube.get(gvk, ns, name)
        if pred(obj):
            assert obj is not None
            return obj
        assert asyncio.get_running_loop().time() < deadline, f"{name}: {obj and obj.get('status')}"
        await asyncio.sleep(0.1)


async def _cluster(ctx: Ctx, ns: str, recorded: str = "") -> str:
    name = f"c-{secrets.token_hex(3)}"
    md: dict[str, Any] = {"name": name, "namespace": ns}
    if recorded:
        md["annotations"] = {RECORDED_ANNOTATION: recorded}
    cluster = await ctx.kube.create(CLUSTER, {
        "apiVersion": CLUSTER.api_version, "kind": "Cluster", "metadata": md,
        "spec": {"infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerCluster", "name": name}}})
    await ctx.kube.create(DOCKER_CLUSTER, {
        "apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster",
        "metadata": {"name": name, "namespace": ns, "labels": {CLUSTER_NAME: name},
                     "ownerReferences": [contract.owner_ref(cluster)]}, "spec": {}})
    await _until(dcc.reconcile, ctx, DOCKER_CLUSTER, ns, name, contract.infra_provisioned)
    return name


async def _machine(ctx: Ctx, ns: str, cluster: str, preload: list[str]) -> tuple[str, str]:
    name = f"m-{secrets.token_hex(3)}"
    await ctx.kube.create(SECRET, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
        "data": {"value": base64.b64encode(CLOUD_CONFIG.encode()).decode(),
                 "format": base64.b64encode(b"cloud-config").decode()}})
    labels = {CLUSTER_NAME: cluster, "cluster.x-k8s.io/control-plane": ""}
    machine = await ctx.kube.create(MACHINE, {
        "apiVersion": MACHINE.api_version, "kind": "Machine", "metadata": {"name": name, "namespace": ns,
                                                                          "labels": labels},
        "spec": {"clusterName": cluster, "version": "v1.34.4", "bootstrap": {"dataSecretName": name},
                 "infrastructureRef": {"apiGroup": INFRA_GROUP, "kind": "DockerMachine", "name": name}}})
    await ctx.kube.create(DOCKER_MACHINE, {
        "apiVersion": DOCKER_MACHINE.api_version, "kind": "DockerMachine",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [contract.owner_ref(machine)]},
        "spec": {"preLoadImages": preload} if preload else {}})
    return name, dmr.container_name(cluster, name)


def _ctx(kube: Kube, fake: FakeRuntime) -> Ctx:
    return Ctx(kube=kube, runtime=fake, settings=Settings(privileged_mode="restricted", poll_seconds=0.1),
               workload=WorkloadClients(kube))


def _launched(fake: FakeRuntime, node: str) -> bool:
    return any(n == node and LAUNCH_TAG in cmd for n, cmd in fake.execs)


async def test_preload_and_recorded_images_are_in_containerd_before_the_bootstrap(kube: Kube, namespace: str) -> None:
    fake = FakeRuntime()
    ctx = _ctx(kube, fake)
    cluster = await _cluster(ctx, namespace, recorded="capd-py/echo:loaded")
    name, node = await _machine(ctx, namespace, cluster, ["capd-py/echo:pre", "busybox"])
    order: list[str] = []
    orig = fake.exec

    def exec_(name: str, cmd: list[str], stdin: bytes | None = None, timeout: float | None = None) -> ExecResult:
        if name == node and (LAUNCH_TAG in cmd or cmd[2:4] == ["images", "import"]):
            order.append("bootstrap" if LAUNCH_TAG in cmd else "import")
        return orig(name, cmd, stdin, timeout)
    fake.exec = exec_  # type: ignore[method-assign]
    dm = await _until(dmc.reconcile, ctx, DOCKER_MACHINE, namespace, name, contract.infra_provisioned)
    assert order == ["import", "import", "import", "bootstrap"]
    have = fake.ctr_images[node]
    for ref in ("capd-py/echo:pre", "busybox", "capd-py/echo:loaded"):
        assert have[normalize(ref)] == fake.image_id(ref)
    assert cond.is_true(dm, dmr.BOOTSTRAP_EXEC_SUCCEEDED)


async def test_missing_preload_image_is_a_condition_until_it_exists(kube: Kube, namespace: str) -> None:
    fake = FakeRuntime()
    ctx = _ctx(kube, fake)
    cluster = await _cluster(ctx, namespace, recorded="capd-py/echo:deleted-since")
    fake.all_images = False
    fake.images |= {"capd-py/node:v1.34.4", "capd-py/echo:pre"}
    name, node = await _machine(ctx, namespace, cluster, ["capd-py/echo:pre", "capd-py/app:not-built"])

    def failed(o: dict[str, Any] | None) -> bool:
        return (cond.get(o or {}, dmr.BOOTSTRAP_EXEC_SUCCEEDED) or {}).get("reason") == "PreLoadImagesFailed"
    dm = await _until(dmc.reconcile, ctx, DOCKER_MACHINE, namespace, name, failed)
    c = cond.get(dm, dmr.BOOTSTRAP_EXEC_SUCCEEDED) or {}
    assert c["status"] == "False" and "capd-py/app:not-built (spec.preLoadImages) not present in the local docker " \
        "daemon" in c["message"] and "never pulls" in c["message"]
    assert not cond.is_true(dm, "Ready") and cond.is_true(dm, dmr.CONTAINER_PROVISIONED)
    res = await dmc.reconcile(ctx, namespace, name)
    assert res is not None and res.requeue_after  # looked at again, not stuck
    assert not _launched(fake, node) and node not in fake.ctr_images  # no bootstrap, nothing half-loaded
    events = [e["reason"] for e in await kube.list(EVENT, namespace) if e["involvedObject"]["name"] == name
              for _ in range(e.get("count", 1))]  # a repeat is one Event whose count grows
    assert events.count("PreLoadImagesFailed") == 1

    fake.images.add("capd-py/app:not-built")  # built: the machine proceeds; the recorded image gone is an Event
    dm = await _until(dmc.reconcile, ctx, DOCKER_MACHINE, namespace, name, contract.infra_provisioned)
    assert set(fake.ctr_images[node]) == {normalize("capd-py/echo:pre"), normalize("capd-py/app:not-built")}
    events = [e["reason"] for e in await kube.list(EVENT, namespace) if e["involvedObject"]["name"] == name]
    assert "PreLoadImageMissing" in events and _launched(fake, node)
