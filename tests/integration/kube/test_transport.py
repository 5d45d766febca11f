"""The aiohttp transport against a local HTTP server: 429 answers are retried after Retry-After, other
answers pass through, and one Kube serves several event loops."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import kubernetes.client
import pytest
from aiohttp import web

from capd_py.kube.client import Kube, KubeError

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


@pytest.fixture
def server() -> Iterator[tuple[str, list[str]]]:
    """A server whose /busy answers 429 twice, then 200; /missing answers 404."""
    seen: list[str] = []
    busy = {"left": 2}

    async def handle(req: web.Request) -> web.Response:
        seen.append(req.path)
        if req.path == "/busy" and busy["left"] > 0:
            busy["left"] -= 1
            return web.json_response({"kind": "Status", "reason": "TooManyRequests",
                                      "message": "storage is (re)initializing"}, status=429,
                                     headers={"Retry-After": "1"})
        if req.path == "/missing":
            return web.json_response({"kind": "Status", "reason": "NotFound", "message": "gone"}, status=404)
        return web.json_response({"ok": True})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{port}", seen
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
        loop.close()


def _kube(host: str) -> Kube:
    cfg = kubernetes.client.Configuration()
    cfg.host = host
    return Kube(kubernetes.client.ApiClient(cfg))


def test_429_is_retried_after_retry_after_and_errors_pass_through(server: tuple[str, list[str]]) -> None:
    host, seen = server
    kube = _kube(host)

    async def main() -> None:
        assert await kube.acall("GET", "/busy") == {"ok": True}
        with pytest.raises(KubeError) as e:
            await kube.acall("GET", "/missing")
        assert e.value.not_found and e.value.message == "gone"
    asyncio.run(main())
    assert seen.count("/busy") == 3
    # a second event loop gets a session of its own
    assert asyncio.run(kube.acall("GET", "/other")) == {"ok": True}
    kube.close()


def test_closing_after_the_loop_ended_leaves_no_unclosed_session(server: tuple[str, list[str]],
                                                                recwarn: pytest.WarningsRecorder) -> None:
    import gc
    # what earlier tests of this worker left for the collector is theirs, not this test's: collected first
    gc.collect()
    recwarn.clear()
    host, _ = server
    kube = _kube(host)
    assert asyncio.run(kube.acall("GET", "/x")) == {"ok": True}
    sessions = list(kube._transport._sessions.values()) if kube._transport else []
    kube.close()
    assert sessions and all(s.closed for s in sessions)
    del sessions
    gc.collect()
    assert not [w for w in recwarn if "Unclosed" in str(w.message)]
