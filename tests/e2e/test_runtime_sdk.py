"""Issue 29 item 5: upstream Cluster API release-1.13's runtime-SDK e2e (test/e2e/cluster_upgrade_runtimesdk.go,
`ClusterUpgradeWithRuntimeSDKSpec`) against capd-py, with capd-py's Python test extension
(capd_py/testing/test_extension.py, upstream's test/extension rebuilt with the kit) as the extension.

Upstream's flavors, unchanged but for the CNI: `clusterclass-quick-start-runtimesdk.yaml` (external patches,
variable discovery and the upgrade plan from the extension) and `cluster-template-upgrades-runtimesdk` (a topology
Cluster with a MachineDeployment and a MachinePool), both rendered by upstream clusterctl (`generate yaml --from`,
`generate cluster --from`) with upstream's docker e2e values (tests/e2e/test_upstream_templates.py: capd-netd
instead of kindnet, no DOCKER_PRELOAD_IMAGES). 1 control plane, WORKER_MACHINE_COUNT 1 (the flavor gives it to the
MachineDeployment and to the MachinePool: 3 nodes; upstream's default is 2).

The management cluster is a user's: `EXP_RUNTIME_SDK=true capd-py init` (host mode: the controllers run on this host,
the admission webhooks are installed), so the extension, served by this test's process on 127.0.0.1, is reached by
the controllers as upstream's core reaches its Service. Its ExtensionConfig is upstream e2e's (name
`k8s-upgrade-with-runtimesdk`, settings `extensionConfigName`, `defaultAllHandlersToBlocking: "true"`,
`disableInPlaceUpdates: "true"`, a namespaceSelector naming the test's namespace), by URL with a caBundle instead of
a Service with CA injection.

Upstream's sequence and assertions, step by step (its `runtimeHookTestHandler`): each hook answers "blocking"
(retryAfterSeconds 5) by default; the test waits until the hook was called and the Cluster's TopologyReconciled
message names it, then checks for HOLD seconds that it keeps blocking (nothing moved: refs not set / versions not
rolled / the Cluster still there) -- upstream holds 30 s; here 12 s, and the test also requires that the hook was
asked again meanwhile (retryAfterSeconds honoured, not a one-off) -- then patches
`<hook key>-preloadedResponse: {"Status": "Success"}` into the responses ConfigMap and waits for progress:
1. creation: BeforeClusterCreate (no infrastructure / control plane refs while it blocks);
2. the upgrade v1.34.4 -> v1.35.4: first the `before-upgrade.hook.cluster.cluster.x-k8s.io/upgrade-test`
   annotation blocks it ("annotation ... is set", without calling the hook), then BeforeClusterUpgrade,
   BeforeControlPlaneUpgrade (the control plane keeps v1.34.4), AfterControlPlaneUpgrade (the control plane at
   v1.35.4, workers held at v1.34.4; meanwhile upstream's MachineSet preflight test: the MachineDeployment scaled
   up by hand stays scaled, its MachineSet creates no Machine: "KubeadmVersionSkew" preflight check failed),
   BeforeWorkersUpgrade, AfterWorkersUpgrade, AfterClusterUpgrade (the Cluster webhook refuses the next
   version: "AfterClusterUpgrade" hook is still blocking);
3. deletion: BeforeClusterDelete (the Cluster and its containers stay); then nothing is left.
Finally upstream's `checkLifecycleHookResponses` (every hook's last answer in the ConfigMap is a Success, with
retryAfterSeconds 0) and, from the extension's ordered call record, the hooks in upstream's order, each blocking
at least twice before its first success and never blocking after it.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.cli.management import MANAGEMENT_LABEL
from capd_py.kube.client import Kube
from capd_py.runtime_extension import ExtensionServer
from capd_py.testing import test_extension as te
from capd_py.testing.e2e import (
    K8S_VERSION,
    UPGRADE_TO_VERSION,
    docker_leftovers,
    kubectl_bin,
    run,
    upstream_e2e_variables,
    wait_for,
    workload_kubectl,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2700)]

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
CLASS = UPSTREAM / "e2e-clusterclass-quick-start-runtimesdk.yaml"
TEMPLATE = UPSTREAM / "e2e-cluster-template-upgrades-runtimesdk.yaml"
EXTENSION_CONFIG = te.DEFAULT_EXTENSION_CONFIG_NAME   # upstream's spec name, k8s-upgrade-with-runtimesdk
BEFORE_UPGRADE_ANNOTATION = "before-upgrade.hook.cluster.cluster.x-k8s.io/upgrade-test"
HOLD = 12.0        # how long a blocking hook must keep blocking (upstream: 30 s); > 2 x retryAfterSeconds (5 s)
CALLED = 90.0      # how long a hook may take to be called once due (upstream: 30 s; 2 loaded cores here)
PROCEEDS = 90.0    # how long progress may take once a hook lets go (upstream: 30 s)
BLOCKING = f"Status: Success, RetryAfterSeconds: {te.DEFAULT_BLOCKING_RETRY_SECONDS}"
SUCCESS = "Status: Success, RetryAfterSeconds: 0"


# -- the management cluster and the extension ------------------------------------------------------------------

class Management:
    """A management cluster made by `EXP_RUNTIME_SDK=true capd-py init` (host mode), its CLI environment."""

    def __init__(self, name: str, home: Path):
        self.name, self.home = name, home
        self.env = {**os.environ, "CAPD_PY_HOME": str(home), "CAPD_PY_PLAIN": "1", "EXP_RUNTIME_SDK": "true"}
        self.kubeconfig = home / f"{name}.kubeconfig"
        self.log = home / f"{name}-controllers.log"

    def capd(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([sys.executable, "-m", "capd_py.cli", *args], capture_output=True, text=True,
                           env=self.env, timeout=timeout)
        assert r.returncode == 0, f"capd-py {' '.join(args)}: {r.stderr[-3000:]}"
        return r

    def kubectl(self, *args: str, input_: str | None = None, check: bool = True) -> str:
        return run([kubectl_bin(), "--kubeconfig", str(self.kubeconfig), *args], input_=input_, check=check).stdout

    def get(self, resource: str, name: str, ns: str) -> dict[str, Any]:
        return json.loads(self.kubectl("get", resource, name, "-n", ns, "-o", "json"))

    def items(self, resource: str, ns: str, selector: str) -> list[dict[str, Any]]:
        return list(json.loads(self.kubectl("get", resource, "-n", ns, "-l", selector, "-o", "json"))["items"])

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:]) if self.log.exists() else ""


@pytest.fixture(scope="module")
def management(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Management]:
    for image in (f"kindest/node:{K8S_VERSION}", f"kindest/node:{UPGRADE_TO_VERSION}"):
        if run(["docker", "image", "inspect", image], check=False).returncode != 0:
            pytest.fail(f"{image} is missing: run `make images`", pytrace=False)
    m = Management(f"e2e-rsdk-mgmt-{secrets.token_hex(3)}", tmp_path_factory.mktemp("rsdk") / "home")
    try:
        t0 = time.monotonic()
        m.capd("init", "--name", m.name)   # EXP_RUNTIME_SDK=true in its environment: the RuntimeSDK gate on
        print(f"\ninit (EXP_RUNTIME_SDK=true) {time.monotonic() - t0:.0f}s")
        yield m
    finally:
        print(f"\n--- controllers log tail ---\n{m.log_tail()}")
        subprocess.run([sys.executable, "-m", "capd_py.cli", "delete", "management", "--name", m.name],
                       env=m.env, capture_output=True, timeout=180)
        for c in run(["docker", "ps", "-aq", "--filter", f"label={MANAGEMENT_LABEL}={m.name}"]).stdout.split():
            run(["docker", "rm", "-fv", c], check=False)


class ServedExtension:
    """The test extension served by this process (an event loop in a thread of its own) on 127.0.0.1, where the
    host-mode controllers reach it; `calls` is its ordered record of the lifecycle calls it answered."""

    def __init__(self, kubeconfig: Path, cert_dir: Path, namespace: str):
        self.calls: list[te.HookCall] = []
        self._kubes: list[Kube] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-extension", daemon=True)
        self._thread.start()

        def kube() -> Kube:   # made on the server's loop, at the first hook call (its aiohttp session is per loop)
            k = Kube.from_kubeconfig(str(kubeconfig))
            self._kubes.append(k)
            return k

        self.server: ExtensionServer
        self.server, self.config = asyncio.run_coroutine_threadsafe(te.serve_test_extension(
            kube, "127.0.0.1", 0, cert_dir=cert_dir, name=EXTENSION_CONFIG, namespaces=(namespace,),
            calls=self.calls), self._loop).result(60)

    def record(self) -> list[te.HookCall]:
        return list(self.calls)

    def stop(self) -> None:
        async def stop() -> None:
            await self.server.stop()
            for k in self._kubes:
                k.close()
            await asyncio.sleep(0.1)
        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def capd_netd_manifest() -> str:
    """The CNI manifest capd-py's default template delivers through its ClusterResourceSet."""
    cm = next(d for d in parse_documents(generate_cluster("x", env={})) if d["kind"] == "ConfigMap")
    return str(cm["data"]["resources"])


# -- what upstream's handlers look at ------------------------------------------------------------------------

class Spec:
    """One Cluster of the spec: reads of the management cluster as upstream's helpers make them."""

    def __init__(self, m: Management, ext: ServedExtension, name: str, ns: str):
        self.m, self.ext, self.name, self.ns = m, ext, name, ns
        self.cm = te.config_map_name(name, EXTENSION_CONFIG)
        self.selector = f"cluster.x-k8s.io/cluster-name={name}"

    def cluster(self) -> dict[str, Any]:
        return self.m.get("cluster", self.name, self.ns)

    def cluster_available(self) -> bool:
        return any(c["type"] == "Available" and c["status"] == "True"
                   for c in (self.cluster().get("status") or {}).get("conditions") or [])

    def topology_message(self) -> str:
        conds = (self.cluster().get("status") or {}).get("conditions") or []
        return next((str(c.get("message", "")) for c in conds if c["type"] == "TopologyReconciled"), "")

    def control_plane(self) -> dict[str, Any]:
        ref = self.cluster()["spec"]["controlPlaneRef"]
        return self.m.get("kubeadmcontrolplanes", ref["name"], self.ns)

    def control_plane_version(self) -> str:
        return str(self.control_plane()["spec"]["version"])

    def responses(self) -> dict[str, str]:
        out = self.m.kubectl("get", "configmap", self.cm, "-n", self.ns, "-o", "json", "--ignore-not-found")
        return dict((json.loads(out).get("data") or {}) if out.strip() else {})

    def recorded(self, key: str) -> bool:
        return f"{key}-actualResponseStatus" in self.responses()

    def versions(self, cp: str, workers: str) -> bool:
        """upstream's checkVersions: control-plane Machines at `cp`, MachineDeployments and MachinePools at
        `workers` (their template's version)."""
        machines = self.m.items("machines", self.ns, f"{self.selector},cluster.x-k8s.io/control-plane")
        mds = self.m.items("machinedeployments", self.ns, self.selector)
        mps = self.m.items("machinepools", self.ns, self.selector)
        return bool(machines and mds and mps) \
            and all(x["spec"]["version"] == cp for x in machines) \
            and all(x["spec"]["template"]["spec"]["version"] == workers for x in [*mds, *mps])

    def node_healthy(self, machine: dict[str, Any]) -> bool:
        return any(c["type"] == "NodeHealthy" and c["status"] == "True"
                   for c in (machine.get("status") or {}).get("conditions") or [])

    def control_plane_at(self, version: str) -> bool:
        """upstream's waitControlPlaneVersion: spec and status version, every control-plane Machine, NodeHealthy."""
        cp = self.control_plane()
        machines = self.m.items("machines", self.ns, f"{self.selector},cluster.x-k8s.io/control-plane")
        return cp["spec"]["version"] == version and (cp.get("status") or {}).get("version") == version \
            and bool(machines) and all(x["spec"]["version"] == version and self.node_healthy(x) for x in machines)

    def workers_at(self, version: str) -> bool:
        """upstream's workersVersions: MachineDeployments, MachinePools and every worker Machine, NodeHealthy."""
        mds = self.m.items("machinedeployments", self.ns, self.selector)
        mps = self.m.items("machinepools", self.ns, self.selector)
        workers = [x for x in self.m.items("machines", self.ns, self.selector)
                   if "cluster.x-k8s.io/control-plane" not in x["metadata"].get("labels", {})]
        return bool(mds and mps and workers) \
            and all(x["spec"]["template"]["spec"]["version"] == version for x in [*mds, *mps]) \
            and all(x["spec"]["version"] == version and self.node_healthy(x) for x in workers)

    def diagnostics(self) -> str:
        """Where the Cluster stands, for a failure's message."""
        c = self.m.kubectl("get", "cluster", self.name, "-n", self.ns, "-o", "json", "--ignore-not-found")
        out = [f"hook calls: {self.ext.record()}", f"responses: {self.responses()}"]
        if c.strip():
            cl = json.loads(c)
            out += [f"annotations: {cl['metadata'].get('annotations')}",
                    f"conditions: {(cl.get('status') or {}).get('conditions')}"]
            ref = cl["spec"].get("controlPlaneRef") or {}
            if ref.get("name"):
                cp = self.m.get("kubeadmcontrolplanes", ref["name"], self.ns)
                out.append(f"control plane spec.version {cp['spec'].get('version')} status.version "
                           f"{(cp.get('status') or {}).get('version')} conditions "
                           f"{(cp.get('status') or {}).get('conditions')}")
        out.append(self.m.log_tail(40))
        return "\n".join(out)

    def calls_of(self, key: str) -> int:
        return sum(1 for c in self.ext.record() if c.key == key)

    def unblock(self, key: str) -> None:
        # upstream's merge patch, byte for byte
        self.m.kubectl("patch", "configmap", self.cm, "-n", self.ns, "--type", "merge", "-p",
                       json.dumps({"data": {f"{key}-preloadedResponse": '{"Status": "Success"}'}}))


def hold(what: str, check: Callable[[], bool], seconds: float = HOLD, interval: float = 3.0) -> None:
    """upstream's Consistently: `check` true at every poll for `seconds`."""
    end = time.monotonic() + seconds
    while True:
        assert check(), f"{what}: stopped holding"
        if time.monotonic() >= end:
            return
        time.sleep(interval)


def runtime_hook(spec: Spec, hook: str, attributes: list[str], blocking: Callable[[], bool],
                 before_unblocking: Callable[[], None] | None = None) -> float:
    """upstream's runtimeHookTestHandler; returns the seconds from the hook's first call to its release."""
    key = te.hook_key(hook, attributes)
    shows = (lambda: True) if hook == "BeforeClusterDelete" else (lambda: hook in spec.topology_message())
    wait_for(lambda: spec.recorded(key) and shows(), CALLED, f"{key} called and blocking")
    first = time.monotonic()
    asked = spec.calls_of(key)
    hold(f"{key} blocks", lambda: shows() and blocking())
    # the pause is the hook's doing: it was asked again (after retryAfterSeconds) and still said wait
    assert spec.calls_of(key) > asked, f"{key} not asked again while blocking: {spec.ext.record()}"
    if before_unblocking is not None:
        before_unblocking()
    spec.unblock(key)
    try:
        if hook == "BeforeClusterDelete":
            wait_for(lambda: not blocking(), PROCEEDS, f"{key} released")
        else:
            wait_for(lambda: not (shows() or blocking()), PROCEEDS, f"{key} released")
    except AssertionError as e:
        raise AssertionError(f"{e}\n{spec.diagnostics()}") from None
    print(f"{key}: blocked {time.monotonic() - first:.0f}s (asked {spec.calls_of(key)} times), released")
    return time.monotonic() - first


def annotation_hook(spec: Spec, blocking: Callable[[], bool]) -> None:
    """upstream's annotationHookTestHandler: the before-upgrade annotation blocks the upgrade, then is removed."""
    message = f"annotation {BEFORE_UPGRADE_ANNOTATION} is set"
    shows = lambda: message in spec.topology_message()   # noqa: E731
    wait_for(lambda: shows() and blocking(), CALLED, "the before-upgrade annotation blocking")
    hold("the before-upgrade annotation blocks", lambda: shows() and blocking())
    spec.m.kubectl("annotate", "cluster", spec.name, "-n", spec.ns, f"{BEFORE_UPGRADE_ANNOTATION}-")
    wait_for(lambda: not shows(), PROCEEDS, "the annotation no longer blocking")


def machine_set_preflight_checks(spec: Spec) -> None:
    """upstream's machineSetPreflightChecksTest: the control plane is at the new version, AfterControlPlaneUpgrade
    holds the workers; a MachineDeployment scaled up by hand stays scaled (the topology controller leaves it
    alone), its MachineSet wants the replica but creates no Machine (KubeadmVersionSkew); then scaled back."""
    md = spec.m.items("machinedeployments", spec.ns, spec.selector)[0]
    name, replicas = md["metadata"]["name"], int(md["spec"]["replicas"])

    def scale(n: int) -> None:
        spec.m.kubectl("patch", "machinedeployment", name, "-n", spec.ns, "--type", "merge", "-p",
                       json.dumps({"spec": {"replicas": n}}))

    def md_replicas() -> int:
        return int(spec.m.get("machinedeployment", name, spec.ns)["spec"]["replicas"])

    def md_machines() -> list[dict[str, Any]]:
        return spec.m.items("machines", spec.ns, f"cluster.x-k8s.io/deployment-name={name}")

    scale(replicas + 1)
    hold("the scaled-up MachineDeployment is not reverted", lambda: md_replicas() == replicas + 1, 10, 1)

    def ms_blocked() -> bool:
        ms = spec.m.items("machinesets", spec.ns, f"cluster.x-k8s.io/deployment-name={name}")[0]
        up = next((c for c in ms.get("status", {}).get("conditions") or [] if c["type"] == "ScalingUp"), None)
        return ms["spec"]["replicas"] == replicas + 1 and up is not None and up["status"] == "True" \
            and up["reason"] == "ScalingUp" and '"KubeadmVersionSkew" preflight check failed' in up["message"]
    wait_for(ms_blocked, 60, "the MachineSet's scale-up held by the KubeadmVersionSkew preflight check")
    hold("no new Machine", lambda: len(md_machines()) == replicas, 10, 1)
    scale(replicas)


# -- the spec ------------------------------------------------------------------------------------------------

def test_cluster_upgrade_with_runtime_sdk(management: Management, clusterctl: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    m = management
    monkeypatch.delenv("DOCKER_PRELOAD_IMAGES", raising=False)
    t0 = time.monotonic()
    ns = f"e2e-rsdk-{secrets.token_hex(3)}"
    name = f"e2e-rsdk-{secrets.token_hex(3)}"
    times: dict[str, float] = {}
    m.kubectl("create", "namespace", ns)
    ext = ServedExtension(m.kubeconfig, tmp_path / "certs", ns)
    try:
        spec = Spec(m, ext, name, ns)
        _spec(spec, clusterctl, tmp_path, times)
    finally:
        # as upstream's AfterEach: the ExtensionConfig first, so BeforeClusterDelete cannot hold the cleanup
        m.kubectl("delete", "extensionconfig", EXTENSION_CONFIG, "--ignore-not-found", check=False)
        m.kubectl("delete", "cluster", "--all", "-n", ns, "--ignore-not-found", "--timeout", "300s", check=False)
        m.kubectl("delete", "namespace", ns, "--ignore-not-found", "--wait=false", check=False)
        ext.stop()
        for c in run(["docker", "ps", "-aq", "--filter", f"label=io.x-k8s.capd-py.cluster={name}"]).stdout.split():
            run(["docker", "rm", "-fv", c], check=False)
        for n in run(["docker", "network", "ls", "-q", "--filter", f"label=io.x-k8s.capd-py.cluster={name}"]
                     ).stdout.split():
            run(["docker", "network", "rm", n], check=False)
    print("phases: " + ", ".join(f"{k} {v:.0f}s" for k, v in times.items())
          + f"; whole test {time.monotonic() - t0:.0f}s")


def _spec(spec: Spec, clusterctl: str, tmp: Path, times: dict[str, float]) -> None:
    m, ns, name = spec.m, spec.ns, spec.name
    from_v, to_v = K8S_VERSION, UPGRADE_TO_VERSION
    t = time.monotonic()

    # "Deploy Test Extension ExtensionConfig": discovered by the core (its handlers in the status)
    m.kubectl("apply", "-f", "-", input_=json.dumps(spec.ext.config))
    def discovered() -> bool:
        st = json.loads(m.kubectl("get", "extensionconfig", EXTENSION_CONFIG, "-o", "json")).get("status") or {}
        return any(c["type"] == "Discovered" and c["status"] == "True" for c in st.get("conditions") or []) \
            and len(st.get("handlers") or []) == 13
    wait_for(discovered, 60, "the ExtensionConfig discovered")

    # upstream's flavors rendered by upstream clusterctl; the class first, so its variables are discovered
    env = {**upstream_e2e_variables(tmp, capd_netd_manifest()), "EXTENSION_CONFIG_NAME": EXTENSION_CONFIG,
           "NAMESPACE": ns}
    cc = run([clusterctl, "generate", "yaml", "--from", str(CLASS)], env=env, timeout=120).stdout
    manifest = run([clusterctl, "generate", "cluster", name, "--from", str(TEMPLATE), "--target-namespace", ns,
                    "--kubernetes-version", from_v, "--control-plane-machine-count", "1",
                    "--worker-machine-count", "1"], env=env, timeout=120).stdout
    assert "${" not in cc + manifest
    assert f"generate-patches.{EXTENSION_CONFIG}" in cc
    assert sorted(d["kind"] for d in yaml.safe_load_all(manifest) if d) == ["Cluster", "ClusterResourceSet",
                                                                             "ConfigMap"]
    m.kubectl("apply", "-n", ns, "-f", "-", input_=cc)
    wait_for(lambda: any(c["type"] == "VariablesReady" and c["status"] == "True" for c in (m.get(
        "clusterclass", "quick-start-runtimesdk", ns).get("status") or {}).get("conditions") or []), 60,
        "ClusterClass VariablesReady (DiscoverVariables)")
    m.kubectl("apply", "-f", "-", input_=manifest)
    times["extension + class + apply"] = time.monotonic() - t

    # 1. creation waits for BeforeClusterCreate
    t = time.monotonic()
    def creation_blocked() -> bool:
        s = spec.cluster()["spec"]
        return not (s.get("infrastructureRef") or {}).get("name") and not (s.get("controlPlaneRef") or {}).get("name")
    runtime_hook(spec, "BeforeClusterCreate", [], creation_blocked)
    times["BeforeClusterCreate"] = time.monotonic() - t

    t = time.monotonic()
    kc = tmp / f"{name}.kubeconfig"
    def ready(version: str) -> bool:
        if not spec.cluster_available():
            return False
        nodes = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
        return len(nodes) == 3 and all(
            n["status"]["nodeInfo"]["kubeletVersion"] == version
            and any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]) for n in nodes)
    wait_for(lambda: spec.cluster_available(), 600, f"cluster {name} Available", 5)
    m.capd("get", "kubeconfig", name, "-n", ns, "--kubeconfig", str(m.kubeconfig), "-o", str(kc))
    wait_for(lambda: ready(from_v), 300, f"3 Ready nodes at {from_v}", 3)
    # the extension's patches reached the objects (GeneratePatches): the node image by version, kubelet v=2
    cp = spec.control_plane()
    assert {"name": "v", "value": "2"} in cp["spec"]["kubeadmConfigSpec"]["initConfiguration"]["nodeRegistration"][
        "kubeletExtraArgs"], cp["spec"]["kubeadmConfigSpec"]
    times["created (Available, 3 Ready nodes)"] = time.monotonic() - t
    wait_for(lambda: spec.recorded("AfterControlPlaneInitialized"), CALLED, "AfterControlPlaneInitialized called")

    # 2. the upgrade, step by step
    t = time.monotonic()
    wait_for(lambda: spec.control_plane_at(from_v) and spec.workers_at(from_v), 120, f"every Machine at {from_v}")
    m.kubectl("annotate", "cluster", name, "-n", ns, f"{BEFORE_UPGRADE_ANNOTATION}=")
    m.kubectl("patch", "cluster", name, "-n", ns, "--type", "merge", "-p",
              json.dumps({"spec": {"topology": {"version": to_v}}}))
    before_cluster_upgrade = te.hook_key("BeforeClusterUpgrade", [from_v, to_v])
    before_cp_upgrade = te.hook_key("BeforeControlPlaneUpgrade", [from_v, to_v])

    def before_cluster_upgrade_blocks() -> bool:
        return spec.control_plane_version() == from_v and spec.versions(from_v, from_v) \
            and not spec.recorded(before_cp_upgrade)
    annotation_hook(spec, lambda: before_cluster_upgrade_blocks() and not spec.recorded(before_cluster_upgrade))
    runtime_hook(spec, "BeforeClusterUpgrade", [from_v, to_v], before_cluster_upgrade_blocks)
    runtime_hook(spec, "BeforeControlPlaneUpgrade", [from_v, to_v],
                 lambda: spec.control_plane_version() == from_v and spec.versions(from_v, from_v))
    wait_for(lambda: spec.control_plane_at(to_v), 600, f"the control plane at {to_v}", 5)
    times["control plane upgraded"] = time.monotonic() - t
    hold(f"workers still at {from_v}", lambda: spec.versions(to_v, from_v), 4, 2)

    after_cp = te.hook_key("AfterControlPlaneUpgrade", [to_v])
    before_workers = te.hook_key("BeforeWorkersUpgrade", [from_v, to_v])
    after_cluster = te.hook_key("AfterClusterUpgrade", [to_v])
    runtime_hook(spec, "AfterControlPlaneUpgrade", [to_v],
                 lambda: spec.control_plane_version() == to_v and spec.versions(to_v, from_v)
                 and not spec.recorded(before_workers) and not spec.recorded(after_cluster),
                 before_unblocking=lambda: machine_set_preflight_checks(spec))
    runtime_hook(spec, "BeforeWorkersUpgrade", [from_v, to_v],
                 lambda: spec.control_plane_version() == to_v and spec.versions(to_v, from_v))
    t = time.monotonic()
    after_workers = te.hook_key("AfterWorkersUpgrade", [to_v])
    early: list[str] = []

    def workers_upgraded() -> bool:
        # AfterWorkersUpgrade is due only once no worker is upgrading (upstream: neither a MachineDeployment nor a
        # MachinePool): never while a Machine of the old version is still there
        old = [x["metadata"]["name"] for x in m.items("machines", ns, spec.selector)
               if x["spec"].get("version") != to_v]
        if old and spec.recorded(after_workers):
            early.append(f"{after_workers} called while {old} still run {from_v}")
        return spec.workers_at(to_v)
    wait_for(workers_upgraded, 600, f"the workers at {to_v}", 3)
    assert not early, early
    times["workers upgraded"] = time.monotonic() - t
    runtime_hook(spec, "AfterWorkersUpgrade", [to_v],
                 lambda: spec.control_plane_version() == to_v and spec.versions(to_v, to_v)
                 and not spec.recorded(after_cluster))

    # AfterClusterUpgrade: while it blocks, the Cluster webhook refuses the next minor (a server-side dry run)
    major, minor, patch = to_v.lstrip("v").split(".")
    next_v = f"v{major}.{int(minor) + 1}.{patch}"
    def next_upgrade_refused() -> bool:
        r = run([kubectl_bin(), "--kubeconfig", str(m.kubeconfig), "patch", "cluster", name, "-n", ns,
                 "--dry-run=server", "--type", "merge", "-p",
                 json.dumps({"spec": {"topology": {"version": next_v}}})], check=False)
        return r.returncode != 0 and '"AfterClusterUpgrade" hook is still blocking' in r.stderr
    runtime_hook(spec, "AfterClusterUpgrade", [to_v], next_upgrade_refused)

    t = time.monotonic()
    wait_for(lambda: ready(to_v), 300, f"3 Ready nodes at {to_v}", 3)
    machines = m.items("machines", ns, spec.selector)
    assert len(machines) == 3 and all(any(c["type"] == "Ready" and c["status"] == "True"
                                          for c in x["status"]["conditions"]) for x in machines), machines
    times["nodes Ready after the upgrade"] = time.monotonic() - t

    # 3. deletion waits for BeforeClusterDelete: the Cluster and every container stay while it blocks
    t = time.monotonic()
    containers = 4   # 3 nodes + the load balancer (a replaced machine's container may take a moment to go)
    wait_for(lambda: len(docker_leftovers(name).get("containers", [])) == containers, 60, "4 containers")
    m.kubectl("delete", "cluster", name, "-n", ns, "--wait=false")

    def delete_blocked() -> bool:
        out = m.kubectl("get", "cluster", name, "-n", ns, "-o", "json", "--ignore-not-found")
        if not out.strip():
            return False
        annotations = json.loads(out)["metadata"].get("annotations") or {}
        return "runtime.cluster.x-k8s.io/ok-to-delete" not in annotations \
            and len(docker_leftovers(name).get("containers", [])) == containers
    runtime_hook(spec, "BeforeClusterDelete", [], delete_blocked)
    wait_for(lambda: not m.kubectl("get", "cluster", name, "-n", ns, "--ignore-not-found", "-o", "name").strip(),
             300, "the Cluster gone", 3)
    wait_for(lambda: not docker_leftovers(name), 120, "no containers, networks or volumes of the cluster")
    kinds = "machines,machinesets,machinedeployments,machinepools,dockermachines,dockermachinepools,dockerclusters," \
            "kubeadmconfigs,kubeadmcontrolplanes,dockermachinetemplates,kubeadmconfigtemplates"
    wait_for(lambda: not m.kubectl("get", kinds, "-n", ns, "-l", spec.selector, "-o", "name").strip(), 60,
             "no Cluster API objects of the cluster")
    times["deleted"] = time.monotonic() - t

    # upstream's checkLifecycleHookResponses: every hook called, its last answer a Success
    expected = {
        "BeforeClusterCreate": SUCCESS,
        "AfterControlPlaneInitialized": "Success",
        before_cluster_upgrade: SUCCESS,
        before_cp_upgrade: SUCCESS,
        after_cp: SUCCESS,
        before_workers: SUCCESS,
        te.hook_key("AfterWorkersUpgrade", [to_v]): SUCCESS,
        after_cluster: SUCCESS,
        "BeforeClusterDelete": SUCCESS,
    }
    data = spec.responses()
    assert {k: data.get(f"{k}-actualResponseStatus") for k in expected} == expected, data

    # and in order, from the extension's record: first calls in upstream's order; each hook blocked (at least
    # twice: asked again after retryAfterSeconds) before it let go, and never blocked again after that
    record = spec.ext.record()
    order = list(dict.fromkeys(c.key for c in record))
    assert order == list(expected), order
    for key in expected:
        answers = [c.status for c in record if c.key == key]
        if key == "AfterControlPlaneInitialized":
            assert answers and set(answers) == {"Success"}, (key, answers)
            continue
        released = answers.index(SUCCESS)
        assert released >= 2 and set(answers[:released]) == {BLOCKING} and set(answers[released:]) == {SUCCESS}, \
            (key, answers)
    # the next hook is asked only once the one before it let go
    for earlier, later in zip(list(expected), list(expected)[1:], strict=False):
        let_go = min(i for i, c in enumerate(record) if c.key == earlier and c.status != BLOCKING)
        assert min(i for i, c in enumerate(record) if c.key == later) > let_go, (earlier, later, record)
    print("\nhook calls in order: " + ", ".join(f"{k} x{sum(1 for c in record if c.key == k)}" for k in order))
