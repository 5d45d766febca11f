"""The conversion webhook's serving certificate (pure; no I/O): a self-signed CA, whose PEM goes into each
CRD's spec.conversion.webhook.clientConfig.caBundle, and a server certificate it signs for the names and
addresses the management API server dials."""

from __future__ import annotations

import datetime as _dt
import ipaddress
from collections.abc import Sequence

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from capd_py.reconcile.certs import KeyPair, new_ca, new_leaf_cert

CA_COMMON_NAME = "capd-py-webhook-ca"
SERVING_VALIDITY_DAYS = 365
CA_VALIDITY_DAYS = 3650


def new_webhook_ca(now: _dt.datetime | None = None) -> KeyPair:
    return new_ca(CA_COMMON_NAME, now=now, days=CA_VALIDITY_DAYS)


def new_serving_cert(ca: KeyPair, hosts: Sequence[str], now: _dt.datetime | None = None,
                     days: int = SERVING_VALIDITY_DAYS) -> KeyPair:
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
                         sans=names, now=now, days=days)


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
