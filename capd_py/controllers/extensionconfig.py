"""ExtensionConfig controller (upstream internal/controllers/extensionconfig; RuntimeSDK feature gate): inject the
caBundle the `runtime.cluster.x-k8s.io/inject-ca-from-secret` annotation names, call the extension's Discovery
hook, write `status.handlers` and the `Discovered` condition, and register the handlers in the Runtime SDK service's
registry (`ctx.runtime_sdk`), from which hook calls find them.

At the start (after the cache is primed, before hook calls are answered) `warm_up` discovers every ExtensionConfig
and fills the registry at once; until it did, reconciles wait and hook calls fail ("not warmed up"), as upstream's.
No finalizer, as upstream: a deleted ExtensionConfig is unregistered when it is gone from the cache (the
registry is memory only). Paused (the `cluster.x-k8s.io/paused` annotation) stops discovery; its handlers stay
registered."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from capd_py.api.gvk import EXTENSION_CONFIG, NAMESPACE, SECRET
from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller
from capd_py.controllers.queue import Result
from capd_py.controllers.services.runtime_sdk import RuntimeSDKService
from capd_py.controllers.skeleton import Kind, Outcome, Subject, run
from capd_py.kube.cache import Reader
from capd_py.reconcile.runtime_sdk import extensionconfig as rec

Obj = dict[str, Any]
# while the registry is cold (upstream: RequeueAfter 10 s)
NOT_READY_REQUEUE = 10.0
# after a failed discovery or CA injection (upstream returns the error: the work queue's backoff)
FAILED_REQUEUE = 10.0
OWNED = (rec.DISCOVERED,)
WARMUP_INTERVAL, WARMUP_TIMEOUT = 2.0, 60.0


def _service(ctx: Ctx) -> RuntimeSDKService | None:
    sdk = ctx.runtime_sdk
    return sdk if isinstance(sdk, RuntimeSDKService) else None


async def inject_ca(ctx: Ctx, ec: Obj) -> Obj:
    """The ExtensionConfig with the caBundle its annotation asks for (written when it changed: a spec patch, so the
    generation moves before the condition records it). CABundleError when the Secret cannot give one."""
    ref = rec.ca_secret(ec)
    if ref is None:
        return ec
    secret = await ctx.kube.get(SECRET, ref.namespace, ref.name)
    bundle = rec.ca_bundle(ref, secret)
    if ((ec.get("spec") or {}).get("clientConfig") or {}).get("caBundle") == bundle:
        return ec
    ctx.log.info("extensionconfig %s: caBundle injected from Secret %s", ec["metadata"]["name"], ref)
    return await ctx.kube.merge_patch(EXTENSION_CONFIG, None, ec["metadata"]["name"],
                                      {"spec": {"clientConfig": {"caBundle": bundle}}})


async def discover(ctx: Ctx, sdk: RuntimeSDKService, ec: Obj) -> tuple[Obj, Obj, str | None]:
    """(the ExtensionConfig after CA injection, its status after discovery, the error if discovery failed).
    A CA that cannot be injected is raised (nothing is written, as upstream)."""
    ec = await inject_ca(ctx, ec)
    try:
        handlers: list[dict[str, Any]] | None = await sdk.discover(ec)
        error = None
    except RuntimeSDKError as e:
        handlers, error = None, str(e)
    return ec, rec.discovered_status(ec, handlers, error), error


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    sdk = _service(ctx)
    if sdk is None:
        return Outcome()
    if not sdk.ready:
        return Outcome(requeue_after=NOT_READY_REQUEUE)
    try:
        ec, status, error = await discover(ctx, sdk, sub.obj)
    except rec.CABundleError as e:
        ctx.log.warning("extensionconfig %s: %s", sub.name, e)
        return Outcome(requeue_after=FAILED_REQUEUE)
    if error is not None:
        ctx.log.warning("extensionconfig %s: %s", sub.name, error)
        return Outcome(status=status, obj=ec, owned_conditions=OWNED, requeue_after=FAILED_REQUEUE)
    sdk.register({**ec, "status": status})
    return Outcome(status=status, obj=ec, owned_conditions=OWNED)


async def _delete(ctx: Ctx, sub: Subject) -> Outcome:
    sdk = _service(ctx)
    if sdk is not None and sdk.ready:
        sdk.unregister(sub.name)
    return Outcome()


KIND = Kind(EXTENSION_CONFIG, reconcile=_reconcile, delete=_delete, cluster_name=None)


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    sdk = _service(ctx)
    if sdk is not None and sdk.ready and await ctx.kube.get(EXTENSION_CONFIG, None, name) is None:
        sdk.unregister(name)  # gone: upstream's reconcile of a NotFound object
        return None
    return await run(ctx, KIND, namespace, name)


async def warm_up_once(ctx: Ctx, sdk: RuntimeSDKService) -> None:
    """Discover every ExtensionConfig (paused ones too, as upstream's warm-up), write their status, then fill the
    registry with all of them at once; RuntimeSDKError naming each failure (the registry stays cold)."""
    errors = []
    done = []
    for ec in await ctx.kube.list(EXTENSION_CONFIG):
        name = ec["metadata"]["name"]
        try:
            ec, status, error = await discover(ctx, sdk, ec)
        except rec.CABundleError as e:
            errors.append(f"failed to reconcile ExtensionConfig: {e}")
            continue
        ec = await lifecycle.write_status(ctx.kube, EXTENSION_CONFIG, ec, status, OWNED)
        if error is not None:
            errors.append(f"failed to reconcile ExtensionConfig: failed to discover ExtensionConfig {name}: {error}")
            continue
        done.append({**ec, "status": status})
    if errors:
        raise RuntimeSDKError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    sdk.warm_up(done)


async def warm_up(ctx: Ctx) -> None:
    """Until the registry is warm: every WARMUP_INTERVAL for WARMUP_TIMEOUT, then every NOT_READY_REQUEUE (upstream
    stops its manager after 60 s; here the controllers go on and hook calls keep failing, saying why)."""
    sdk = _service(ctx)
    if sdk is None:
        return
    start = time.monotonic()
    while not sdk.ready:
        try:
            await warm_up_once(ctx, sdk)
        except RuntimeSDKError as e:
            late = time.monotonic() - start > WARMUP_TIMEOUT
            (ctx.log.error if late else ctx.log.warning)("ExtensionConfig registry warmup failed: %s", e)
            await asyncio.sleep(NOT_READY_REQUEUE if late else WARMUP_INTERVAL)
            continue
        ctx.log.info("The extension registry is warmed up")


def secret_to_extension_configs(obj: Obj, cache: Reader) -> list[tuple[str, str]]:
    """A Secret's change reaches the ExtensionConfigs whose inject-ca annotation names it."""
    md = obj.get("metadata") or {}
    key = f"{md.get('namespace')}/{md.get('name')}"
    out = []
    for ec in cache.list(EXTENSION_CONFIG, None):
        try:
            ref = rec.ca_secret(ec)
        except rec.CABundleError:
            continue
        if ref is not None and str(ref) == key:
            out.append(("", ec["metadata"]["name"]))
    return out


def no_keys(obj: Obj, cache: Reader) -> list[tuple[str, str]]:
    """Namespaces are watched only so hook calls read their labels from the cache (namespaceSelector)."""
    return []


def controller() -> Controller:
    return Controller(gvk=EXTENSION_CONFIG, reconcile=reconcile,
                      watches=[(SECRET, secret_to_extension_configs), (NAMESPACE, no_keys)])
