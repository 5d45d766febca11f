"""runtime.cluster.x-k8s.io: upstream's ExtensionConfig webhook (internal/webhooks/extensionconfig.go), pure.

Defaults: an absent namespaceSelector becomes the empty one (every namespace), a service without a port gets 443.
Validation: refused outright while the RuntimeSDK gate is off; the name a DNS-1123 label; exactly one of url and
service; an https URL; the service's name a DNS-1035 label, its namespace a DNS-1123 label, its path a URL path
starting with "/", its port 1-65535; a namespaceSelector that parses."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from capd_py.api import features
from capd_py.api.admission.checks import dns1035_label_errors, dns1123_label_errors, selector_error
from capd_py.api.admission.fielderrors import FieldError, forbidden, invalid, required

Gates = Mapping[str, bool]


def _request_uri_error(value: str) -> str | None:
    """Go's url.ParseRequestURI: an absolute URL or an absolute path; no fragment."""
    if not value:
        return 'parse "": empty url'
    if "#" in value:
        return f'parse "{value}": invalid URI for request'
    if value.startswith("/"):
        return None
    parts = urlsplit(value)
    if not parts.scheme:
        return f'parse "{value}": invalid URI for request'
    if any(c in parts.netloc for c in " <>\"{}|\\^`"):
        return f'parse "{value}": invalid character in host name'
    return None


def _service(client_config: Mapping[str, Any]) -> dict[str, Any]:
    """The service reference, {} when none (upstream's ServiceReference.IsDefined: any field set)."""
    return {k: v for k, v in dict(client_config.get("service") or {}).items() if v not in (None, "")}


def default_extensionconfig(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    spec = out.setdefault("spec", {})
    if spec.get("namespaceSelector") is None:
        spec["namespaceSelector"] = {}
    service = (spec.get("clientConfig") or {}).get("service")
    if isinstance(service, dict) and _service(spec["clientConfig"]) and service.get("port") is None:
        service["port"] = 443
    return out


def validate_extensionconfig(old: dict[str, Any] | None, new: dict[str, Any],
                             gates: Gates | None = None) -> list[FieldError]:
    if not (gates or {}).get(features.RUNTIME_SDK, features.DEFAULTS[features.RUNTIME_SDK]):
        return [forbidden("spec", "can be set only if the RuntimeSDK feature flag is enabled")]
    errs: list[FieldError] = []
    name = str((new.get("metadata") or {}).get("name") or "")
    label = dns1123_label_errors(name)
    if label:
        errs.append(invalid("metadata.name", name, "ExtensionConfig name should be a valid DNS1123 label name: "
                                                   "[" + " ".join(label) + "]"))
    spec = new.get("spec") or {}
    cc = spec.get("clientConfig") or {}
    url = str(cc.get("url") or "")
    service = _service(cc)
    if not url and not service:
        errs.append(required("spec.clientConfig", "either url or service must be defined"))
    if url and service:
        errs.append(forbidden("spec.clientConfig", "only one of url or service can be defined"))
    if url:
        problem = _request_uri_error(url)
        if problem:
            errs.append(invalid("spec.clientConfig.url", url, f"must be a valid URL, e.g. https://example.com: "
                                                              f"{problem}"))
        elif urlsplit(url).scheme != "https":
            errs.append(invalid("spec.clientConfig.url", url,
                                "'https' is the only allowed URL scheme, e.g. https://example.com"))
    if service:
        sname, sns = str(service.get("name") or ""), str(service.get("namespace") or "")
        if not sname:
            errs.append(required("spec.clientConfig.service.name", "must not be empty"))
        errs += [invalid("spec.clientConfig.service.name", sname, m) for m in dns1035_label_errors(sname)]
        if not sns:
            errs.append(required("spec.clientConfig.service.namespace", "must not be empty"))
        errs += [invalid("spec.clientConfig.service.namespace", sns, m) for m in dns1123_label_errors(sns)]
        path = str(service.get("path") or "")
        if path:
            problem = _request_uri_error(path)
            if problem:
                errs.append(invalid("spec.clientConfig.service.path", path,
                                    f"must be a valid URL path e.g. /path/to/hook: {problem}"))
            if not path.startswith("/"):
                errs.append(invalid("spec.clientConfig.service.path", path,
                                    "must start with \"/\" to be a valid URL path"))
        port = service.get("port")
        if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
            errs.append(invalid("spec.clientConfig.service.port", port, "must be between 1 and 65535, inclusive"))
    selector = spec.get("namespaceSelector")
    if selector is None:
        errs.append(required("spec.namespaceSelector", "must be defined"))
    else:
        problem = selector_error(selector)
        if problem:
            errs.append(invalid("spec.namespaceSelector", selector, problem))
    return errs
