"""The kit's real HTTPS server: called over TLS, verifying the serving certificate against the CA the kit made (as
the core does with the ExtensionConfig's caBundle); and `capd-py extension serve` as its own process."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from capd_py.api import runtime_hooks
from capd_py.runtime_extension import Extension, ExtensionServer, serve

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
ROOT = Path(__file__).resolve().parents[3]


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())  # only this CA; hostname checked
    return context


async def post(url: str, ca_pem: bytes, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(
            url, data=json.dumps(body) if not isinstance(body, bytes) else body,
            headers={"Content-Type": "application/json"}, ssl=client_context(ca_pem)) as resp:
        text = await resp.text()
        return resp.status, json.loads(text) if resp.content_type == "application/json" else text


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[ExtensionServer]:
    ext = Extension(name="it")

    @ext.handler("BeforeClusterCreate", "gate", timeout_seconds=3, failure_policy="Ignore")
    async def gate(request: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"retryAfterSeconds": 2, "message": f"waiting for {request['cluster']['metadata']['name']}"}

    @ext.handler("ValidateTopology", "refuse")
    def refuse(_: dict[str, Any]) -> None:
        raise ValueError("topology refused")

    srv = await serve(ext, "127.0.0.1", 0, cert_dir=tmp_path / "certs")
    try:
        yield srv
    finally:
        await srv.stop()


async def test_discovery_and_handlers_over_tls_with_the_ca_the_kit_made(server: ExtensionServer) -> None:
    ca = server.certs.ca_pem
    status, discovery = await post(server.url + runtime_hooks.path("Discovery"), ca,
                                   {"apiVersion": API, "kind": "DiscoveryRequest"})
    assert status == 200
    assert discovery == {"apiVersion": API, "kind": "DiscoveryResponse", "status": "Success", "handlers": [
        {"name": "gate", "requestHook": {"apiVersion": API, "hook": "BeforeClusterCreate"}, "timeoutSeconds": 3,
         "failurePolicy": "Ignore"},
        {"name": "refuse", "requestHook": {"apiVersion": API, "hook": "ValidateTopology"}}]}
    status, answer = await post(server.url + runtime_hooks.path("BeforeClusterCreate", "gate"), ca, {
        "apiVersion": API, "kind": "BeforeClusterCreateRequest", "cluster": {"metadata": {"name": "c1"}}})
    assert (status, answer) == (200, {"apiVersion": API, "kind": "BeforeClusterCreateResponse", "status": "Success",
                                      "message": "waiting for c1", "retryAfterSeconds": 2})
    status, refused = await post(server.url + runtime_hooks.path("ValidateTopology", "refuse"), ca, {})
    assert (status, refused["status"], refused["message"]) == (200, "Failure", "topology refused")
    status, bad = await post(server.url + runtime_hooks.path("ValidateTopology", "refuse"), ca, b"{oops")
    assert status == 200 and bad["message"].startswith("error unmarshalling request")
    status, _ = await post(server.url + runtime_hooks.path("BeforeClusterCreate", "other"), ca, {})
    assert status == 404


async def test_a_client_trusting_another_ca_is_refused(server: ExtensionServer, tmp_path: Path) -> None:
    from capd_py.runtime_extension import ensure_certs
    other = ensure_certs(tmp_path / "other")
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await post(server.url + runtime_hooks.path("Discovery"), other.ca_pem, {})


async def test_capd_py_extension_serve_runs_the_test_extension_until_sigterm(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CAPD_PY_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "capd_py.cli", "extension", "serve", "capd_py.testing.test_extension:extension",
         "--address", "127.0.0.1", "--port", "0", "--cert-dir", str(tmp_path / "certs")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        assert proc.stderr is not None
        url = None
        for _ in range(200):  # the line comes once it listens; the read blocks until then
            line = proc.stderr.readline()
            if not line:
                break
            m = re.search(r"serving \d+ handler\(s\) on (https://[^\s:/]+:\d+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "no serving line on stderr"
        ca = (tmp_path / "certs" / "ca.crt").read_bytes()
        status, discovery = await post(url + runtime_hooks.path("Discovery"), ca, {})
        assert status == 200 and len(discovery["handlers"]) == 13
        status, patches = await post(url + runtime_hooks.path("GeneratePatches", "generate-patches"), ca, {
            "items": [{"uid": "u", "holderReference": {"apiVersion": "cluster.x-k8s.io/v1beta2"},
                       "object": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                  "kind": "DockerClusterTemplate", "spec": {"template": {"spec": {}}}},
                       "variables": [{"name": "imageRepository", "value": "kindest"}]}]})
        assert patches["status"] == "Success" and patches["items"][0]["uid"] == "u"
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert out == ""  # progress only on stderr
