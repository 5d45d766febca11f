"""The registration manifest: an ExtensionConfig (runtime.cluster.x-k8s.io/v1beta2, upstream's field names) pointing
the core at an extension server, by URL or by Service, trusting the CA that signed its serving certificate."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

import yaml

from capd_py.api import selectors
from capd_py.api.runtime_hooks import EXTENSION_CONFIG_GROUP

API_VERSION = f"{EXTENSION_CONFIG_GROUP}/v1beta2"
KIND = "ExtensionConfig"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"  # every Namespace carries it (set by the API server)


def namespace_selector(value: str | Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A LabelSelector from its string form (`a=b,k in (x,y)`) or dict form; None for none (all namespaces)."""
    if value is None or value == "":
        return None
    if isinstance(value, Mapping):
        return dict(value)
    parsed = selectors.parse(value)
    # the empty halves are left out, as upstream's omitempty fields are
    return {k: v for k, v in parsed.items() if v}


def for_namespaces(*namespaces: str) -> dict[str, Any]:
    """The selector upstream's e2e puts on its ExtensionConfig: only Clusters in these namespaces are served."""
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": list(namespaces)}]}


def extension_config(name: str, ca_pem: bytes, *, url: str | None = None, service: Mapping[str, Any] | None = None,
                     namespace_selector: Mapping[str, Any] | None = None,
                     settings: Mapping[str, str] | None = None,
                     annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ExtensionConfig `name`: exactly one of `url` (https://host:port, the server's root; the core appends
    each handler's path) and `service` ({namespace, name, port?, path?})."""
    if (url is None) == (service is None):
        raise ValueError("an ExtensionConfig names exactly one of url and service")
    client: dict[str, Any] = {}
    if url is not None:
        if not url.startswith("https://"):
            raise ValueError(f"extension URL {url!r} must be https:// (the core calls extensions over TLS only)")
        client["url"] = url
    else:
        client["service"] = dict(service or {})
    client["caBundle"] = base64.b64encode(ca_pem).decode()
    spec: dict[str, Any] = {"clientConfig": client}
    if namespace_selector:
        spec["namespaceSelector"] = dict(namespace_selector)
    if settings:
        spec["settings"] = {str(k): str(v) for k, v in settings.items()}
    meta: dict[str, Any] = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def to_yaml(obj: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(obj), sort_keys=False)
