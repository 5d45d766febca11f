"""A Discovery answer (upstream defaultAndValidateDiscoveryResponse + Discover): its handlers defaulted
(failurePolicy Fail, timeoutSeconds 10), checked, and turned into the ExtensionConfig's `status.handlers`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capd_py.api import runtime_hooks
from capd_py.api.admission.checks import dns1123_label_errors
from capd_py.api.runtime_hooks import DEFAULT_TIMEOUT_SECONDS, FAIL, IGNORE
from capd_py.reconcile.runtime_sdk.registry import aggregate_message, parse_group_version

MAX_TIMEOUT_SECONDS = 30


class DiscoveryError(Exception):
    pass




def _go_strings(items: list[str]) -> str:
    return "[" + " ".join(items) + "]"


def validate(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The defaulted handlers of a Discovery answer; DiscoveryError naming every problem otherwise."""
    handlers = []
    errors: list[str] = []
    names: set[str] = set()
    for raw in response.get("handlers") or []:
        h = dict(raw)
        h["failurePolicy"] = h.get("failurePolicy") if h.get("failurePolicy") is not None else FAIL
        h["timeoutSeconds"] = (int(h["timeoutSeconds"]) if h.get("timeoutSeconds") is not None
                               else DEFAULT_TIMEOUT_SECONDS)
        name = str(h.get("name") or "")
        if name in names:
            errors.append(f"duplicate name for handler {name} found")
        names.add(name)
        label = dns1123_label_errors(name)
        if label:
            errors.append(f"handler name {name} is not valid: {_go_strings(label)}")
        if not 0 <= h["timeoutSeconds"] <= MAX_TIMEOUT_SECONDS:
            errors.append(f"handler {name} timeoutSeconds {h['timeoutSeconds']} must be between 0 and 30")
        if h["failurePolicy"] not in (FAIL, IGNORE):
            errors.append(f"handler {name} failurePolicy {h['failurePolicy']} must equal \"Ignore\" or \"Fail\"")
        rh = h.get("requestHook") or {}
        api_version, hook = str(rh.get("apiVersion") or ""), str(rh.get("hook") or "")
        try:
            group, version = parse_group_version(api_version)
        except ValueError as e:
            errors.append(f"handler {name} requestHook APIVersion {api_version} is not valid: {e}")
        else:
            if (group, version) != (runtime_hooks.GROUP, runtime_hooks.VERSION) or hook not in runtime_hooks.HOOKS:
                errors.append(f"handler {name} requestHook {api_version}/{hook} is not in the Runtime SDK catalog")
        handlers.append(h)
    if errors:
        raise DiscoveryError(f"failed to validate discovery response: {aggregate_message(errors)}")
    return handlers


def status_handlers(extension_config: str, response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`status.handlers` from a Discovery answer (validated first): registered names, the hook, timeout and policy
    (a timeout of 0 stays unset, as upstream's int32 with omitempty)."""
    out = []
    for h in validate(response):
        rh = h.get("requestHook") or {}
        entry: dict[str, Any] = {
            "name": runtime_hooks.registered_name(str(h["name"]), extension_config),
            "requestHook": {"apiVersion": str(rh.get("apiVersion") or ""), "hook": str(rh.get("hook") or "")},
            "failurePolicy": h["failurePolicy"],
        }
        if h["timeoutSeconds"]:
            entry["timeoutSeconds"] = h["timeoutSeconds"]
        out.append(entry)
    return out
