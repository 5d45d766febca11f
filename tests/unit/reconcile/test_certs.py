"""Cluster certificates, their secrets and the admin kubeconfig."""

from __future__ import annotations

import base64
import datetime as dt

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from capd_py.reconcile import certs

pytestmark = pytest.mark.unit

OWNER = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "name": "kcp",
         "uid": "u1", "controller": True, "blockOwnerDeletion": True}


@pytest.fixture(scope="module")
def ca() -> certs.KeyPair:
    return certs.new_ca()


def test_ca_is_a_ten_year_ca(ca: certs.KeyPair) -> None:
    c = x509.load_pem_x509_certificate(ca.cert)
    assert c.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert c.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert c.subject.rfc4514_string() == "CN=kubernetes"
    life = c.not_valid_after_utc - c.not_valid_before_utc
    assert dt.timedelta(days=3649) < life < dt.timedelta(days=3651)
    assert certs.validate_keypair(certs.CLUSTER_CA, ca) is None


def test_service_account_pair_is_public_and_private_key() -> None:
    kp = certs.generate(certs.SERVICE_ACCOUNT)
    assert b"BEGIN PUBLIC KEY" in kp.cert
    pub = serialization.load_pem_public_key(kp.cert)
    priv = serialization.load_pem_private_key(kp.key, password=None)
    assert pub.public_numbers() == priv.public_key().public_numbers()  # type: ignore[union-attr]
    assert certs.validate_keypair(certs.SERVICE_ACCOUNT, kp) is None


def test_certificate_secret_layout(ca: certs.KeyPair) -> None:
    s = certs.certificate_secret("c1", "ns", certs.ETCD_CA, ca, OWNER)
    assert s["metadata"]["name"] == "c1-etcd"
    assert s["type"] == "cluster.x-k8s.io/secret"
    assert s["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}
    assert s["metadata"]["ownerReferences"] == [OWNER]
    assert set(s["data"]) == {"tls.crt", "tls.key"}
    assert certs.keypair_from_secret(s) == ca
    assert [certs.secret_name("c1", p) for p in certs.PURPOSES] == ["c1-ca", "c1-etcd", "c1-proxy", "c1-sa"]


def test_keypair_from_missing_or_empty_secret() -> None:
    assert certs.keypair_from_secret(None) is None
    assert certs.keypair_from_secret({"data": {}}) is None


def test_corrupted_pair_is_reported(ca: certs.KeyPair) -> None:
    assert certs.validate_keypair(certs.CLUSTER_CA, certs.KeyPair(b"garbage", ca.key))
    assert certs.validate_keypair(certs.CLUSTER_CA, certs.KeyPair(ca.cert, b"garbage"))


def test_key_of_another_pair_is_reported(ca: certs.KeyPair) -> None:
    other = certs.generate(certs.ETCD_CA)
    msg = certs.validate_keypair(certs.CLUSTER_CA, certs.KeyPair(ca.cert, other.key))
    assert msg and "does not match" in msg
    sa, sa2 = certs.generate(certs.SERVICE_ACCOUNT), certs.generate(certs.SERVICE_ACCOUNT)
    assert certs.validate_keypair(certs.SERVICE_ACCOUNT, sa) is None
    assert "does not match" in (certs.validate_keypair(certs.SERVICE_ACCOUNT, certs.KeyPair(sa.cert, sa2.key)) or "")


def test_ca_cert_hash_is_sha256_of_spki(ca: certs.KeyPair) -> None:
    import hashlib
    c = x509.load_pem_x509_certificate(ca.cert)
    spki = c.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    assert certs.ca_cert_hash(ca.cert) == "sha256:" + hashlib.sha256(spki).hexdigest()


def test_cert_files_paths_and_modes() -> None:
    cs = {p: certs.generate(p) for p in certs.PURPOSES}
    files = {f["path"]: f for f in certs.cert_files(cs)}
    assert set(files) == {
        "/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key",
        "/etc/kubernetes/pki/etcd/ca.crt", "/etc/kubernetes/pki/etcd/ca.key",
        "/etc/kubernetes/pki/front-proxy-ca.crt", "/etc/kubernetes/pki/front-proxy-ca.key",
        "/etc/kubernetes/pki/sa.pub", "/etc/kubernetes/pki/sa.key"}
    assert files["/etc/kubernetes/pki/ca.key"]["permissions"] == "0600"
    assert files["/etc/kubernetes/pki/ca.crt"]["permissions"] == "0640"
    # worker: only the CA certificate, no key
    only = certs.cert_files({certs.CLUSTER_CA: certs.KeyPair(cs["ca"].cert, b"")}, "/pki")
    assert [f["path"] for f in only] == ["/pki/ca.crt"]


def test_admin_kubeconfig_signed_by_ca(ca: certs.KeyPair) -> None:
    ep = {"host": "172.18.0.2", "port": 6443}
    text = certs.admin_kubeconfig("c1", ep, ca)
    cfg = yaml.safe_load(text)
    assert cfg["clusters"][0]["cluster"]["server"] == "https://172.18.0.2:6443"
    assert base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]) == ca.cert
    assert cfg["current-context"] == "c1-admin@c1"
    client = x509.load_pem_x509_certificate(base64.b64decode(cfg["users"][0]["user"]["client-certificate-data"]))
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    client.verify_directly_issued_by(ca_cert)
    assert client.subject.rfc4514_string() == "CN=kubernetes-admin,O=system:masters"
    sec = certs.kubeconfig_secret("c1", "ns", text, OWNER)
    assert sec["metadata"]["name"] == "c1-kubeconfig"
    assert sec["type"] == "cluster.x-k8s.io/secret"
    assert base64.b64decode(sec["data"]["value"]).decode() == text
    assert certs.kubeconfig_needs_regeneration(sec, ep, ca) is None
    assert certs.kubeconfig_needs_regeneration(sec, {"host": "other", "port": 6443}, ca) == "endpoint changed"
    assert certs.kubeconfig_needs_regeneration(None, ep, ca) == "missing"
    late = dt.datetime.now(dt.UTC) + dt.timedelta(days=340)
    assert certs.kubeconfig_needs_regeneration(sec, ep, ca, now=late) == "client certificate expiring"


def test_ipv6_endpoint_url() -> None:
    assert certs.endpoint_url({"host": "fd00::1", "port": 6443}) == "https://[fd00::1]:6443"
