"""What the controllers see of the Runtime SDK (issue 29): a service on the controller context (`Ctx.runtime_sdk`)
that knows the discovered extension handlers and calls them. Types only (no I/O): the implementation over HTTPS is
capd_py/controllers/services/runtime_sdk.py, unit tests use a fake.

Semantics are upstream's (internal/runtime/client): `call_all` calls every handler registered for a hook whose
ExtensionConfig's namespaceSelector matches the Cluster's namespace, adding the ExtensionConfig's settings to each
request; a `Failure` status from any handler fails the call (whatever the failurePolicy); an error reaching a
handler (connection, timeout, a non-2xx answer, an undecodable body) fails it unless that handler's failurePolicy is
Ignore. Blocking hooks aggregate to the lowest non-zero `retryAfterSeconds`; messages are joined."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from capd_py.api.runtime_hooks import FAILURE, SUCCESS, Hook


class RuntimeSDKError(Exception):
    """A hook call that failed: the message says which handler and why (it goes into a condition)."""


@dataclass(frozen=True)
class HookResult:
    status: str = SUCCESS
    message: str = ""
    retry_after_seconds: int = 0
    # (registered handler name, its response) in call order
    responses: tuple[tuple[str, Mapping[str, Any]], ...] = field(default_factory=tuple)

    @property
    def blocking(self) -> bool:
        return self.retry_after_seconds > 0

    @property
    def failed(self) -> bool:
        return self.status == FAILURE


class RuntimeSDK(Protocol):
    def enabled(self) -> bool:
        """The RuntimeSDK feature gate is on."""
        ...

    def registered(self, hook: str) -> list[str]:
        """Registered names (`<handler>.<ExtensionConfig>`) of every discovered handler serving `hook`."""
        ...

    async def call_all(self, hook: Hook, request: Mapping[str, Any], namespace: str) -> HookResult:
        """Every handler of `hook` selected for `namespace`; raises RuntimeSDKError (see module docstring)."""
        ...

    async def call(self, name: str, hook: Hook, request: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
        """One handler by registered name (external patches, variable discovery); its response, Success only;
        RuntimeSDKError otherwise (unknown name, not selected for `namespace`, not serving `hook`, failed call)."""
        ...


class NoRuntimeSDK:
    """The gate off (or no service wired): no handler is known; calling one is an error naming the gate."""

    def enabled(self) -> bool:
        return False

    def registered(self, hook: str) -> list[str]:
        return []

    async def call_all(self, hook: Hook, request: Mapping[str, Any], namespace: str) -> HookResult:
        return HookResult()

    async def call(self, name: str, hook: Hook, request: Mapping[str, Any], namespace: str) -> Mapping[str, Any]:
        raise RuntimeSDKError(f"cannot call extension handler {name!r}: the RuntimeSDK feature gate is disabled "
                              "(EXP_RUNTIME_SDK=true / --feature-gates RuntimeSDK=true)")
