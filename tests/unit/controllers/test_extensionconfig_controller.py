"""The ExtensionConfig controller on an in-memory API with a fake transport: discovery into status and the
registry, a stable object not written again, a failed discovery, paused, CA injection, deletion, the warm-up."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as rh
from capd_py.api.labels import PAUSED_ANNOTATION
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers import extensionconfig
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.services.runtime_sdk import RuntimeSDKService
from capd_py.kube.runtime_sdk_client import HandlerUnreachable
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadKube

pytestmark = pytest.mark.unit
R = "extensionconfigs"


class FakeClient:
    def __init__(self) -> None:
        self.discovery: dict[str, Any] | Exception = rh.response(rh.DISCOVERY, handlers=[
            {"name": "create", "requestHook": {"apiVersion": rh.API_VERSION, "hook": "BeforeClusterCreate"}}])
        self.calls: list[tuple[str, bytes]] = []

    async def post(self, url: str, body: Mapping[str, Any], timeout_seconds: float, ca_pem: bytes = b""
                   ) -> dict[str, Any]:
        self.calls.append((url, ca_pem))
        if isinstance(self.discovery, Exception):
            raise self.discovery
        return self.discovery

    async def close(self) -> None:
        pass


def setup(ready: bool = True) -> tuple[Ctx, FakeWorkloadKube, RuntimeSDKService, FakeClient]:
    kube = FakeWorkloadKube(FakeRuntime(), "ns", "c1")
    client = FakeClient()
    sdk = RuntimeSDKService(kube, client=client)  # type: ignore[arg-type]
    if ready:
        sdk.warm_up([])
    ctx = Ctx(kube=kube, runtime=FakeRuntime(), settings=Settings(), workload=None,  # type: ignore[arg-type]
              runtime_sdk=sdk)
    return ctx, kube, sdk, client


def put(kube: FakeWorkloadKube, name: str = "ext", **md: Any) -> None:
    kube.put_object(R, {"apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig",
                        "metadata": {"name": name, "generation": 1, **md},
                        "spec": {"clientConfig": {"url": "https://ext.example"}, "namespaceSelector": {}}})


def get(kube: FakeWorkloadKube, name: str = "ext") -> dict[str, Any]:
    obj = kube.object(R, None, name)
    assert obj is not None
    return obj


async def test_discovery_writes_status_and_registers() -> None:
    ctx, kube, sdk, client = setup()
    put(kube)
    assert await extensionconfig.reconcile(ctx, "", "ext") is None
    obj = get(kube)
    assert [h["name"] for h in obj["status"]["handlers"]] == ["create.ext"]
    assert cond.get(obj, "Discovered")["reason"] == "Discovered"  # type: ignore[index]
    assert cond.get(obj, "Paused")["status"] == "False"  # type: ignore[index]
    assert sdk.registered("BeforeClusterCreate") == ["create.ext"]
    assert client.calls[0][0] == "https://ext.example/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"
    rv = obj["metadata"]["resourceVersion"]
    await extensionconfig.reconcile(ctx, "", "ext")
    assert get(kube)["metadata"]["resourceVersion"] == rv  # discovered again, nothing changed: no write


async def test_failed_discovery_keeps_the_handlers_and_retries() -> None:
    ctx, kube, sdk, client = setup()
    put(kube)
    await extensionconfig.reconcile(ctx, "", "ext")
    client.discovery = HandlerUnreachable("http call failed: refused")
    res = await extensionconfig.reconcile(ctx, "", "ext")
    assert res is not None and res.requeue_after == extensionconfig.FAILED_REQUEUE
    obj = get(kube)
    c = cond.get(obj, "Discovered")
    assert c is not None and (c["status"], c["reason"]) == ("False", "NotDiscovered")
    assert c["message"] == 'Error in discovery: failed to discover extension "ext": http call failed: refused'
    assert [h["name"] for h in obj["status"]["handlers"]] == ["create.ext"]
    assert sdk.registered("BeforeClusterCreate") == ["create.ext"]  # not registered again, not dropped either


async def test_cold_registry_waits_and_paused_does_nothing() -> None:
    ctx, kube, sdk, client = setup(ready=False)
    put(kube)
    res = await extensionconfig.reconcile(ctx, "", "ext")
    assert res is not None and res.requeue_after == extensionconfig.NOT_READY_REQUEUE and client.calls == []
    sdk.warm_up([])
    put(kube, "paused", annotations={PAUSED_ANNOTATION: ""})
    await extensionconfig.reconcile(ctx, "", "paused")
    assert cond.get(get(kube, "paused"), "Paused")["status"] == "True"  # type: ignore[index]
    assert client.calls == []


async def test_ca_injected_from_the_annotated_secret() -> None:
    ctx, kube, sdk, client = setup()
    put(kube, annotations={rh.INJECT_CA_FROM_SECRET_ANNOTATION: "sys/ext-ca"})
    res = await extensionconfig.reconcile(ctx, "", "ext")
    assert res is not None and client.calls == [] and "status" not in get(kube)  # no Secret: nothing written
    kube.put_object("secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ext-ca",
                                                                                  "namespace": "sys"},
                                "data": {"ca.crt": base64.b64encode(b"PEM").decode()}})
    await extensionconfig.reconcile(ctx, "", "ext")
    obj = get(kube)
    assert obj["spec"]["clientConfig"]["caBundle"] == base64.b64encode(b"PEM").decode()
    assert client.calls[-1][1] == b"PEM"  # discovery trusted the injected CA
    assert cond.is_true(obj, "Discovered")


async def test_deleted_is_unregistered() -> None:
    ctx, kube, sdk, client = setup()
    put(kube)
    await extensionconfig.reconcile(ctx, "", "ext")
    await kube.delete(extensionconfig.EXTENSION_CONFIG, None, "ext")
    await extensionconfig.reconcile(ctx, "", "ext")
    assert sdk.registered("BeforeClusterCreate") == []


async def test_warm_up_discovers_everything_then_fills_the_registry() -> None:
    ctx, kube, sdk, client = setup(ready=False)
    put(kube, "a")
    put(kube, "b", annotations={PAUSED_ANNOTATION: ""})  # paused ones too, as upstream's warm-up
    await extensionconfig.warm_up_once(ctx, sdk)
    assert sdk.ready and sdk.registered("BeforeClusterCreate") == ["create.a", "create.b"]
    assert cond.is_true(get(kube, "a"), "Discovered") and cond.is_true(get(kube, "b"), "Discovered")
    cold = setup(ready=False)
    put(cold[1], "a")
    cold[3].discovery = HandlerUnreachable("down")
    with pytest.raises(RuntimeSDKError, match="failed to discover ExtensionConfig a"):
        await extensionconfig.warm_up_once(cold[0], cold[2])
    assert not cold[2].ready
    assert cond.get(get(cold[1], "a"), "Discovered")["status"] == "False"  # type: ignore[index]
