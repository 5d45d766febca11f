"""A local stand-in for the two release sources upstream's e2e suite asks at start: the Go module proxy's version
list and GitHub's release downloads (`make conformance`, issue 41).

Why it is needed: upstream's `test/e2e` resolves release markers such as `go://sigs.k8s.io/cluster-api@v1.11`
while ginkgo builds its spec tree (clusterctl_upgrade_test.go calls `GetStableReleaseOfMinor` in four `Describe`
bodies), so *every* run, whatever the focus, needs (1) `$GOPROXY/sigs.k8s.io/cluster-api/@v/list` to list a
release of each minor and (2) `https://github.com/kubernetes-sigs/cluster-api/releases/download/<v>/metadata.yaml`
to answer 200 for it. This machine reaches neither GitHub nor the proxy's list of those minors (2026-12-06: the
proxy lists v1.8.4, v1.13.4-6 and v1.14.2 only), so without this the suite fails before its first spec.

What it serves, and nothing else:
- GOPROXY protocol, plain HTTP: `GET /<module>/@v/list` for the modules in `releases` (the releases upstream has
  published, as recorded in UPSTREAM_RELEASES with their source); 404 for every other path, as a proxy does for
  a module or major version it does not know.
- GitHub release downloads, over HTTPS through `HTTPS_PROXY` (the suite's HTTP client honours it): a `CONNECT
  github.com:443` is answered with a certificate for github.com signed by this mirror's own CA (the suite process
  trusts it through `SSL_CERT_FILE`, see `client_environment`), then `GET /<owner>/<repo>/releases/download/<v>/<file>`
  is read from `assets/<owner>/<repo>/<v>/<file>`. Every listed release has its `metadata.yaml` there (every
  upstream release publishes one); the other assets only where this machine can have them (a clusterctl binary it
  built, say). A missing asset is a 404 with its path, so a spec that needs one fails saying which.
- Any other CONNECT target is refused (403): the suite's clients reach the management and workload clusters
  directly (`NO_PROXY` covers private and loopback addresses).
"""

from __future__ import annotations

import os
import re
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from capd_py.reconcile.certs import new_ca
from capd_py.reconcile.servingcert import new_serving_cert

CLUSTER_API_MODULE = "sigs.k8s.io/cluster-api"
GITHUB_HOST = "github.com"


def _patches(minor: str, last: int) -> tuple[str, ...]:
    return tuple(f"v{minor}.{patch}" for patch in range(last + 1))


# The releases of sigs.k8s.io/cluster-api upstream has published, for the minors upstream's v1.14 e2e suite names
# (n-3 .. current). Source: the tags of github.com/kubernetes-sigs/cluster-api (a mirror fetched 2026-08-21: up to
# v1.11.11, v1.12.11, v1.13.5, v1.14.0) and the Go module proxy on 2026-12-06, which serves the test module at
# v1.13.7-8 and v1.14.1-4 (a test module version is only tagged with its release).
UPSTREAM_RELEASES: Mapping[str, tuple[str, ...]] = {
    CLUSTER_API_MODULE: _patches("1.11", 11) + _patches("1.12", 11) + _patches("1.13", 8) + _patches("1.14", 4),
}

# NO_PROXY for the suite process: everything it should reach directly (Go's http.ProxyFromEnvironment takes CIDRs).
DIRECT_ADDRESSES = ("localhost", "127.0.0.0/8", "::1", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7",
                    "fe80::/10", ".svc", ".cluster.local")

_RELEASE_PATH = re.compile(r"^/(?P<owner>[^/]+)/(?P<repo>[^/]+)/releases/download/(?P<version>[^/]+)/(?P<name>[^/]+)$")


def version_list(releases: Mapping[str, Sequence[str]], path: str) -> str | None:
    """The body of a GOPROXY `@v/list` request for `path`, or None (404) for a module or path not served."""
    if not path.endswith("/@v/list"):
        return None
    module = path[1:-len("/@v/list")]
    versions = releases.get(module)
    return None if versions is None else "".join(f"{v}\n" for v in versions)


def release_asset(assets: Path, path: str) -> Path | None:
    """The file a GitHub release download path names under `assets`, or None (404)."""
    match = _RELEASE_PATH.match(path.split("?", 1)[0])
    if match is None or any(part in ("..", ".") for part in match.groups()):
        return None
    candidate = assets / match["owner"] / match["repo"] / match["version"] / match["name"]
    return candidate if candidate.is_file() else None


def stage_metadata(assets: Path, releases: Sequence[str], metadata_of_minor: Mapping[str, Path],
                   owner: str = "kubernetes-sigs", repo: str = "cluster-api") -> list[str]:
    """Put each release's metadata.yaml under `assets` (from upstream's own copy for its minor, e.g. the e2e data's
    `shared/v1.11/metadata.yaml`); returns the releases left without one (their minor has no copy)."""
    missing: list[str] = []
    for version in releases:
        minor = ".".join(version.lstrip("v").split(".")[:2])
        source = metadata_of_minor.get(minor)
        if source is None:
            missing.append(version)
            continue
        target = assets / owner / repo / version / "metadata.yaml"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
    return missing


@dataclass(frozen=True)
class Mirror:
    url: str        # http://127.0.0.1:PORT: both the GOPROXY and the HTTPS proxy
    ca_file: Path   # the mirror's CA (PEM)

    def client_environment(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """The environment for a process that should take its releases from this mirror."""
        env = dict(os.environ if base is None else base)
        bundle = self.ca_file.with_name("trust-bundle.pem")
        system = Path(ssl.get_default_verify_paths().cafile or "/etc/ssl/certs/ca-certificates.crt")
        bundle.write_bytes((system.read_bytes() if system.is_file() else b"") + b"\n" + self.ca_file.read_bytes())
        no_proxy = ",".join(DIRECT_ADDRESSES)
        env.update({"GOPROXY": self.url, "HTTPS_PROXY": self.url, "https_proxy": self.url,
                    "NO_PROXY": no_proxy, "no_proxy": no_proxy, "SSL_CERT_FILE": str(bundle)})
        env.pop("HTTP_PROXY", None)
        env.pop("http_proxy", None)
        return env


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, releases: Mapping[str, Sequence[str]], assets: Path, tls: ssl.SSLContext) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.releases = releases
        self.assets = assets
        self.tls = tls


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # the suite's own log says what it asked for

    def _reply(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_CONNECT(self) -> None:
        host = self.path.rsplit(":", 1)[0]
        if host != GITHUB_HOST:
            self._reply(403, f"the release mirror serves {GITHUB_HOST} only, not {host}\n".encode())
            return
        self.send_response(200, "Connection established")
        self.end_headers()
        try:
            tls = self.server.tls.wrap_socket(self.connection, server_side=True)
        except (ssl.SSLError, OSError):
            self.close_connection = True
            return
        _Handler(tls, self.client_address, self.server)  # serves the requests inside the tunnel
        self.close_connection = True

    def do_GET(self) -> None:
        if self.headers.get("Host", "").split(":")[0] == GITHUB_HOST:
            asset = release_asset(self.server.assets, self.path)
            if asset is None:
                self._reply(404, f"not in this machine's release mirror: https://{GITHUB_HOST}{self.path}\n".encode())
            else:
                self._reply(200, asset.read_bytes(), "application/octet-stream")
            return
        body = version_list(self.server.releases, self.path.split("?", 1)[0])
        if body is None:
            self._reply(404, b"not found\n")
        else:
            self._reply(200, body.encode())

    do_HEAD = do_GET


@contextmanager
def serving(assets: Path, releases: Mapping[str, Sequence[str]] = UPSTREAM_RELEASES) -> Iterator[Mirror]:
    """Run the mirror on a loopback port for the duration of the block."""
    ca = new_ca("capd-py release mirror CA", days=2)
    leaf = new_serving_cert(ca, [GITHUB_HOST], days=2)
    with tempfile.TemporaryDirectory(prefix="capd-py-release-mirror-") as tmp:
        d = Path(tmp)
        (d / "ca.pem").write_bytes(ca.cert)
        (d / "tls.crt").write_bytes(leaf.cert + ca.cert)
        (d / "tls.key").write_bytes(leaf.key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(d / "tls.crt", d / "tls.key")
        server = _Server(releases, assets, context)
        thread = threading.Thread(target=server.serve_forever, name="release-mirror", daemon=True)
        thread.start()
        try:
            yield Mirror(url=f"http://127.0.0.1:{server.server_port}", ca_file=d / "ca.pem")
        finally:
            server.shutdown()
            server.server_close()
