"""HTTP to one API server on the running event loop, with aiohttp (the library kopf's watches already use).

The `kubernetes` package's client is synchronous: every call went through a worker thread, its
serialisation layer and urllib3, and thread hand-offs plus GIL contention cost the controllers more CPU
than their own decisions. Here a call is one request on a keep-alive connection of the calling loop.
Credentials come from the same `kubernetes.client.Configuration` the synchronous client uses (kubeconfig
or in-cluster service account), so both talk to the API server identically.

An aiohttp session belongs to one event loop; a Kube may be used from several (tests, the CLI), so there
is one session per loop, and sessions of loops that have since closed are dropped.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import kubernetes.client
from tenacity import AsyncRetrying, RetryCallState, retry_if_result, stop_after_delay

RETRY_429_SECONDS = 30.0


class Unreachable(OSError):
    """The API server did not answer: connection refused or reset, DNS, TLS handshake, timeout. One type for
    "cannot reach it" (an OSError, as the socket errors it stands for), so callers catch it, not Exception."""

    def __init__(self, host: str, cause: BaseException):
        super().__init__(f"{host}: {cause.__class__.__name__}: {cause or 'no answer'}")
        self.host, self.cause = host, cause


CONNECTION_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, OSError, ssl.SSLError)


class StreamError(Exception):
    """A streamed request's non-2xx answer (the client turns it into its KubeError)."""

    def __init__(self, status: int, reason: str, data: bytes):
        super().__init__(f"{status} {reason}")
        self.status, self.reason, self.data = status, reason, data


def ssl_context(cfg: kubernetes.client.Configuration) -> ssl.SSLContext | bool:
    if not str(cfg.host).startswith("https"):
        return False
    if not cfg.verify_ssl:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if cfg.assert_hostname is False:
            ctx.check_hostname = False
    if cfg.cert_file:
        ctx.load_cert_chain(cfg.cert_file, cfg.key_file or None)
    return ctx


class AioTransport:
    def __init__(self, cfg: kubernetes.client.Configuration, limit: int = 64):
        self._cfg = cfg
        self._host = str(cfg.host).rstrip("/")
        self._ssl = ssl_context(cfg)
        self._limit = limit
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}
        self._basic = aiohttp.BasicAuth(cfg.username, cfg.password or "") if cfg.username else None

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        s = self._sessions.get(loop)
        if s is None or s.closed:
            for old in [lp for lp in self._sessions if lp.is_closed()]:
                gone = self._sessions.pop(old).connector
                if gone is not None:
                    _abort(gone)  # marks it closed: no "Unclosed client session" when it is collected
            s = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=self._ssl, limit=self._limit),
                                      auth=self._basic)
            self._sessions[loop] = s
        return s

    def _headers(self, content_type: str | None, has_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if content_type or has_body:
            headers["Content-Type"] = content_type or "application/json"
        # evaluated per call: in-cluster tokens are refreshed by the configuration's hook
        auth: dict[str, Any] = dict(self._cfg.auth_settings())
        for a in auth.values():
            if a.get("in") == "header" and a.get("value"):
                headers[str(a["key"])] = str(a["value"])
        return headers

    async def request(self, method: str, path: str, body: Any = None, query: Iterable[tuple[str, Any]] = (),
                      content_type: str | None = None, timeout: float = 30) -> tuple[int, str, bytes]:
        """(status, reason, body bytes) of one request; connection errors raise `Unreachable`.
        A 429 (the API server's "storage is (re)initializing", priority-and-fairness throttling) is retried
        after the Retry-After it names, as client-go does, up to RETRY_429_SECONDS in all."""
        params = [(k, _param(v)) for k, v in query]
        data = json.dumps(body).encode() if body is not None else None
        headers = self._headers(content_type, data is not None)

        async def once() -> tuple[int, str, bytes, float]:
            try:
                async with self._session().request(method, self._host + path, params=params or None, data=data,
                                                   headers=headers, timeout=aiohttp.ClientTimeout(total=timeout)) as r:
                    return r.status, r.reason or "", await r.read(), _retry_after(r)
            except Unreachable:
                raise
            except CONNECTION_ERRORS as e:
                raise Unreachable(self._host, e) from e
        answer: tuple[int, str, bytes, float] = await AsyncRetrying(
            retry=retry_if_result(lambda a: a[0] == 429), wait=_wait_retry_after,
            stop=stop_after_delay(RETRY_429_SECONDS), retry_error_callback=_last)(once)
        return answer[0], answer[1], answer[2]

    async def lines(self, path: str, query: Iterable[tuple[str, Any]] = (),
                    timeout: float = 330) -> AsyncIterator[bytes]:
        """The lines of one streamed GET (a watch), as they arrive; a non-2xx answer raises
        `StreamError` with its status and body. `timeout` bounds the whole stream (the caller asks the API
        server to end it sooner with timeoutSeconds)."""
        params = [(k, _param(v)) for k, v in query]
        try:
            async with self._session().get(self._host + path, params=params or None,
                                           headers=self._headers(None, False),
                                           timeout=aiohttp.ClientTimeout(total=timeout, sock_connect=5)) as r:
                if not 200 <= r.status <= 299:
                    raise StreamError(r.status, r.reason or "", await r.read())
                async for line in r.content:
                    if line.strip():
                        yield line
        except (Unreachable, StreamError):
            raise
        except CONNECTION_ERRORS as e:
            raise Unreachable(self._host, e) from e

    def close(self) -> None:
        """Close every loop's connections, from synchronous code (WorkloadClients dropping a stale client,
        the end of a CLI command). aiohttp's public close is a coroutine, which a stopped loop would never
        run; the connector's synchronous part aborts the sockets at once, which is all a client needs."""
        sessions, self._sessions = self._sessions, {}
        for loop, s in sessions.items():
            conn = s.connector
            if s.closed or conn is None:
                continue
            if loop.is_closed():  # asyncio.run() has returned: its sockets are gone, mark the session closed
                _abort(conn)
                continue
            try:
                running = asyncio.get_running_loop()
            except RuntimeError:
                running = None
            if running is not loop and loop.is_running():
                loop.call_soon_threadsafe(_abort, conn)
            else:
                _abort(conn)


def _retry_after(resp: aiohttp.ClientResponse) -> float:
    try:
        return min(max(float(resp.headers.get("Retry-After", "1")), 0.1), 5.0)
    except ValueError:
        return 1.0


def _wait_retry_after(rs: RetryCallState) -> float:
    return float(rs.outcome.result()[3]) if rs.outcome and not rs.outcome.failed else 1.0


def _last(rs: RetryCallState) -> Any:
    """Out of time: hand back the last 429 answer (the caller turns it into a KubeError)."""
    return rs.outcome.result() if rs.outcome else (429, "TooManyRequests", b"", 0.0)


def _abort(conn: aiohttp.BaseConnector) -> None:
    conn._close(abort_ssl=True)


def _param(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
