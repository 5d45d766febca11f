"""Upstream Cluster API's managers (`make upstream`, hack/build-upstream.sh) as host processes against a kubeconfig.

Five roles, four binaries in `$CAPD_PY_CACHE/upstream/<version>/bin/`:

    core                   cluster-api-manager            Cluster, Machine, MS, MD, MP, MHC, CRS, topology
    kubeadm-bootstrap      kubeadm-bootstrap-manager      KubeadmConfig
    kubeadm-control-plane  kubeadm-control-plane-manager  KubeadmControlPlane
    docker                 capd-manager                   Docker* (CAPD)
    in-memory              capd-manager                   Dev* with backend.inMemory (since v1.10 the in-memory
                                                          provider lives in CAPD's manager; POD_IP = its workload
                                                          API servers' address)

What they need, read from each v1.13 main.go:
- a kubeconfig (`--kubeconfig`); leader election is off by default (`--leader-elect=false` said anyway);
- health probes (`--health-addr`) and metrics (`--diagnostics-address`, plain HTTP with `--insecure-diagnostics`) on
  free loopback ports;
- a webhook server: every manager registers its webhooks unconditionally and adds the webhook server's
  StartedChecker to /healthz and /readyz, so it cannot run without one (`--webhook-port=0` means controller-runtime's
  default 9443). It is served on a free loopback port with a self-signed certificate written to a temp dir
  (`--webhook-cert-dir`); the API server only calls it if webhook configurations name it (`webhook_url`, `ca_bundle`);
- the CRDs of every kind its controllers watch, Established, else its caches never sync (the process exits after
  upstream's 5-minute CacheSyncTimeout). capd-py's CRDs serve the v1beta2 upstream stores (upstream also serves
  v1beta1). ExtensionConfig (the core's ClusterClass controller, with ClusterTopology on, RuntimeSDK or not) and
  CAPD's DevCluster/DevMachine/DevMachineTemplate/DevMachinePool are capd-py's kinds too now; a kind capd-py did not
  define would be a role's `extra_crds` (upstream's CRD, copied into the cache by the build);
- the same `--feature-gates` as capd-py's controllers (capd_py.api.features.DEFAULTS: ClusterTopology on);
- for CAPD: a docker daemon (`DOCKER_HOST` or /var/run/docker.sock), and the in-memory provider's fixed debug port
  19000 (and 20000-30000 for its workload API servers): one CAPD manager per host.

Stop = SIGTERM to the process group, SIGKILL after a grace period.

    with UpstreamManager("core", env.kubeconfig_path) as m:
        m.wait_healthy(60)
        m.wait_started(["Cluster", "Machine"], 120)

`python -m capd_py.testing.upstream_managers ROLE --kubeconfig PATH [-- extra flags]` runs one in the foreground.
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import fcntl
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from capd_py.api import features, kubeyaml
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube import admission_webhook
from capd_py.kube.client import Kube
from capd_py.kube.crds import install_crds
from capd_py.testing.envtest import cache_dir, free_port, stop_process_group, write_serving_cert

MAKE_HINT = "build them with `make upstream` (hack/build-upstream.sh)"
CAPD_DEBUG_PORT = 19000  # test/infrastructure/inmemory/pkg/server/mux.go DefaultDebugPort, always bound by CAPD


@dataclass(frozen=True)
class Role:
    name: str
    binary: str
    # upstream CRDs (file names under crds/<provider>/) this role watches that capd-py does not define
    extra_crds: tuple[str, ...] = ()
    # controller kinds whose workers start once their watches sync (controller-runtime's "Starting workers")
    controllers: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # its webhook configurations: webhooks/<this>.yaml in the build (upstream's config/webhook/manifests.yaml)
    webhooks: str = ""


ROLES: Mapping[str, Role] = {r.name: r for r in (
    # its ClusterClass controller (ClusterTopology) watches ExtensionConfigs whatever RuntimeSDK says, CAPD's manager
    # the Dev* kinds: capd-py defines both now (issues 29, 30), so nothing extra
    Role("core", "cluster-api-manager", webhooks="core",
         controllers=("Cluster", "Machine", "MachineSet", "MachineDeployment", "MachinePool", "MachineHealthCheck",
                      "ClusterResourceSet", "ClusterResourceSetBinding", "ClusterClass")),
    Role("kubeadm-bootstrap", "kubeadm-bootstrap-manager", webhooks="bootstrap", controllers=("KubeadmConfig",)),
    Role("kubeadm-control-plane", "kubeadm-control-plane-manager", webhooks="controlplane",
         controllers=("KubeadmControlPlane",)),
    Role("docker", "capd-manager", webhooks="docker",
         controllers=("DockerCluster", "DockerMachine", "DockerMachineTemplate", "DockerMachinePool")),
    Role("in-memory", "capd-manager", webhooks="docker",
         controllers=("DevCluster", "DevMachine", "DevMachineTemplate", "DevMachinePool"),
         env=(("POD_IP", "127.0.0.1"),)),
)}


def root(version: str = CLUSTER_API_VERSION) -> Path:
    return cache_dir() / "upstream" / version


def binary(role: str, version: str = CLUSTER_API_VERSION) -> Path:
    return root(version) / "bin" / ROLES[role].binary


def missing(version: str = CLUSTER_API_VERSION) -> str | None:
    """Why the upstream managers cannot be run (None: they can)."""
    r = root(version)
    absent = sorted({str(binary(n, version)) for n in ROLES if not os.access(binary(n, version), os.X_OK)})
    if absent or not (r / ".complete").exists():
        return (f"upstream Cluster API {version} managers not built (missing: {', '.join(absent) or r / '.complete'}); "
                f"{MAKE_HINT}")
    return None


def built_versions(version: str = CLUSTER_API_VERSION) -> str:
    """The build's VERSIONS file (root and test module versions, go version, build time)."""
    p = root(version) / "VERSIONS"
    return p.read_text() if p.exists() else ""


def extra_crds(roles: Iterable[str], version: str = CLUSTER_API_VERSION) -> list[dict[str, Any]]:
    """Upstream's CRDs that `roles` watch and capd-py does not define (install them beside capd-py's)."""
    names = sorted({f for r in roles for f in ROLES[r].extra_crds})
    return [kubeyaml.load((root(version) / "crds" / n).read_text()) for n in names]


def feature_gates(overrides: Mapping[str, bool] | None = None) -> str:
    gates = {**features.DEFAULTS, **(overrides or {})}
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))


class UpstreamManagerError(RuntimeError):
    pass


@dataclass
class UpstreamManager:
    role: str
    kubeconfig: Path
    version: str = CLUSTER_API_VERSION
    gates: Mapping[str, bool] | None = None  # on top of capd-py's defaults
    extra_args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    verbosity: int = 2

    dir: Path | None = None
    health_port: int = 0
    metrics_port: int = 0
    webhook_port: int = 0
    ca_bundle: bytes = b""  # PEM of the CA that signed the webhook server's certificate
    proc: subprocess.Popen[bytes] | None = None
    _log: Any = None
    _debug_port_lock: Any = None

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise UpstreamManagerError(f"unknown role {self.role!r}; one of {', '.join(ROLES)}")

    # -- public -----------------------------------------------------------------------------------------
    @property
    def webhook_url(self) -> str:
        return f"https://127.0.0.1:{self.webhook_port}"

    @property
    def log_path(self) -> Path:
        return self._d / "manager.log"

    def webhook_configurations(self) -> list[dict[str, Any]]:
        """Upstream's Mutating/ValidatingWebhookConfigurations of this manager (its config/webhook/manifests.yaml,
        kept by the build), pointed at its local webhook server (URL clientConfig + `ca_bundle`) and renamed
        `upstream-<role>-...` so several managers' sit side by side. Apply them once the manager is healthy: with
        failurePolicy Fail, a write of a covered kind fails while the server is down."""
        path = root(self.version) / "webhooks" / f"{ROLES[self.role].webhooks}.yaml"
        if not ROLES[self.role].webhooks or not path.exists():
            raise UpstreamManagerError(f"{path} is missing; {MAKE_HINT}")
        ca = base64.b64encode(self.ca_bundle).decode()
        out = []
        for doc in kubeyaml.load_all(path.read_text()):
            if not doc:
                continue
            doc["metadata"] = {"name": f"upstream-{self.role}-{doc['metadata']['name']}"}
            for w in doc.get("webhooks") or []:
                svc = w["clientConfig"].pop("service")
                w["clientConfig"] = {"url": f"{self.webhook_url}{svc['path']}", "caBundle": ca}
            out.append(doc)
        return out

    def argv(self) -> list[str]:
        return [str(binary(self.role, self.version)),
                f"--kubeconfig={self.kubeconfig}",
                "--leader-elect=false",
                f"--health-addr=127.0.0.1:{self.health_port}",
                f"--diagnostics-address=127.0.0.1:{self.metrics_port}", "--insecure-diagnostics",
                f"--webhook-port={self.webhook_port}", f"--webhook-cert-dir={self._d / 'webhook-certs'}",
                f"--feature-gates={feature_gates(self.gates)}",
                f"--v={self.verbosity}",
                *self.extra_args]

    def start(self) -> UpstreamManager:
        why = missing(self.version)
        if why:
            raise UpstreamManagerError(why)
        if ROLES[self.role].binary == "capd-manager":
            self._debug_port_lock = _take_debug_port(CAPD_PORT_WAIT)
            if not _port_free(CAPD_DEBUG_PORT):
                self._release_debug_port()
                raise UpstreamManagerError(f"port {CAPD_DEBUG_PORT} (CAPD's in-memory debug server) is taken: "
                                           "a CAPD manager runs on this host outside capd-py's tests; one per host")
        self.dir = Path(tempfile.mkdtemp(prefix=f"capd-py-upstream-{self.role}-"))
        atexit.register(self.stop)
        self.ca_bundle = write_serving_cert(self._d / "webhook-certs")
        ports: set[int] = set()
        while len(ports) < 3:
            ports.add(free_port())
        self.health_port, self.metrics_port, self.webhook_port = sorted(ports)
        env = {**os.environ, **dict(ROLES[self.role].env), **self.env}
        env.pop("KUBECONFIG", None)  # the flag says which
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.argv(), stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True, cwd=self._d, env=env)
        return self

    def stop(self, grace: float = 10.0) -> None:
        p, self.proc = self.proc, None
        if p is not None:
            stop_process_group(p, grace)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self._release_debug_port()
        atexit.unregister(self.stop)

    def _release_debug_port(self) -> None:
        f, self._debug_port_lock = self._debug_port_lock, None
        if f is not None:
            f.close()  # closing drops the flock

    def __enter__(self) -> UpstreamManager:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def probe(self, path: str = "/healthz") -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}{path}", timeout=2) as r:  # noqa: S310
                return bool(r.status == 200)
        except Exception:  # noqa: BLE001 - not up (yet)
            return False

    def healthy(self) -> bool:
        return self.probe("/healthz") and self.probe("/readyz")

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:  # noqa: S310
            return str(r.read().decode())

    def log_tail(self, lines: int = 40) -> str:
        if self.dir is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def started_controllers(self) -> set[str]:
        """Kinds of the controllers whose workers started (their watches synced), from the log."""
        if self.dir is None or not self.log_path.exists():
            return set()
        log = self.log_path.read_text(errors="replace")
        return set(re.findall(r'"Starting workers".*?controllerKind="([^"]+)"', log))

    def wait_healthy(self, timeout: float) -> float:
        """Seconds until /healthz and /readyz answered ok; raises with the log's tail if the process dies or time
        runs out."""
        return self._wait(self.healthy, timeout, "healthy (/healthz and /readyz)")

    def wait_started(self, kinds: Iterable[str] | None = None, timeout: float = 120.0) -> float:
        want = set(ROLES[self.role].controllers if kinds is None else kinds)
        return self._wait(lambda: want <= self.started_controllers(), timeout,
                          f"controllers started ({', '.join(sorted(want))})",
                          lambda: f"started: {sorted(self.started_controllers())}")

    # -- internals --------------------------------------------------------------------------------------
    @property
    def _d(self) -> Path:
        if self.dir is None:
            raise UpstreamManagerError(f"upstream {self.role} manager is not running")
        return self.dir

    def _wait(self, ok: Any, timeout: float, what: str, detail: Any = lambda: "") -> float:
        start = time.monotonic()
        while True:
            if self.proc is None or self.proc.poll() is not None:
                rc = None if self.proc is None else self.proc.returncode
                raise UpstreamManagerError(f"upstream {self.role} manager exited ({rc}) before {what}:\n"
                                           f"{self.log_tail()}")
            if ok():
                return time.monotonic() - start
            if time.monotonic() - start > timeout:
                raise UpstreamManagerError(f"upstream {self.role} manager not {what} after {timeout:.0f} s "
                                           f"{detail()}:\n{self.log_tail()}")
            time.sleep(0.2)


# CAPD binds its debug port whatever its role: one CAPD manager per host. Test processes (xdist workers, a
# conformance or oracle run beside `make test`) take turns through this lock instead of failing on the port.
CAPD_PORT_LOCK = Path(tempfile.gettempdir()) / "capd-py-capd-manager.lock"
CAPD_PORT_WAIT = 900.0


def _take_debug_port(timeout: float) -> Any:
    f = open(CAPD_PORT_LOCK, "a")  # noqa: SIM115 - held until the manager stops
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return f
        except BlockingIOError:
            if time.monotonic() > deadline:
                f.close()
                raise UpstreamManagerError(f"another CAPD manager held {CAPD_PORT_LOCK} for {timeout:.0f}s") from None
            time.sleep(0.5)


def with_contract_labels(crd: dict[str, Any]) -> dict[str, Any]:
    """The contract labels upstream's kustomize config adds to its CRD bases (`cluster.x-k8s.io/<contract>:
    <version>`, how the core finds a provider's version): one per served v1beta1/v1beta2 version."""
    served = [v["name"] for v in crd["spec"]["versions"] if v.get("served") and v["name"] in ("v1beta1", "v1beta2")]
    crd["metadata"].setdefault("labels", {}).update({f"cluster.x-k8s.io/{v}": v for v in served})
    return crd


def upstream_crds(version: str = CLUSTER_API_VERSION) -> list[dict[str, Any]]:
    """Upstream's CRD bases as its release installs them (kept by `make upstream` in the cache)."""
    return [with_contract_labels(d) for p in sorted((root(version) / "crds").glob("*/*.yaml"))
            for d in kubeyaml.load_all(p.read_text()) if d]


async def serve(kube: Kube, kubeconfig: Path, stack: contextlib.ExitStack, roles: Sequence[str],
                env_of: Mapping[str, Mapping[str, str]] | None = None) -> list[UpstreamManager]:
    """An API server as upstream's release sets it up: its CRD bases installed, the managers of `roles` running
    (entered on `stack`, so they stop with it; `env_of[role]`: extra environment), healthy, their controllers
    started, and their webhook configurations installed."""
    await install_crds(kube, wait=True, crds=upstream_crds())
    managers = [stack.enter_context(UpstreamManager(r, kubeconfig, env=(env_of or {}).get(r, {}))) for r in roles]
    for m in managers:
        m.wait_healthy(60)
        m.wait_started(timeout=120)
    await admission_webhook.install(kube, [c for m in managers for c in m.webhook_configurations()])
    return managers


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("0.0.0.0", port))  # noqa: S104 - CAPD binds ":19000"
        except OSError:
            return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m capd_py.testing.upstream_managers",
                                 description="Run one upstream Cluster API manager against a kubeconfig until Ctrl-C.")
    ap.add_argument("role", choices=sorted(ROLES))
    ap.add_argument("--kubeconfig", required=True, type=Path)
    ap.add_argument("--version", default=CLUSTER_API_VERSION)
    ap.add_argument("extra", nargs="*", help="more flags for the manager (after --)")
    a = ap.parse_args(argv)
    m = UpstreamManager(a.role, a.kubeconfig.resolve(), a.version, extra_args=a.extra).start()
    try:
        print(" ".join(m.argv()), file=sys.stderr)
        print(f" • log: {m.log_path}; health http://127.0.0.1:{m.health_port}/healthz, metrics "
              f"http://127.0.0.1:{m.metrics_port}/metrics, webhooks {m.webhook_url}", file=sys.stderr)
        took = m.wait_healthy(120)
        print(f" ✓ upstream {a.role} manager healthy after {took:.1f} s (Ctrl-C stops it)", file=sys.stderr)
        while m.proc is not None and m.proc.poll() is None:
            time.sleep(1)
        print(m.log_tail(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        m.stop()


if __name__ == "__main__":
    sys.exit(main())
