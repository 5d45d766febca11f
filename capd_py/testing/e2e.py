"""Helpers for the e2e tier: drive capd-py through its CLI the way a user would, and look at docker."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import secrets
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_result, stop_after_delay, wait_fixed

from capd_py.api import kubeyaml
from capd_py.api.labels import MANAGEMENT_LABEL
from capd_py.controllers.manager import ACTIVITY_FILE_ENV
from capd_py.kube.crds import install_crds
from capd_py.testing.envtest import EnvTest, cache_dir, stop_process_group
from capd_py.testing.host_lock import once_per_run

CAPD = [sys.executable, "-m", "capd_py.cli"]
K8S_VERSION = os.environ.get("CAPD_PY_K8S_VERSION", "v1.34.4")
# the next minor, for upgrade tests: `make images` builds both (Makefile K8S_VERSIONS)
UPGRADE_TO_VERSION = os.environ.get("CAPD_PY_UPGRADE_TO_VERSION", "v1.35.4")
# The e2e tier's session management plane (tests/e2e/conftest.py `mgmt`) resyncs every 15 s, not every 60 s
# (Settings.resync_seconds): the waits for "nothing changes" wait for resync passes to complete
# (capd_py/testing/quiet.py `resyncs=`), so two of them cost ~30 s, not 2 minutes. No e2e test depends on the
# 60 s (a resync only reconciles again, level-triggered). What it costs, measured (issue 40; one stable 1 CP + 1 W
# cluster, ~16 keys, 240 s windows, both orders averaged): +1.0 s of the controllers' CPU and +0.75 s of dockerd's
# per 240 s (~0.1 s per extra pass), ~0.01 core; the API server's and the nodes' CPU moved less than between two
# windows of one setting (the node containers alone use ~0.47 core). Env CAPD_PY_E2E_RESYNC_SECONDS.
E2E_RESYNC_SECONDS = float(os.environ.get("CAPD_PY_E2E_RESYNC_SECONDS", "15"))


def kubectl_bin() -> str:
    p = cache_dir() / "k8s" / K8S_VERSION / "bin" / "kubectl"
    return str(p) if p.exists() else "kubectl"


def run(args: list[str], input_: str | None = None, check: bool = True, timeout: float = 900,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(args, input=input_, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    return p


def cli(*args: str, env: dict[str, str], timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`capd-py ARGS` in this interpreter with exactly `env` (a home of the test's own, say); not checked."""
    return subprocess.run([*CAPD, *args], capture_output=True, text=True, env=env, timeout=timeout)


def remove_management(name: str, env: dict[str, str], timeout: float = 120) -> None:
    """`capd-py delete management --name NAME`, then whatever still carries that management cluster's label (its
    node container, volumes), so that no fixture leaves a node behind, whatever failed before."""
    cli("delete", "management", "--name", name, env=env, timeout=timeout)
    label = f"label={MANAGEMENT_LABEL}={name}"
    for c in run(["docker", "ps", "-a", "-q", "--filter", label], check=False).stdout.split():
        run(["docker", "rm", "-f", "-v", c], check=False)
    for v in run(["docker", "volume", "ls", "-q", "--filter", label], check=False).stdout.split():
        run(["docker", "volume", "rm", "-f", v], check=False)


_WAIT_ERRORS = (AssertionError, subprocess.SubprocessError, json.JSONDecodeError, KeyError)


def wait_for(fn: Callable[[], Any], timeout: float, what: str, interval: float = 2.0) -> Any:
    """fn() until it returns something truthy (its expected failures count as "not yet")."""
    last: list[Any] = [None]

    def attempt() -> Any:
        try:
            last[0] = fn()
        except _WAIT_ERRORS as e:
            last[0] = e
            return None
        return last[0]

    def timed_out(_state: RetryCallState) -> Any:
        raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last[0]!r}"[:4000])

    return Retrying(retry=retry_if_result(lambda v: not v), stop=stop_after_delay(timeout), wait=wait_fixed(interval),
                    retry_error_callback=timed_out)(attempt)


@dataclass
class Mgmt:
    env: EnvTest
    kubeconfig: str
    log: Path
    # where its `capd-py controllers` keeps its writes and reconciles (CAPD_PY_ACTIVITY_FILE): wait for quiet on it
    # with capd_py.testing.quiet (None: started without one)
    activity: Path | None = None
    # the `capd-py controllers` process (benchmarks read its CPU and peak RSS from /proc)
    pid: int | None = None

    def capd(self, *args: str, input_: str | None = None, check: bool = True, timeout: float = 900
             ) -> subprocess.CompletedProcess[str]:
        return run([*CAPD, *args], input_=input_, check=check, timeout=timeout,
                   env={"CAPD_PY_KUBECONFIG": self.kubeconfig})

    def kubectl(self, *args: str, input_: str | None = None, check: bool = True) -> str:
        return run([kubectl_bin(), "--kubeconfig", self.kubeconfig, *args], input_=input_, check=check).stdout

    def get(self, kind: str, name: str, ns: str = "default") -> dict[str, Any]:
        return json.loads(self.kubectl("get", kind, name, "-n", ns, "-o", "json"))

    def condition(self, kind: str, name: str, ctype: str, ns: str = "default") -> bool:
        obj = self.get(kind, name, ns)
        return any(c.get("type") == ctype and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or [])

    def log_tail(self, n: int = 80) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


@contextlib.contextmanager
def management_plane(log: Path, env: dict[str, str] | None = None,
                     resync_seconds: float | None = None) -> Iterator[Mgmt]:
    """A management plane for e2e tests: a real kube-apiserver + etcd (+ kube-controller-manager, for the garbage
    collector) with capd-py's CRDs, and `capd-py controllers` on it in a process group of its own (`env` added to its
    environment: feature gates, say), stopped with its whole group at the end. The controllers keep their
    writes, reconciles and resync passes in `activity.json` beside the log (`Mgmt.activity`) and resync every
    `resync_seconds` (None: the controllers' default, 60 s, as benchmarks want it; the tier's session plane passes
    E2E_RESYNC_SECONDS; `env` may set CAPD_PY_RESYNC_SECONDS itself)."""
    if resync_seconds is not None:
        env = {"CAPD_PY_RESYNC_SECONDS": f"{resync_seconds:g}", **(env or {})}
    activity = log.with_name("activity.json")
    et = EnvTest(controller_manager=True).start()
    k = et.kube()
    try:
        asyncio.run(install_crds(k, wait=True))
    finally:
        k.close()
    with open(log, "wb") as out:
        proc = subprocess.Popen([*CAPD, "controllers", "--kubeconfig", str(et.kubeconfig_path)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, ACTIVITY_FILE_ENV: str(activity), **(env or {})})
    m = Mgmt(et, str(et.kubeconfig_path), log, activity, proc.pid)
    try:
        yield m
    finally:
        stop_process_group(proc, 20)
        print(f"\n--- controllers log tail ---\n{m.log_tail(60)}")
        et.stop()


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds process `pid` used so far (/proc; its waited-for children included); 0.0 for None
    or a process gone."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # after the ")" ending comm: state is field 3, utime 14, stime 15, cutime 16, cstime 17 (proc(5))
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cluster_containers(cluster: str) -> dict[str, str]:
    """name -> id of every container docker has for the cluster (by capd-py's label); a name twice is an error."""
    out = run(["docker", "ps", "-a", "--filter", f"label=io.x-k8s.capd-py.cluster={cluster}",
               "--format", "{{.Names}} {{.ID}}"]).stdout.split("\n")
    pairs = [line.split() for line in out if line.strip()]
    names = [p[0] for p in pairs]
    assert len(names) == len(set(names)), f"duplicate containers: {names}"
    return {p[0]: p[1] for p in pairs}


def docker_leftovers(cluster: str) -> dict[str, list[str]]:
    """Containers, networks and volumes docker still has for this cluster, by capd-py labels."""
    lab = f"label=io.x-k8s.capd-py.cluster={cluster}"
    ps = run(["docker", "ps", "-a", "-q", "--filter", lab]).stdout.split()
    nets = run(["docker", "network", "ls", "-q", "--filter", lab]).stdout.split()
    vols = run(["docker", "volume", "ls", "-q", "--filter", lab]).stdout.split()
    named = [n for n in run(["docker", "ps", "-a", "--format", "{{.Names}}"]).stdout.split()
             if n == f"{cluster}-lb" or n.startswith(f"{cluster}-control-plane") or n.startswith(f"{cluster}-md-")]
    return {k: v for k, v in {"containers": ps, "networks": nets, "volumes": vols, "named": named}.items() if v}


# e2e clusters are named by the tests (e2e-quick, e2e-topology, ...); an earlier run killed before its cleanup
# left their containers, networks and volumes, which a new run would adopt (same names and labels)
E2E_CLUSTER_PREFIX = "e2e-"
E2E_NETWORK_PREFIX = "capd-e2e-"   # networks tests make for themselves (test_network_pool.py)


def remove_leftovers(cluster_prefix: str = E2E_CLUSTER_PREFIX) -> list[str]:
    """Remove what an earlier e2e run left on this docker host: containers, networks and volumes of clusters
    named `cluster_prefix*`, and networks named E2E_NETWORK_PREFIX*. Other clusters (a user's) are left alone.
    Returns `kind name` of what was removed."""
    key = "io.x-k8s.capd-py.cluster"
    removed: list[str] = []
    # containers first: docker refuses to remove a network with endpoints or a volume in use
    for kind, ls, rm in (("container", ["ps", "-a"], ["rm", "-f", "-v"]),
                         ("network", ["network", "ls"], ["network", "rm"]),
                         ("volume", ["volume", "ls"], ["volume", "rm", "-f"])):
        fmt = "{{.Names}}" if kind == "container" else "{{.Name}}"
        out = run(["docker", *ls, "--filter", f"label={key}", "--format", f'{fmt}\t{{{{.Label "{key}"}}}}']).stdout
        names = [n for n, _, c in (line.partition("\t") for line in out.splitlines()) if c.startswith(cluster_prefix)]
        if kind == "network":
            names += [n for n in run(["docker", "network", "ls", "--format", "{{.Name}}"]).stdout.split()
                      if n.startswith(E2E_NETWORK_PREFIX)]
        for n in names:
            if run(["docker", *rm, n], check=False).returncode == 0:
                removed.append(f"{kind} {n}")
    return removed


def sweep_leftovers() -> None:
    """`remove_leftovers` once per test run, by the first management plane that starts (a second worker's must not
    remove the first one's live clusters), printing what it removed."""
    for what in once_per_run("e2e-sweep", remove_leftovers) or []:
        print(f"removed a leftover of an earlier run: {what}")


# the Cluster API kinds a cluster's deletion must remove from the management cluster (by the cluster-name label)
CLUSTER_KINDS = ("clusters", "machines", "machinesets", "machinedeployments", "machinepools", "dockermachines",
                 "dockermachinepools", "dockerclusters", "devmachines", "devmachinepools", "devclusters",
                 "kubeadmconfigs", "kubeadmcontrolplanes")


def cluster_objects_left(mgmt: Mgmt, cluster: str, ns: str = "default") -> list[str]:
    """`kind/name` of the cluster's objects still in the management cluster (labelled with its name), plus the
    Cluster itself and its ClusterResourceSetBinding (named after it)."""
    out = mgmt.kubectl("get", ",".join(CLUSTER_KINDS), "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={cluster}",
                       "-o", "name").split()
    out += mgmt.kubectl("get", "cluster,clusterresourcesetbinding", cluster, "-n", ns, "--ignore-not-found",
                        "-o", "name").split()
    return out


def host_address() -> str:
    """This machine's address on its default route: where node containers and the management cluster both reach a
    port a docker host publishes, as they would a remote host's (the multi-host e2e tests' host `address`)."""
    out = run(["ip", "-4", "route", "get", "1.1.1.1"]).stdout
    m = re.search(r"\bsrc (\S+)", out)
    assert m, out
    return m.group(1)


def workload_kubectl(kubeconfig: Path, *args: str, input_: str | None = None) -> str:
    return run([kubectl_bin(), "--kubeconfig", str(kubeconfig), *args], input_=input_).stdout


async def kubectl_async(kubeconfig: Path, *args: str, check: bool = True, timeout: float = 60
                        ) -> tuple[int, str, str]:
    """kubectl without blocking the event loop (the API server it talks to may be served by this loop: capd-py's
    in-memory clusters in an in-process controllers process); (exit code, stdout, stderr), AssertionError on a
    non-zero exit when `check`."""
    p = await asyncio.create_subprocess_exec(kubectl_bin(), "--kubeconfig", str(kubeconfig), *args,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(p.communicate(), timeout)
    code = p.returncode if p.returncode is not None else -1
    if check and code != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {code}\nstdout:\n{out.decode()}\n"
                             f"stderr:\n{err.decode()}")
    return code, out.decode(), err.decode()


def nodes_ready(kubeconfig: Path, want: int) -> bool:
    items = json.loads(workload_kubectl(kubeconfig, "get", "nodes", "-o", "json"))["items"]
    ready = [n for n in items if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]
    return len(items) == want and len(ready) == want


@dataclass
class WorkloadCluster:
    """A workload cluster made from the default template (`generate cluster` + `apply`), Available."""
    name: str
    control_planes: int
    workers: int
    kubeconfig: Path
    available_seconds: float    # apply -> Cluster Available
    deleted: bool = False       # set by whoever deletes it (the next user gets a fresh one)
    namespace: str = "default"


def create_cluster(mgmt: Mgmt, name: str, cp: int, workers: int, tmp: Path, timeout: float,
                   namespace: str = "default", generate_args: tuple[str, ...] = ()) -> WorkloadCluster:
    manifest = mgmt.capd("generate", "cluster", name, "--control-plane-machine-count", str(cp),
                         "--worker-machine-count", str(workers), "--target-namespace", namespace,
                         *generate_args).stdout
    t0 = time.monotonic()
    # `apply --wait` is what a user runs: it returns once the Cluster is Available (or fails naming what waits)
    mgmt.capd("apply", "-f", "-", "--wait", f"{int(timeout)}s", input_=manifest, timeout=timeout + 60)
    try:
        wait_for(lambda: mgmt.condition("cluster", name, "Available", namespace), 30, f"cluster {name} Available", 2)
    except AssertionError as e:  # Available flapped after apply saw it: say which condition went False and why
        tree = mgmt.capd("describe", "cluster", name, "-n", namespace, "--show-conditions", "all", check=False)
        raise AssertionError(f"{e}\n{tree.stdout}\n--- controllers log tail ---\n{mgmt.log_tail(60)}") from None
    available = time.monotonic() - t0
    kc = tmp / f"{name}.kubeconfig"
    mgmt.capd("get", "kubeconfig", name, "-n", namespace, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, cp + workers), 300, f"{cp + workers} Ready nodes")
    return WorkloadCluster(name, cp, workers, kc, available, namespace=namespace)


def delete_cluster_objects(mgmt: Mgmt, name: str, namespace: str = "default") -> None:
    """Delete a cluster made from the default template, and what the template adds beside it (the CNI
    ConfigMap and ClusterResourceSet stay after the Cluster, as upstream's do); force-remove leftovers."""
    mgmt.capd("delete", "cluster", name, "-n", namespace, "--wait", "--timeout", "300", check=False)
    mgmt.kubectl("delete", "clusterresourceset", f"{name}-crs-0", "-n", namespace, "--ignore-not-found", check=False)
    mgmt.kubectl("delete", "configmap", f"cni-{name}-crs-0", "-n", namespace, "--ignore-not-found", check=False)
    for c in run(["docker", "ps", "-a", "-q", "--filter", f"label=io.x-k8s.capd-py.cluster={name}"]).stdout.split():
        run(["docker", "rm", "-f", "-v", c], check=False)


def create_namespace(mgmt: Mgmt, prefix: str) -> str:
    """A fresh namespace for a test that acts on a whole namespace (`capd-py move` takes every cluster of
    it): the shared clusters of other tests live in `default` and must not be touched."""
    ns = f"{prefix}-{secrets.token_hex(3)}"
    mgmt.kubectl("create", "namespace", ns)
    return ns


def delete_namespace(mgmt: Mgmt, namespace: str) -> None:
    """Delete every cluster still in the namespace (as delete_cluster_objects), then the namespace."""
    if namespace == "default":
        raise ValueError("delete_namespace is for a test's own namespace, not default")
    for ref in mgmt.kubectl("get", "clusters", "-n", namespace, "-o", "name", "--ignore-not-found",
                            check=False).split():
        delete_cluster_objects(mgmt, ref.rsplit("/", 1)[-1], namespace)
    mgmt.kubectl("delete", "namespace", namespace, "--ignore-not-found", "--wait=false", check=False)


class SharedClusters:
    """Workload clusters shared by the e2e tests of one session (each costs minutes on 2 cores). A cluster
    is made on first use; one a test deleted (`deleted=True`) is made again for the next user."""

    def __init__(self, mgmt: Mgmt, tmp: Path):
        self.mgmt, self.tmp = mgmt, tmp
        self.clusters: dict[str, WorkloadCluster] = {}
        self.attempted: set[str] = set()   # cleaned up even when their creation failed

    def get(self, name: str, cp: int, workers: int, timeout: float = 600) -> WorkloadCluster:
        c = self.clusters.get(name)
        if c is None or c.deleted:
            self.attempted.add(name)
            c = self.clusters[name] = create_cluster(self.mgmt, name, cp, workers, self.tmp, timeout)
            print(f"\n{cp} CP + {workers} worker(s): {name} Available after {c.available_seconds:.0f}s")
        return c

    def cleanup(self) -> None:
        for name in sorted(self.attempted):
            c = self.clusters.get(name)
            if c is None or not c.deleted:
                delete_cluster_objects(self.mgmt, name)


# Two pause pods (the node image holds the pause image) that must survive a restart, stop or restore.
KEEP_APP = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: keep}
spec:
  replicas: 2
  selector: {matchLabels: {app: keep}}
  template:
    metadata: {labels: {app: keep}}
    spec:
      tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
      containers:
      - {name: pause, image: "registry.k8s.io/pause:3.10.1", imagePullPolicy: Never}
"""


# A Deployment with one pod per node (control plane included) behind a Service.
ECHO_APP = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: echo}
spec:
  replicas: 2
  selector: {matchLabels: {app: echo}}
  template:
    metadata: {labels: {app: echo}}
    spec:
      # one pod per node, control plane included
      tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
      topologySpreadConstraints:
      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
         labelSelector: {matchLabels: {app: echo}}}
      containers:
      - {name: echo, image: capd-py/echo:latest, imagePullPolicy: Never, ports: [{containerPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
"""


class LBProbe:
    """Polls the workload API through the load balancer's host port while something disruptive runs."""

    def __init__(self, kubeconfig: Path):
        cfg = kubeyaml.load(kubeconfig.read_text())
        self.server = cfg["clusters"][0]["cluster"]["server"]
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE
        self.ok = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def _probe_once(self) -> None:
        # /readyz may be anonymous-denied; /version is allowed to system:unauthenticated by default RBAC
        with urllib.request.urlopen(f"{self.server}/version", context=self.ctx, timeout=3) as r:
            r.read()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._probe_once()
                self.ok += 1
            except Exception as first:  # noqa: BLE001 - one retry: a connection cut by a reload is not an outage
                try:
                    time.sleep(0.5)
                    self._probe_once()
                    self.ok += 1
                except Exception as e:  # noqa: BLE001
                    self.failures.append(f"{time.strftime('%H:%M:%S')} {first!r} / {e!r}")
            self._stop.wait(1.0)

    def __enter__(self) -> LBProbe:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join(10)


class ServiceProbe(LBProbe):
    """Polls a workload Service through the API server's service proxy (through the load balancer, with the
    kubeconfig's client certificate): the workload keeps answering while nodes come and go."""

    def __init__(self, kubeconfig: Path, service: str, namespace: str = "default", port: int = 80):
        super().__init__(kubeconfig)
        user = kubeyaml.load(kubeconfig.read_text())["users"][0]["user"]
        self._dir = tempfile.TemporaryDirectory()
        cert, key = Path(self._dir.name) / "c.crt", Path(self._dir.name) / "c.key"
        cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
        key.write_bytes(base64.b64decode(user["client-key-data"]))
        self.ctx.load_cert_chain(str(cert), str(key))
        self.url = f"{self.server}/api/v1/namespaces/{namespace}/services/{service}:{port}/proxy/"

    def _probe_once(self) -> None:
        with urllib.request.urlopen(self.url, context=self.ctx, timeout=3) as r:
            r.read()

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._dir.cleanup()


def upstream_e2e_variables(tmp: Path, cni_manifest: str) -> dict[str, str]:
    """The environment `clusterctl generate cluster --from` gets to render upstream's Docker e2e flavors: the
    values of upstream's test/e2e/config/docker.yaml (release-1.13) except the two that pull images. CNI_RESOURCES
    is `cni_manifest` (capd-netd's, the one capd-py's default template embeds; upstream's kindnet pulls its image),
    as upstream's e2e framework fills it: the ConfigMap's data, {"resources": <the manifest>}, as JSON;
    DOCKER_PRELOAD_IMAGES is left to the templates' default `[]` (the caller unsets it)."""
    return {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp / "xdg"),
            "DOCKER_SERVICE_DOMAIN": "cluster.local", "DOCKER_SERVICE_CIDRS": "10.128.0.0/12",
            "DOCKER_POD_CIDRS": "192.168.0.0/16", "CNI_RESOURCES": json.dumps({"resources": cni_manifest})}
