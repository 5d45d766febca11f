"""The registry of discovered extension handlers (upstream internal/runtime/registry): every handler an
ExtensionConfig's `status.handlers` lists, by registered name (`<handler>.<ExtensionConfig>`), with what a call to
it needs (clientConfig, namespaceSelector, settings, timeout, failurePolicy).

It starts cold and answers nothing until `warm_up` got every ExtensionConfig there is (at the controllers' start):
a hook called before that could miss a handler, so it is an error, as upstream's. An ExtensionConfig is added all or
nothing (a handler with an unparsable apiVersion keeps every handler of that ExtensionConfig out)."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import runtime_hooks, selectors
from capd_py.api.admission.checks import selector_error
from capd_py.api.runtime_hooks import DEFAULT_TIMEOUT_SECONDS


class RegistryError(Exception):
    """The registry cannot answer (not warmed up, unknown handler) or an ExtensionConfig cannot be added."""


@dataclass(frozen=True)
class Registration:
    name: str  # <handler>.<ExtensionConfig name>
    extension_config: str
    resource_version: str
    group: str
    version: str
    hook: str
    namespace_selector: Mapping[str, Any] = field(default_factory=dict)
    client_config: Mapping[str, Any] = field(default_factory=dict)
    timeout_seconds: int = 0  # 0: DEFAULT_TIMEOUT_SECONDS
    failure_policy: str = ""  # "" is Fail, as upstream reads anything but Ignore
    settings: Mapping[str, str] = field(default_factory=dict)

    @property
    def handler(self) -> str:
        """The name the extension gave the handler in discovery (the last part of the hook's path)."""
        return self.name.removesuffix("." + self.extension_config)

    @property
    def timeout(self) -> int:
        return self.timeout_seconds or DEFAULT_TIMEOUT_SECONDS

    @property
    def ignore_errors(self) -> bool:
        return self.failure_policy == runtime_hooks.IGNORE


def parse_group_version(api_version: str) -> tuple[str, str]:
    """(group, version) as apimachinery's ParseGroupVersion reads them: "" and "v1" have no group; more than one
    slash is an error."""
    if not api_version:
        return "", ""
    parts = api_version.split("/")
    if len(parts) == 1:
        return "", parts[0]
    if len(parts) == 2:
        return parts[0], parts[1]
    raise ValueError(f"unexpected GroupVersion string: {api_version}")


def registrations(ec: Mapping[str, Any]) -> list[Registration]:
    """Every handler of one ExtensionConfig; RegistryError naming each handler that cannot be registered."""
    md = ec.get("metadata") or {}
    name = str(md.get("name") or "")
    spec = ec.get("spec") or {}
    selector = spec.get("namespaceSelector") or {}
    problem = selector_error(selector)
    if problem:
        raise RegistryError(f"failed to add ExtensionConfig {_q(name)} to registry: failed to create "
                            f"namespaceSelector: {problem}")
    out, errors = [], []
    for h in (ec.get("status") or {}).get("handlers") or []:
        hname = str(h.get("name") or "")
        rh = h.get("requestHook") or {}
        try:
            group, version = parse_group_version(str(rh.get("apiVersion") or ""))
        except ValueError as e:
            errors.append(f"failed to add extension handler {_q(hname)} to registry: failed to parse GroupVersion "
                          f"{_q(str(rh.get('apiVersion')))} of handler {_q(hname)}: {e}")
            continue
        out.append(Registration(
            name=hname, extension_config=name, resource_version=str(md.get("resourceVersion") or ""),
            group=group, version=version, hook=str(rh.get("hook") or ""), namespace_selector=dict(selector),
            client_config=dict(spec.get("clientConfig") or {}), timeout_seconds=int(h.get("timeoutSeconds") or 0),
            failure_policy=str(h.get("failurePolicy") or ""), settings=dict(spec.get("settings") or {})))
    if errors:
        raise RegistryError(f"failed to add ExtensionConfig {_q(name)} to registry: {aggregate_message(errors)}")
    return out


def aggregate_message(errors: list[str]) -> str:
    """kerrors.NewAggregate's message: one error as is, several as `[a, b]`."""
    return errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"


def _q(s: str) -> str:
    """Go's %q of a plain string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Registry:
    """State, no I/O: the service (controllers/services/runtime_sdk.py) owns one per controllers process."""

    def __init__(self) -> None:
        self.ready = False
        self._items: dict[str, Registration] = {}

    def warm_up(self, extension_configs: Iterable[Mapping[str, Any]]) -> None:
        """Every ExtensionConfig there is, at once; the registry is ready after. An error leaves it cold and empty."""
        if self.ready:
            raise RegistryError("failed to warm up registry: invalid operation: WarmUp cannot be called on a "
                                "registry which has already been warmed up")
        items: dict[str, Registration] = {}
        errors = []
        for ec in extension_configs:
            try:
                self._add_into(items, ec)
            except RegistryError as e:
                errors.append(str(e))
        if errors:
            raise RegistryError(f"failed to warm up registry: {aggregate_message(errors)}")
        self._items = items
        self.ready = True

    def add(self, ec: Mapping[str, Any]) -> None:
        """Register (or re-register: its old entries replaced) an ExtensionConfig's handlers."""
        name = str((ec.get("metadata") or {}).get("name") or "")
        if not self.ready:
            raise RegistryError(f"failed to add ExtensionConfig {_q(name)} to registry: invalid operation: Add cannot "
                                "be called on a registry which has not been warmed up")
        self._add_into(self._items, ec)

    def remove(self, extension_config: str) -> None:
        if not self.ready:
            raise RegistryError(f"failed to remove ExtensionConfig {_q(extension_config)} from registry: invalid "
                                "operation: Remove cannot be called on a registry which has not been warmed up")
        self._drop(self._items, extension_config)

    def list(self, hook: str, group: str = runtime_hooks.GROUP) -> list[Registration]:
        """Every handler of `hook` (any version), by name (upstream's map order is random; ours is stable)."""
        if not self.ready:
            raise RegistryError(f"failed to list extension handlers for GroupHook \"{group}/{hook}\": invalid "
                                "operation: List cannot be called on a registry which has not been warmed up")
        return sorted((r for r in self._items.values() if r.group == group and r.hook == hook), key=lambda r: r.name)

    def get(self, name: str) -> Registration:
        if not self.ready:
            raise RegistryError(f"failed to get extension handler {_q(name)} from registry: invalid operation: Get "
                                "cannot be called on a registry not yet ready")
        r = self._items.get(name)
        if r is None:
            raise RegistryError(f"failed to get extension handler {_q(name)} from registry: handler with name "
                                f"{_q(name)} has not been registered")
        return r

    def names(self) -> builtins.list[str]:
        return sorted(self._items)

    @staticmethod
    def _drop(items: dict[str, Registration], extension_config: str) -> None:
        for k in [k for k, r in items.items() if r.extension_config == extension_config]:
            del items[k]

    def _add_into(self, items: dict[str, Registration], ec: Mapping[str, Any]) -> None:
        name = str((ec.get("metadata") or {}).get("name") or "")
        self._drop(items, name)
        for r in registrations(ec):  # all or nothing: raises before anything is added
            items[r.name] = r


def namespace_selected(registration: Registration, namespace: str,
                       namespace_labels: Mapping[str, str] | None) -> bool:
    """The handler is called for objects of `namespace`, whose labels are these (None: it does not exist). An empty
    selector selects every namespace without looking; a non-empty one and a missing namespace is an error, as
    upstream's read of the namespace fails."""
    if selectors.selector_is_empty(dict(registration.namespace_selector)):
        return True
    if namespace_labels is None:
        raise RegistryError(f"failed to match namespace: failed to get namespace {namespace}: namespaces "
                            f"{_q(namespace)} not found")
    return selectors.selector_matches(dict(registration.namespace_selector), dict(namespace_labels))
