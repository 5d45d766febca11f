"""The Runtime SDK end to end: the controllers process (in-process, RuntimeSDK gate on) against a real API server
and a real local HTTPS extension server (aiohttp, a CA of the test's own). ExtensionConfigs are discovered (status
and the Discovered condition), their handlers registered and called through the RuntimeSDK service with
upstream's semantics: namespaceSelector, settings, per-handler timeout, failurePolicy, aggregation; a caBundle
injected from a Secret; a deleted ExtensionConfig unregistered."""

from __future__ import annotations

import asyncio
import base64
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as rh
from capd_py.api.gvk import EXTENSION_CONFIG, NAMESPACE, SECRET
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers.services.runtime_sdk import RuntimeSDKService
from capd_py.kube.client import Kube
from capd_py.kube.conversion_webhook import server_ssl_context
from capd_py.reconcile import servingcert
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import Operator, eventually, in_process_operator

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


@dataclass
class Extension:
    """What the extension server was asked: (path, timeout query, request body)."""

    url: str
    ca: bytes
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    # answers by hook path; a status code instead of a body answers with it
    answers: dict[str, dict[str, Any] | int] = field(default_factory=dict)
    handlers: list[dict[str, Any]] = field(default_factory=list)

    def paths(self) -> list[str]:
        """Hook calls' paths (a discovery the controller runs meanwhile left out)."""
        return [p for p, _, _ in self.calls if not p.endswith("/discovery")]

    def calls_for(self, cluster: str) -> list[tuple[str, str, dict[str, Any]]]:
        """The calls of requests about `cluster`: the envtest is shared, and the operator's topology controller calls
        BeforeClusterCreate for other tests' Clusters through a handler selecting every namespace."""
        return [c for c in self.calls if ((c[2].get("cluster") or {}).get("metadata") or {}).get("name") == cluster]


def handler(name: str, hook: str, **kw: Any) -> dict[str, Any]:
    return {"name": name, "requestHook": {"apiVersion": rh.API_VERSION, "hook": hook}, **kw}


@pytest.fixture
async def extension() -> AsyncIterator[Extension]:
    ca = servingcert.new_webhook_ca()
    cert = servingcert.new_serving_cert(ca, ["127.0.0.1"])
    ext = Extension("", ca.cert, handlers=[
        handler("create", "BeforeClusterCreate", timeoutSeconds=5),
        handler("create-too", "BeforeClusterCreate", failurePolicy="Ignore"),
        handler("after-init", "AfterControlPlaneInitialized"),
    ])

    async def serve(request: web.Request) -> web.Response:
        body = await request.json()
        ext.calls.append((request.path, request.query.get("timeout", ""), body))
        if request.path.endswith("/discovery"):
            return web.json_response(rh.response(rh.DISCOVERY, handlers=ext.handlers))
        answer = ext.answers.get(request.path, {"status": "Success"})
        if isinstance(answer, int):
            return web.Response(status=answer, text="down")
        return web.json_response(answer)

    app = web.Application()
    app.router.add_post("/{tail:.*}", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(cert.cert, cert.key))
    await site.start()
    ext.url = f"https://127.0.0.1:{runner.addresses[0][1]}/prefix"
    try:
        yield ext
    finally:
        await runner.cleanup()


@pytest.fixture
async def operator(envtest: EnvTest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Operator]:
    monkeypatch.setenv("CAPD_PY_FEATURE_GATES", "RuntimeSDK=true")
    try:
        async with in_process_operator(envtest, workloads="none") as op:
            yield op
    finally:
        # the envtest is shared: an ExtensionConfig left behind (a failed test) would fail the next warm-up
        k = envtest.kube()
        try:
            for ec in await k.list(EXTENSION_CONFIG):
                await k.delete(EXTENSION_CONFIG, None, ec["metadata"]["name"])
        finally:
            k.close()


def ec_manifest(name: str, ext: Extension, ca: bool = True, **spec: Any) -> dict[str, Any]:
    client: dict[str, Any] = {"url": ext.url}
    if ca:
        client["caBundle"] = base64.b64encode(ext.ca).decode()
    return {"apiVersion": EXTENSION_CONFIG.api_version, "kind": "ExtensionConfig", "metadata": {"name": name},
            "spec": {"clientConfig": client, "namespaceSelector": {}, **spec}}


async def discovered(kube: Kube, name: str, status: str = "True", timeout: float = 30) -> dict[str, Any]:
    got: dict[str, Any] = {}

    async def check() -> bool:
        obj = await kube.get(EXTENSION_CONFIG, None, name)
        c = cond.get(obj or {}, "Discovered")
        got["obj"] = obj
        return bool(c and c["status"] == status)
    await eventually(check, timeout, f"ExtensionConfig {name} Discovered={status}", state=lambda: _ret(got))
    return dict(got["obj"])


async def _ret(x: Any) -> Any:
    return x


async def registered(sdk: RuntimeSDKService, hook: str, name: str) -> bool:
    try:
        return name in sdk.registered(hook)
    except RuntimeSDKError:  # not warmed up yet
        return False


def service_of(op: Operator) -> RuntimeSDKService:
    sdk = op.manager.ctx.runtime_sdk
    assert isinstance(sdk, RuntimeSDKService), "the RuntimeSDK gate wires the service"
    return sdk


async def test_discovery_registration_and_calls(operator: Operator, kube: Kube, extension: Extension,
                                                namespace: str) -> None:
    name = f"ext-{secrets.token_hex(3)}"
    await kube.create(EXTENSION_CONFIG, ec_manifest(name, extension, settings={"from": "config", "both": "config"}))
    obj = await discovered(kube, name)
    assert [h["name"] for h in obj["status"]["handlers"]] == [f"create.{name}", f"create-too.{name}",
                                                             f"after-init.{name}"]
    assert obj["status"]["handlers"][0] == {
        "name": f"create.{name}", "requestHook": {"apiVersion": rh.API_VERSION, "hook": "BeforeClusterCreate"},
        "timeoutSeconds": 5, "failurePolicy": "Fail"}
    assert cond.get(obj, "Paused")["status"] == "False"  # type: ignore[index]
    assert extension.calls[0][0] == "/prefix/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"

    sdk = service_of(operator)
    await eventually(lambda: registered(sdk, "BeforeClusterCreate", f"create.{name}"), 30, "the handlers registered")
    # a service of the test's own loop over the operator's registry (the client's sessions belong to a loop)
    mine = RuntimeSDKService(kube, registry=sdk.registry)
    try:
        extension.calls.clear()
        base = "/prefix/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclustercreate"
        extension.answers[f"{base}/create"] = rh.response(rh.BEFORE_CLUSTER_CREATE, message="wait",
                                                          retryAfterSeconds=20)
        extension.answers[f"{base}/create-too"] = rh.response(rh.BEFORE_CLUSTER_CREATE, message="soon",
                                                              retryAfterSeconds=7)
        request = rh.request(rh.BEFORE_CLUSTER_CREATE, {"cluster": {"metadata": {"name": f"c-{name}"}},
                                                        "settings": {"both": "request"}})
        result = await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, namespace)
        assert (result.status, result.retry_after_seconds) == ("Success", 7)
        assert sorted(result.message.split(", ")) == ["soon", "wait"]  # joined in call order
        mine_calls = extension.calls_for(f"c-{name}")
        assert sorted(p for p, _, _ in mine_calls) == [f"{base}/create", f"{base}/create-too"]  # each once
        path, timeout, body = next(c for c in mine_calls if c[0].endswith("/create"))
        assert timeout == "5s"  # the handler's timeoutSeconds, as upstream's ?timeout=
        assert body["kind"] == "BeforeClusterCreateRequest" and body["apiVersion"] == rh.API_VERSION
        assert body["settings"] == {"from": "config", "both": "request"}  # the request's own settings win

        # failurePolicy Ignore forgives an unreachable handler, never a Failure answer
        extension.answers[f"{base}/create-too"] = 503
        assert (await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, namespace)).retry_after_seconds == 20
        extension.answers[f"{base}/create-too"] = rh.response(rh.BEFORE_CLUSTER_CREATE, "Failure", "no")
        with pytest.raises(RuntimeSDKError, match=f'failed to call extension handler "create-too.{name}": got '
                                                  "failure response"):
            await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, namespace)
        # failurePolicy Fail: an unreachable handler fails the call
        extension.answers[f"{base}/create-too"] = rh.response(rh.BEFORE_CLUSTER_CREATE)
        extension.answers[f"{base}/create"] = 500
        with pytest.raises(RuntimeSDKError, match="got response with status code 500"):
            await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, namespace)

        # one handler by name; a handler of another hook is refused
        answer = await mine.call(f"after-init.{name}", rh.AFTER_CONTROL_PLANE_INITIALIZED,
                                 rh.request(rh.AFTER_CONTROL_PLANE_INITIALIZED), namespace)
        assert answer["status"] == "Success"
        with pytest.raises(RuntimeSDKError, match="handler does not match GroupHook"):
            await mine.call(f"after-init.{name}", rh.BEFORE_CLUSTER_CREATE, request, namespace)
    finally:
        await mine.close()
        await kube.delete(EXTENSION_CONFIG, None, name)
    async def gone() -> bool:
        return not await registered(sdk, "BeforeClusterCreate", f"create.{name}")
    await eventually(gone, 30, "a deleted ExtensionConfig's handlers unregistered")


async def test_namespace_selector_reads_the_namespaces_labels(operator: Operator, kube: Kube, extension: Extension,
                                                               namespace: str) -> None:
    name = f"sel-{secrets.token_hex(3)}"
    await kube.create(EXTENSION_CONFIG, ec_manifest(name, extension) | {"spec": {
        **ec_manifest(name, extension)["spec"], "namespaceSelector": {"matchLabels": {"rsdk": name}}}})
    await discovered(kube, name)
    sdk = service_of(operator)
    await eventually(lambda: registered(sdk, "BeforeClusterCreate", f"create.{name}"), 30, "registered")
    mine = RuntimeSDKService(operator.manager.ctx.kube, registry=sdk.registry)  # namespaces from the cache

    async def cached() -> bool:  # the fixture made the namespace just before: the watch brings it a moment later
        return await operator.manager.ctx.kube.get(NAMESPACE, None, namespace) is not None
    await eventually(cached, 30, "the test's namespace in the operator's cache")
    request = rh.request(rh.BEFORE_CLUSTER_CREATE)
    try:
        extension.calls.clear()
        await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, namespace)
        assert not [p for p in extension.paths() if p.endswith("/create")], "not selected: not called"
        with pytest.raises(RuntimeSDKError, match="namespaceSelector did not match"):
            await mine.call(f"create.{name}", rh.BEFORE_CLUSTER_CREATE, request, namespace)
        await kube.merge_patch(NAMESPACE, None, namespace, {"metadata": {"labels": {"rsdk": name}}})

        async def selected() -> bool:
            extension.calls.clear()
            await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, namespace)
            return any(p.endswith("/create") for p in extension.paths())
        await eventually(selected, 30, "the labelled namespace selected (its labels read from the cache)")
        with pytest.raises(RuntimeSDKError, match="failed to get namespace no-such-namespace"):
            await mine.call_all(rh.BEFORE_CLUSTER_CREATE, request, "no-such-namespace")
    finally:
        await mine.close()
        await kube.delete(EXTENSION_CONFIG, None, name)


async def test_failed_discovery_then_ca_injected_from_a_secret(operator: Operator, kube: Kube, extension: Extension,
                                                               namespace: str) -> None:
    name = f"ca-{secrets.token_hex(3)}"
    manifest = ec_manifest(name, extension, ca=False)
    manifest["metadata"]["annotations"] = {rh.INJECT_CA_FROM_SECRET_ANNOTATION: f"{namespace}/ext-ca"}
    await kube.create(EXTENSION_CONFIG, manifest)
    # no Secret yet: nothing written, as upstream (the CA cannot be injected); then a Secret without ca.crt
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ext-ca",
                                                                                 "namespace": namespace},
                               "data": {"tls.crt": base64.b64encode(b"x").decode()}})
    await asyncio.sleep(0)
    obj = await kube.get(EXTENSION_CONFIG, None, name)
    assert obj is not None and "caBundle" not in obj["spec"]["clientConfig"]
    await kube.merge_patch(SECRET, namespace, "ext-ca", {"data": {"ca.crt": base64.b64encode(extension.ca).decode()}})
    obj = await discovered(kube, name)  # the Secret's change reached the ExtensionConfig
    assert base64.b64decode(obj["spec"]["clientConfig"]["caBundle"]) == extension.ca
    c = cond.get(obj, "Discovered")
    assert c is not None and c["observedGeneration"] == obj["metadata"]["generation"]

    # an answer discovery refuses: Discovered=False NotDiscovered, the handlers found before kept
    extension.handlers.append(handler("Bad_Name", "BeforeClusterCreate"))
    await kube.merge_patch(EXTENSION_CONFIG, None, name, {"spec": {"settings": {"poke": "1"}}})
    obj = await discovered(kube, name, "False")
    c = cond.get(obj, "Discovered")
    assert c is not None and c["reason"] == "NotDiscovered"
    assert c["message"].startswith(f'Error in discovery: failed to discover extension "{name}": failed to validate '
                                   "discovery response: handler name Bad_Name is not valid")
    assert len(obj["status"]["handlers"]) == 3
    await kube.delete(EXTENSION_CONFIG, None, name)


async def test_an_unreachable_extension_is_not_discovered(operator: Operator, kube: Kube,
                                                          extension: Extension) -> None:
    name = f"down-{secrets.token_hex(3)}"
    manifest = ec_manifest(name, extension)
    manifest["spec"]["clientConfig"]["url"] = "https://127.0.0.1:1/nothing"
    await kube.create(EXTENSION_CONFIG, manifest)
    obj = await discovered(kube, name, "False")
    assert "http call failed" in cond.get(obj, "Discovered")["message"]  # type: ignore[index]
    assert "handlers" not in obj.get("status", {})
    await kube.delete(EXTENSION_CONFIG, None, name)
