"""The Runtime SDK service on the controller context (`Ctx.runtime_sdk` while the RuntimeSDK gate is on): the
registry of discovered handlers (reconcile/runtime_sdk/registry.py), filled by the ExtensionConfig controller, and the
HTTPS client (kube/runtime_sdk_client.py) that calls them. Semantics: capd_py/api/runtime_sdk.py (upstream
internal/runtime/client: handlers called one after the other, the first failure ends the call)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from capd_py.api import runtime_hooks
from capd_py.api.gvk import NAMESPACE
from capd_py.api.runtime_hooks import DEFAULT_TIMEOUT_SECONDS, DISCOVERY, Hook
from capd_py.api.runtime_sdk import HookResult, RuntimeSDKError
from capd_py.kube.client import Kube
from capd_py.kube.runtime_sdk_client import HandlerUnreachable, RuntimeClient
from capd_py.reconcile.runtime_sdk import calls, discovery
from capd_py.reconcile.runtime_sdk.extensionconfig import ca_pem
from capd_py.reconcile.runtime_sdk.registry import Registration, Registry, RegistryError, namespace_selected

log = logging.getLogger("capd_py.runtime_sdk")


def _q(s: str) -> str:
    return '"' + s.replace('"', '\\"') + '"'


class RuntimeSDKService:
    """`capd_py.api.runtime_sdk.RuntimeSDK` over HTTPS. `kube` reads Namespaces (from the cache in the
    controllers process: the ExtensionConfig controller watches them)."""

    def __init__(self, kube: Kube, client: RuntimeClient | None = None, registry: Registry | None = None):
        self.kube = kube
        self.client = client or RuntimeClient()
        self.registry = registry or Registry()

    # -- the controllers' side (RuntimeSDK Protocol) -----------------------------------------------------------
    def enabled(self) -> bool:
        return True

    @property
    def ready(self) -> bool:
        """The registry was warmed up (every ExtensionConfig discovered once at start)."""
        return self.registry.ready

    def registered(self, hook: str) -> list[str]:
        """RuntimeSDKError before the registry is warmed up: "none" could be wrong then."""
        try:
            return [r.name for r in self.registry.list(hook)]
        except RegistryError as e:
            raise RuntimeSDKError(f"failed to get extension handlers for hook {_q(_group_hook(hook))}: {e}") from e

    async def call_all(self, hook: Hook, request: Mapping[str, Any], namespace: str) -> HookResult:
        where = f"failed to call extension handlers for hook {_q(_group_hook(hook.name))}"
        try:
            candidates = self.registry.list(hook.name)
            labels = await self._namespace_labels(namespace, candidates)
            selected = [r for r in candidates if namespace_selected(r, namespace, labels)]
        except RegistryError as e:
            raise RuntimeSDKError(f"{where}: {e}") from e
        responses = []
        for r in selected:
            try:
                responses.append((r.name, await self._call(r, hook, request)))
            except RuntimeSDKError as e:  # the first failure ends it: no waiting on more unreachable servers
                raise RuntimeSDKError(f"{where}: {e}") from e
        return calls.aggregate(hook, responses)

    async def call(self, name: str, hook: Hook, request: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
        try:
            r = self.registry.get(name)
        except RegistryError as e:
            raise RuntimeSDKError(f"failed to call extension handler {_q(name)}: {e}") from e
        if (r.group, r.hook) != (runtime_hooks.GROUP, hook.name):
            raise RuntimeSDKError(f"failed to call extension handler {_q(name)}: handler does not match GroupHook "
                                  f"{_q(_group_hook(hook.name))}")
        try:
            labels = await self._namespace_labels(namespace, [r])
            selected = namespace_selected(r, namespace, labels)
        except RegistryError as e:
            raise RuntimeSDKError(f"failed to call extension handler {_q(name)}: {e}") from e
        if not selected:
            raise RuntimeSDKError(f"failed to call extension handler {_q(name)}: namespaceSelector did not match "
                                  f"namespace {namespace}")
        return await self._call(r, hook, request)

    # -- the ExtensionConfig controller's side -----------------------------------------------------------------
    async def discover(self, ec: Mapping[str, Any]) -> list[dict[str, Any]]:
        """`status.handlers` from the extension's Discovery answer; RuntimeSDKError saying why not."""
        name = str((ec.get("metadata") or {}).get("name") or "")
        cc = (ec.get("spec") or {}).get("clientConfig") or {}
        where = f"failed to discover extension {_q(name)}"
        try:
            url = calls.url_for(cc, DISCOVERY.name)
            answer = await self.client.post(url, runtime_hooks.request(DISCOVERY), DEFAULT_TIMEOUT_SECONDS,
                                            ca_pem(cc))
        except (calls.CallError, HandlerUnreachable) as e:
            raise RuntimeSDKError(f"{where}: {e}") from e
        problem = calls.status_error(answer, "discover extension", name)
        if problem:
            log.info("discovery of ExtensionConfig %s answered %s: %s", name, answer.get("status"),
                     answer.get("message"))
            raise RuntimeSDKError(problem)
        try:
            return discovery.status_handlers(name, answer)
        except discovery.DiscoveryError as e:
            raise RuntimeSDKError(f"{where}: {e}") from e

    def warm_up(self, extension_configs: list[dict[str, Any]]) -> None:
        self.registry.warm_up(extension_configs)

    def register(self, ec: Mapping[str, Any]) -> None:
        name = str((ec.get("metadata") or {}).get("name") or "")
        try:
            self.registry.add(ec)
        except RegistryError as e:
            raise RuntimeSDKError(f"failed to register ExtensionConfig {_q(name)}: {e}") from e

    def unregister(self, name: str) -> None:
        try:
            self.registry.remove(name)
        except RegistryError as e:
            raise RuntimeSDKError(f"failed to unregister ExtensionConfig {_q(name)}: {e}") from e

    async def close(self) -> None:
        await self.client.close()

    # -- internals ----------------------------------------------------------------------------------------------
    async def _namespace_labels(self, namespace: str, regs: list[Registration]) -> dict[str, str] | None:
        """The namespace's labels when some selector needs them (None: it does not exist)."""
        if all(not r.namespace_selector.get("matchLabels") and not r.namespace_selector.get("matchExpressions")
               for r in regs):
            return {}
        ns = await self.kube.get(NAMESPACE, None, namespace)
        return None if ns is None else dict((ns.get("metadata") or {}).get("labels") or {})

    async def _call(self, r: Registration, hook: Hook, request: Mapping[str, Any]) -> Mapping[str, Any]:
        where = f"failed to call extension handler {_q(r.name)}"
        body = calls.with_settings(request, r.settings)
        body["apiVersion"], body["kind"] = f"{r.group}/{r.version}", hook.request_kind
        try:
            url = calls.url_for(r.client_config, hook.name, r.handler, r.group, r.version)
            answer = await self.client.post(url, body, r.timeout, ca_pem(r.client_config))
        except calls.CallError as e:
            raise RuntimeSDKError(f"{where}: {e}") from e
        except HandlerUnreachable as e:
            if r.ignore_errors:
                log.error("ignoring an error calling extension handler %s because of failurePolicy Ignore: %s",
                          r.name, e)
                return calls.ignored_response(hook)
            raise RuntimeSDKError(f"{where}: {e}") from e
        problem = calls.status_error(answer, "call extension handler", r.name)
        if problem:
            log.info("extension handler %s answered %s: %s", r.name, answer.get("status"), answer.get("message"))
            raise RuntimeSDKError(problem)
        return answer


def _group_hook(hook: str) -> str:
    return f"{runtime_hooks.GROUP}/{hook}"
