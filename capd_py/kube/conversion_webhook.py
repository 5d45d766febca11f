"""The conversion webhook: an HTTPS server answering the API server's ConversionReviews for the CRDs served
in v1beta1 and v1beta2 (the conversion itself is capd_py.api.conversion, pure), and the CRD changes that
point the API server at it. How the API server reaches it in host and in-cluster mode: docs/conversion.md."""

from __future__ import annotations

import base64
import copy
import json
import logging
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web

from capd_py.api.conversion import ConversionError
from capd_py.api.conversion.review import review
from capd_py.kube.crds import load_crds

log = logging.getLogger(__name__)

CONVERT_PATH = "/convert"
HEALTH_PATH = "/healthz"
# Upstream release-1.13's v1beta1 schemas, one file per CRD file name (hack/vendor_upstream_v1beta1.py).
V1BETA1_SCHEMAS = Path(__file__).resolve().parent / "crds_v1beta1"
# A ConversionReview of a large LIST can be big; the API server sends up to 3 MiB objects each.
MAX_REQUEST_BYTES = 64 * 1024 * 1024


async def _convert(request: web.Request) -> web.Response:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return web.json_response({"message": f"not JSON: {exc}"}, status=400)
    try:
        answer = review(body)
    except ConversionError as exc:
        return web.json_response({"message": str(exc)}, status=400)
    response = answer["response"]
    if response["result"]["status"] != "Success":
        log.warning("conversion to %s failed: %s", body["request"].get("desiredAPIVersion"),
                    response["result"].get("message"))
    return web.json_response(answer)


async def _healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def app() -> web.Application:
    application = web.Application(client_max_size=MAX_REQUEST_BYTES)
    application.router.add_post(CONVERT_PATH, _convert)
    application.router.add_get(HEALTH_PATH, _healthz)
    return application


def server_ssl_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A TLS server context from PEM bytes (ssl only loads files: they live in a private temp dir briefly)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with tempfile.TemporaryDirectory(prefix="capd-py-webhook-") as d:
        cert, key = Path(d) / "tls.crt", Path(d) / "tls.key"
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key)
    return context


@dataclass
class WebhookServer:
    """The running server; `port` is the one bound (ask for 0 to get a free one)."""

    runner: web.AppRunner
    host: str
    port: int

    async def stop(self) -> None:
        if self.runner.server is not None:  # idempotent
            await self.runner.cleanup()


async def serve(host: str, port: int, cert_pem: bytes, key_pem: bytes, reuse_port: bool = False
                ) -> WebhookServer:
    """Listen on host:port. `reuse_port` (SO_REUSEPORT) lets several processes on one network namespace share the
    port, e.g. two hostNetwork controller replicas on the single management node; the kernel spreads
    connections between them, and either answers (conversion is stateless)."""
    runner = web.AppRunner(app(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=server_ssl_context(cert_pem, key_pem), reuse_port=reuse_port)
    await site.start()
    bound = int(runner.addresses[0][1]) if runner.addresses else port
    log.info("conversion webhook listening on https://%s:%d%s", host, bound, CONVERT_PATH)
    return WebhookServer(runner, host, bound)


def webhook_conversion(ca_pem: bytes, *, url: str | None = None, service: dict[str, Any] | None = None
                       ) -> dict[str, Any]:
    """A CRD's spec.conversion for this webhook: by URL (host mode) or by Service (in-cluster mode)."""
    if (url is None) == (service is None):
        raise ValueError("exactly one of url and service")
    client: dict[str, Any] = {"caBundle": base64.b64encode(ca_pem).decode()}
    if url is not None:
        client["url"] = url
    else:
        client["service"] = {**(service or {}), "path": CONVERT_PATH}
    return {"strategy": "Webhook",
            "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client}}


def with_v1beta1(crd: dict[str, Any], v1beta1_schema: dict[str, Any], conversion: dict[str, Any]
                 ) -> dict[str, Any]:
    """The CRD serving v1beta1 too (not stored; v1beta2 stays the storage version), converted by the webhook.
    The v1beta1 version copies the v1beta2 one's subresources and printer columns."""
    out = copy.deepcopy(crd)
    versions = [v for v in out["spec"]["versions"] if v["name"] != "v1beta1"]
    hub = next(v for v in versions if v["name"] == "v1beta2")
    spoke: dict[str, Any] = {"name": "v1beta1", "served": True, "storage": False,
                             "schema": {"openAPIV3Schema": copy.deepcopy(v1beta1_schema)}}
    for key in ("subresources", "additionalPrinterColumns"):
        if key in hub:
            spoke[key] = copy.deepcopy(hub[key])
    spoke["deprecated"] = True
    spoke["deprecationWarning"] = (f"{out['spec']['group']}/v1beta1 {out['spec']['names']['kind']} is deprecated; "
                                   "use v1beta2")
    out["spec"]["versions"] = [*versions, spoke]
    out["spec"]["conversion"] = conversion
    return out


def v1beta1_schema(crd: dict[str, Any], directory: Path = V1BETA1_SCHEMAS) -> dict[str, Any]:
    """Upstream's v1beta1 openAPIV3Schema for this CRD (files are named as crds/: <group>_<plural>.yaml)."""
    path = directory / f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"
    return yaml.safe_load(path.read_text())["openAPIV3Schema"]  # type: ignore[no-any-return]


def crds_serving_v1beta1(conversion: dict[str, Any], crds: list[dict[str, Any]] | None = None
                         ) -> list[dict[str, Any]]:
    """Every capd-py CRD (or `crds`) serving v1beta1 too, converted by the webhook `conversion` names
    (webhook_conversion(...)); install them with capd_py.kube.crds.install_crds(kube, crds=...)."""
    return [with_v1beta1(crd, v1beta1_schema(crd), conversion) for crd in (crds if crds is not None else load_crds())]
