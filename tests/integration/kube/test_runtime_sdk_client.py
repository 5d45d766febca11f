"""The runtime client against a real local HTTPS extension server (aiohttp, a CA of the test's own): TLS verified
against the caBundle, the timeout bounding a call, and every way a call can fail to produce an answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from capd_py.kube.conversion_webhook import server_ssl_context
from capd_py.kube.runtime_sdk_client import HandlerUnreachable, RuntimeClient
from capd_py.reconcile import servingcert

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


@dataclass
class Server:
    base: str
    ca: bytes
    seen: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    ca = servingcert.new_webhook_ca()
    cert = servingcert.new_serving_cert(ca, ["127.0.0.1"])
    holder: dict[str, Server] = {}

    async def ok(request: web.Request) -> web.Response:
        holder["s"].seen.append((request.path, request.query.get("timeout", ""), await request.json()))
        return web.json_response({"status": "Success", "echo": request.path})

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(5)
        return web.json_response({"status": "Success"})

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500, text="boom")

    async def garbage(request: web.Request) -> web.Response:
        return web.Response(status=200, text="not json")

    app = web.Application()
    app.router.add_post("/ok", ok)
    app.router.add_post("/slow", slow)
    app.router.add_post("/broken", broken)
    app.router.add_post("/garbage", garbage)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl_context(cert.cert, cert.key))
    await site.start()
    port = runner.addresses[0][1]
    holder["s"] = Server(f"https://127.0.0.1:{port}", ca.cert)
    try:
        yield holder["s"]
    finally:
        await runner.cleanup()


async def test_post_verifies_tls_with_the_ca_bundle_and_sends_the_timeout(server: Server) -> None:
    client = RuntimeClient()
    try:
        got = await client.post(f"{server.base}/ok", {"kind": "X"}, 7, server.ca)
        assert got == {"status": "Success", "echo": "/ok"}
        assert server.seen == [("/ok", "7s", {"kind": "X"})]  # upstream's ?timeout=<duration>
        # without the caBundle, the system's CAs do not know the test's CA
        with pytest.raises(HandlerUnreachable, match="http call failed: Post .*certificate verify failed"):
            await client.post(f"{server.base}/ok", {}, 5)
        other = servingcert.new_webhook_ca()
        with pytest.raises(HandlerUnreachable, match="certificate verify failed"):
            await client.post(f"{server.base}/ok", {}, 5, other.cert)
    finally:
        await client.close()


async def test_every_failure_to_answer_is_handler_unreachable(server: Server) -> None:
    client = RuntimeClient()
    try:
        with pytest.raises(HandlerUnreachable, match="http request timeout expired"):
            await client.post(f"{server.base}/slow", {}, 1, server.ca)
        with pytest.raises(HandlerUnreachable, match=r'got response with status code 500 != 200: response: "boom"'):
            await client.post(f"{server.base}/broken", {}, 5, server.ca)
        with pytest.raises(HandlerUnreachable, match="failed to decode response"):
            await client.post(f"{server.base}/garbage", {}, 5, server.ca)
        with pytest.raises(HandlerUnreachable, match="http call failed"):
            await client.post("https://127.0.0.1:1/nothing", {}, 5, server.ca)
        with pytest.raises(HandlerUnreachable, match="failed to create tls config"):
            await client.post(f"{server.base}/ok", {}, 5, b"not a pem")
    finally:
        await client.close()


