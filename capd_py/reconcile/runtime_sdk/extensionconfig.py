"""An ExtensionConfig's decisions (upstream's ExtensionConfig controller, its pure parts): the caBundle its
`runtime.cluster.x-k8s.io/inject-ca-from-secret` annotation asks for, and the status a discovery leaves
(`status.handlers` and the `Discovered` condition)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api.runtime_hooks import INJECT_CA_FROM_SECRET_ANNOTATION

DISCOVERED = "Discovered"
R_DISCOVERED = "Discovered"
R_NOT_DISCOVERED = "NotDiscovered"
CA_KEY = "ca.crt"  # the Secret's key whose value becomes spec.clientConfig.caBundle


class CABundleError(Exception):
    pass


@dataclass(frozen=True)
class SecretRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def ca_secret(ec: Mapping[str, Any]) -> SecretRef | None:
    """The Secret the annotation names (None: no annotation); CABundleError unless it is `<namespace>/<name>`."""
    raw = ((ec.get("metadata") or {}).get("annotations") or {}).get(INJECT_CA_FROM_SECRET_ANNOTATION)
    if raw is None:
        return None
    namespace, sep, name = str(raw).partition("/")
    if not sep:
        namespace, name = "", str(raw)
    if not namespace or not name:
        raise CABundleError(f"failed to reconcile caBundle: secret name \"{raw}\" must be in the form "
                            "<namespace>/<name>")
    return SecretRef(namespace, name)


def ca_bundle(ref: SecretRef, secret: Mapping[str, Any] | None) -> str:
    """spec.clientConfig.caBundle (base64, as the API carries []byte) from the Secret's ca.crt."""
    if secret is None:
        raise CABundleError(f"failed to reconcile caBundle: failed to get secret \"{ref}\": secrets \"{ref.name}\" "
                            "not found")
    data = secret.get("data") or {}
    if CA_KEY not in data:
        raise CABundleError(f"failed to reconcile caBundle: secret {ref} does not contain a \"{CA_KEY}\" entry")
    return str(data[CA_KEY])


def ca_pem(client_config: Mapping[str, Any]) -> bytes:
    """The PEM bytes of a caBundle (b"" when unset or not base64)."""
    raw = client_config.get("caBundle")
    if not raw:
        return b""
    try:
        return base64.b64decode(str(raw), validate=True)
    except ValueError:
        return b""


def discovered_status(ec: Mapping[str, Any], handlers: list[dict[str, Any]] | None, error: str | None
                      ) -> dict[str, Any]:
    """The status after a discovery: the handlers found and Discovered=True, or (`error`) the handlers as they were
    and Discovered=False NotDiscovered saying why."""
    status = dict(ec.get("status") or {})
    generation = (ec.get("metadata") or {}).get("generation")
    if error is not None:
        status["conditions"] = cond.set_condition(status.get("conditions"), DISCOVERED, False, R_NOT_DISCOVERED,
                                                  f"Error in discovery: {error}", observed_generation=generation)
        return status
    if handlers:
        status["handlers"] = handlers
    else:
        status.pop("handlers", None)
    status["conditions"] = cond.set_condition(status.get("conditions"), DISCOVERED, True, R_DISCOVERED,
                                              observed_generation=generation)
    return status
