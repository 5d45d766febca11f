"""The in-memory workload clusters over HTTPS (an adapter: what a request returns is decided by
capd_py/reconcile/inmemory_api.py and done by the cluster's store, capd_py/kube/inmemory_api.py `InMemoryAPI`).

As upstream v1.14's `WorkloadClustersMux` (test/infrastructure/inmemory/pkg/server/mux.go): one HTTP server for every
in-memory cluster of the controllers process, a listening socket per cluster on a port from a range (default
20000-30000, handed out in order) at one host (the controllers' address: `POD_IP` in a pod, else 127.0.0.1), the
cluster told apart by the port a connection came in on. The port is given when the DevCluster is first reconciled
(its `spec.controlPlaneEndpoint`); here the port is also bound then (not listened on), so no other process takes it
before the cluster's first API server starts. The socket listens, with a serving certificate signed by the
cluster's CA (the `<cluster>-ca` Secret; names: localhost, 127.0.0.1, ::1 and the host, as upstream), once a
control-plane machine's kube-apiserver Pod exists, and stops when the last one goes; the port is given back when the
DevCluster is deleted. The `<cluster>-kubeconfig` Secret then works with kubectl.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import ipaddress
import json
import logging
import socket
from dataclasses import replace
from typing import Any

from aiohttp import web

from capd_py.api import kubeyaml
from capd_py.kube.client import KubeError
from capd_py.kube.conversion_webhook import server_ssl_context
from capd_py.kube.inmemory_api import InMemoryAPI, InMemoryClusters
from capd_py.reconcile import inmemory_api
from capd_py.reconcile.certs import KeyPair, new_key_pem
from capd_py.reconcile.servingcert import new_serving_cert

log = logging.getLogger("capd_py.inmemory.server")

Key = tuple[str, str]
DEFAULT_WATCH_SECONDS = 120.0  # upstream's watch timeout when the client names none
# watch parameters the list under a watch does not take
_WATCH_ONLY = {"watch", "resourceVersion", "resourceVersionMatch", "allowWatchBookmarks", "timeoutSeconds",
               "sendInitialEvents", "limit", "continue"}


def _bind(host: str, port: int, reuse: bool = False) -> socket.socket:
    """A TCP socket bound to host:port, not listening yet (so the port is ours, and connecting is refused).

    Without SO_REUSEADDR, so the port is ours alone: Linux lets two sockets that both set it bind one port while
    neither listens, and two controllers processes on one host both took the range's first port (the second failed
    at listen; measured 2026-12-06 with two test workers). `reuse`: with it, for a port that must be this one (a
    cluster's endpoint after a restart) which connections of the earlier process may still hold in TIME_WAIT."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        if reuse:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def _bind_given(host: str, port: int) -> socket.socket:
    """The given port: alone if it can be, else beside the TIME_WAIT connections of an earlier process."""
    try:
        return _bind(host, port)
    except OSError:
        return _bind(host, port, reuse=True)


class InMemoryServer:
    """The listeners of one controllers process's in-memory clusters (their stores are in `clusters`)."""

    def __init__(self, clusters: InMemoryClusters, host: str, ports: range = inmemory_api.DEFAULT_PORTS):
        self.clusters, self.host, self.ports = clusters, host, ports
        self._next = ports.start
        self._ports: dict[Key, int] = {}
        self._by_port: dict[int, Key] = {}
        self._reserved: dict[Key, socket.socket] = {}
        self._sites: dict[Key, web.SockSite] = {}
        self._watches: dict[Key, set[asyncio.Queue[tuple[str, str, dict[str, Any]] | None]]] = {}
        self._runner: web.AppRunner | None = None
        self._key_pem: bytes | None = None   # one key for every serving certificate (upstream: the same)
        self._key_future: asyncio.Future[bytes] | None = None
        self._lock = asyncio.Lock()

    # -- ports ----------------------------------------------------------------------------------------------------
    def port(self, namespace: str, cluster: str) -> int | None:
        return self._ports.get((namespace, cluster))

    def assign(self, namespace: str, cluster: str, port: int | None = None) -> int:
        """The cluster's port: `port` (its endpoint's, after a restart) or the next free one of the range; bound at
        once. OSError when `port` cannot be bound or the range has none left."""
        key = (namespace, cluster)
        if key in self._ports:
            return self._ports[key]
        if port is not None:
            self._reserved[key] = _bind_given(self.host, port)
        else:
            tried: set[int] = set()
            while True:
                p = inmemory_api.next_port(self.ports, set(self._by_port) | tried, self._next)
                if p is None:
                    raise OSError(f"no free port left in {self.ports.start}-{self.ports.stop - 1} on {self.host}")
                try:
                    self._reserved[key] = _bind(self.host, p)
                except OSError:  # another process has it (upstream does not check: a TODO there)
                    tried.add(p)
                    continue
                port, self._next = p, p + 1
                break
        self._ports[key], self._by_port[port] = port, key
        if self._key_future is None and self._key_pem is None:
            # the key (~0.1-0.3 s of CPU) is made now, off the loop, so the first API server does not wait for it
            with contextlib.suppress(RuntimeError):  # no running loop: serve makes it
                self._key_future = asyncio.get_running_loop().run_in_executor(None, new_key_pem)
        return port

    def serving(self, namespace: str, cluster: str) -> bool:
        return (namespace, cluster) in self._sites

    async def serve(self, namespace: str, cluster: str, ca: KeyPair) -> None:
        """Listen on the cluster's port with a serving certificate signed by `ca` (no-op when listening)."""
        key = (namespace, cluster)
        async with self._lock:
            if key in self._sites:
                return
            port = self._ports.get(key)
            if port is None:
                raise KeyError(f"{namespace}/{cluster}: no port assigned")
            if self._runner is None:
                app = web.Application()
                app.router.add_route("*", "/{tail:.*}", self._handle)
                self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
                await self._runner.setup()
            if self._key_pem is None:
                self._key_pem = await (self._key_future or asyncio.to_thread(new_key_pem))
            cert = new_serving_cert(ca, inmemory_api.serving_hosts(self.host), key_pem=self._key_pem)
            sock = self._reserved.pop(key, None) or _bind_given(self.host, port)
            site = web.SockSite(self._runner, sock, ssl_context=server_ssl_context(cert.cert, cert.key))
            await site.start()
            self._sites[key] = site
            log.info("%s/%s: in-memory API server at https://%s", namespace, cluster, self.address(port))

    def address(self, port: int) -> str:
        try:
            v6 = ipaddress.ip_address(self.host).version == 6
        except ValueError:
            v6 = False
        return f"[{self.host}]:{port}" if v6 else f"{self.host}:{port}"

    async def stop(self, namespace: str, cluster: str) -> None:
        """Stop listening (the cluster has no API server left); the port stays the cluster's."""
        key = (namespace, cluster)
        async with self._lock:
            site = self._sites.pop(key, None)
            for q in self._watches.pop(key, set()):
                q.put_nowait(None)
            if site is not None:
                await site.stop()
                log.info("%s/%s: in-memory API server stopped", namespace, cluster)

    async def release(self, namespace: str, cluster: str) -> None:
        """The cluster is gone: stop listening and give its port back."""
        await self.stop(namespace, cluster)
        key = (namespace, cluster)
        sock = self._reserved.pop(key, None)
        if sock is not None:
            sock.close()
        port = self._ports.pop(key, None)
        if port is not None:
            self._by_port.pop(port, None)

    async def close(self) -> None:
        for key in list(self._ports):
            await self.release(*key)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- requests -------------------------------------------------------------------------------------------------
    def _cluster_of(self, request: web.Request) -> tuple[Key, InMemoryAPI] | None:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        key = self._by_port.get(int(sockname[1])) if sockname else None
        api = self.clusters.get(*key) if key else None
        return (key, api) if key and api else None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        found = self._cluster_of(request)
        if found is None:
            return _json(inmemory_api.status(503, "ServiceUnavailable", "no in-memory cluster on this port"))
        key, api = found
        query = {k: v for k, v in request.query.items()}
        what = inmemory_api.route(request.method, request.path, query, api.version)
        if isinstance(what, inmemory_api.Answer):
            return _json(what)
        tables = inmemory_api.wants_table(request.headers.get("Accept", ""))
        if what.verb == "watch":
            return await self._watch(request, key, api, what, query, tables)
        body: Any = None
        refused = inmemory_api.unreadable(request.headers.get("Content-Type", "")) if request.can_read_body else None
        if refused is not None:
            return _json(refused)
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = kubeyaml.load(raw)  # a server-side apply body may be YAML
        try:
            out = api.call(request.method, what.path, body, list(query.items()),
                           content_type=request.content_type)
        except KubeError as e:
            return _json(inmemory_api.Answer(e.status, e.body or inmemory_api.status(e.status, e.reason,
                                                                                      e.message).body))
        if tables and what.verb in ("get", "list"):
            return _json(inmemory_api.Answer(200, inmemory_api.table(what, out, _dt.datetime.now(_dt.UTC))))
        return _json(inmemory_api.Answer(201 if what.verb == "create" else 200, inmemory_api.typed(what, out)))

    async def _watch(self, request: web.Request, key: Key, api: InMemoryAPI, what: inmemory_api.Request,
                     query: dict[str, str], tables: bool) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[tuple[str, str, dict[str, Any]] | None] = asyncio.Queue()

        def tell(resource: str, kind: str, obj: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(events.put_nowait, (resource, kind, obj))

        list_query = [(k, v) for k, v in query.items() if k not in _WATCH_ONLY]
        api.watchers.append(tell)  # before the list: nothing written in between is missed
        self._watches.setdefault(key, set()).add(events)
        try:
            try:
                listed = api.call("GET", what.path, None, list_query)
            except KubeError as e:
                return _json(inmemory_api.Answer(e.status, e.body))
            after = int(listed["metadata"]["resourceVersion"])
            resp = web.StreamResponse(headers={"Content-Type": inmemory_api.JSON})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            as_table = replace(what, verb="get")

            async def send(event: dict[str, Any]) -> None:
                if tables and event["type"] != "BOOKMARK":
                    event = {**event, "object": inmemory_api.table(as_table, event["object"],
                                                                   _dt.datetime.now(_dt.UTC))}
                await resp.write(json.dumps(event).encode() + b"\n")

            for event in inmemory_api.initial_events(what, listed, query.get("resourceVersion", "")):
                if event["type"] != "BOOKMARK" or query.get("allowWatchBookmarks") == "true":
                    await send(event)
            timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_SECONDS)
            with contextlib.suppress(asyncio.TimeoutError, ConnectionResetError):
                async with asyncio.timeout(timeout):
                    while (item := await events.get()) is not None:
                        seen = inmemory_api.watch_event(what, query, *item, after=after)
                        if seen is not None:
                            await send(seen)
            return resp
        finally:
            with contextlib.suppress(ValueError):
                api.watchers.remove(tell)
            self._watches.get(key, set()).discard(events)


def _json(answer: inmemory_api.Answer) -> web.Response:
    if isinstance(answer.body, str):
        return web.Response(status=answer.status, text=answer.body)
    return web.json_response(answer.body, status=answer.status)
