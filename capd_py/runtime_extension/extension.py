"""An extension: handlers (typed Python functions) registered for Runtime SDK hooks, the discovery answer made from
them, and the dispatch of one HTTP body to one handler. No sockets here (server.py serves it), so a test calls
`Extension.call` directly.

Upstream's rules (exp/runtime/server, internal/runtime/client's discovery validation): a handler has a hook, a name
(a DNS-1123 label, unique in the extension: the core refuses a discovery answer with duplicates), and optionally
timeoutSeconds (0..30; the core defaults 10) and failurePolicy (Fail | Ignore; the core defaults Fail), which only
discovery reports. It is served at runtime_hooks.path(hook, name). A request body that is not JSON, or a handler that
raises, is answered with status Failure and the message, HTTP 200, as upstream's server answers a handler error."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from capd_py.api import runtime_hooks
from capd_py.api.admission import checks
from capd_py.api.runtime_hooks import DISCOVERY, FAIL, FAILURE, HOOKS, IGNORE, SUCCESS, Hook
from capd_py.runtime_extension.types import DiscoveryResponse, ExtensionHandler

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])

MAX_TIMEOUT_SECONDS = 30


class ExtensionError(ValueError):
    """A handler that cannot be registered (unknown hook, bad name, duplicate, out-of-range option)."""


@dataclass(frozen=True)
class Registration:
    hook: Hook
    name: str
    func: Callable[[Any], Any]
    timeout_seconds: int | None = None
    failure_policy: str | None = None

    @property
    def path(self) -> str:
        return runtime_hooks.path(self.hook.name, self.name)

    def discovery_entry(self) -> ExtensionHandler:
        entry: ExtensionHandler = {"name": self.name,
                                   "requestHook": {"apiVersion": runtime_hooks.API_VERSION, "hook": self.hook.name}}
        # unset stays unset, as upstream's nil pointers: the core applies its own defaults
        if self.timeout_seconds is not None:
            entry["timeoutSeconds"] = self.timeout_seconds
        if self.failure_policy is not None:
            entry["failurePolicy"] = self.failure_policy
        return entry


def _hook(hook: str | Hook) -> Hook:
    name = hook.name if isinstance(hook, Hook) else hook
    found = HOOKS.get(name)
    if found is None:
        raise ExtensionError(f"hook {name!r} does not exist in the Runtime SDK catalog "
                             f"(one of {', '.join(sorted(HOOKS))})")
    if found is DISCOVERY:
        raise ExtensionError("the Discovery hook is answered by the extension itself from its handlers")
    return found


@dataclass
class Extension:
    """A set of handlers served together by one HTTPS server. `name` is the default name of its ExtensionConfig and
    `settings` the default spec.settings of that manifest (`capd-py extension manifest` overrides both); `{name}` in
    a setting's value stands for the ExtensionConfig's name (an extension that must know under which name it is
    registered, as the test extension, gets it that way)."""

    name: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    _by_path: dict[str, Registration] = field(default_factory=dict, repr=False)

    def add(self, hook: str | Hook, name: str, func: Callable[[Any], Any], *, timeout_seconds: int | None = None,
            failure_policy: str | None = None) -> Registration:
        """Register `func` (sync or async; it takes the request dict and returns the response fields, or None for
        a plain Success) for `hook` under `name`."""
        h = _hook(hook)
        if not checks.is_dns1123_label(name):
            raise ExtensionError(f"handler name {name!r} is not valid: a DNS-1123 label (lowercase alphanumerics "
                                 "and '-', starting and ending alphanumeric, at most 63 characters)")
        if any(r.name == name for r in self._by_path.values()):
            raise ExtensionError(f"there is already a handler named {name!r}: names are unique in an extension")
        if timeout_seconds is not None and not 0 <= timeout_seconds <= MAX_TIMEOUT_SECONDS:
            raise ExtensionError(f"handler {name} timeoutSeconds {timeout_seconds} must be between 0 and "
                                 f"{MAX_TIMEOUT_SECONDS}")
        if failure_policy is not None and failure_policy not in (FAIL, IGNORE):
            raise ExtensionError(f'handler {name} failurePolicy {failure_policy} must equal "{IGNORE}" or "{FAIL}"')
        if not callable(func):
            raise ExtensionError(f"handler {name}: {func!r} is not callable")
        reg = Registration(h, name, func, timeout_seconds, failure_policy)
        if reg.path in self._by_path:  # two names differing only in case share a path
            raise ExtensionError(f"there is already a handler registered for path {reg.path!r}")
        self._by_path[reg.path] = reg
        return reg

    def handler(self, hook: str | Hook, name: str, *, timeout_seconds: int | None = None,
                failure_policy: str | None = None) -> Callable[[F], F]:
        """Decorator form of `add`; the function is returned unchanged (callable directly in tests)."""
        def register(func: F) -> F:
            self.add(hook, name, func, timeout_seconds=timeout_seconds, failure_policy=failure_policy)
            return func
        return register

    def manifest_settings(self, config_name: str) -> dict[str, str]:
        return {k: v.replace("{name}", config_name) for k, v in self.settings.items()}

    @property
    def registrations(self) -> list[Registration]:
        return list(self._by_path.values())

    def registration(self, path: str) -> Registration | None:
        return self._by_path.get(path)

    def discovery(self) -> DiscoveryResponse:
        """The Discovery hook's answer: every handler, in registration order."""
        out: DiscoveryResponse = runtime_hooks.response(DISCOVERY)  # type: ignore[assignment]
        out["handlers"] = [r.discovery_entry() for r in self._by_path.values()]
        return out

    async def call(self, path: str, body: bytes | str | Mapping[str, Any]) -> dict[str, Any] | None:
        """The response to a POST of `body` at `path`; None when nothing is served there."""
        if path == runtime_hooks.path(DISCOVERY.name):
            return dict(self.discovery())
        reg = self._by_path.get(path)
        if reg is None:
            return None
        return await dispatch(reg, body)


async def dispatch(reg: Registration, body: bytes | str | Mapping[str, Any]) -> dict[str, Any]:
    hook = reg.hook
    if isinstance(body, Mapping):
        request: Any = dict(body)
    else:
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            return runtime_hooks.response(hook, FAILURE, f"error unmarshalling request: {exc}")
        if not isinstance(request, dict):
            return runtime_hooks.response(hook, FAILURE, f"error unmarshalling request: expected a JSON object, "
                                                         f"got {type(request).__name__}")
    try:
        if inspect.iscoroutinefunction(reg.func):
            out = await reg.func(request)
        else:
            # a sync handler may block (files, subprocesses): keep the server answering others meanwhile
            out = await asyncio.to_thread(reg.func, request)
            if inspect.isawaitable(out):
                out = await out
    except Exception as exc:  # any handler error is the caller's Failure, never a 500 without a body
        log.exception("%s handler %s failed", hook.name, reg.name)
        return runtime_hooks.response(hook, FAILURE, str(exc) or type(exc).__name__)
    if out is None:
        out = {}
    if not isinstance(out, Mapping):
        return runtime_hooks.response(hook, FAILURE, f"handler {reg.name} returned {type(out).__name__}, "
                                                     "not the response fields")
    fields = {k: v for k, v in out.items() if k not in ("apiVersion", "kind")}
    fields.setdefault("status", SUCCESS)
    return runtime_hooks.response(hook, **fields)
