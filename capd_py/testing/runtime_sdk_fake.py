"""An in-memory `capd_py.api.runtime_sdk.RuntimeSDK` for tests of the controllers' hook call points and external
patches: handlers are Python callables registered by name; every call is recorded in order."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api.runtime_hooks import FAILURE, Hook, response, split_registered_name
from capd_py.api.runtime_sdk import HookResult, RuntimeSDKError

Responder = Callable[[Mapping[str, Any]], Mapping[str, Any]]


@dataclass
class FakeRuntimeSDK:
    gate: bool = True
    # registered name (`<handler>.<extensionconfig>`) -> (hook name, responder)
    handlers: dict[str, tuple[str, Responder]] = field(default_factory=dict)
    # namespaces each ExtensionConfig serves (absent: every namespace)
    namespaces: dict[str, set[str]] = field(default_factory=dict)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (hook, registered name, request)

    def register(self, name: str, hook: Hook, responder: Responder | None = None) -> None:
        """`responder` answers each request; None: a Success (retryAfterSeconds 0 on blocking hooks)."""
        split_registered_name(name)

        def success(_req: Mapping[str, Any]) -> Mapping[str, Any]:
            return response(hook)
        self.handlers[name] = (hook.name, responder or success)

    def enabled(self) -> bool:
        return self.gate

    def registered(self, hook: str) -> list[str]:
        return [n for n, (h, _) in self.handlers.items() if h == hook]

    def _selected(self, name: str, namespace: str) -> bool:
        served = self.namespaces.get(split_registered_name(name)[1])
        return served is None or namespace in served

    def hook_calls(self, hook: str | None = None) -> list[str]:
        """The hooks (or, with `hook`, the handlers of that hook) called so far, in order."""
        return [n if hook else h for h, n, _ in self.calls if hook is None or h == hook]

    async def call_all(self, hook: Hook, request: Mapping[str, Any], namespace: str) -> HookResult:
        responses: list[tuple[str, Mapping[str, Any]]] = []
        for name in self.registered(hook.name):
            if self._selected(name, namespace):
                responses.append((name, await self.call_one(name, hook, request)))
        failed = [(n, r) for n, r in responses if r.get("status") == FAILURE]
        if failed:
            raise RuntimeSDKError("; ".join(f"failed to call extension handler {n!r}: got failure response: "
                                            f"{r.get('message', '')}" for n, r in failed))
        retry = [int(r.get("retryAfterSeconds") or 0) for _, r in responses]
        retry = [x for x in retry if x > 0]
        return HookResult(message="; ".join(str(r["message"]) for _, r in responses if r.get("message")),
                          retry_after_seconds=min(retry) if retry else 0, responses=tuple(responses))

    async def call(self, name: str, hook: Hook, request: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
        if name not in self.handlers or self.handlers[name][0] != hook.name:
            raise RuntimeSDKError(f"extension handler {name!r} is not registered for {hook.name}")
        if not self._selected(name, namespace):
            raise RuntimeSDKError(f"extension handler {name!r} is not selected for namespace {namespace!r}")
        r = await self.call_one(name, hook, request)
        if r.get("status") == FAILURE:
            raise RuntimeSDKError(f"failed to call extension handler {name!r}: got failure response: "
                                  f"{r.get('message', '')}")
        return r

    async def call_one(self, name: str, hook: Hook, request: Mapping[str, Any]) -> Mapping[str, Any]:
        self.calls.append((hook.name, name, dict(request)))
        return self.handlers[name][1](request)
