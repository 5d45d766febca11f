"""The Runtime SDK on real node containers: a smoke of upstream Cluster API release-1.13's runtime-SDK e2e
(test/e2e/cluster_upgrade_runtimesdk.go) with capd-py's Python test extension (capd_py/testing/test_extension.py),
kept to what needs real nodes (issue 40).

What moved: the whole spec -- every hook through a v1.34.4 -> v1.35.4 upgrade, its order and blocking, the upgrade
plan, the MachineSet preflight check, the Cluster webhook's AfterClusterUpgrade refusal, resourceVersions stable
after the upgrade -- runs on capd-py's inMemory backend with upstream v1.14's `in-memory-topology` flavor, as
upstream v1.14 runs it (tests/integration/controllers/test_runtime_sdk_inmemory.py, about two minutes, no
container); the MachinePool's part of the workers' upgrade (AfterWorkersUpgrade waits for the pool's instance to be
replaced; no Machine left without infrastructure) runs with this module's flavor on fake node containers
(test_runtime_sdk_inmemory.py::test_workers_upgrade_waits_for_the_machine_pool). This module ran all of it on real
nodes in ~334 s. The real upgrade of nodes (new node image, kubeadm join / upgrade, drain, etcd member removal, the
API and a Service answering throughout) is tests/e2e/test_upgrade.py's; a real MachinePool scaling with Ready Nodes
is test_machinepool_workers.py's; so the upgrade is not repeated here.

What stays here, on real nodes: upstream's docker runtime-SDK flavors as vendored
(tests/fixtures/upstream/e2e-clusterclass-quick-start-runtimesdk.yaml: Docker* templates patched by the extension's
GeneratePatches, variables from DiscoverVariables; e2e-cluster-template-upgrades-runtimesdk.yaml: a topology Cluster
with a MachineDeployment and a MachinePool), rendered by upstream clusterctl v1.13.6 (`generate yaml --from`,
`generate cluster --from`, upstream's docker e2e values, capd-netd as CNI_RESOURCES), 1 control plane and
WORKER_MACHINE_COUNT 1 (the flavor gives it to the MachineDeployment and to the MachinePool: 3 nodes).
- A management plane of its own with the RuntimeSDK gate on (capd_py.testing.e2e.management_plane: a real
  kube-apiserver, `capd-py controllers` on this host with CAPD_PY_FEATURE_GATES=RuntimeSDK=true); the extension is
  served by this test's process on 127.0.0.1 and registered by upstream e2e's ExtensionConfig (its name, settings and
  a namespaceSelector naming the test's namespace) by URL + caBundle. The responses ConfigMap is made first, each
  blocking hook preloaded as blocking with retryAfterSeconds 1 (the extension's default is upstream's 5 s).
- BeforeClusterCreate (upstream's runtimeHookTestHandler): called, named by TopologyReconciled; while it blocks the
  Cluster has no infrastructure / control plane refs and docker has no container of the cluster; with the
  controllers' write counter (their activity file, capd_py/testing/quiet.py): once they wrote nothing in the
  namespace for SETTLE s, the hook is asked again and meanwhile nothing was written and no resourceVersion changed;
  then released by the preloaded Success.
- Created: Available, 3 Ready Nodes at v1.34.4 through the load balancer, AfterControlPlaneInitialized recorded after
  a real `kubeadm init`; the extension's patches on the real objects: every node container runs the node image the
  GeneratePatches customImage names (kindest/node:v1.34.4, capd-py's node image under that tag), kubelet `v=2`.
- BeforeClusterDelete: `kubectl delete cluster`; while it blocks the Cluster, its 4 containers (3 nodes + the load
  balancer) and every other object of it stay (no deletionTimestamp but the Cluster's, no ok-to-delete annotation),
  nothing is written; released: no Cluster, no Cluster API object, no container, network or volume of it.
- Upstream's checkLifecycleHookResponses for these three hooks, and from the extension's ordered record
  (test_extension.record_problems): their first calls in order, each blocking one blocked at least twice before its
  success and never after.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.kube.client import Kube
from capd_py.runtime_extension import ExtensionServer
from capd_py.testing import test_extension as te
from capd_py.testing.e2e import (
    K8S_VERSION,
    Mgmt,
    docker_leftovers,
    management_plane,
    run,
    upstream_e2e_variables,
    wait_for,
    workload_kubectl,
)
from capd_py.testing.envtest import missing_binaries
from capd_py.testing.quiet import activity, wait_quiet_sync

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

UPSTREAM = Path(__file__).resolve().parents[1] / "fixtures" / "upstream"
CLASS = UPSTREAM / "e2e-clusterclass-quick-start-runtimesdk.yaml"
TEMPLATE = UPSTREAM / "e2e-cluster-template-upgrades-runtimesdk.yaml"
EXT = te.DEFAULT_EXTENSION_CONFIG_NAME   # upstream's spec name, k8s-upgrade-with-runtimesdk
RETRY = 1
PRELOADED_BLOCKING = f'{{"Status": "Success", "RetryAfterSeconds": {RETRY}}}'
BLOCKING = f"Status: Success, RetryAfterSeconds: {RETRY}"
SETTLE = 2.0       # seconds without a controller write in the namespace (the activity file is rewritten every 1 s)
CALLED = 90.0      # a due hook is called, or a released one lets things move, within this (upstream: 30 s)
KINDS = "machines,machinesets,machinedeployments,machinepools,dockermachines,dockermachinepools,dockerclusters," \
        "kubeadmconfigs,kubeadmcontrolplanes,dockermachinetemplates,kubeadmconfigtemplates,machinehealthchecks"


@pytest.fixture(scope="module")
def management(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mgmt]:
    """A management plane of this module's own with the RuntimeSDK gate on (what EXP_RUNTIME_SDK=true gives)."""
    missing = missing_binaries()
    if missing:
        pytest.fail(f"missing binaries {missing}: run `make images`", pytrace=False)
    if run(["docker", "image", "inspect", f"kindest/node:{K8S_VERSION}"], check=False).returncode != 0:
        pytest.fail(f"kindest/node:{K8S_VERSION} is missing: run `make images`", pytrace=False)
    log = tmp_path_factory.mktemp("rsdk") / "controllers.log"
    with management_plane(log, env={"CAPD_PY_FEATURE_GATES": "RuntimeSDK=true"}) as m:
        yield m


class ServedExtension:
    """The test extension served by this process (an event loop in a thread of its own) on 127.0.0.1, where the
    host's controllers reach it; `calls` is its ordered record of the lifecycle calls it answered."""

    def __init__(self, kubeconfig: str, cert_dir: Path, namespace: str):
        self.calls: list[te.HookCall] = []
        self._kubes: list[Kube] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="test-extension", daemon=True)
        self._thread.start()

        def kube() -> Kube:   # made on the server's loop, at the first hook call (its aiohttp session is per loop)
            k = Kube.from_kubeconfig(kubeconfig)
            self._kubes.append(k)
            return k

        self.server: ExtensionServer
        self.server, self.config = asyncio.run_coroutine_threadsafe(te.serve_test_extension(
            kube, "127.0.0.1", 0, cert_dir=cert_dir, name=EXT, namespaces=(namespace,),
            calls=self.calls), self._loop).result(60)

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


class Spec:
    """One Cluster of the spec: reads of the management cluster as upstream's helpers make them."""

    def __init__(self, m: Mgmt, ext: ServedExtension, name: str, ns: str):
        self.m, self.ext, self.name, self.ns = m, ext, name, ns
        self.cm = te.config_map_name(name, EXT)
        self.selector = f"cluster.x-k8s.io/cluster-name={name}"

    def cluster(self) -> dict[str, Any] | None:
        out = self.m.kubectl("get", "cluster", self.name, "-n", self.ns, "-o", "json", "--ignore-not-found")
        return json.loads(out) if out.strip() else None

    def topology_message(self) -> str:
        conds = ((self.cluster() or {}).get("status") or {}).get("conditions") or []
        return next((str(c.get("message", "")) for c in conds if c["type"] == "TopologyReconciled"), "")

    def responses(self) -> dict[str, str]:
        out = self.m.kubectl("get", "configmap", self.cm, "-n", self.ns, "-o", "json", "--ignore-not-found")
        return dict((json.loads(out).get("data") or {}) if out.strip() else {})

    def recorded(self, key: str) -> bool:
        return f"{key}-actualResponseStatus" in self.responses()

    def calls_of(self, key: str) -> int:
        return sum(1 for c in self.ext.calls if c.key == key)

    def writes(self) -> int:
        """The controllers' writes to objects of this namespace so far (their activity file)."""
        assert self.m.activity is not None
        return int((activity(self.m.activity).get("by_namespace") or {}).get(self.ns, 0))

    def objects(self) -> dict[str, str]:
        """Every Cluster API object of the namespace, with its resourceVersion."""
        out = json.loads(self.m.kubectl("get", f"clusters,{KINDS}", "-n", self.ns, "-o", "json"))["items"]
        return {f"{o['kind']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"] for o in out}

    def containers(self) -> int:
        return len(docker_leftovers(self.name).get("containers", []))

    def state(self) -> str:
        c = self.cluster() or {}
        return "\n".join([f"hook calls: {[(x.key, x.status) for x in self.ext.calls][-12:]}",
                          f"annotations: {(c.get('metadata') or {}).get('annotations')}",
                          f"conditions: {(c.get('status') or {}).get('conditions')}", self.m.log_tail(40)])

    def unblock(self, key: str) -> None:
        # upstream's merge patch, byte for byte
        self.m.kubectl("patch", "configmap", self.cm, "-n", self.ns, "--type", "merge", "-p",
                       json.dumps({"data": {f"{key}-preloadedResponse": '{"Status": "Success"}'}}))


def runtime_hook(spec: Spec, hook: str, blocked: Callable[[], bool]) -> None:
    """upstream's runtimeHookTestHandler, its Consistently done with the write counter: called and shown; once the
    controllers wrote nothing in the namespace for SETTLE s it blocks, is asked again (retryAfterSeconds honoured)
    and meanwhile nothing was written and no resourceVersion changed; released by the preloaded Success."""
    key = te.hook_key(hook)
    assert spec.m.activity is not None

    def shows() -> bool:
        return hook == "BeforeClusterDelete" or hook in spec.topology_message()
    wait_for(lambda: spec.recorded(key) and shows(), CALLED, f"{key} called and shown blocking")
    first = time.monotonic()
    wait_quiet_sync(spec.m.activity, window=SETTLE, timeout=CALLED, what=f"{key}: settled", interval=0.2,
                    namespace=spec.ns)
    mark, before, asked = spec.writes(), spec.objects(), spec.calls_of(key)
    assert shows() and blocked(), f"{key}: not blocked once settled\n{spec.state()}"
    wait_for(lambda: spec.calls_of(key) > asked, 3 * RETRY + 10, f"{key} asked again while blocking", 0.2)
    wait_quiet_sync(spec.m.activity, window=SETTLE, timeout=CALLED, what=f"{key}: settled again", interval=0.2,
                    namespace=spec.ns)
    after, writes = spec.objects(), spec.writes()
    assert writes == mark and after == before, (
        f"{key}: the controllers wrote while blocked: "
        f"{activity(spec.m.activity).get('recent', [])[-(writes - mark):]}; "
        f"changed: { {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v} }")
    assert shows() and blocked(), f"{key}: stopped blocking\n{spec.state()}"
    spec.unblock(key)
    try:
        wait_for(lambda: not blocked() if hook == "BeforeClusterDelete" else not (shows() or blocked()), CALLED,
                 f"{key} released", 0.5)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{spec.state()}") from None
    print(f"{key}: blocked {time.monotonic() - first:.1f}s (asked {spec.calls_of(key)} times), released")


def test_runtime_sdk_hooks_on_real_nodes(management: Mgmt, clusterctl: str, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    m = management
    monkeypatch.delenv("DOCKER_PRELOAD_IMAGES", raising=False)
    t0 = time.monotonic()
    ns, name = f"e2e-rsdk-{secrets.token_hex(3)}", f"e2e-rsdk-{secrets.token_hex(3)}"
    times: dict[str, float] = {}
    m.kubectl("create", "namespace", ns)
    ext = ServedExtension(m.kubeconfig, tmp_path / "certs", ns)
    try:
        _spec(Spec(m, ext, name, ns), clusterctl, tmp_path, times)
    finally:
        # as upstream's AfterEach: the ExtensionConfig first, so BeforeClusterDelete cannot hold the cleanup
        m.kubectl("delete", "extensionconfig", EXT, "--ignore-not-found", check=False)
        m.kubectl("delete", "cluster", "--all", "-n", ns, "--ignore-not-found", "--timeout", "300s", check=False)
        ext.stop()
        for c in run(["docker", "ps", "-aq", "--filter", f"label=io.x-k8s.capd-py.cluster={name}"]).stdout.split():
            run(["docker", "rm", "-fv", c], check=False)
        for n in run(["docker", "network", "ls", "-q", "--filter", f"label=io.x-k8s.capd-py.cluster={name}"]
                     ).stdout.split():
            run(["docker", "network", "rm", n], check=False)
        print("phases: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items())
              + f"; whole test {time.monotonic() - t0:.1f}s")


def _spec(spec: Spec, clusterctl: str, tmp: Path, times: dict[str, float]) -> None:
    m, ns, name = spec.m, spec.ns, spec.name
    t = time.monotonic()

    # "Deploy Test Extension ExtensionConfig": discovered by the core (its handlers in the status)
    m.kubectl("apply", "-f", "-", input_=json.dumps(spec.ext.config))

    def discovered() -> bool:
        st = json.loads(m.kubectl("get", "extensionconfig", EXT, "-o", "json")).get("status") or {}
        return any(c["type"] == "Discovered" and c["status"] == "True" for c in st.get("conditions") or []) \
            and len(st.get("handlers") or []) == 13
    wait_for(discovered, 60, "the ExtensionConfig discovered")

    # upstream's flavors rendered by upstream clusterctl; the class first, so its variables are discovered
    env = {**upstream_e2e_variables(tmp, capd_netd_manifest()), "EXTENSION_CONFIG_NAME": EXT, "NAMESPACE": ns}
    cc = run([clusterctl, "generate", "yaml", "--from", str(CLASS)], env=env, timeout=120).stdout
    manifest = run([clusterctl, "generate", "cluster", name, "--from", str(TEMPLATE), "--target-namespace", ns,
                    "--kubernetes-version", K8S_VERSION, "--control-plane-machine-count", "1",
                    "--worker-machine-count", "1"], env=env, timeout=120).stdout
    assert "${" not in cc + manifest
    assert f"generate-patches.{EXT}" in cc
    assert sorted(d["kind"] for d in yaml.safe_load_all(manifest) if d) == ["Cluster", "ClusterResourceSet",
                                                                             "ConfigMap"]
    m.kubectl("apply", "-n", ns, "-f", "-", input_=cc)
    wait_for(lambda: any(c["type"] == "VariablesReady" and c["status"] == "True" for c in (m.get(
        "clusterclass", "quick-start-runtimesdk", ns).get("status") or {}).get("conditions") or []), 60,
        "ClusterClass VariablesReady (DiscoverVariables)")
    # the responses ConfigMap first: the two blocking hooks of the smoke answer "blocking, ask again in 1 s"
    m.kubectl("create", "configmap", spec.cm, "-n", ns,
              *(f"--from-literal={k}-preloadedResponse={PRELOADED_BLOCKING}"
                for k in ("BeforeClusterCreate", "BeforeClusterDelete")))
    m.kubectl("apply", "-f", "-", input_=manifest)
    times["extension + class + apply"] = time.monotonic() - t

    # 1. creation waits for BeforeClusterCreate: no refs, nothing in docker
    t = time.monotonic()

    def creation_blocked() -> bool:
        s = (spec.cluster() or {}).get("spec") or {}
        return not (s.get("infrastructureRef") or {}).get("name") \
            and not (s.get("controlPlaneRef") or {}).get("name") and not docker_leftovers(name)
    runtime_hook(spec, "BeforeClusterCreate", creation_blocked)
    times["BeforeClusterCreate"] = time.monotonic() - t

    # 2. created on real nodes
    t = time.monotonic()
    kc = tmp / f"{name}.kubeconfig"

    def available() -> bool:
        return any(c["type"] == "Available" and c["status"] == "True"
                   for c in ((spec.cluster() or {}).get("status") or {}).get("conditions") or [])
    wait_for(available, 600, f"cluster {name} Available", 5)
    m.capd("get", "kubeconfig", name, "-n", ns, "-o", str(kc))

    def ready() -> bool:
        nodes = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
        return len(nodes) == 3 and all(
            n["status"]["nodeInfo"]["kubeletVersion"] == K8S_VERSION
            and any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]) for n in nodes)
    wait_for(ready, 300, f"3 Ready nodes at {K8S_VERSION}", 3)
    times["created (Available, 3 Ready nodes)"] = time.monotonic() - t
    wait_for(lambda: spec.recorded("AfterControlPlaneInitialized"), CALLED, "AfterControlPlaneInitialized called")
    # the extension's patches reached the real objects: the node image by version on every node, kubelet v=2
    nodes = [c for c in run(["docker", "ps", "--filter", f"label=io.x-k8s.capd-py.cluster={name}", "--format",
                             "{{.Names}} {{.Image}}"]).stdout.splitlines() if not c.split()[0].endswith("-lb")]
    assert len(nodes) == 3 and {c.split()[1] for c in nodes} == {f"kindest/node:{K8S_VERSION}"}, nodes
    kcp = json.loads(m.kubectl("get", "kubeadmcontrolplanes", "-n", ns, "-l", spec.selector, "-o", "json"))["items"][0]
    assert {"name": "v", "value": "2"} in kcp["spec"]["kubeadmConfigSpec"]["initConfiguration"]["nodeRegistration"][
        "kubeletExtraArgs"], kcp["spec"]["kubeadmConfigSpec"]

    # 3. deletion waits for BeforeClusterDelete: the Cluster, its 4 containers and every object of it stay
    t = time.monotonic()
    wait_for(lambda: spec.containers() == 4, 60, "4 containers (3 nodes + the load balancer)")
    parts = len(json.loads(m.kubectl("get", KINDS, "-n", ns, "-l", spec.selector, "-o", "json"))["items"])
    m.kubectl("delete", "cluster", name, "-n", ns, "--wait=false")

    def delete_blocked() -> bool:
        c = spec.cluster()
        if c is None or "runtime.cluster.x-k8s.io/ok-to-delete" in (c["metadata"].get("annotations") or {}):
            return False
        objs = json.loads(m.kubectl("get", KINDS, "-n", ns, "-l", spec.selector, "-o", "json"))["items"]
        return len(objs) == parts and not any(o["metadata"].get("deletionTimestamp") for o in objs) \
            and spec.containers() == 4
    runtime_hook(spec, "BeforeClusterDelete", delete_blocked)
    wait_for(lambda: spec.cluster() is None, 300, "the Cluster gone", 3)
    wait_for(lambda: not docker_leftovers(name), 120, "no containers, networks or volumes of the cluster")
    wait_for(lambda: not m.kubectl("get", KINDS, "-n", ns, "-l", spec.selector, "-o", "name").strip(), 60,
             "no Cluster API objects of the cluster")
    times["deleted"] = time.monotonic() - t

    # upstream's checkLifecycleHookResponses, then the order and blocking from the extension's record
    expected = {"BeforeClusterCreate": te.RELEASED, "AfterControlPlaneInitialized": "Success",
                "BeforeClusterDelete": te.RELEASED}
    data = spec.responses()
    assert {k: data.get(f"{k}-actualResponseStatus") for k in expected} == expected, data
    assert te.record_problems(spec.ext.calls, list(expected), BLOCKING) == []
    print("\nhook calls in order: " + ", ".join(f"{k} x{spec.calls_of(k)}" for k in expected))
