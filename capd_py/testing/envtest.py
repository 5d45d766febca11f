"""A throw-away management plane for tests: etcd + kube-apiserver as local subprocesses.

No controllers run (no kube-controller-manager): namespaces are not finalized by a namespace controller,
garbage collection does not happen. Everything lives in a temp dir and on random loopback ports; `stop()`
kills both process groups and removes the temp dir.

    with EnvTest() as env:
        kube = env.kube()           # capd_py.kube.client.Kube authenticated as system:masters
        env.kubeconfig_path         # for kubectl / other clients
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import datetime
import ipaddress
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from tenacity import RetryError, Retrying, retry_if_result, stop_after_delay, wait_fixed

from capd_py.api.versions import DEFAULT_VERSION
from capd_py.kube import admission_webhook
from capd_py.kube.client import Kube
from capd_py.kube.crds import install_crds

MAKE_HINT = "run `make binaries` to build them"


class EnvTestError(RuntimeError):
    pass


def cache_dir() -> Path:
    return Path(os.environ.get("CAPD_PY_CACHE") or Path.home() / ".cache" / "capd-py")


def binary_paths(version: str = DEFAULT_VERSION) -> tuple[Path, Path]:
    """(kube-apiserver, etcd) locations in the build cache."""
    root = cache_dir()
    return root / "k8s" / version / "bin" / "kube-apiserver", root / "addons" / version / "etcd"


def missing_binaries(version: str = DEFAULT_VERSION) -> list[Path]:
    return [p for p in binary_paths(version) if not (p.is_file() and os.access(p, os.X_OK))]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- PKI ---------------------------------------------------------------------------------------------------

def _pem_key(key: Any) -> bytes:
    return bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


@dataclass
class _CA:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, cn: str) -> _CA:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                             content_commitment=False, key_encipherment=False,
                                             data_encipherment=False, key_agreement=False, encipher_only=False,
                                             decipher_only=False), critical=True)
                .sign(key, hashes.SHA256()))
        return cls(key, cert)

    def issue(self, cn: str, orgs: tuple[str, ...] = (), server: bool = False,
              client: bool = False) -> tuple[bytes, bytes]:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + (
            [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        b = (x509.CertificateBuilder().subject_name(x509.Name(attrs)).issuer_name(self.cert.subject)
             .public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
             .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
             .add_extension(x509.ExtendedKeyUsage(usages), critical=False))
        if server:
            b = b.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes"), x509.DNSName("kubernetes.default"),
                x509.DNSName("kubernetes.default.svc"), x509.DNSName("kubernetes.default.svc.cluster.local"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
            ]), critical=False)
        cert = b.sign(self.key, hashes.SHA256())
        return _pem_cert(cert), _pem_key(key)


def write_serving_cert(directory: Path, cert_name: str = "tls.crt", key_name: str = "tls.key") -> bytes:
    """A serving certificate for localhost / 127.0.0.1 signed by a new CA, written as `directory`/tls.crt and tls.key
    (controller-runtime's webhook server's names); returns the CA's PEM (a webhook configuration's caBundle)."""
    ca = _CA.create("capd-py-local-serving-ca")
    crt, key = ca.issue("localhost", server=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / cert_name).write_bytes(crt)
    (directory / key_name).write_bytes(key)
    (directory / key_name).chmod(0o600)
    return _pem_cert(ca.cert)


# --- the environment ---------------------------------------------------------------------------------------

@dataclass
class EnvTest:
    version: str = DEFAULT_VERSION
    startup_timeout: float = 60.0
    extra_apiserver_flags: list[str] = field(default_factory=list)
    # A real management cluster garbage-collects owned objects and finalizes namespaces; the e2e tier
    # wants that, so it can also run kube-controller-manager (only those controllers).
    controller_manager: bool = False

    dir: Path | None = None
    etcd_port: int = 0
    etcd_peer_port: int = 0
    port: int = 0
    _procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    _logs: list[Any] = field(default_factory=list)

    # -- public -----------------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def kubeconfig_path(self) -> Path:
        return self._d / "kubeconfig"

    @property
    def kubeconfig(self) -> str:
        return self.kubeconfig_path.read_text()

    def kube(self) -> Kube:
        """A new `capd_py.kube.client.Kube` for this API server (caller closes it)."""
        return Kube.from_kubeconfig(str(self.kubeconfig_path))

    def start(self) -> EnvTest:
        missing = missing_binaries(self.version)
        if missing:
            raise EnvTestError(f"envtest binaries missing: {', '.join(map(str, missing))}; {MAKE_HINT} "
                               f"(CAPD_PY_CACHE={cache_dir()})")
        apiserver, etcd = binary_paths(self.version)
        self.dir = Path(tempfile.mkdtemp(prefix="capd-py-envtest-"))
        atexit.register(self.stop)  # an interpreter exit without stop() must not leak the processes
        try:
            self._write_pki()
            self._start_etcd(etcd)
            for attempt in range(3):  # a random port can be taken between probing and binding
                try:
                    self._start_apiserver(apiserver)
                    break
                except EnvTestError as e:
                    if attempt == 2 or "address already in use" not in str(e):
                        raise
                    self._procs.pop("kube-apiserver", None)
            self._write_kubeconfig()
            if self.controller_manager:
                self._start_controller_manager()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for name in ("kube-controller-manager", "kube-apiserver", "etcd"):  # clients before servers
            p = self._procs.pop(name, None)
            if p is not None:
                stop_process_group(p)
        for f in self._logs:
            with contextlib.suppress(Exception):
                f.close()
        self._logs.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        atexit.unregister(self.stop)

    def __enter__(self) -> EnvTest:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, name: str, lines: int = 40) -> str:
        p = self._d / f"{name}.log"
        if not p.exists():
            return ""
        return "\n".join(p.read_text(errors="replace").splitlines()[-lines:])

    # -- internals --------------------------------------------------------------------------------------
    @property
    def _d(self) -> Path:
        if self.dir is None:
            raise EnvTestError("envtest is not running")
        return self.dir

    def _write(self, name: str, data: bytes, mode: int = 0o600) -> Path:
        p = self._d / "pki" / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(mode)
        return p

    def _write_pki(self) -> None:
        ca = _CA.create("capd-py-envtest-ca")
        self._write("ca.crt", _pem_cert(ca.cert), 0o644)
        self._write("ca.key", _pem_key(ca.key))
        crt, key = ca.issue("kube-apiserver", server=True)
        self._write("apiserver.crt", crt)
        self._write("apiserver.key", key)
        crt, key = ca.issue("capd-py-admin", orgs=("system:masters",), client=True)
        self._write("admin.crt", crt)
        self._write("admin.key", key)
        sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self._write("sa.key", _pem_key(sa))
        self._write("sa.pub", sa.public_key().public_bytes(serialization.Encoding.PEM,
                                                           serialization.PublicFormat.SubjectPublicKeyInfo), 0o644)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        log = open(self._d / f"{name}.log", "wb")  # noqa: SIM115 - closed in stop()
        self._logs.append(log)
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=self._d)
        self._procs[name] = p
        return p

    def _start_etcd(self, etcd: Path) -> None:
        for _ in range(5):
            self.etcd_port, self.etcd_peer_port = free_port(), free_port()
            if self.etcd_port != self.etcd_peer_port:
                break
        client = f"http://127.0.0.1:{self.etcd_port}"
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        p = self._spawn("etcd", [
            str(etcd), "--name=envtest", f"--data-dir={self._d / 'etcd'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=envtest={peer}", "--initial-cluster-state=new",
            "--unsafe-no-fsync=true", "--snapshot-count=100000", "--log-level=warn",
        ])
        self._wait(lambda: _http_ok(f"{client}/health"), p, "etcd", 20)

    def _start_apiserver(self, apiserver: Path) -> None:
        pki = self._d / "pki"
        self.port = free_port()
        argv = [
            str(apiserver),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={self.port}",
            f"--cert-dir={pki}",
            f"--tls-cert-file={pki / 'apiserver.crt'}", f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=RBAC", "--anonymous-auth=false",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",  # no token controller runs here
            "--enable-priority-and-fairness=false",
            "--storage-backend=etcd3", "--storage-media-type=application/json",
            "--watch-cache=true",
            "--endpoint-reconciler-type=none",
            "--v=1",
            *self.extra_apiserver_flags,
        ]
        p = self._spawn("kube-apiserver", argv)
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self._wait(lambda: _http_ok(f"{self.host}/readyz", ctx), p, "kube-apiserver", self.startup_timeout)

    def _start_controller_manager(self) -> None:
        kcm = binary_paths(self.version)[0].with_name("kube-controller-manager")
        if not (kcm.is_file() and os.access(kcm, os.X_OK)):
            raise EnvTestError(f"envtest binary missing: {kcm}; {MAKE_HINT}")
        pki = self._d / "pki"
        p = self._spawn("kube-controller-manager", [
            str(kcm), f"--kubeconfig={self.kubeconfig_path}", f"--authentication-kubeconfig={self.kubeconfig_path}",
            f"--authorization-kubeconfig={self.kubeconfig_path}",
            "--controllers=garbagecollector,namespace,serviceaccount-token,serviceaccount",
            f"--service-account-private-key-file={pki / 'sa.key'}", f"--root-ca-file={pki / 'ca.crt'}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            "--concurrent-gc-syncs=5", "--v=1",
        ])
        time.sleep(0.5)
        if p.poll() is not None:
            raise EnvTestError(f"kube-controller-manager exited with {p.returncode}:\n"
                               f"{self.log_tail('kube-controller-manager')}")

    def _wait(self, probe: Any, proc: subprocess.Popen[bytes], name: str, timeout: float) -> None:
        def ready() -> bool:
            if proc.poll() is not None:  # not retried: a dead process will not come up
                raise EnvTestError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            return bool(probe())

        try:
            Retrying(retry=retry_if_result(lambda ok: not ok), wait=wait_fixed(0.1),
                     stop=stop_after_delay(timeout))(ready)
        except RetryError:
            raise EnvTestError(f"{name} not ready after {timeout:.0f}s:\n{self.log_tail(name)}") from None

    def _write_kubeconfig(self) -> None:
        pki = self._d / "pki"
        cfg = {
            "apiVersion": "v1", "kind": "Config", "current-context": "envtest", "preferences": {},
            "clusters": [{"name": "envtest", "cluster": {"server": self.host,
                                                         "certificate-authority": str(pki / "ca.crt")}}],
            "users": [{"name": "admin", "user": {"client-certificate": str(pki / "admin.crt"),
                                                 "client-key": str(pki / "admin.key")}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
        }
        self.kubeconfig_path.write_text(yaml.safe_dump(cfg))
        self.kubeconfig_path.chmod(0o600)


def _http_ok(url: str, ctx: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2, context=ctx) as r:  # noqa: S310 - loopback only
            return bool(r.status == 200)
    except Exception:  # noqa: BLE001 - not up yet
        return False


def stop_process_group(p: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    """Stop a process started in a session of its own and everything it started: SIGTERM to its group, SIGKILL
    after `grace` seconds. A controllers process left running keeps re-creating what a test deleted."""
    if p.poll() is not None:
        return
    try:
        pgid = os.getpgid(p.pid)
    except ProcessLookupError:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    try:
        p.wait(grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        p.wait(grace)


@contextlib.contextmanager
def started_with_crds(crds: list[dict[str, Any]] | None = None, admission: list[dict[str, Any]] | None = None
                      ) -> Iterator[EnvTest]:
    """A started envtest API server with capd-py's CRDs (or `crds`) installed and Established, and the admission
    webhook configurations `admission` (kube/admission_webhook.configurations: writes of capd-py's kinds then need
    the webhook server running); stopped on exit."""
    env = EnvTest().start()
    try:
        k = env.kube()
        try:
            asyncio.run(install_crds(k, wait=True, crds=crds))
            if admission:
                asyncio.run(admission_webhook.install(k, admission))
        finally:
            k.close()
        yield env
    finally:
        env.stop()
