"""What a hook call's answers mean (upstream internal/runtime/client, its pure parts): the URL of a handler, the
request a handler gets (the ExtensionConfig's settings under the request's own), whether an answer is a success,
and how the answers of every handler of a hook add up to one."""

from __future__ import annotations

import copy
import posixpath
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from capd_py.api import runtime_hooks
from capd_py.api.runtime_hooks import FAILURE, SUCCESS, Hook
from capd_py.api.runtime_sdk import HookResult


class CallError(Exception):
    """A call that cannot be made or whose answer fails it (the message is what the condition shows)."""


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def url_for(client_config: Mapping[str, Any], hook: str = "", handler: str = "",
            group: str = runtime_hooks.GROUP, version: str = runtime_hooks.VERSION) -> str:
    """The https URL of `handler` of `hook` (no hook: the server's base URL) on the extension server
    `client_config` names: `service` -> https://<name>.<namespace>.svc[:port]<path>, or `url`; the hook's path
    (`/<group>/<version>/<hook>/<handler>`, lower case) is joined to a path the config has."""
    service = client_config.get("service") or {}
    if service:
        host = f"{service.get('name', '')}.{service.get('namespace', '')}.svc"
        if service.get("port") is not None:
            host = f"{host}:{int(service['port'])}"
        scheme, netloc, base = "https", host, str(service.get("path") or "")
    else:
        raw = str(client_config.get("url") or "")
        if not raw:
            raise CallError("failed to compute URL: at least one of service and url should be defined in config")
        parts = urlsplit(raw)
        if parts.scheme != "https":
            raise CallError(f"failed to compute URL: expected https scheme, got {parts.scheme}")
        scheme, netloc, base = parts.scheme, parts.netloc, parts.path
    hook_path = ""
    if hook:
        hook_path = f"/{group}/{version}/{hook.lower()}" + (f"/{handler.lower()}" if handler else "")
    # Go's path.Join: cleaned, no trailing slash
    joined = posixpath.normpath(posixpath.join(base or "/", hook_path.lstrip("/"))) if (base or hook_path) else ""
    if joined == ".":
        joined = ""
    return urlunsplit((scheme, netloc, joined, "", ""))


def with_settings(request: Mapping[str, Any], settings: Mapping[str, str]) -> dict[str, Any]:
    """A copy of `request` whose `settings` are the ExtensionConfig's with the request's own over them."""
    out = copy.deepcopy(dict(request))
    out["settings"] = {**dict(settings), **dict(request.get("settings") or {})}
    return out


def status_error(response: Mapping[str, Any], operation: str, target: str) -> str | None:
    """Why `response` fails the call (None: it is a success). The extension's message is left out, as upstream
    leaves it out: a message unique per call would make every reconcile write a new condition."""
    status = response.get("status")
    if status == SUCCESS:
        return None
    if status == FAILURE:
        return f"failed to {operation} {_q(target)}: got failure response, please check controller logs for errors"
    return (f"failed to {operation} {_q(target)}: got unknown response status {_q(str(status or ''))}, please check "
            "controller logs for errors")


def ignored_response(hook: Hook) -> dict[str, Any]:
    """What an unreachable handler with failurePolicy Ignore answers: the default success."""
    return runtime_hooks.response(hook)


def aggregate(hook: Hook, responses: Sequence[tuple[str, Mapping[str, Any]]]) -> HookResult:
    """Every handler succeeded: one Success whose retryAfterSeconds is the lowest non-zero one (blocking hooks) and
    whose message joins the handlers' messages with ", "."""
    retry = 0
    messages = []
    for _, r in responses:
        if hook.blocking:
            value = int(r.get("retryAfterSeconds") or 0)
            if value and (retry == 0 or value < retry):
                retry = value
        if r.get("message"):
            messages.append(str(r["message"]))
    return HookResult(status=SUCCESS, message=", ".join(messages), retry_after_seconds=retry,
                      responses=tuple((n, r) for n, r in responses))
