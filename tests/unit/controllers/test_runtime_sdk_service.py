"""The RuntimeSDK service's call semantics with a fake transport (upstream internal/runtime/client: handlers one
after the other, the first failure ends the call, failurePolicy Ignore forgives only an unreachable handler)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from capd_py.api import runtime_hooks as rh
from capd_py.api.gvk import GVK
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers.services.runtime_sdk import RuntimeSDKService
from capd_py.kube.runtime_sdk_client import HandlerUnreachable

pytestmark = pytest.mark.unit


class FakeClient:
    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any] | Exception] = {}
        self.posts: list[tuple[str, dict[str, Any], float]] = []

    async def post(self, url: str, body: Mapping[str, Any], timeout_seconds: float, ca_pem: bytes = b""
                   ) -> dict[str, Any]:
        self.posts.append((url, dict(body), timeout_seconds))
        answer = self.answers.get(url.rsplit("/", 1)[-1], {"status": "Success"})
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def close(self) -> None:
        pass


class FakeKube:
    def __init__(self, namespaces: dict[str, dict[str, str]]):
        self.namespaces = namespaces

    async def get(self, gvk: GVK, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert gvk.kind == "Namespace"
        labels = self.namespaces.get(name)
        return None if labels is None else {"metadata": {"name": name, "labels": labels}}


def ec(name: str, *handlers: dict[str, Any], selector: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "1"},
            "spec": {"clientConfig": {"url": f"https://{name}:8443"}, "namespaceSelector": selector or {},
                     "settings": {"s": name}},
            "status": {"handlers": [{**h, "name": f"{h['name']}.{name}"} for h in handlers]}}


def h(name: str, hook: str = "BeforeClusterUpgrade", **kw: Any) -> dict[str, Any]:
    return {"name": name, "requestHook": {"apiVersion": rh.API_VERSION, "hook": hook}, **kw}


def service(*ecs: dict[str, Any], namespaces: dict[str, dict[str, str]] | None = None
            ) -> tuple[RuntimeSDKService, FakeClient]:
    client = FakeClient()
    sdk = RuntimeSDKService(FakeKube(namespaces or {"ns": {}}), client=client)  # type: ignore[arg-type]
    sdk.warm_up(list(ecs))
    return sdk, client


async def test_not_warmed_up_is_an_error() -> None:
    sdk = RuntimeSDKService(FakeKube({}), client=FakeClient())  # type: ignore[arg-type]
    assert sdk.enabled() and not sdk.ready
    with pytest.raises(RuntimeSDKError, match="not been warmed up"):
        await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "ns")
    with pytest.raises(RuntimeSDKError, match="not been warmed up"):
        sdk.registered("BeforeClusterUpgrade")


async def test_call_all_in_order_with_settings_timeout_and_aggregation() -> None:
    sdk, client = service(ec("a", h("one", timeoutSeconds=3)), ec("b", h("two"), h("other", "BeforeClusterDelete")))
    client.answers["one"] = rh.response(rh.BEFORE_CLUSTER_UPGRADE, message="m1", retryAfterSeconds=9)
    client.answers["two"] = rh.response(rh.BEFORE_CLUSTER_UPGRADE, message="m2", retryAfterSeconds=4)
    out = await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "ns")
    assert (out.retry_after_seconds, out.message) == (4, "m1, m2")
    assert [(u.rsplit("/", 2)[-2:], t, b["settings"]) for u, b, t in client.posts] == [
        (["beforeclusterupgrade", "one"], 3, {"s": "a"}), (["beforeclusterupgrade", "two"], 10, {"s": "b"})]
    assert sdk.registered("BeforeClusterUpgrade") == ["one.a", "two.b"]


async def test_first_failure_ends_the_call() -> None:
    sdk, client = service(ec("a", h("one")), ec("b", h("two")))
    client.answers["one"] = HandlerUnreachable("http call failed: connection refused")
    with pytest.raises(RuntimeSDKError, match='hook "hooks.runtime.cluster.x-k8s.io/BeforeClusterUpgrade": failed '
                                              'to call extension handler "one.a": http call failed'):
        await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "ns")
    assert len(client.posts) == 1  # "two" never waited for


async def test_failure_policy_ignore_forgives_only_unreachable() -> None:
    sdk, client = service(ec("a", h("one", failurePolicy="Ignore")))
    client.answers["one"] = HandlerUnreachable("timeout")
    out = await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "ns")
    assert out.status == "Success" and out.retry_after_seconds == 0
    client.answers["one"] = rh.response(rh.BEFORE_CLUSTER_UPGRADE, "Failure", "nope")
    with pytest.raises(RuntimeSDKError, match="got failure response"):
        await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "ns")


async def test_namespace_selector_and_call_by_name() -> None:
    sdk, client = service(ec("a", h("one"), selector={"matchLabels": {"x": "y"}}), ec("b", h("two")),
                          namespaces={"ns": {}, "picked": {"x": "y"}})
    await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "ns")
    assert [u.rsplit("/", 1)[-1] for u, _, _ in client.posts] == ["two"]
    client.posts.clear()
    await sdk.call_all(rh.BEFORE_CLUSTER_UPGRADE, rh.request(rh.BEFORE_CLUSTER_UPGRADE), "picked")
    assert [u.rsplit("/", 1)[-1] for u, _, _ in client.posts] == ["one", "two"]
    with pytest.raises(RuntimeSDKError, match="namespaceSelector did not match namespace ns"):
        await sdk.call("one.a", rh.BEFORE_CLUSTER_UPGRADE, {}, "ns")
    with pytest.raises(RuntimeSDKError, match="failed to get namespace gone"):
        await sdk.call("one.a", rh.BEFORE_CLUSTER_UPGRADE, {}, "gone")
    with pytest.raises(RuntimeSDKError, match='handler with name "nope.a" has not been registered'):
        await sdk.call("nope.a", rh.BEFORE_CLUSTER_UPGRADE, {}, "ns")
    assert (await sdk.call("one.a", rh.BEFORE_CLUSTER_UPGRADE, {}, "picked"))["status"] == "Success"


async def test_discover_validates_the_answer() -> None:
    sdk, client = service()
    client.answers["discovery"] = rh.response(rh.DISCOVERY, handlers=[h("one")])
    assert [x["name"] for x in await sdk.discover(ec("e"))] == ["one.e"]
    client.answers["discovery"] = rh.response(rh.DISCOVERY, "Failure", "broken")
    with pytest.raises(RuntimeSDKError, match='failed to discover extension "e": got failure response'):
        await sdk.discover(ec("e"))
    client.answers["discovery"] = HandlerUnreachable("http call failed: refused")
    with pytest.raises(RuntimeSDKError, match='failed to discover extension "e": http call failed: refused'):
        await sdk.discover(ec("e"))
    sdk.register(ec("e", h("one")))
    assert sdk.registered("BeforeClusterUpgrade") == ["one.e"]
    sdk.unregister("e")
    assert sdk.registered("BeforeClusterUpgrade") == []
