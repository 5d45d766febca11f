from __future__ import annotations

import datetime as _dt
import ipaddress

import pytest
from cryptography import x509

from capd_py.reconcile.servingcert import new_serving_cert, new_webhook_ca, serving_cert_needs_renewal

pytestmark = pytest.mark.unit

NOW = _dt.datetime(2026, 12, 3, 8, 0, tzinfo=_dt.UTC)
HOSTS = ["capd-py-webhook.capd-py-system.svc", "172.18.0.1", "127.0.0.1"]


def test_the_serving_cert_names_every_host_and_is_signed_by_the_ca() -> None:
    ca = new_webhook_ca(NOW)
    pair = new_serving_cert(ca, HOSTS, NOW)
    cert = x509.load_pem_x509_certificate(pair.cert)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert))
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["capd-py-webhook.capd-py-system.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("172.18.0.1"),
                                                         ipaddress.ip_address("127.0.0.1")]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in usage
    assert not serving_cert_needs_renewal(pair.cert, ca.cert, HOSTS, NOW)


def test_renewal_when_a_host_is_missing_the_ca_changed_or_it_expires_soon() -> None:
    ca = new_webhook_ca(NOW)
    pair = new_serving_cert(ca, HOSTS, NOW)
    assert serving_cert_needs_renewal(pair.cert, ca.cert, [*HOSTS, "10.0.0.1"], NOW)
    assert serving_cert_needs_renewal(pair.cert, new_webhook_ca(NOW).cert, HOSTS, NOW)
    assert serving_cert_needs_renewal(pair.cert, ca.cert, HOSTS, NOW + _dt.timedelta(days=340))
    assert serving_cert_needs_renewal(b"not a cert", ca.cert, HOSTS, NOW)


def test_a_serving_cert_needs_a_host() -> None:
    with pytest.raises(ValueError):
        new_serving_cert(new_webhook_ca(NOW), [], NOW)
