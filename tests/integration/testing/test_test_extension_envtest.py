"""The test extension against a real API server (envtest), called over HTTPS as the core calls it: the hook-responses
ConfigMap is created when missing, answers come from its preloaded responses, calls are recorded in it, and the
e2e's unblocking patch lets a blocking hook through."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from capd_py.api import runtime_hooks
from capd_py.api.gvk import CONFIG_MAP
from capd_py.kube.client import Kube
from capd_py.runtime_extension import ExtensionServer, serve
from capd_py.testing import test_extension as te

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
BLOCKING = {"extensionConfigName": "ext", "defaultAllHandlersToBlocking": "true"}


@pytest.fixture
async def server(kube: Kube, tmp_path: Path) -> AsyncIterator[ExtensionServer]:
    srv = await serve(te.new_extension(kube), "127.0.0.1", 0, cert_dir=tmp_path)
    try:
        yield srv
    finally:
        await srv.stop()


async def call(server: ExtensionServer, hook: str, handler: str, namespace: str, settings: dict[str, str],
               **fields: Any) -> dict[str, Any]:
    body = {"apiVersion": API, "kind": f"{hook}Request", "settings": settings,
            "cluster": {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                        "metadata": {"name": "c1", "namespace": namespace}}, **fields}
    context = ssl.create_default_context(cadata=server.certs.ca_pem.decode())
    async with aiohttp.ClientSession() as session, session.post(
            server.url + runtime_hooks.path(hook, handler), data=json.dumps(body), ssl=context) as resp:
        assert resp.status == 200
        out: dict[str, Any] = await resp.json()
        return out


async def hook_data(kube: Kube, namespace: str) -> dict[str, str]:
    cm = await kube.get(CONFIG_MAP, namespace, te.config_map_name("c1", "ext"))
    assert cm is not None, "the hook-responses ConfigMap exists"
    return dict(cm.get("data") or {})


async def test_blocking_by_default_then_unblocked_by_the_e2e_patch(server: ExtensionServer, kube: Kube,
                                                                   namespace: str) -> None:
    assert await kube.get(CONFIG_MAP, namespace, te.config_map_name("c1", "ext")) is None
    out = await call(server, "BeforeClusterCreate", "before-cluster-create", namespace, BLOCKING)
    assert (out["status"], out["retryAfterSeconds"]) == ("Success", 5)
    assert await hook_data(kube, namespace) == {
        "BeforeClusterCreate-actualResponseStatus": "Status: Success, RetryAfterSeconds: 5"}
    # upstream's runtimeHookTestHandler: a merge patch of the preloaded response
    await kube.merge_patch(CONFIG_MAP, namespace, te.config_map_name("c1", "ext"), {
        "data": {"BeforeClusterCreate-preloadedResponse": '{"Status": "Success"}'}})
    out = await call(server, "BeforeClusterCreate", "before-cluster-create", namespace, BLOCKING)
    assert (out["status"], out["retryAfterSeconds"]) == ("Success", 0)
    assert (await hook_data(kube, namespace))["BeforeClusterCreate-actualResponseStatus"] == (
        "Status: Success, RetryAfterSeconds: 0")


async def test_upgrade_hooks_record_per_version_and_a_preloaded_failure_is_answered(
        server: ExtensionServer, kube: Kube, namespace: str) -> None:
    await kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": te.config_map_name("c1", "ext"), "namespace": namespace},
                                   "data": {"AfterControlPlaneUpgrade-v1.35.4-preloadedResponse":
                                            '{"Status": "Failure", "Message": "hold on"}'}})
    settings = {"extensionConfigName": "ext"}
    out = await call(server, "BeforeClusterUpgrade", "before-cluster-upgrade", namespace, settings,
                     fromKubernetesVersion="v1.34.4", toKubernetesVersion="v1.35.4")
    assert (out["status"], out["retryAfterSeconds"]) == ("Success", 0)
    out = await call(server, "AfterControlPlaneUpgrade", "after-control-plane-upgrade", namespace, settings,
                     kubernetesVersion="v1.35.4")
    assert (out["status"], out["message"]) == ("Failure", "hold on")
    out = await call(server, "AfterControlPlaneInitialized", "after-control-plane-initialized", namespace, settings)
    assert out == {"apiVersion": API, "kind": "AfterControlPlaneInitializedResponse", "status": "Success"}
    data = await hook_data(kube, namespace)
    assert data["BeforeClusterUpgrade-v1.34.4-v1.35.4-actualResponseStatus"] == "Status: Success, RetryAfterSeconds: 0"
    assert data["AfterControlPlaneUpgrade-v1.35.4-actualResponseStatus"] == "Status: Failure, RetryAfterSeconds: 0"
    assert data["AfterControlPlaneInitialized-actualResponseStatus"] == "Success"


async def test_a_namespace_that_does_not_exist_is_the_api_servers_message(server: ExtensionServer) -> None:
    out = await call(server, "BeforeClusterDelete", "before-cluster-delete", "no-such-namespace",
                     {"extensionConfigName": "ext"})
    assert out["status"] == "Failure"
    assert out["message"] == (f"failed to create the ConfigMap no-such-namespace/{te.config_map_name('c1', 'ext')}: "
                              'namespaces "no-such-namespace" not found')


async def test_serve_test_extension_gives_the_server_and_its_extension_config(kube: Kube, namespace: str,
                                                                              tmp_path: Path) -> None:
    server, config = await te.serve_test_extension(kube, "127.0.0.1", cert_dir=tmp_path, name="e2e-ext",
                                                   namespaces=(namespace,))
    try:
        assert config["metadata"]["name"] == "e2e-ext"
        assert config["spec"]["clientConfig"]["url"] == server.url
        assert config["spec"]["settings"] == {"extensionConfigName": "e2e-ext", "disableInPlaceUpdates": "true",
                                              "defaultAllHandlersToBlocking": "true"}
        assert config["spec"]["namespaceSelector"]["matchExpressions"][0]["values"] == [namespace]
        out = await call(server, "BeforeClusterDelete", "before-cluster-delete", namespace,
                         config["spec"]["settings"])
        assert (out["status"], out["retryAfterSeconds"]) == ("Success", 5)
        cm = await kube.get(CONFIG_MAP, namespace, te.config_map_name("c1", "e2e-ext"))
        assert cm is not None and cm["data"] == {
            "BeforeClusterDelete-actualResponseStatus": "Status: Success, RetryAfterSeconds: 5"}
    finally:
        await server.stop()
