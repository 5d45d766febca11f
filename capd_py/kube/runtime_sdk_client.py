"""HTTPS calls to Runtime SDK extension servers (upstream internal/runtime/client's httpCall): a hook request
POSTed as JSON, the JSON answer back. aiohttp on the calling loop, one session per loop (as kube/transport.py);
TLS verified against the ExtensionConfig's caBundle (the system's CAs when it has none), the host name checked.

No retries, as upstream makes none: a failed call is the caller's to judge (failurePolicy), and the reconcile that
made it runs again. An error reaching the handler (connection, TLS, timeout, a non-200 answer, a body that is not
a JSON object) is `HandlerUnreachable` (upstream's errCallingExtensionHandler: the one kind failurePolicy Ignore
forgives)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import ssl
from collections.abc import Mapping
from typing import Any

import aiohttp

from capd_py.api import godur


class HandlerUnreachable(Exception):
    """The call did not produce an answer (upstream errCallingExtensionHandler); the message says why."""


class RuntimeClient:
    """Posts hook requests. State: an aiohttp session per event loop and an ssl context per caBundle."""

    def __init__(self) -> None:
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        s = self._sessions.get(loop)
        if s is None or s.closed:
            for old in [lp for lp in self._sessions if lp.is_closed()]:
                self._sessions.pop(old)
            s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=32))
            self._sessions[loop] = s
        return s

    def ssl_context(self, ca_pem: bytes) -> ssl.SSLContext:
        """Verifies the server against `ca_pem` (the system's CAs when empty); one context per bundle."""
        key = hashlib.sha256(ca_pem).hexdigest()
        ctx = self._contexts.get(key)
        if ctx is None:
            try:
                ctx = ssl.create_default_context(cadata=ca_pem.decode()) if ca_pem else ssl.create_default_context()
            except (ssl.SSLError, ValueError, UnicodeDecodeError) as e:
                raise HandlerUnreachable(f"failed to create tls config: caBundle: {e}") from e
            self._contexts[key] = ctx
        return ctx

    async def post(self, url: str, body: Mapping[str, Any], timeout_seconds: float, ca_pem: bytes = b""
                   ) -> dict[str, Any]:
        """POST `body` to `url` (with `?timeout=<d>` as upstream adds), bounded by `timeout_seconds`; the decoded
        JSON object answered with 200. HandlerUnreachable otherwise."""
        context = self.ssl_context(ca_pem)
        params = {"timeout": godur.format_seconds(int(timeout_seconds))} if timeout_seconds else None
        try:
            async with asyncio.timeout(timeout_seconds or None):
                async with self._session().post(url, data=json.dumps(body).encode(), params=params, ssl=context,
                                                headers={"Content-Type": "application/json",
                                                         "Accept": "application/json"}) as r:
                    data = await r.read()
                    status = r.status
        except TimeoutError as e:
            raise HandlerUnreachable(f"http call failed: Post \"{url}\": http request timeout expired") from e
        except (aiohttp.ClientError, OSError, ssl.SSLError) as e:
            raise HandlerUnreachable(f"http call failed: Post \"{url}\": {e}") from e
        if status != 200:
            raise HandlerUnreachable(f"http call failed: got response with status code {status} != 200: response: "
                                     f"{json.dumps(data.decode(errors='replace'))}")
        try:
            answer = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise HandlerUnreachable(f"http call failed: failed to decode response: {e}") from e
        if not isinstance(answer, dict):
            raise HandlerUnreachable("http call failed: failed to decode response: not a JSON object")
        return answer

    async def close(self) -> None:
        for s in list(self._sessions.values()):
            if not s.closed:
                await s.close()
        self._sessions.clear()
