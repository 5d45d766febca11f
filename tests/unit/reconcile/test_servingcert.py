from __future__ import annotations

import datetime as _dt
import ipaddress

import pytest
from cryptography import x509

from capd_py.reconcile import servingcert
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


def test_the_secret_round_trips_and_is_only_rewritten_when_needed() -> None:
    from capd_py.reconcile.servingcert import WebhookCert, desired_webhook_cert, secret_manifest

    first = desired_webhook_cert(None, HOSTS, NOW)
    assert first is not None
    secret = secret_manifest(first, "7")
    assert secret["metadata"] == {"name": "capd-py-webhook-cert", "namespace": "capd-py-system",
                                  "labels": {"app.kubernetes.io/part-of": "capd-py"}, "resourceVersion": "7"}
    assert WebhookCert.from_secret(secret) == first
    assert WebhookCert.from_secret({"data": {"ca.crt": "eA=="}}) is None
    assert desired_webhook_cert(first, HOSTS, NOW) is None
    moved = desired_webhook_cert(first, ["10.1.0.1", "127.0.0.1"], NOW)
    assert moved is not None and moved.ca == first.ca and moved.serving != first.serving
    # an expiring CA (10 years) is replaced, and so is the serving certificate it signed
    renewed = desired_webhook_cert(first, HOSTS, NOW + _dt.timedelta(days=3640))
    assert renewed is not None and renewed.ca != first.ca
    assert not serving_cert_needs_renewal(renewed.serving.cert, renewed.ca.cert, HOSTS, NOW + _dt.timedelta(days=3640))


def test_an_unusable_ca_is_replaced() -> None:
    from capd_py.reconcile.certs import KeyPair
    from capd_py.reconcile.servingcert import ca_needs_renewal

    ca, other = new_webhook_ca(NOW), new_webhook_ca(NOW)
    assert not ca_needs_renewal(ca, NOW)
    assert ca_needs_renewal(KeyPair(ca.cert, other.key), NOW)         # a key that is not the certificate's
    assert ca_needs_renewal(KeyPair(ca.cert, b"not a key"), NOW)
    assert ca_needs_renewal(KeyPair(b"not a certificate", ca.key), NOW)
    leaf = new_serving_cert(ca, HOSTS, NOW)                            # a certificate that is no CA
    assert ca_needs_renewal(leaf, NOW)
    assert ca_needs_renewal(ca, NOW + _dt.timedelta(days=3640))       # 30 days or fewer left


def test_what_to_serve_follows_the_crds_conversion() -> None:
    from capd_py.reconcile.servingcert import Endpoint, endpoint, host_mode_url

    url = host_mode_url("172.18.0.1")
    assert url == "https://172.18.0.1:9443/convert"
    by_url = {"strategy": "Webhook", "webhook": {"clientConfig": {"url": url, "caBundle": "x"}}}
    assert endpoint(by_url) == Endpoint("172.18.0.1", 9443, ("172.18.0.1", "127.0.0.1"), reuse_port=False)
    by_name = {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://mgmt.example:8443/convert"}}}
    assert endpoint(by_name) == Endpoint("0.0.0.0", 8443, ("mgmt.example", "127.0.0.1"), reuse_port=False)
    assert endpoint(by_name, bind="10.0.0.2") == Endpoint("10.0.0.2", 8443, ("mgmt.example", "127.0.0.1"), False)
    by_service = {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {
        "namespace": "capd-py-system", "name": "capd-py-webhook", "port": 443, "path": "/convert"}}}}
    assert endpoint(by_service) == Endpoint("0.0.0.0", 9443, ("capd-py-webhook.capd-py-system.svc",
                                                               "capd-py-webhook.capd-py-system.svc.cluster.local"),
                                            reuse_port=True)
    assert [getattr(endpoint(c), "secret_namespace", None) for c in (by_url, by_service)] == ["capd-py-system"] * 2
    # clusterctl's components: the Service, so the controllers and their certificate's Secret, in capd-system
    in_capd_system = {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {
        "namespace": "capd-system", "name": "capd-py-webhook", "port": 443, "path": "/convert"}}}}
    ep = endpoint(in_capd_system)
    assert ep is not None and ep.secret_namespace == "capd-system"
    assert ep.hosts == ("capd-py-webhook.capd-system.svc", "capd-py-webhook.capd-system.svc.cluster.local")
    assert endpoint({"strategy": "None"}) is None
    assert endpoint(None) is None


def test_client_config_patch_trusts_the_ca_and_names_the_core_service() -> None:
    """clusterctl moves each provider's CRDs' Service reference into the provider's namespace: the controllers point
    it back at theirs (the Docker* CRDs'), and write their CA; a CRD already right gets no patch."""
    import base64

    ca = b"-----CA-----"
    core = {"namespace": "capd-py-system", "name": "capd-py-webhook"}

    def conversion(namespace: str, bundle: bytes = b"") -> dict[str, object]:
        client: dict[str, object] = {"service": {"namespace": namespace, "name": "capd-py-webhook", "port": 443,
                                                 "path": "/convert"}}
        if bundle:
            client["caBundle"] = base64.b64encode(bundle).decode()
        return {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": client}}

    moved = servingcert.client_config_patch(conversion("capd-system"), ca, core)
    assert moved == {"spec": {"conversion": {"webhook": {"clientConfig": {
        "caBundle": base64.b64encode(ca).decode(), "service": {"namespace": "capd-py-system"}}}}}}
    assert servingcert.client_config_patch(conversion("capd-py-system", ca), ca, core) is None
    assert servingcert.client_config_patch(conversion("capd-system", ca), ca, None) is None  # no reference: CA only
    assert servingcert.client_config_patch({"strategy": "None"}, ca, core) is None
    assert servingcert.client_config_patch(None, ca, core) is None
    by_url = {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://10.0.0.1:9443/convert"}}}
    assert servingcert.client_config_patch(by_url, ca, core) == {"spec": {"conversion": {"webhook": {
        "clientConfig": {"caBundle": base64.b64encode(ca).decode()}}}}}
