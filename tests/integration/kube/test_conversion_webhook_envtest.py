"""The conversion webhook behind a real kube-apiserver: CRDs serving v1beta1 (upstream's schema, not stored)
and v1beta2 (storage), converted by capd_py.kube.conversion_webhook on the host. Upstream v1.10's v1beta1
CAPD manifests apply unchanged, read back in both versions, and a v1beta1 edit keeps v1beta2-only fields.

Uses an envtest of its own: the shared one's CRDs stay v1beta2-only for every other test."""

from __future__ import annotations

import asyncio
import copy
import os
import ssl
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from capd_py.api import gvk
from capd_py.api.conversion import DATA_ANNOTATION, to_hub
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.conversion_webhook import (
    CONVERT_PATH,
    WebhookServer,
    crds_serving_v1beta1,
    serve,
    webhook_conversion,
)
from capd_py.reconcile.certs import KeyPair
from capd_py.reconcile.servingcert import new_serving_cert, new_webhook_ca
from capd_py.testing.conversion import KINDS, WEBHOOK_PROCESS, at, create_and_read_back, of, upstream_v1beta1
from capd_py.testing.envtest import EnvTest, free_port, started_with_crds

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = ROOT / "tests" / "fixtures" / "upstream"
NAMESPACE = gvk.GVK("", "v1", "Namespace", "namespaces", namespaced=False)


class Webhook:
    def __init__(self) -> None:
        self.port = free_port()
        self.ca = new_webhook_ca()
        self.pair: KeyPair = new_serving_cert(self.ca, ["127.0.0.1"])

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}{CONVERT_PATH}"


@pytest.fixture(scope="module")
def webhook() -> Webhook:
    return Webhook()


@pytest.fixture(scope="module")
def conv_env(webhook: Webhook) -> Iterator[EnvTest]:
    with started_with_crds(crds_serving_v1beta1(webhook_conversion(webhook.ca.cert, url=webhook.url))) as env:
        yield env


@pytest.fixture
async def server(webhook: Webhook) -> AsyncIterator[WebhookServer]:
    running = await serve("127.0.0.1", webhook.port, webhook.pair.cert, webhook.pair.key)
    try:
        yield running
    finally:
        await running.stop()


@pytest.fixture
async def ckube(conv_env: EnvTest, server: WebhookServer) -> AsyncIterator[Kube]:
    k = conv_env.kube()
    try:
        yield k
    finally:
        k.close()


@pytest.fixture
async def ns(ckube: Kube) -> str:
    name = f"conv-{int(time.time() * 1000) % 10**8}"
    await ckube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def test_the_webhook_answers_over_tls(webhook: Webhook, server: WebhookServer) -> None:
    context = ssl.create_default_context(cadata=webhook.ca.cert.decode())
    review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
              "request": {"uid": "u", "desiredAPIVersion": "cluster.x-k8s.io/v1beta1", "objects": []}}
    async with aiohttp.ClientSession() as session:
        async with session.post(webhook.url, json=review, ssl=context) as r:
            assert r.status == 200
            assert (await r.json())["response"] == {"uid": "u", "convertedObjects": [],
                                                    "result": {"status": "Success"}}
        async with session.post(webhook.url, data=b"{", ssl=context) as r:
            assert r.status == 400


@pytest.mark.parametrize(("file", "count"), [("e2e-bases.yaml", 11), ("development.yaml", 8)])
async def test_upstream_v1beta1_manifests_apply_and_read_back_in_both_versions(ckube: Kube, ns: str, file: str,
                                                                              count: int) -> None:
    """e2e-bases: upstream v1.10's e2e Cluster + KCP + MachineDeployment + MachinePool + ClusterResourceSet;
    development: its default clusterctl flavor, the ClusterClass quick-start and a topology Cluster."""
    objs = upstream_v1beta1(ns, file)
    assert len(objs) == count
    started = time.monotonic()
    for obj, hub, spoke in await create_and_read_back(ckube, objs):
        # what the API server added (defaults) converts back to the same v1beta2 object
        assert to_hub(spoke).get("spec") == hub.get("spec"), obj["kind"]
    created = time.monotonic() - started
    # a LIST in v1beta1 converts every item in one review
    listed = await ckube.list(at(KINDS[("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate")], "v1beta1"),
                              ns)
    assert sorted(o["metadata"]["name"] for o in listed) == sorted(
        o["metadata"]["name"] for o in objs if o["kind"] == "DockerMachineTemplate")
    print(f"created and read back {len(objs)} v1beta1 objects ({file}) through the webhook in {created:.2f}s")


async def test_a_v1beta1_edit_keeps_what_only_v1beta2_can_say(ckube: Kube, ns: str) -> None:
    cluster = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1", "namespace": ns},
               "spec": {"paused": False, "availabilityGates": [{"conditionType": "MyGate", "polarity": "Positive"}],
                        "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io",
                                            "kind": "KubeadmControlPlane", "name": "c1"}}}
    hub_gvk = KINDS[("cluster.x-k8s.io", "Cluster")]
    await ckube.create(hub_gvk, cluster)
    spoke = await ckube.get(at(hub_gvk, "v1beta1"), ns, "c1")
    assert spoke is not None and DATA_ANNOTATION in spoke["metadata"]["annotations"]
    assert spoke["spec"]["controlPlaneRef"] == {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2",
                                                "kind": "KubeadmControlPlane", "name": "c1", "namespace": ns}
    spoke["spec"]["paused"] = True
    await ckube.replace(at(hub_gvk, "v1beta1"), spoke)
    hub = await ckube.get(hub_gvk, ns, "c1")
    assert hub is not None
    assert hub["spec"]["paused"] is True
    assert hub["spec"]["availabilityGates"] == [{"conditionType": "MyGate", "polarity": "Positive"}]
    assert DATA_ANNOTATION not in (hub["metadata"].get("annotations") or {})


async def test_v1beta1_writes_pass_capd_pys_admission_rules(ckube: Kube, ns: str) -> None:
    """A v1beta1 write is validated against the v1beta1 schema only; capd-py's rules for versions (a Machine's
    semver, a control plane's supported range), immutable fields and replicas are copied into it
    (conversion_webhook.with_capd_rules), with the same messages as through v1beta2. Without them a v1beta1 Machine
    at `v1.20` was accepted (docs/conversion.md)."""
    machine_gvk = KINDS[("cluster.x-k8s.io", "Machine")]
    machine: dict[str, Any]
    machine = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "metadata": {"name": "m", "namespace": ns},
               "spec": {"clusterName": "c", "version": "v1.20", "bootstrap": {"dataSecretName": "s"},
                        "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                              "kind": "DockerMachine", "name": "m"}}}
    refused: dict[str, KubeError] = {}
    for version, body in (("v1beta2", to_hub(machine)), ("v1beta1", copy.deepcopy(machine))):
        with pytest.raises(KubeError) as e:
            await ckube.create(at(machine_gvk, version), body)
        refused[version] = e.value
    assert refused["v1beta1"].invalid
    assert "spec.version" in refused["v1beta1"].message
    assert "must be a valid semantic version" in refused["v1beta1"].message
    print(f"v1beta1 Machine at v1.20: {refused['v1beta1']}")
    # (an immutable clusterName is the admission webhooks' since 2026-12-08, as upstream's: not a schema rule to copy)
    machine["spec"]["version"] = "v1.34.4"
    await ckube.create(of(machine), copy.deepcopy(machine))
    # replicas: a control plane cannot be scaled to 0 through v1beta1 either
    kcp = next(o for o in upstream_v1beta1(ns) if o["kind"] == "KubeadmControlPlane")
    await ckube.create(of(kcp), copy.deepcopy(kcp))
    with pytest.raises(KubeError) as e:
        await ckube.merge_patch(of(kcp), ns, kcp["metadata"]["name"], {"spec": {"replicas": 0}})
    assert e.value.invalid and "replicas must be greater than or equal to 1" in e.value.message
    # a minor skipped on the KubeadmControlPlane
    with pytest.raises(KubeError) as e:
        await ckube.merge_patch(of(kcp), ns, kcp["metadata"]["name"], {"spec": {"version": "v1.36.1"}})
    assert e.value.invalid and "upgrade one minor version at a time" in e.value.message
    print(f"v1beta1 KCP upgrade two minors up: {e.value}")
    # a DockerMachineTemplate's spec.template.spec
    dmt = next(o for o in upstream_v1beta1(ns) if o["kind"] == "DockerMachineTemplate")
    await ckube.create(of(dmt), copy.deepcopy(dmt))
    with pytest.raises(KubeError) as e:
        await ckube.merge_patch(of(dmt), ns, dmt["metadata"]["name"], {"spec": {"template": {"spec": {
            "customImage": "other:v1"}}}})
    assert e.value.invalid and "spec.template.spec is immutable" in e.value.message


async def test_without_the_webhook_only_v1beta1_fails(conv_env: EnvTest, webhook: Webhook) -> None:
    """Host mode: while the process serving the webhook (`capd-py controllers`) is down, v1beta2 clients and the
    controllers are unaffected; v1beta1 reads and writes fail at once with the connection error. The webhook
    runs in a process of its own here, killed as a crashed controllers process would be (an in-process server
    that stops keeps answering on the API server's open keep-alive connections)."""
    env = {**os.environ, "CERT": webhook.pair.cert.decode(), "KEY": webhook.pair.key.decode()}
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WEBHOOK_PROCESS, str(webhook.port),
                                                env=env, stdout=asyncio.subprocess.PIPE)
    kube = conv_env.kube()
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            assert (await proc.stdout.readline()).strip() == b"ready"
        ns = f"conv-{int(time.time() * 1000) % 10**8}"
        await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        hub_gvk = KINDS[("infrastructure.cluster.x-k8s.io", "DockerCluster")]
        await kube.create(hub_gvk, {"apiVersion": hub_gvk.api_version, "kind": "DockerCluster",
                                    "metadata": {"name": "d", "namespace": ns}})
        assert await kube.get(at(hub_gvk, "v1beta1"), ns, "d") is not None
        proc.kill()
        await proc.wait()
        assert await kube.get(hub_gvk, ns, "d") is not None
        started = time.monotonic()
        with pytest.raises(KubeError) as failed:
            await kube.get(at(hub_gvk, "v1beta1"), ns, "d")
        elapsed = time.monotonic() - started
        assert "conversion webhook" in str(failed.value)
        assert elapsed < 5
        print(f"v1beta1 GET without the webhook failed after {elapsed:.2f}s: {str(failed.value)[:160]}")
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        kube.close()


async def test_two_servers_share_a_port_with_reuse_port(webhook: Webhook) -> None:
    """In-cluster mode runs two hostNetwork replicas on one node: both must be able to listen on the port."""
    port = free_port()
    first = await serve("127.0.0.1", port, webhook.pair.cert, webhook.pair.key, reuse_port=True)
    second = await serve("127.0.0.1", port, webhook.pair.cert, webhook.pair.key, reuse_port=True)
    try:
        assert first.port == second.port == port
        context = ssl.create_default_context(cadata=webhook.ca.cert.decode())
        async with aiohttp.ClientSession() as session:
            for _ in range(4):
                async with session.get(f"https://127.0.0.1:{port}/healthz", ssl=context) as r:
                    assert r.status == 200
        await first.stop()
        async with aiohttp.ClientSession() as session, \
                session.get(f"https://127.0.0.1:{port}/healthz", ssl=context) as r:
            assert r.status == 200, "the other replica still answers"
    finally:
        await first.stop()
        await second.stop()


async def test_a_v1beta1_machine_drain_rule_reads_back_as_v1beta2(ckube: Kube, ns: str) -> None:
    """Upstream serves MachineDrainRule in v1beta1 too (the same fields): written as v1beta1, read as either; the
    order rule holds for v1beta1 writes."""
    rule: dict[str, Any]
    rule = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDrainRule",
            "metadata": {"name": "mdr", "namespace": ns},
            "spec": {"drain": {"behavior": "Drain", "order": 5},
                     "machines": [{"selector": {"matchLabels": {"os": "linux"}},
                                   "clusterSelector": {"matchLabels": {"stage": "production"}}}],
                     "pods": [{"selector": {"matchLabels": {"app": "logging"}}}]}}
    ((written, hub, spoke),) = await create_and_read_back(ckube, [rule])
    assert hub["spec"] == written["spec"] == spoke["spec"]
    assert DATA_ANNOTATION not in (hub["metadata"].get("annotations") or {})
    bad = copy.deepcopy(rule)
    bad["metadata"]["name"], bad["spec"]["drain"] = "bad", {"behavior": "Skip", "order": 1}
    with pytest.raises(KubeError) as e:
        await ckube.create(of(bad), bad)
    assert e.value.invalid and 'order must not be set if drain behavior is "Skip" or "WaitCompleted"' in e.value.message
