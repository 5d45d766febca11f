"""The extension's HTTPS server (aiohttp): POST at each handler's path and at the discovery path, JSON in and out,
on the serving certificate of certs.ensure_certs. One server per Extension; `serve` returns once it listens."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from capd_py.api import runtime_hooks
from capd_py.api.runtime_hooks import DISCOVERY
from capd_py.kube.conversion_webhook import server_ssl_context, start_https
from capd_py.runtime_extension.certs import ServingCerts, default_cert_dir, ensure_certs
from capd_py.runtime_extension.extension import Extension

log = logging.getLogger(__name__)

DEFAULT_PORT = 9443  # upstream's runtime extension server default
HEALTH_PATH = "/healthz"
# GeneratePatches carries every template of a Cluster; the core sends objects of up to a few MiB each
MAX_REQUEST_BYTES = 64 * 1024 * 1024


def app(extension: Extension) -> web.Application:
    """The routes of `extension` as registered now (discovery first, then each handler)."""
    async def answer(request: web.Request) -> web.Response:
        out = await extension.call(request.path, await request.read())
        if out is None:  # routes are exact; unreachable unless a registration went away
            raise web.HTTPNotFound()
        return web.json_response(out)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    application = web.Application(client_max_size=MAX_REQUEST_BYTES)
    application.router.add_post(runtime_hooks.path(DISCOVERY.name), answer)
    for reg in extension.registrations:
        application.router.add_post(reg.path, answer)
    application.router.add_get(HEALTH_PATH, healthz)
    return application


@dataclass
class ExtensionServer:
    runner: web.AppRunner
    host: str
    port: int
    certs: ServingCerts

    @property
    def url(self) -> str:
        """The URL for an ExtensionConfig's clientConfig.url (the server's root)."""
        host = "127.0.0.1" if self.host in ("", "0.0.0.0") else "::1" if self.host == "::" else self.host
        return f"https://[{host}]:{self.port}" if ":" in host else f"https://{host}:{self.port}"

    async def stop(self) -> None:
        if self.runner.server is not None:  # idempotent
            await self.runner.cleanup()


def certificate_hosts(address: str, extra: Sequence[str] = ()) -> list[str]:
    """What the serving certificate names: `extra` (the hosts the core dials), and the bound address when it is a
    specific one (localhost and 127.0.0.1 are always added by ensure_certs)."""
    hosts = list(extra)
    try:
        if not ipaddress.ip_address(address).is_unspecified:
            hosts.append(address)
    except ValueError:
        if address:
            hosts.append(address)
    return hosts


async def serve(extension: Extension, address: str = "0.0.0.0", port: int = DEFAULT_PORT,
                cert_dir: Path | str | None = None, hosts: Sequence[str] = (),
                certs: ServingCerts | None = None) -> ExtensionServer:
    """Listen on address:port (0: a free port, see ExtensionServer.port) with `certs`, or the certificates of
    `cert_dir` (default ~/.capd-py/runtime-extension-certs) made or completed for `hosts`."""
    if certs is None:
        certs = ensure_certs(cert_dir or default_cert_dir(), certificate_hosts(address, hosts))
    runner, bound = await start_https(app(extension), address or None, port,
                                      server_ssl_context(certs.cert_pem, certs.key_pem))
    server = ExtensionServer(runner, address, bound, certs)
    log.info("runtime extension %s serving %d handler(s) on %s", extension.name or "(unnamed)",
             len(extension.registrations), server.url)
    return server
