"""The conversion webhook: an HTTPS server answering the API server's ConversionReviews for the CRDs served
in v1beta1 and v1beta2 (the conversion itself is capd_py.api.conversion, pure), the CRD changes that
point the API server at it, its serving certificate's Secret, and `run_webhook`, what every controllers process
runs. How the API server reaches it in host and in-cluster mode: docs/conversion.md."""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import json
import logging
import re
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from capd_py.api import kubeyaml
from capd_py.api.conversion import ConversionError, spoke_version
from capd_py.api.conversion.review import review
from capd_py.api.gvk import CRD, GVK, SECRET
from capd_py.kube import admission_webhook
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.crds import load_crds
from capd_py.reconcile import servingcert
from capd_py.reconcile.servingcert import WebhookCert

log = logging.getLogger(__name__)

CONVERT_PATH = "/convert"
HEALTH_PATH = "/healthz"
# Upstream release-1.13's v1beta1 schemas (ExtensionConfig: v1alpha1), one file per CRD file name
# (hack/vendor_upstream_v1beta1.py).
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


def app(kube: Kube | None = None) -> web.Application:
    """Conversion at CONVERT_PATH, admission (defaulting and validating, capd_py.kube.admission_webhook) at its
    paths; `kube` reads the KubeadmControlPlane a scale request names (upstream's scale webhook)."""
    application = web.Application(client_max_size=MAX_REQUEST_BYTES)
    application.router.add_post(CONVERT_PATH, _convert)
    admission_webhook.add_routes(application, kube)
    application.router.add_get(HEALTH_PATH, _healthz)
    return application


def server_ssl_context(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A TLS server context from PEM bytes (ssl only loads files: they live in a private temp dir briefly)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_chain(context, cert_pem, key_pem)
    return context


def _load_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="capd-py-webhook-") as d:
        cert, key = Path(d) / "tls.crt", Path(d) / "tls.key"
        cert.write_bytes(cert_pem)
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        context.load_cert_chain(cert, key)


@dataclass
class WebhookServer:
    """The running server; `port` is the one bound (ask for 0 to get a free one)."""

    runner: web.AppRunner
    host: str
    port: int
    context: ssl.SSLContext | None = None
    reuse_port: bool = False

    async def stop(self) -> None:
        if self.runner.server is not None:  # idempotent
            await self.runner.cleanup()

    def reload(self, cert_pem: bytes, key_pem: bytes) -> None:
        """A new serving certificate for the next TLS handshakes (the listening socket and open connections stay:
        an in-process restart left the API server's keep-alive connections on the old server, docs/conversion.md)."""
        if self.context is not None:
            _load_chain(self.context, cert_pem, key_pem)


async def start_https(application: web.Application, host: str | None, port: int, context: ssl.SSLContext,
                      reuse_port: bool = False) -> tuple[web.AppRunner, int]:
    """`application` served over HTTPS on host:port (0: a free port); (its runner, the port bound)."""
    runner = web.AppRunner(application, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=context, reuse_port=reuse_port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner, int(runner.addresses[0][1]) if runner.addresses else port


async def serve(host: str, port: int, cert_pem: bytes, key_pem: bytes, reuse_port: bool = False,
                kube: Kube | None = None) -> WebhookServer:
    """Listen on host:port. `reuse_port` (SO_REUSEPORT) lets several processes on one network namespace share the
    port, e.g. two hostNetwork controller replicas on the single management node; the kernel spreads
    connections between them, and either answers (conversion is stateless)."""
    context = server_ssl_context(cert_pem, key_pem)
    runner, bound = await start_https(app(kube), host, port, context, reuse_port)
    log.info("conversion webhook listening on https://%s:%d%s", host, bound, CONVERT_PATH)
    return WebhookServer(runner, host, bound, context, reuse_port)


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


def with_v1beta1(crd: dict[str, Any], v1beta1_schema: dict[str, Any], conversion: dict[str, Any],
                 served: dict[str, Any] | None = None) -> dict[str, Any]:
    """The CRD serving v1beta1 too (not stored; v1beta2 stays the storage version), converted by the webhook.
    `served`: upstream's `subresources` and `additionalPrinterColumns` of that version (a vendored file,
    v1beta1_served); without it the v1beta1 version copies the v1beta2 one's. (ExtensionConfig: v1alpha1,
    upstream's older version of the runtime group, `spoke_version`.)"""
    out = copy.deepcopy(crd)
    name = spoke_version(out["spec"]["group"], out["spec"]["names"]["kind"])
    versions = [v for v in out["spec"]["versions"] if v["name"] != name]
    hub = next(v for v in versions if v["name"] == "v1beta2")
    spoke: dict[str, Any] = {"name": name, "served": True, "storage": False,
                             "schema": {"openAPIV3Schema": copy.deepcopy(v1beta1_schema)}}
    for key in ("subresources", "additionalPrinterColumns"):
        value = (served or {}).get(key) if served is not None else hub.get(key)
        if value:
            spoke[key] = copy.deepcopy(value)
    spoke["deprecated"] = True
    spoke["deprecationWarning"] = (f"{out['spec']['group']}/{name} {out['spec']['names']['kind']} is deprecated; "
                                   "use v1beta2")
    out["spec"]["versions"] = [*versions, spoke]
    out["spec"]["conversion"] = conversion
    return out


# capd-py's admission rules (CEL in the v1beta2 schema, hack/gen_crds.py) that a v1beta1 write must pass too: the
# API server validates a write against the schema of the version it was sent in only. Copied from the v1beta2
# schema at these paths, where v1beta1 has the same field (same messages, the version range from one source).
# A rule naming a field v1beta1 lacks there is left out (it would not compile).
V1BETA1_RULE_PATHS: dict[str, tuple[str, ...]] = {
    "Cluster": ("spec", "spec.topology.version"),
    "Machine": ("spec.clusterName", "spec.version"),
    "MachineSet": ("spec.clusterName", "spec.replicas", "spec.template.spec.version"),
    "MachineDeployment": ("spec.clusterName", "spec.replicas", "spec.template.spec.version"),
    "MachinePool": ("spec.clusterName", "spec.replicas", "spec.template.spec.version"),
    "MachineHealthCheck": ("spec.clusterName",),
    "KubeadmControlPlane": ("spec.replicas", "spec.version", "spec.kubeadmConfigSpec.clusterConfiguration"),
    "DockerMachine": ("spec",),
    "DockerMachineTemplate": ("spec.template.spec",),
    "DockerClusterTemplate": ("spec.template.spec",),
    "DevMachineTemplate": ("spec.template.spec",),
    "DevClusterTemplate": ("spec.template.spec",),
    "ClusterResourceSet": ("spec.clusterSelector", "spec.strategy"),
    "ClusterResourceSetBinding": ("spec.clusterName",),
    "MachineDrainRule": ("spec.drain",),
}
_SELF_FIELD = re.compile(r"\b(?:self|oldSelf)\.([A-Za-z_][A-Za-z0-9_]*)\b(?!\s*\()")  # fields, not methods


def _at(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in path.split("."):
        node = ((node or {}).get("properties") or {}).get(part)
        if node is None:
            return None
    return node


def with_capd_rules(kind: str, hub_schema: dict[str, Any], v1beta1: dict[str, Any]) -> dict[str, Any]:
    """`v1beta1` (upstream's schema) with capd-py's rules for versions, immutable fields and replicas
    (V1BETA1_RULE_PATHS) copied from the v1beta2 schema `hub_schema`."""
    out = copy.deepcopy(v1beta1)
    for path in V1BETA1_RULE_PATHS.get(kind, ()):
        source, target = _at(hub_schema, path), _at(out, path)
        if source is None or target is None or target.get("type") != source.get("type"):
            continue
        fields = set(target.get("properties") or {})
        existing = {r.get("rule") for r in target.get("x-kubernetes-validations") or []}
        for r in source.get("x-kubernetes-validations") or []:
            if r["rule"] in existing or not set(_SELF_FIELD.findall(r["rule"])) <= fields:
                continue
            target.setdefault("x-kubernetes-validations", []).append(copy.deepcopy(r))
    return out


def _v1beta1_path(crd: dict[str, Any], directory: Path = V1BETA1_SCHEMAS) -> Path:
    return directory / f"{crd['spec']['group']}_{crd['spec']['names']['plural']}.yaml"


def v1beta1_served(crd: dict[str, Any], directory: Path = V1BETA1_SCHEMAS) -> dict[str, Any]:
    """Upstream's v1beta1 version of this CRD as vendored (files are named as crds/: <group>_<plural>.yaml):
    `openAPIV3Schema`, `subresources`, `additionalPrinterColumns`."""
    path = _v1beta1_path(crd, directory)
    return kubeyaml.load(path.read_text())  # type: ignore[no-any-return]


def v1beta1_schema(crd: dict[str, Any], directory: Path = V1BETA1_SCHEMAS) -> dict[str, Any]:
    """Upstream's v1beta1 openAPIV3Schema for this CRD."""
    return v1beta1_served(crd, directory)["openAPIV3Schema"]  # type: ignore[no-any-return]


def crds_serving_v1beta1(conversion: dict[str, Any], crds: list[dict[str, Any]] | None = None
                         ) -> list[dict[str, Any]]:
    """Every capd-py CRD (or `crds`) serving v1beta1 too, converted by the webhook `conversion` names
    (webhook_conversion(...)); install them with capd_py.kube.crds.install_crds(kube, crds=...)."""
    out = []
    for crd in (crds if crds is not None else load_crds()):
        # DevMachinePool(Template): upstream v1.14 serves them at v1beta2 only (no vendored file)
        if not _v1beta1_path(crd).exists():
            out.append(crd)
            continue
        hub = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")["schema"]["openAPIV3Schema"]
        served = v1beta1_served(crd)
        schema = with_capd_rules(crd["spec"]["names"]["kind"], hub, served["openAPIV3Schema"])
        out.append(with_v1beta1(crd, schema, conversion, served))
    return out


# -- the serving certificate's Secret and the CRDs' caBundle (I/O; the decisions are reconcile/servingcert.py) --

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
# The CRD whose spec.conversion says how every capd-py CRD is converted: one of the provider whose components carry
# the controllers (reconcile/components.py), so its Service reference is where clusterctl put the controllers' Service
# (every other provider's CRDs name their own namespace after `clusterctl init`, and the controllers fix them).
REFERENCE_CRD = "dockerclusters.infrastructure.cluster.x-k8s.io"


def _conflict(e: BaseException) -> bool:
    return isinstance(e, KubeError) and e.conflict


async def ensure_cert(kube: Kube, hosts: tuple[str, ...] | list[str],
                      namespace: str = servingcert.SECRET_NAMESPACE) -> WebhookCert:
    """The Secret `namespace`/capd-py-webhook-cert (the Endpoint's secret_namespace), created (CA + serving
    certificate) when missing, its serving certificate re-issued when it misses a host or expires within 30 days, a
    new CA when the CA is unusable.
    Several replicas may do this at once: writes carry the resourceVersion read, a conflict means reading again
    (five reads at most; the last conflict is raised)."""
    async for attempt in AsyncRetrying(retry=retry_if_exception(_conflict), stop=stop_after_attempt(5),
                                       reraise=True):
        with attempt:
            return await _ensure_cert_once(kube, hosts, namespace)
    raise AssertionError("unreachable: AsyncRetrying returns or raises")


async def _ensure_cert_once(kube: Kube, hosts: tuple[str, ...] | list[str], namespace: str) -> WebhookCert:
    secret = await kube.get(SECRET, namespace, servingcert.SECRET_NAME)
    current = WebhookCert.from_secret(secret)
    desired = servingcert.desired_webhook_cert(current, hosts)
    if desired is None and current is not None:
        return current
    assert desired is not None
    if secret is None:
        await _create_secret(kube, desired, namespace)
        log.info("created the conversion webhook's CA and serving certificate for %s", ", ".join(hosts))
    else:
        await kube.replace(SECRET, servingcert.secret_manifest(desired, secret["metadata"]["resourceVersion"],
                                                               namespace))
        log.info("re-issued the conversion webhook's serving certificate for %s%s", ", ".join(hosts),
                 " (new CA)" if current is None or desired.ca != current.ca else "")
    return desired


async def _create_secret(kube: Kube, cert: WebhookCert, namespace: str) -> None:
    try:
        await kube.create(SECRET, servingcert.secret_manifest(cert, namespace=namespace))
    except KubeError as e:
        if not e.not_found:
            raise
        try:
            await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace",
                                          "metadata": {"name": namespace}})
        except KubeError as ns_error:
            if not ns_error.conflict:
                raise
        await kube.create(SECRET, servingcert.secret_manifest(cert, namespace=namespace))


async def served_conversion(kube: Kube) -> dict[str, Any] | None:
    """spec.conversion of capd-py's CRDs on the server (None when they are not installed)."""
    crd = await kube.get(CRD, None, REFERENCE_CRD)
    return None if crd is None else dict(crd["spec"].get("conversion") or {})


@functools.cache
def _crd_names() -> list[str]:
    """capd-py's CRD names (the packaged manifests parsed once per process: run_webhook asks every few minutes)."""
    return [str(c["metadata"]["name"]) for c in load_crds()]


async def ensure_ca_bundle(kube: Kube, ca_pem: bytes, names: list[str] | None = None,
                           service: dict[str, Any] | None = None) -> list[str]:
    """Every capd-py CRD converted by a webhook trusts `ca_pem` and, with `service` (the Service REFERENCE_CRD
    names), names that Service (servingcert.client_config_patch: clusterctl moves the reference into each provider's
    namespace); returns the CRDs patched."""
    wanted = names if names is not None else _crd_names()
    patched: list[str] = []
    for name in wanted:
        crd = await kube.get(CRD, None, name)
        patch = servingcert.client_config_patch(((crd or {}).get("spec") or {}).get("conversion"), ca_pem, service)
        if crd is None or patch is None:
            continue
        await kube.merge_patch(CRD, None, name, patch)
        patched.append(name)
    if patched:
        log.info("conversion webhook caBundle/Service updated in %d CRD(s)", len(patched))
    return patched


RECHECK_EVERY = 10  # run_webhook's refreshes between passes over every CRD and webhook configuration


async def run_webhook(kube: Kube, bind: str | None = None, refresh_seconds: float = 60.0,
                      ready: asyncio.Event | None = None) -> None:
    """What every controllers process runs (leader or not: conversion is stateless and a standby must answer
    during a failover), until cancelled: serve the webhook the CRDs point at (servingcert.endpoint; nothing while
    they are not converted by a webhook), with the certificate from the Secret, re-issued when needed; every
    `refresh_seconds` read both again, reload a changed certificate and keep the CRDs' caBundle current (every
    CRD and webhook configuration at start, when REFERENCE_CRD's CA differs, and every RECHECK_EVERY refreshes: CRDs
    installed later, e.g. by `clusterctl init` of another capd-py provider, get theirs).
    `ready` is set once a server listens."""
    server: WebhookServer | None = None
    served: WebhookCert | None = None
    checked_all = False
    passes = 0
    try:
        while True:
            passes += 1
            if passes % RECHECK_EVERY == 0:
                checked_all = False
            try:
                conversion = await served_conversion(kube)
                ep = servingcert.endpoint(conversion, bind)
                if ep is None:
                    if server is not None:
                        await server.stop()
                        server, served = None, None
                else:
                    cert = await ensure_cert(kube, ep.hosts, ep.secret_namespace)
                    if not checked_all or servingcert.ca_bundle_of(conversion) != cert.ca.cert:
                        service = (((conversion or {}).get("webhook") or {}).get("clientConfig") or {}).get("service")
                        await ensure_ca_bundle(kube, cert.ca.cert, service=service)
                        await admission_webhook.ensure_ca_bundle(kube, cert.ca.cert)
                        checked_all = True
                    if server is not None and (server.host, server.port, server.reuse_port) != (
                            ep.bind, ep.port, ep.reuse_port):
                        await server.stop()
                        server = None
                    if server is None:
                        server = await serve(ep.bind, ep.port, cert.serving.cert, cert.serving.key,
                                             reuse_port=ep.reuse_port, kube=kube)
                    elif served != cert:
                        server.reload(cert.serving.cert, cert.serving.key)
                        log.info("conversion webhook serves its new certificate")
                    served = cert
                    if ready is not None:
                        ready.set()
                delay = refresh_seconds
            except (KubeError, OSError, ssl.SSLError, aiohttp.ClientError) as e:
                log.error("conversion webhook: %s; retrying in 5s", e)
                delay = min(5.0, refresh_seconds)
            await asyncio.sleep(delay)
    finally:
        if server is not None:
            await server.stop()
