"""Cluster certificates and the admin kubeconfig, the way Cluster API stores them (pure; no I/O).

Secrets (upstream names and layout): `<cluster>-ca` (cluster CA), `<cluster>-etcd` (etcd CA),
`<cluster>-proxy` (front-proxy CA), `<cluster>-sa` (service-account key pair; tls.crt holds the public
key), each of type `cluster.x-k8s.io/secret` with keys `tls.crt` / `tls.key`, labelled with the cluster
name and owned by whoever generated them (the KubeadmControlPlane, or the KubeadmConfig for standalone
control-plane machines). `<cluster>-kubeconfig` (key `value`) carries an admin client certificate signed
by the cluster CA and points at the Cluster's controlPlaneEndpoint.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import hashlib
from dataclasses import dataclass
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from capd_py.api import kubeyaml
from capd_py.api.labels import CLUSTER_NAME

SECRET_TYPE = "cluster.x-k8s.io/secret"
TLS_CRT = "tls.crt"
TLS_KEY = "tls.key"
KUBECONFIG_KEY = "value"

CLUSTER_CA = "ca"
ETCD_CA = "etcd"
FRONT_PROXY_CA = "proxy"
SERVICE_ACCOUNT = "sa"
KUBECONFIG = "kubeconfig"
PURPOSES: tuple[str, ...] = (CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA, SERVICE_ACCOUNT)

DEFAULT_CERTIFICATES_DIR = "/etc/kubernetes/pki"
CA_VALIDITY_DAYS = 3650
CLIENT_CERT_VALIDITY_DAYS = 365
# The kubeconfig is regenerated when its client certificate has less than this left.
KUBECONFIG_ROTATION_DAYS = 30
RSA_BITS = 2048


@dataclass(frozen=True)
class KeyPair:
    cert: bytes  # PEM (for the service-account pair: the PEM public key)
    key: bytes   # PEM private key


def secret_name(cluster: str, purpose: str) -> str:
    return f"{cluster}-{purpose}"


def _now(now: _dt.datetime | None) -> _dt.datetime:
    return (now or _dt.datetime.now(_dt.UTC)).astimezone(_dt.UTC)


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)


def new_key_pem() -> bytes:
    """A fresh RSA private key, PEM (made once and reused where many certificates are signed, as upstream's
    in-memory server does)."""
    return _key_pem(_new_key())


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def new_ca(common_name: str = "kubernetes", now: _dt.datetime | None = None,
           days: int = CA_VALIDITY_DAYS) -> KeyPair:
    """A self-signed CA (RSA 2048, 10 years by default) usable by kubeadm for any of its CAs."""
    t = _now(now)
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(t - _dt.timedelta(minutes=5))
        .not_valid_after(t + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True,
                                     content_commitment=False, data_encipherment=False, key_agreement=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def new_service_account_keypair() -> KeyPair:
    key = _new_key()
    pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                        serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyPair(pub, _key_pem(key))


def generate(purpose: str, now: _dt.datetime | None = None) -> KeyPair:
    if purpose == SERVICE_ACCOUNT:
        return new_service_account_keypair()
    if purpose in (CLUSTER_CA, ETCD_CA, FRONT_PROXY_CA):
        return new_ca(now=now)
    raise ValueError(f"unknown certificate purpose {purpose!r}")


# --- secrets ------------------------------------------------------------------------------------

def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def certificate_secret(cluster: str, namespace: str, purpose: str, kp: KeyPair,
                       owner: dict[str, Any] | None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": secret_name(cluster, purpose), "namespace": namespace,
                          "labels": {CLUSTER_NAME: cluster}}
    if owner:
        md["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": md, "type": SECRET_TYPE,
            "data": {TLS_CRT: _b64(kp.cert), TLS_KEY: _b64(kp.key)}}


def keypair_from_secret(secret: dict[str, Any] | None) -> KeyPair | None:
    """None when the secret is absent or lacks tls.crt (a worker only needs the cert; key may be empty)."""
    data = (secret or {}).get("data") or {}
    if not data.get(TLS_CRT):
        return None
    return KeyPair(base64.b64decode(data[TLS_CRT]), base64.b64decode(data.get(TLS_KEY) or ""))


def validate_keypair(purpose: str, kp: KeyPair) -> str | None:
    """A message when a stored pair is unusable (corrupted secret), else None."""
    return _validate_pem(purpose, kp.cert, kp.key)


# Parsing (and so checking) an RSA private key costs milliseconds and every control-plane reconcile
# validates four pairs; the answer for the same bytes never changes.
@functools.lru_cache(maxsize=1024)
def _validate_pem(purpose: str, cert_pem: bytes, key_pem: bytes | None) -> str | None:
    try:
        if purpose == SERVICE_ACCOUNT:
            serialization.load_pem_public_key(cert_pem)
        else:
            cert = x509.load_pem_x509_certificate(cert_pem)
            bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
            if not bc.ca:
                return f"{purpose}: certificate is not a CA"
        if key_pem:
            # OpenSSL's full RSA consistency check costs tens of ms per key (seconds of CPU for 100
            # clusters); what matters here is that the key parses and belongs to the certificate.
            key = serialization.load_pem_private_key(key_pem, password=None, unsafe_skip_rsa_key_validation=True)
            pub = serialization.load_pem_public_key(cert_pem) if purpose == SERVICE_ACCOUNT else cert.public_key()
            if _spki(key.public_key()) != _spki(pub):
                return f"{purpose}: private key does not match the certificate"
    except (ValueError, TypeError, x509.ExtensionNotFound) as e:
        return f"{purpose}: {e}"
    return None


def _spki(k: Any) -> bytes:
    return bytes(k.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))


def ca_cert_hash(cert_pem: bytes) -> str:
    """kubeadm discovery hash: sha256 over the certificate's DER SubjectPublicKeyInfo."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    spki = cert.public_key().public_bytes(serialization.Encoding.DER,
                                          serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def cert_files(certs: dict[str, KeyPair], certificates_dir: str = DEFAULT_CERTIFICATES_DIR,
               purposes: tuple[str, ...] = PURPOSES) -> list[dict[str, str]]:
    """cloud-init write_files entries placing the CAs/keys where kubeadm looks for them."""
    d = (certificates_dir or DEFAULT_CERTIFICATES_DIR).rstrip("/")
    paths = {CLUSTER_CA: (f"{d}/ca.crt", f"{d}/ca.key"),
             ETCD_CA: (f"{d}/etcd/ca.crt", f"{d}/etcd/ca.key"),
             FRONT_PROXY_CA: (f"{d}/front-proxy-ca.crt", f"{d}/front-proxy-ca.key"),
             SERVICE_ACCOUNT: (f"{d}/sa.pub", f"{d}/sa.key")}
    out: list[dict[str, str]] = []
    for p in purposes:
        kp = certs.get(p)
        if not kp:
            continue
        crt, key = paths[p]
        out.append({"path": crt, "owner": "root:root", "permissions": "0640", "content": kp.cert.decode()})
        if kp.key:
            out.append({"path": key, "owner": "root:root", "permissions": "0600", "content": kp.key.decode()})
    return out


# --- kubeconfig ---------------------------------------------------------------------------------

def endpoint_url(endpoint: dict[str, Any]) -> str:
    host = str(endpoint["host"])
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"https://{host}:{int(endpoint['port'])}"


def new_leaf_cert(ca: KeyPair, subject: list[x509.NameAttribute], usage: x509.ObjectIdentifier,
                  sans: list[x509.GeneralName] | None = None, now: _dt.datetime | None = None,
                  days: int = CLIENT_CERT_VALIDITY_DAYS, key_pem: bytes | None = None) -> KeyPair:
    """A fresh key (or `key_pem`'s: RSA key generation is the slow part) and a certificate for it signed by `ca`: not
    a CA, digital signature + key encipherment, the one extended `usage` (client or server auth), valid from five
    minutes ago for `days`."""
    t = _now(now)
    ca_cert = x509.load_pem_x509_certificate(ca.cert)
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise ValueError("CA key is not RSA")
    loaded = serialization.load_pem_private_key(key_pem, password=None) if key_pem else _new_key()
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise ValueError("the leaf key is not RSA")
    key = loaded
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject)).issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(t - _dt.timedelta(minutes=5))
        .not_valid_after(t + _dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                     content_commitment=False, data_encipherment=False, key_agreement=False,
                                     crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def new_client_cert(ca: KeyPair, common_name: str, organizations: list[str], now: _dt.datetime | None = None,
                    days: int = CLIENT_CERT_VALIDITY_DAYS) -> KeyPair:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return new_leaf_cert(ca, attrs, ExtendedKeyUsageOID.CLIENT_AUTH, now=now, days=days)


def admin_kubeconfig(cluster: str, endpoint: dict[str, Any], ca: KeyPair, now: _dt.datetime | None = None) -> str:
    client = new_client_cert(ca, "kubernetes-admin", ["system:masters"], now=now)
    user, ctx = f"{cluster}-admin", f"{cluster}-admin@{cluster}"
    cfg = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cluster, "cluster": {"server": endpoint_url(endpoint),
                                                   "certificate-authority-data": _b64(ca.cert)}}],
        "contexts": [{"name": ctx, "context": {"cluster": cluster, "user": user}}],
        "current-context": ctx,
        "users": [{"name": user, "user": {"client-certificate-data": _b64(client.cert),
                                          "client-key-data": _b64(client.key)}}],
    }
    return str(yaml.safe_dump(cfg, sort_keys=False))


def kubeconfig_secret(cluster: str, namespace: str, kubeconfig: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": secret_name(cluster, KUBECONFIG), "namespace": namespace,
                          "labels": {CLUSTER_NAME: cluster}}
    if owner:
        md["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": md, "type": SECRET_TYPE,
            "data": {KUBECONFIG_KEY: _b64(kubeconfig.encode())}}


def kubeconfig_needs_regeneration(secret: dict[str, Any] | None, endpoint: dict[str, Any], ca: KeyPair,
                                  now: _dt.datetime | None = None) -> str | None:
    """Why the stored kubeconfig must be rewritten (missing, other endpoint, other CA, expiring), or None."""
    raw = ((secret or {}).get("data") or {}).get(KUBECONFIG_KEY)
    if not raw:
        return "missing"
    parsed = _kubeconfig_facts(raw)
    if parsed is None:
        return "unreadable"
    server, ca_cert, not_after = parsed
    if server != endpoint_url(endpoint):
        return "endpoint changed"
    if ca_cert != ca.cert:
        return "cluster CA changed"
    if not_after - _now(now) < _dt.timedelta(days=KUBECONFIG_ROTATION_DAYS):
        return "client certificate expiring"
    return None


# Every control-plane reconcile checks the stored kubeconfig; parsing its YAML and certificate each time
# was several per cent of the controllers' CPU, and the facts of the same bytes never change.
@functools.lru_cache(maxsize=1024)
def _kubeconfig_facts(raw: str) -> tuple[str | None, bytes, _dt.datetime] | None:
    """(server, CA certificate, client certificate notAfter) of a base64 kubeconfig, None if unreadable."""
    try:
        cfg = kubeyaml.load(base64.b64decode(raw))
        cl = cfg["clusters"][0]["cluster"]
        usr = cfg["users"][0]["user"]
        cert = x509.load_pem_x509_certificate(base64.b64decode(usr["client-certificate-data"]))
        return cl.get("server"), base64.b64decode(cl.get("certificate-authority-data", "")), cert.not_valid_after_utc
    except (KeyError, IndexError, TypeError, ValueError, yaml.YAMLError):
        return None
