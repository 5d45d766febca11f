"""The conversion webhook's serving certificate (pure; no I/O): a self-signed CA, whose PEM goes into each
CRD's spec.conversion.webhook.clientConfig.caBundle, and a server certificate it signs for the names and
addresses the management API server dials."""

from __future__ import annotations

import base64
import datetime as _dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from capd_py.reconcile.certs import KeyPair, new_ca, new_leaf_cert, validate_keypair

CA_COMMON_NAME = "capd-py-webhook-ca"
SERVING_VALIDITY_DAYS = 365
CA_VALIDITY_DAYS = 3650


def new_webhook_ca(now: _dt.datetime | None = None) -> KeyPair:
    return new_ca(CA_COMMON_NAME, now=now, days=CA_VALIDITY_DAYS)


def new_serving_cert(ca: KeyPair, hosts: Sequence[str], now: _dt.datetime | None = None,
                     days: int = SERVING_VALIDITY_DAYS, key_pem: bytes | None = None) -> KeyPair:
    """A server certificate for `hosts` (DNS names and IP addresses; the first is the common name)."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host")
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return new_leaf_cert(ca, [x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])], ExtendedKeyUsageOID.SERVER_AUTH,
                         sans=names, now=now, days=days, key_pem=key_pem)


def serving_cert_needs_renewal(cert_pem: bytes, ca_pem: bytes, hosts: Sequence[str],
                               now: _dt.datetime | None = None, min_days_left: int = 30) -> bool:
    """True when the certificate is not signed by this CA, misses a host, or expires within `min_days_left`."""
    t = (now or _dt.datetime.now(_dt.UTC)).astimezone(_dt.UTC)
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert.verify_directly_issued_by(ca)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return True
    present = {str(v) for v in sans.get_values_for_type(x509.DNSName)}
    present |= {str(v) for v in sans.get_values_for_type(x509.IPAddress)}
    if any(_normalized(h) not in present for h in hosts):
        return True
    return cert.not_valid_after_utc - t < _dt.timedelta(days=min_days_left)


def _normalized(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


# -- where the certificate lives and who dials it (docs/conversion.md) --------------------------------------

SECRET_NAMESPACE = "capd-py-system"
SECRET_NAME = "capd-py-webhook-cert"
SECRET_TYPE = "kubernetes.io/tls"
CA_CRT, CA_KEY, TLS_CRT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
# In-cluster: the Service in front of the controllers' pods, and the port the pods listen on (hostNetwork).
SERVICE_NAME = "capd-py-webhook"
SERVICE_PORT = 443
DEFAULT_PORT = 9443
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class WebhookCert:
    """What the Secret holds: the CA (its key too: every replica may re-issue the serving certificate) and the
    serving certificate + key, all PEM."""

    ca: KeyPair
    serving: KeyPair

    def secret_data(self) -> dict[str, str]:
        raw = {CA_CRT: self.ca.cert, CA_KEY: self.ca.key, TLS_CRT: self.serving.cert, TLS_KEY: self.serving.key}
        return {k: base64.b64encode(v).decode() for k, v in raw.items()}

    @classmethod
    def from_secret(cls, secret: dict[str, Any] | None) -> WebhookCert | None:
        data = (secret or {}).get("data") or {}
        try:
            raw = {k: base64.b64decode(data[k]) for k in (CA_CRT, CA_KEY, TLS_CRT, TLS_KEY)}
        except (KeyError, ValueError, TypeError):
            return None
        return cls(KeyPair(raw[CA_CRT], raw[CA_KEY]), KeyPair(raw[TLS_CRT], raw[TLS_KEY]))


def secret_manifest(cert: WebhookCert, resource_version: str | None = None, namespace: str = SECRET_NAMESPACE
                    ) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": SECRET_NAME, "namespace": namespace,
                            "labels": {"app.kubernetes.io/part-of": "capd-py"}}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": SECRET_TYPE, "data": cert.secret_data()}


def ca_needs_renewal(ca: KeyPair, now: _dt.datetime | None = None, min_days_left: int = 30) -> bool:
    """Unusable (not a CA certificate, a key that does not parse or match it: certs.validate_keypair, cached per
    content, so the refresh every replica runs each minute costs no key parsing) or about to expire."""
    if validate_keypair(CA_COMMON_NAME, ca) is not None:
        return True
    t = (now or _dt.datetime.now(_dt.UTC)).astimezone(_dt.UTC)
    return x509.load_pem_x509_certificate(ca.cert).not_valid_after_utc - t < _dt.timedelta(days=min_days_left)


def desired_webhook_cert(current: WebhookCert | None, hosts: Sequence[str], now: _dt.datetime | None = None
                         ) -> WebhookCert | None:
    """The Secret's next content, or None when `current` serves `hosts` for long enough. A missing or unusable CA
    means a new CA (and so a new caBundle in every CRD); otherwise only the serving certificate is re-issued."""
    if current is None or ca_needs_renewal(current.ca, now):
        ca = new_webhook_ca(now)
        return WebhookCert(ca, new_serving_cert(ca, hosts, now))
    if serving_cert_needs_renewal(current.serving.cert, current.ca.cert, hosts, now):
        return WebhookCert(current.ca, new_serving_cert(current.ca, hosts, now))
    return None


@dataclass(frozen=True)
class Endpoint:
    """Where this process serves the webhook the CRDs point at: the address it binds, the certificate's hosts,
    whether several processes share the port (in-cluster: two hostNetwork replicas on one node), and the namespace
    of the certificate's Secret (in-cluster the Service's, the controllers' own: capd-py-system for `capd-py init
    --in-cluster`, capd-system for clusterctl's components; SECRET_NAMESPACE in host mode)."""

    bind: str
    port: int
    hosts: tuple[str, ...]
    reuse_port: bool
    secret_namespace: str = SECRET_NAMESPACE


def host_mode_url(address: str, port: int = DEFAULT_PORT) -> str:
    host = f"[{address}]" if ":" in address else address
    return f"https://{host}:{port}/convert"


def service_hosts(namespace: str = SECRET_NAMESPACE, name: str = SERVICE_NAME) -> tuple[str, ...]:
    return (f"{name}.{namespace}.svc", f"{name}.{namespace}.svc.cluster.local")


def url_hosts(url: str) -> tuple[str, ...]:
    """The serving certificate's hosts for a URL-configured webhook: the URL's host, and loopback (probes)."""
    host = urlsplit(url).hostname or ""
    return tuple(dict.fromkeys(h for h in (host, LOOPBACK) if h))


def endpoint(conversion: dict[str, Any] | None, bind: str | None = None, port: int = DEFAULT_PORT
             ) -> Endpoint | None:
    """What to serve for a CRD's spec.conversion (None: not converted by a webhook, nothing to serve).
    By URL (host mode, `init --kubeconfig --webhook-url`): bind the URL's address when it is an IP literal
    (else every address, or `bind`), on the URL's port. By Service (in-cluster): every address of the pod's
    (the node's) network namespace on `port`, shared between replicas."""
    if not conversion or conversion.get("strategy") != "Webhook":
        return None
    client = (conversion.get("webhook") or {}).get("clientConfig") or {}
    if client.get("url"):
        parts = urlsplit(str(client["url"]))
        host = parts.hostname or ""
        if bind is None:
            try:
                bind = str(ipaddress.ip_address(host))
            except ValueError:
                bind = "0.0.0.0"
        return Endpoint(bind, parts.port or 443, url_hosts(str(client["url"])), reuse_port=False)
    service = client.get("service") or {}
    if service.get("name"):
        namespace = str(service.get("namespace") or SECRET_NAMESPACE)
        return Endpoint(bind or "0.0.0.0", port, service_hosts(namespace, str(service["name"])), reuse_port=True,
                        secret_namespace=namespace)
    return None


def client_config_patch(conversion: dict[str, Any] | None, ca_pem: bytes,
                        service: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The merge patch of a CRD's `spec.conversion` that makes its webhook trust `ca_pem` and, when it names a
    Service and `service` is given, name that Service's namespace and name (None: nothing to change; a CRD not
    converted by a webhook is left alone). `clusterctl init` moves every CRD's Service reference into its provider's
    namespace (capi-system, capi-kubeadm-bootstrap-system, ...), where capd-py has no Service: the controllers
    point them back at theirs, the one the infrastructure provider's CRDs name (docs/clusterctl.md)."""
    if not conversion or conversion.get("strategy") != "Webhook":
        return None
    client = (conversion.get("webhook") or {}).get("clientConfig") or {}
    want: dict[str, Any] = {}
    if ca_bundle_of(conversion) != ca_pem:
        want["caBundle"] = base64.b64encode(ca_pem).decode()
    current = client.get("service")
    if service and current:
        fix = {k: service[k] for k in ("namespace", "name") if service.get(k) and current.get(k) != service[k]}
        if fix:
            want["service"] = fix
    return {"spec": {"conversion": {"webhook": {"clientConfig": want}}}} if want else None


def ca_bundle_of(conversion: dict[str, Any] | None) -> bytes:
    raw = (((conversion or {}).get("webhook") or {}).get("clientConfig") or {}).get("caBundle") or ""
    try:
        return base64.b64decode(raw)
    except (ValueError, TypeError):
        return b""
