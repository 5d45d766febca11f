"""The extension's certificate directory and its ExtensionConfig manifest."""

from __future__ import annotations

import base64
import datetime as _dt
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from capd_py.reconcile.certs import new_ca
from capd_py.reconcile.servingcert import new_serving_cert
from capd_py.runtime_extension import ensure_certs, extension_config, for_namespaces, namespace_selector, to_yaml
from capd_py.runtime_extension.certs import cert_hosts

pytestmark = pytest.mark.unit


def _issuer_verified(cert_pem: bytes, ca_pem: bytes) -> bool:
    x509.load_pem_x509_certificate(cert_pem).verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
    return True


def test_an_empty_directory_gets_a_ca_and_a_serving_certificate_for_the_hosts(tmp_path: Path) -> None:
    certs = ensure_certs(tmp_path / "d", ["172.18.0.1", "ext.example"])
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert (tmp_path / "d" / "tls.key").stat().st_mode & 0o077 == 0
    assert set(cert_hosts(certs.cert_pem)) == {"172.18.0.1", "ext.example", "localhost", "127.0.0.1"}
    assert _issuer_verified(certs.cert_pem, certs.ca_pem)


def test_the_same_certificates_are_reused_and_a_new_host_keeps_the_old_ones_and_the_ca(tmp_path: Path) -> None:
    first = ensure_certs(tmp_path, ["172.18.0.1"])
    assert ensure_certs(tmp_path, ["172.18.0.1"]) == first
    second = ensure_certs(tmp_path, ["10.0.0.7"])
    assert second.ca_pem == first.ca_pem and second.cert_pem != first.cert_pem
    assert {"172.18.0.1", "10.0.0.7"} <= set(cert_hosts(second.cert_pem))


def test_certificates_made_elsewhere_are_used_as_they_are(tmp_path: Path) -> None:
    ca = new_ca("someone-elses-ca")
    serving = new_serving_cert(ca, ["ext.svc"], now=_dt.datetime.now(_dt.UTC))
    (tmp_path / "tls.crt").write_bytes(serving.cert)
    (tmp_path / "tls.key").write_bytes(serving.key)
    (tmp_path / "ca.crt").write_bytes(ca.cert)
    certs = ensure_certs(tmp_path, ["another.host"])  # not re-issued: we do not hold that CA's key
    assert (certs.ca_pem, certs.cert_pem) == (ca.cert, serving.cert)


def test_extension_config_by_url_with_selector_and_settings() -> None:
    obj = extension_config("ext", b"PEM", url="https://172.18.0.1:9443",
                           namespace_selector=for_namespaces("ns1", "ns2"), settings={"k": "v"})
    assert obj == {"apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig",
                   "metadata": {"name": "ext"},
                   "spec": {"clientConfig": {"url": "https://172.18.0.1:9443",
                                             "caBundle": base64.b64encode(b"PEM").decode()},
                            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                        "operator": "In", "values": ["ns1", "ns2"]}]},
                            "settings": {"k": "v"}}}
    assert yaml.safe_load(to_yaml(obj)) == obj


def test_extension_config_by_service_and_its_refusals() -> None:
    obj = extension_config("ext", b"PEM", service={"namespace": "ns", "name": "svc", "port": 443})
    assert obj["spec"] == {"clientConfig": {"service": {"namespace": "ns", "name": "svc", "port": 443},
                                            "caBundle": base64.b64encode(b"PEM").decode()}}
    with pytest.raises(ValueError, match="exactly one of url and service"):
        extension_config("ext", b"PEM")
    with pytest.raises(ValueError, match="must be https://"):
        extension_config("ext", b"PEM", url="http://x:1")


def test_namespace_selector_from_its_string_form() -> None:
    assert namespace_selector("kubernetes.io/metadata.name in (a,b)") == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]}
    assert namespace_selector("team=x") == {"matchLabels": {"team": "x"}}
    assert namespace_selector("") is None and namespace_selector(None) is None
    with pytest.raises(ValueError):
        namespace_selector("a in")
