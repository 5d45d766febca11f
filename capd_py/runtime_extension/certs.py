"""The extension server's certificates in a directory, as upstream's extension servers read them (controller-runtime
`CertDir`: tls.crt + tls.key, cert-manager's ca.crt beside): read what is there, or make a CA and a serving
certificate for the hosts the core dials. The decisions are capd_py.reconcile.servingcert's (the conversion
webhook's): the same CA and serving-certificate rules, here kept in files instead of a Secret.

- tls.crt, tls.key and no ca.key: certificates someone else made (cert-manager, a user) are used as they are;
  ca.crt is the caBundle (absent: tls.crt, for a self-signed certificate).
- nothing there, or our own files (ca.key present): a CA is made when missing or unusable, and the serving
  certificate is (re)issued when it lacks a host or expires within 30 days; hosts it already had are kept, so
  `manifest --url` and `serve` may add theirs in any order."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from capd_py.reconcile import servingcert
from capd_py.reconcile.certs import KeyPair

CA_CRT, CA_KEY, TLS_CRT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
DEFAULT_HOSTS = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class ServingCerts:
    ca_pem: bytes  # what the ExtensionConfig's caBundle trusts
    cert_pem: bytes
    key_pem: bytes
    directory: Path


def default_cert_dir() -> Path:
    return Path(os.environ.get("CAPD_PY_HOME", "~/.capd-py")).expanduser() / "runtime-extension-certs"


def cert_hosts(cert_pem: bytes) -> list[str]:
    """The DNS names and IP addresses a certificate names (empty when it does not parse)."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound):
        return []
    return [*map(str, sans.get_values_for_type(x509.DNSName)), *map(str, sans.get_values_for_type(x509.IPAddress))]


def _normalized(host: str) -> str:
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return host


def _write(path: Path, data: bytes, private: bool = False) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if private:
        tmp.touch(mode=0o600)
    tmp.write_bytes(data)
    tmp.replace(path)  # a concurrent reader never sees half a file


def ensure_certs(directory: Path | str, hosts: Sequence[str] = ()) -> ServingCerts:
    """The certificates in `directory` (created as needed, see the module docstring), serving `hosts` plus
    localhost and 127.0.0.1."""
    d = Path(directory).expanduser()
    wanted = list(dict.fromkeys(_normalized(h) for h in (*hosts, *DEFAULT_HOSTS) if h))
    tls_crt, tls_key, ca_crt, ca_key = (d / n for n in (TLS_CRT, TLS_KEY, CA_CRT, CA_KEY))
    if tls_crt.exists() and tls_key.exists() and not ca_key.exists():
        ca = ca_crt.read_bytes() if ca_crt.exists() else tls_crt.read_bytes()
        return ServingCerts(ca, tls_crt.read_bytes(), tls_key.read_bytes(), d)
    d.mkdir(parents=True, exist_ok=True)
    current: servingcert.WebhookCert | None = None
    if all(p.exists() for p in (tls_crt, tls_key, ca_crt, ca_key)):
        current = servingcert.WebhookCert(KeyPair(ca_crt.read_bytes(), ca_key.read_bytes()),
                                          KeyPair(tls_crt.read_bytes(), tls_key.read_bytes()))
        wanted = list(dict.fromkeys([*wanted, *cert_hosts(current.serving.cert)]))
    desired = servingcert.desired_webhook_cert(current, wanted)
    if desired is None:
        assert current is not None
        return ServingCerts(current.ca.cert, current.serving.cert, current.serving.key, d)
    if current is None or desired.ca != current.ca:
        _write(ca_key, desired.ca.key, private=True)
        _write(ca_crt, desired.ca.cert)
    _write(tls_key, desired.serving.key, private=True)
    _write(tls_crt, desired.serving.cert)
    return ServingCerts(desired.ca.cert, desired.serving.cert, desired.serving.key, d)
