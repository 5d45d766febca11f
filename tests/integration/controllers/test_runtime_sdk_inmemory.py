"""Upstream Cluster API v1.14's runtime-SDK spec (test/e2e/cluster_upgrade_runtimesdk.go,
`ClusterUpgradeWithRuntimeSDKSpec` with `Flavor: in-memory-topology`) on capd-py's inMemory backend: every hook's
order and blocking through a whole v1.34.4 -> v1.35.4 upgrade, in about a minute and with no container.

Moved here from tests/e2e/test_runtime_sdk.py (issue 40), which ran the same sequence on real node containers in
~334 s and now keeps only a docker smoke (creation and deletion with the hooks; its docstring says what). As
upstream v1.14 did: its RuntimeSDK spec runs on the in-memory backend, only the chained-upgrade variant on docker.

What runs:
- A management cluster set up as `EXP_RUNTIME_SDK=true capd-py init` sets one up in host mode, on an API server of
  this module's own: a real kube-apiserver + etcd (+ kube-controller-manager, for the garbage collector), the CRDs
  converted by the controllers' webhook and upstream's defaulting / validating admission webhooks
  (cli/management.install_crds with a webhook URL), so the Cluster webhook's AfterClusterUpgrade refusal is real;
  every capd-py controller in-process (capd_py/testing/inprocess.operator_in_thread) with the RuntimeSDK gate on and
  the workload clients `capd-py controllers` runs: a DevCluster with `backend.inMemory` gets its workload cluster in
  the controllers' memory, served over HTTPS at its endpoint (docs/in-memory.md). No container is made.
- capd-py's Python test extension (capd_py/testing/test_extension.py, upstream's test/extension rebuilt with the kit)
  served by this test on 127.0.0.1 over HTTPS, registered by upstream e2e's ExtensionConfig (`k8s-upgrade-with-
  runtimesdk`, its settings, a namespaceSelector naming the test's namespace) by URL + caBundle.
- Upstream v1.14.0 e2e's flavor unchanged (tests/fixtures/upstream-v1.14/e2e-clusterclass-in-memory.yaml and
  e2e-cluster-template-in-memory-topology.yaml: DevClusterTemplate / DevMachineTemplates with `backend.inMemory`,
  VMs 10 s, Node / etcd / API server 2 s, 20 % jitter; an empty KubeadmControlPlaneTemplate and KubeadmConfigTemplate;
  external patches and variables from `generate-patches.<ext>` / `discover-variables.<ext>` and the upgrade plan from
  `generate-upgrade-plan.<ext>`), variables substituted as clusterctl does (capd_py/testing/envsubst.py: this tier
  builds no clusterctl; tests/e2e/test_upstream_templates.py renders v1.14's in-memory templates with clusterctl
  v1.14.0) with upstream's docker e2e values, 1 control plane + 1 MachineDeployment worker (upstream's defaults).

What it asserts, in upstream's order (its runtimeHookTestHandler for each hook): the hook is called (its
`-actualResponseStatus` in the responses ConfigMap) and the Cluster's TopologyReconciled message names it; then, with
the controllers' write counter (capd_py/testing/quiet.py) instead of upstream's 30 s Consistently: once the
controllers wrote nothing in the namespace for SETTLE seconds, the blocked state holds, the hook is asked again
(retryAfterSeconds honoured: each hook blocks at least twice) and until then the controllers wrote nothing in the
namespace and no resourceVersion of the cluster's objects changed; then `<key>-preloadedResponse: {"Status":
"Success"}` is patched in and progress follows.
1. ExtensionConfig Discovered with 13 handlers; the ClusterClass VariablesReady (variables from DiscoverVariables).
2. BeforeClusterCreate: no infrastructure / control plane refs while it blocks. Then Available, 2 Ready Nodes at
   v1.34.4 (read through the workload cluster's HTTPS endpoint with its kubeconfig Secret), AfterControlPlaneInitialized
   recorded, the extension's patches on the objects (KCP kubelet `v=2`, `node-labels: kubernetesVersion=<version>`;
   upstream v1.14's `top-level-label-1` marks on the DevCluster and the DevMachineTemplate copies).
3. The upgrade to v1.35.4: the `before-upgrade.hook.cluster.cluster.x-k8s.io/upgrade-test` annotation blocks it
   without calling the hook (quiet for ANNOTATION_QUIET s); BeforeClusterUpgrade (everything at v1.34.4, its request's
   upgrade plan: control plane and workers [v1.35.4], the extension's GenerateUpgradePlan), BeforeControlPlaneUpgrade
   (the control plane keeps v1.34.4); the control plane at v1.35.4 (spec, status, every CP Machine NodeHealthy, the
   KCP's `node-labels` at the new version only), workers still at v1.34.4; AfterControlPlaneUpgrade (workers held;
   upstream's MachineSet preflight test meanwhile: the MachineDeployment scaled up by hand stays scaled, its
   MachineSet says `"KubeadmVersionSkew" preflight check failed` and creates no Machine), BeforeWorkersUpgrade, the
   workers at v1.35.4 (AfterWorkersUpgrade never recorded while a Machine of the old version remains),
   AfterWorkersUpgrade, AfterClusterUpgrade (a server-side dry run of the next minor is refused by the Cluster
   webhook: `"AfterClusterUpgrade" hook is still blocking`).
4. After the upgrade (upstream's PostUpgrade, ValidateResourceVersionStable): 2 Ready Nodes at v1.35.4, the
   kube-proxy DaemonSet at v1.35.4's image, every Machine Ready, the Cluster Available, and the cluster's objects'
   resourceVersions unchanged over a STABLE-second window without writes.
5. Deletion: BeforeClusterDelete (the Cluster, its control plane, MachineDeployment, Machines and in-memory Nodes stay,
   nothing carries a deletionTimestamp but the Cluster, no ok-to-delete annotation); then no Cluster API object of the
   cluster (template copies collected), the in-memory workload cluster gone and its endpoint refusing connections.
6. Upstream's checkLifecycleHookResponses (each key's last answer `Status: Success, RetryAfterSeconds: 0`, `Success`
   for AfterControlPlaneInitialized) and, from the extension's ordered record, the first calls in upstream's order,
   each hook blocking at least twice before its first success and never after it, each asked only once the one
   before it let go.

`test_workers_upgrade_waits_for_the_machine_pool`: upstream v1.14's in-memory flavor has no MachinePool (upstream
has no in-memory machine pool), so the MachinePool's part of the workers' upgrade, which the docker e2e checked,
runs here with upstream v1.13's docker runtime-SDK flavors (clusterclass-quick-start-runtimesdk +
cluster-template-upgrades-runtimesdk, a MachineDeployment and a MachinePool) on fake node containers
(capd_py/testing/fake_workload.py), the same controllers and extension: BeforeWorkersUpgrade holds both at v1.34.4;
AfterWorkersUpgrade is never asked while a Machine of the old version remains; while it blocks every worker is at
v1.35.4, the pool's instance replaced (a new Machine with its DockerMachine) and nothing is written; all nine hooks
in upstream's order.

What this found in capd-py (fixed): a topology Cluster's MachineHealthChecks, made before their Machines, counted
none of them until the next resync (60 s); the MHC controller now watches Machines, as upstream's.
"""

from __future__ import annotations

import base64
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import selectors
from capd_py.api.gvk import (
    CLUSTER,
    CLUSTER_CLASS,
    CONFIG_MAP,
    DAEMON_SET,
    DEV_CLUSTER,
    DEV_MACHINE,
    DEV_MACHINE_TEMPLATE,
    DOCKER_MACHINE,
    EXTENSION_CONFIG,
    GVK,
    KUBEADM_CONFIG,
    KUBEADM_CONFIG_TEMPLATE,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_HEALTH_CHECK,
    MACHINE_POOL,
    MACHINE_SET,
    NAMESPACE,
    NODE,
    SECRET,
)
from capd_py.api.labels import CLUSTER_NAME, MACHINE_POOL_NAME
from capd_py.api.runtime_hooks import OK_TO_DELETE_ANNOTATION
from capd_py.cli import management as management_cli
from capd_py.cli.apply import apply_objects
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import servingcert
from capd_py.testing import envsubst
from capd_py.testing import test_extension as te
from capd_py.testing.envtest import MAKE_HINT, EnvTest, free_port, missing_binaries
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadEtcd, FakeWorkloads
from capd_py.testing.inprocess import eventually, operator_in_thread
from capd_py.testing.quiet import activity, quiet_versions, wait_quiet

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600), pytest.mark.docker_free]

V1_14 = Path(__file__).resolve().parents[2] / "fixtures" / "upstream-v1.14"
CLASS = V1_14 / "e2e-clusterclass-in-memory.yaml"
TEMPLATE = V1_14 / "e2e-cluster-template-in-memory-topology.yaml"
EXT = te.DEFAULT_EXTENSION_CONFIG_NAME   # upstream's spec name, k8s-upgrade-with-runtimesdk
FROM_V, TO_V = "v1.34.4", "v1.35.4"      # the versions the test extension's upgrade plan knows (DEFAULT_VERSIONS)
BEFORE_UPGRADE_ANNOTATION = "before-upgrade.hook.cluster.cluster.x-k8s.io/upgrade-test"
# each blocking hook's preloaded answer: blocking with retryAfterSeconds 1 (the extension's default is upstream's 5)
RETRY = 1
PRELOADED_BLOCKING = f'{{"Status": "Success", "RetryAfterSeconds": {RETRY}}}'
BLOCKING = f"Status: Success, RetryAfterSeconds: {RETRY}"
SUCCESS = "Status: Success, RetryAfterSeconds: 0"
SETTLE = 0.5             # seconds without a controller write in the namespace: what was due is written
ANNOTATION_QUIET = 3.0   # the annotation blocks without a hook call to wait for (retried after 20 min upstream)
STABLE = 6.0             # upstream's PostUpgrade: resourceVersions stay put over this many seconds without writes
MHC_POLL = 10.0          # capd_py/controllers/machinehealthcheck.py POLL
CALLED = 60.0            # a due hook is called, or a released one lets things move, within this (upstream: 30 s)
TOPOLOGY_KINDS = (CLUSTER, DEV_CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE_DEPLOYMENT, MACHINE_SET, MACHINE, DEV_MACHINE,
                  DEV_MACHINE_TEMPLATE, KUBEADM_CONFIG, KUBEADM_CONFIG_TEMPLATE, MACHINE_HEALTH_CHECK)


# -- the management cluster, the controllers, the extension --------------------------------------------------------

@pytest.fixture(scope="module")
def management() -> Iterator[EnvTest]:
    """What `EXP_RUNTIME_SDK=true capd-py init` installs in host mode (CRDs converted by the controllers' webhook,
    upstream's admission webhooks, clusterctl's inventory), on an API server of this module's own."""
    missing = missing_binaries()
    if missing:
        pytest.fail(f"envtest needs {', '.join(map(str, missing))}; {MAKE_HINT}", pytrace=False)
    env = EnvTest(controller_manager=True).start()   # the garbage collector takes the topology's template copies
    try:
        management_cli.install_crds(env.kubeconfig_path,
                                    webhook_url=servingcert.host_mode_url("127.0.0.1", free_port()))
        yield env
    finally:
        env.stop()


@pytest.fixture
async def operator(management: EnvTest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Manager]:
    """Every controller in-process, the RuntimeSDK gate on (EXP_RUNTIME_SDK=true at init) and MachineTaintPropagation
    (upstream's e2e config turns it on: the flavor's topology has taints, which the Cluster webhook refuses with the
    gate off), the workload clients `capd-py controllers` runs (in-memory clusters for the inMemory backend); no
    container runtime is reached."""
    monkeypatch.setenv("CAPD_PY_FEATURE_GATES", "RuntimeSDK=true,MachineTaintPropagation=true")
    async with operator_in_thread(str(management.kubeconfig_path), FakeRuntime()) as m:
        yield m


@pytest.fixture
async def api(management: EnvTest) -> AsyncIterator[Kube]:
    k = management.kube()
    try:
        yield k
    finally:
        k.close()


# -- what upstream's handlers look at --------------------------------------------------------------------------

class Spec:
    """One Cluster of the spec: the reads upstream's helpers make, through the management API server, and the
    workload cluster through its HTTPS endpoint."""

    def __init__(self, kube: Kube, manager: Manager, calls: list[te.HookCall], name: str, ns: str, tmp: Path):
        self.kube, self.manager, self.calls, self.name, self.ns, self.tmp = kube, manager, calls, name, ns, tmp
        self.cm = te.config_map_name(name, EXT)
        self.labels = {CLUSTER_NAME: name}
        self._workload: Kube | None = None

    async def cluster(self) -> dict[str, Any]:
        c = await self.kube.get(CLUSTER, self.ns, self.name)
        assert c is not None, f"Cluster {self.ns}/{self.name} is gone"
        return c

    async def topology_message(self) -> str:
        return str((cond.get(await self.cluster(), "TopologyReconciled") or {}).get("message", ""))

    async def control_plane(self) -> dict[str, Any]:
        ref = (await self.cluster())["spec"]["controlPlaneRef"]
        kcp = await self.kube.get(KUBEADM_CONTROL_PLANE, self.ns, ref["name"])
        assert kcp is not None
        return kcp

    async def of(self, gvk: GVK, **labels: str) -> list[dict[str, Any]]:
        """The cluster's objects of a kind (its `cluster.x-k8s.io/cluster-name` label and `labels`)."""
        return await self.kube.list(gvk, self.ns, labels={**self.labels, **labels})

    async def machines(self, control_plane: bool) -> list[dict[str, Any]]:
        return [m for m in await self.of(MACHINE)
                if ("cluster.x-k8s.io/control-plane" in m["metadata"].get("labels", {})) == control_plane]

    async def responses(self) -> dict[str, str]:
        cm = await self.kube.get(CONFIG_MAP, self.ns, self.cm)
        return dict((cm or {}).get("data") or {})

    async def recorded(self, key: str) -> bool:
        return f"{key}-actualResponseStatus" in await self.responses()

    def calls_of(self, key: str) -> int:
        return sum(1 for c in self.calls if c.key == key)

    def writes(self) -> int:
        """The controllers' writes to objects of this namespace so far (capd_py/testing/quiet.py's counter)."""
        return int((activity(self.manager).get("by_namespace") or {}).get(self.ns, 0))

    async def snapshot(self) -> dict[str, dict[str, Any]]:
        """Every object of the namespace the spec's Cluster is made of (and the class's), by kind/name."""
        return {f"{g.kind}/{o['metadata']['name']}": o for g in (*TOPOLOGY_KINDS, SECRET, CLUSTER_CLASS)
                for o in await self.kube.list(g, self.ns)}

    async def objects(self) -> dict[str, str]:
        """`snapshot()`'s resourceVersions."""
        return {k: str(o["metadata"]["resourceVersion"]) for k, o in (await self.snapshot()).items()}

    async def health_checks_current(self) -> bool:
        """Each MachineHealthCheck's status names the Machines it selects now, all healthy (a hold starts once the
        health checks caught up with a rollout; they watch Machines, and poll their Nodes every MHC_POLL s)."""
        machines = [m for m in await self.of(MACHINE) if not m["metadata"].get("deletionTimestamp")]
        for mhc in await self.of(MACHINE_HEALTH_CHECK):
            sel = mhc["spec"].get("selector")
            names = sorted(m["metadata"]["name"] for m in machines
                           if selectors.selector_matches(sel, m["metadata"].get("labels")))
            st = mhc.get("status") or {}
            if sorted(st.get("targets") or []) != names or st.get("currentHealthy") != len(names):
                return False
        return True

    async def versions(self, cp: str, workers: str) -> bool:
        """upstream's checkVersions: control-plane Machines at `cp`, MachineDeployments at `workers`."""
        machines, mds = await self.machines(True), await self.of(MACHINE_DEPLOYMENT)
        return bool(machines and mds) and all(m["spec"]["version"] == cp for m in machines) \
            and all(md["spec"]["template"]["spec"]["version"] == workers for md in mds)

    async def control_plane_at(self, version: str) -> bool:
        """upstream's waitControlPlaneVersion: spec and status version, every control-plane Machine, NodeHealthy."""
        cp, machines = await self.control_plane(), await self.machines(True)
        return cp["spec"]["version"] == version and (cp.get("status") or {}).get("version") == version \
            and bool(machines) and all(m["spec"]["version"] == version and cond.is_true(m, "NodeHealthy")
                                       for m in machines)

    async def workers_at(self, version: str) -> bool:
        """upstream's workersVersions: MachineDeployments and every worker Machine at `version`, NodeHealthy."""
        mds, workers = await self.of(MACHINE_DEPLOYMENT), await self.machines(False)
        return bool(mds and workers) \
            and all(md["spec"]["template"]["spec"]["version"] == version for md in mds) \
            and all(m["spec"]["version"] == version and cond.is_true(m, "NodeHealthy") for m in workers)

    async def workload(self) -> Kube:
        """The in-memory workload cluster through its endpoint, with the `<cluster>-kubeconfig` Secret."""
        if self._workload is None:
            sec = await self.kube.get(SECRET, self.ns, f"{self.name}-kubeconfig")
            assert sec is not None, "no kubeconfig Secret yet"
            path = self.tmp / f"{self.name}.kubeconfig"
            path.write_bytes(base64.b64decode(sec["data"]["value"]))
            self._workload = Kube.from_kubeconfig(str(path))
        return self._workload

    async def nodes_ready(self, version: str, count: int) -> bool:
        """upstream's WaitForNodesReady: `count` Nodes, each Ready with a kubelet at `version`."""
        nodes = await (await self.workload()).list(NODE)
        return len(nodes) == count and all(n["status"]["nodeInfo"]["kubeletVersion"] == version
                                           and cond.is_true(n, "Ready") for n in nodes)

    async def state(self) -> str:
        """Where the Cluster stands, for a failure's message."""
        out = [f"hook calls: {[(c.key, c.status) for c in self.calls][-20:]}", f"responses: {await self.responses()}",
               f"recent writes: {activity(self.manager).get('recent', [])[-10:]}"]
        c = await self.kube.get(CLUSTER, self.ns, self.name)
        if c is not None:
            bad = [(x["type"], x["status"], x.get("reason"), x.get("message"))
                   for x in (c.get("status") or {}).get("conditions") or [] if x["status"] != "True"]
            out += [f"annotations: {c['metadata'].get('annotations')}", f"conditions not True: {bad}"]
        for mhc in await self.of(MACHINE_HEALTH_CHECK):
            out.append(f"mhc {mhc['metadata']['name']} selector {mhc['spec'].get('selector')} status "
                       f"{ {k: v for k, v in (mhc.get('status') or {}).items() if k != 'conditions'} }")
        for m in await self.of(MACHINE):
            deleting = bool(m["metadata"].get("deletionTimestamp"))
            out.append(f"machine {m['metadata']['name']} {m['spec'].get('version')} "
                       f"{(m.get('status') or {}).get('phase')} deleting={deleting}")
        return "\n".join(out)

    async def unblock(self, key: str) -> None:
        # upstream's merge patch, byte for byte
        await self.kube.merge_patch(CONFIG_MAP, self.ns, self.cm,
                                    {"data": {f"{key}-preloadedResponse": '{"Status": "Success"}'}})

    def close(self) -> None:
        if self._workload is not None:
            self._workload.close()


Check = Callable[[], Awaitable[bool]]


async def hold(spec: Spec, what: str, blocked: Check, key: str | None = None) -> None:
    """upstream's Consistently(blocked), with the write counter: once the controllers wrote nothing in the namespace
    for SETTLE s the state is blocked; then (`key`) the hook is asked again -- its retryAfterSeconds honoured, not a
    one-off -- or (no hook) ANNOTATION_QUIET s pass without a write; meanwhile the controllers wrote nothing there
    and no resourceVersion changed, and the state is still blocked."""
    await eventually(spec.health_checks_current, MHC_POLL + 5, f"{what}: the MachineHealthChecks current",
                     spec.state)
    await wait_quiet(spec.manager, window=SETTLE, timeout=CALLED, what=f"{what}: settled", namespace=spec.ns)
    mark, full = spec.writes(), await spec.snapshot()
    before = {k: str(o["metadata"]["resourceVersion"]) for k, o in full.items()}
    assert await blocked(), f"{what}: not blocked once settled\n{await spec.state()}"
    if key is not None:
        asked = spec.calls_of(key)
        await eventually(lambda: _true(spec.calls_of(key) > asked), 3 * RETRY + 10,
                         f"{key} asked again while blocking", spec.state)
        await wait_quiet(spec.manager, window=SETTLE, timeout=CALLED, what=f"{what}: settled again",
                         namespace=spec.ns)
    else:
        await wait_quiet(spec.manager, window=ANNOTATION_QUIET, timeout=CALLED, what=what, namespace=spec.ns)
    now, writes = await spec.snapshot(), spec.writes()
    after = {k: str(o["metadata"]["resourceVersion"]) for k, o in now.items()}
    changed = {k: (full.get(k, {}).get("status"), now[k].get("status")) for k in now if before.get(k) != after[k]}
    assert writes == mark and after == before, (
        f"{what}: the controllers wrote while blocked: {activity(spec.manager).get('recent', [])[-(writes - mark):]};"
        f" changed (status before, after): {changed}")
    assert await blocked(), f"{what}: stopped blocking\n{await spec.state()}"


async def _true(value: bool) -> bool:
    return value


async def runtime_hook(spec: Spec, hook: str, attributes: list[str], blocked: Check,
                       before_unblocking: Callable[[], Awaitable[None]] | None = None) -> None:
    """upstream's runtimeHookTestHandler: called and shown, holds (see `hold`), released by the preloaded Success."""
    key = te.hook_key(hook, attributes)

    async def shows() -> bool:
        return hook == "BeforeClusterDelete" or hook in await spec.topology_message()

    async def called() -> bool:
        return await spec.recorded(key) and await shows()
    await eventually(called, CALLED, f"{key} called and shown blocking", spec.state)
    first = time.monotonic()

    async def holds() -> bool:
        return await shows() and await blocked()
    await hold(spec, f"{key} blocks", holds, key)
    if before_unblocking is not None:
        await before_unblocking()
    await spec.unblock(key)

    async def released() -> bool:
        if hook == "BeforeClusterDelete":
            return not await blocked()
        return not (await shows() or await blocked())
    await eventually(released, CALLED, f"{key} released", spec.state)
    print(f"{key}: blocked {time.monotonic() - first:.1f}s (asked {spec.calls_of(key)} times), released")


async def annotation_hook(spec: Spec, blocked: Check) -> None:
    """upstream's annotationHookTestHandler: the before-upgrade annotation blocks the upgrade, then is removed."""
    message = f"annotation {BEFORE_UPGRADE_ANNOTATION} is set"

    async def shows() -> bool:
        return message in await spec.topology_message()

    async def holds() -> bool:
        return await shows() and await blocked()
    await eventually(holds, CALLED, "the before-upgrade annotation blocking", spec.state)
    await hold(spec, "the before-upgrade annotation blocks", holds)
    await spec.kube.json_patch(CLUSTER, spec.ns, spec.name, [
        {"op": "remove", "path": "/metadata/annotations/" + BEFORE_UPGRADE_ANNOTATION.replace("/", "~1")}])

    async def gone() -> bool:
        return not await shows()
    await eventually(gone, CALLED, "the annotation no longer blocking", spec.state)


async def machine_set_preflight_checks(spec: Spec) -> None:
    """upstream's machineSetPreflightChecksTest: the control plane is at the new version, AfterControlPlaneUpgrade
    holds the workers; a MachineDeployment scaled up by hand stays scaled (the topology controller leaves it alone),
    its MachineSet wants the replica but creates no Machine (KubeadmVersionSkew); then scaled back."""
    md = (await spec.of(MACHINE_DEPLOYMENT))[0]
    name, replicas = md["metadata"]["name"], int(md["spec"]["replicas"])

    async def scale(n: int) -> None:
        await spec.kube.merge_patch(MACHINE_DEPLOYMENT, spec.ns, name, {"spec": {"replicas": n}})

    async def ms_blocked() -> bool:
        mss = await spec.kube.list(MACHINE_SET, spec.ns, labels={"cluster.x-k8s.io/deployment-name": name})
        up = cond.get(mss[0], "ScalingUp") if mss else None
        return bool(mss) and mss[0]["spec"]["replicas"] == replicas + 1 and up is not None \
            and up["status"] == "True" and up.get("reason") == "ScalingUp" \
            and '"KubeadmVersionSkew" preflight check failed' in str(up.get("message"))

    await scale(replicas + 1)
    await eventually(ms_blocked, CALLED, "the MachineSet's scale-up held by the KubeadmVersionSkew preflight check",
                     spec.state)
    # then nothing more happens: the topology controller did not revert the replicas, no Machine was made
    await wait_quiet(spec.manager, window=SETTLE, timeout=CALLED, what="the preflight check settled",
                     namespace=spec.ns)
    md = await spec.kube.get(MACHINE_DEPLOYMENT, spec.ns, name) or {}
    assert md["spec"]["replicas"] == replicas + 1, "the scaled-up MachineDeployment was reverted"
    made = await spec.kube.list(MACHINE, spec.ns, labels={"cluster.x-k8s.io/deployment-name": name})
    assert len(made) == replicas, [m["metadata"]["name"] for m in made]
    assert await ms_blocked()
    await scale(replicas)


# -- the spec ------------------------------------------------------------------------------------------------

BLOCKING_KEYS = ("BeforeClusterCreate", te.hook_key("BeforeClusterUpgrade", [FROM_V, TO_V]),
                 te.hook_key("BeforeControlPlaneUpgrade", [FROM_V, TO_V]),
                 te.hook_key("AfterControlPlaneUpgrade", [TO_V]), te.hook_key("BeforeWorkersUpgrade", [FROM_V, TO_V]),
                 te.hook_key("AfterWorkersUpgrade", [TO_V]), te.hook_key("AfterClusterUpgrade", [TO_V]),
                 "BeforeClusterDelete")


async def preload(spec: Spec) -> None:
    """The responses ConfigMap, made before the Cluster: every blocking hook's answer preloaded as blocking with
    retryAfterSeconds RETRY, read by the extension as upstream's reads `<key>-preloadedResponse` (without it,
    defaultAllHandlersToBlocking answers the same with upstream's 5 s: each hold and each release would wait for
    that instead)."""
    await spec.kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                        "metadata": {"name": spec.cm, "namespace": spec.ns},
                                        "data": {f"{k}-preloadedResponse": PRELOADED_BLOCKING for k in BLOCKING_KEYS}})


def render(name: str, ns: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """upstream's flavor with clusterctl's substitution: the class (`generate yaml`) and the Cluster (`generate
    cluster NAME --kubernetes-version v1.34.4 --control-plane-machine-count 1 --worker-machine-count 1`), with
    upstream's docker e2e values."""
    values = {**envsubst.E2E_VARIABLES, "NAMESPACE": ns, "CLUSTER_NAME": name, "KUBERNETES_VERSION": FROM_V,
              "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1", "EXTENSION_CONFIG_NAME": EXT}
    return envsubst.documents(CLASS, values, ns), envsubst.documents(TEMPLATE, values, ns)


async def test_cluster_upgrade_with_runtime_sdk_in_memory(operator: Manager, api: Kube, tmp_path: Path) -> None:
    t0 = time.monotonic()
    ns, name = f"rsdk-{secrets.token_hex(3)}", f"k8s-upgrade-with-runtimesdk-{secrets.token_hex(3)}"
    await api.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    calls: list[te.HookCall] = []
    server, config = await te.serve_test_extension(api, "127.0.0.1", 0, cert_dir=tmp_path / "certs", name=EXT,
                                                   namespaces=(ns,), calls=calls)
    spec = Spec(api, operator, calls, name, ns, tmp_path)
    times: dict[str, float] = {}
    try:
        await _spec(spec, config, times)
    finally:
        # as upstream's AfterEach: the ExtensionConfig first, so BeforeClusterDelete cannot hold the cleanup
        await api.delete(EXTENSION_CONFIG, None, EXT)
        if await api.delete(CLUSTER, ns, name):
            await eventually(lambda: _gone(api, CLUSTER, ns, name), 60, "the Cluster deleted in the cleanup")
        spec.close()
        await server.stop()
        await api.delete(NAMESPACE, None, ns)
        print("phases: " + ", ".join(f"{k} {v:.1f}s" for k, v in times.items())
              + f"; whole test {time.monotonic() - t0:.1f}s")


async def _gone(kube: Kube, gvk: GVK, ns: str, name: str) -> bool:
    return await kube.get(gvk, ns, name) is None


async def _spec(spec: Spec, config: dict[str, Any], times: dict[str, float]) -> None:
    kube, ns, name = spec.kube, spec.ns, spec.name
    t = time.monotonic()

    # "Deploy Test Extension ExtensionConfig": discovered by the core (its handlers in the status)
    assert all(o.ok for o in await apply_objects(kube, [config]))

    async def discovered() -> bool:
        ec = await kube.get(EXTENSION_CONFIG, None, EXT) or {}
        return cond.is_true(ec, "Discovered") and len((ec.get("status") or {}).get("handlers") or []) == 13
    await eventually(discovered, CALLED, "the ExtensionConfig discovered with 13 handlers")

    # upstream v1.14's in-memory flavor; the class first, so its variables are discovered
    klass, cluster = render(name, ns)
    assert sorted(d["kind"] for d in klass) == ["ClusterClass", "DevClusterTemplate", "DevMachineTemplate",
                                                "DevMachineTemplate", "KubeadmConfigTemplate",
                                                "KubeadmControlPlaneTemplate"]
    assert [d["kind"] for d in cluster] == ["Cluster"]
    cc = next(d for d in klass if d["kind"] == "ClusterClass")
    assert cc["spec"]["patches"][0]["external"]["generatePatchesExtension"] == f"generate-patches.{EXT}"
    assert cc["spec"]["upgrade"]["external"]["generateUpgradePlanExtension"] == f"generate-upgrade-plan.{EXT}"
    applied = await apply_objects(kube, klass)
    assert all(o.ok for o in applied), [(o.ref, o.detail) for o in applied if not o.ok]

    async def variables_ready() -> bool:
        return cond.is_true(await kube.get(CLUSTER_CLASS, ns, "in-memory") or {}, "VariablesReady")
    await eventually(variables_ready, CALLED, "ClusterClass VariablesReady (DiscoverVariables)")
    await preload(spec)
    applied = await apply_objects(kube, cluster)
    assert all(o.ok for o in applied), [(o.ref, o.detail) for o in applied if not o.ok]
    times["extension + class + apply"] = time.monotonic() - t

    # 1. creation waits for BeforeClusterCreate
    t = time.monotonic()

    async def creation_blocked() -> bool:
        s = (await spec.cluster())["spec"]
        return not (s.get("infrastructureRef") or {}).get("name") and not (s.get("controlPlaneRef") or {}).get("name")
    await runtime_hook(spec, "BeforeClusterCreate", [], creation_blocked)
    times["BeforeClusterCreate"] = time.monotonic() - t

    t = time.monotonic()

    async def created() -> bool:
        return cond.is_true(await spec.cluster(), "Available") and await spec.nodes_ready(FROM_V, 2)
    await eventually(created, 120, f"cluster {name} Available with 2 Ready Nodes at {FROM_V}", spec.state)
    times["created (Available, 2 Ready Nodes)"] = time.monotonic() - t
    await eventually(lambda: spec.recorded("AfterControlPlaneInitialized"), CALLED,
                     "AfterControlPlaneInitialized called", spec.state)
    # the extension's patches reached the objects (GeneratePatches): kubelet v=2 and the version's node label on the
    # (empty in the class) KCP template; upstream v1.14's mark on the DevClusterTemplate (spec.template.metadata)
    # on the DevCluster. (Its marks on the DevMachineTemplates' own metadata do not reach the copies: capd-py's patch
    # engine takes a patched template's spec only, as upstream v1.13's; v1.14's takes its labels too.)
    kcp = await spec.control_plane()
    kubelet = kcp["spec"]["kubeadmConfigSpec"]["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    assert kubelet == [{"name": "v", "value": "2"}, {"name": "node-labels", "value": f"kubernetesVersion={FROM_V}"}]
    dc = (await spec.of(DEV_CLUSTER))[0]
    assert dc["metadata"]["labels"].get(te.TOP_LEVEL_LABEL[0]) == te.TOP_LEVEL_LABEL[1], dc["metadata"]
    assert "inMemory" in dc["spec"]["backend"]

    # 2. the upgrade, step by step
    t = time.monotonic()
    await eventually(lambda: _all(spec.control_plane_at(FROM_V), spec.workers_at(FROM_V)), CALLED,
                     f"every Machine at {FROM_V}", spec.state)
    await kube.merge_patch(CLUSTER, ns, name, {"metadata": {"annotations": {BEFORE_UPGRADE_ANNOTATION: ""}}})
    await kube.merge_patch(CLUSTER, ns, name, {"spec": {"topology": {"version": TO_V}}})
    before_cluster_upgrade = te.hook_key("BeforeClusterUpgrade", [FROM_V, TO_V])
    before_cp_upgrade = te.hook_key("BeforeControlPlaneUpgrade", [FROM_V, TO_V])

    async def before_cluster_upgrade_blocks() -> bool:
        return (await spec.control_plane())["spec"]["version"] == FROM_V and await spec.versions(FROM_V, FROM_V) \
            and not await spec.recorded(before_cp_upgrade)

    async def annotation_blocks() -> bool:
        return await before_cluster_upgrade_blocks() and not await spec.recorded(before_cluster_upgrade)
    await annotation_hook(spec, annotation_blocks)
    await runtime_hook(spec, "BeforeClusterUpgrade", [FROM_V, TO_V], before_cluster_upgrade_blocks)
    # the upgrade plan: the core's, from the extension's GenerateUpgradePlan (one minor: the target, for both)
    request = next(c.request for c in spec.calls if c.key == before_cluster_upgrade)
    assert (request["fromKubernetesVersion"], request["toKubernetesVersion"]) == (FROM_V, TO_V)
    assert request["controlPlaneUpgrades"] == [{"version": TO_V}], request
    assert request["workersUpgrades"] == [{"version": TO_V}], request

    async def cp_upgrade_blocks() -> bool:
        return (await spec.control_plane())["spec"]["version"] == FROM_V and await spec.versions(FROM_V, FROM_V)
    await runtime_hook(spec, "BeforeControlPlaneUpgrade", [FROM_V, TO_V], cp_upgrade_blocks)
    await eventually(lambda: spec.control_plane_at(TO_V), 120, f"the control plane at {TO_V}", spec.state)
    times["control plane upgraded"] = time.monotonic() - t
    assert await spec.versions(TO_V, FROM_V) and await spec.workers_at(FROM_V), "the workers moved early"
    # the extension's node label follows the version, the old one gone (what the docker e2e found once)
    kcs = (await spec.control_plane())["spec"]["kubeadmConfigSpec"]
    for config_ in ("initConfiguration", "joinConfiguration"):
        labels = [a["value"] for a in kcs[config_]["nodeRegistration"]["kubeletExtraArgs"]
                  if a["name"] == "node-labels"]
        assert labels == [f"kubernetesVersion={TO_V}"], (config_, kcs[config_])

    after_cp = te.hook_key("AfterControlPlaneUpgrade", [TO_V])
    before_workers = te.hook_key("BeforeWorkersUpgrade", [FROM_V, TO_V])
    after_workers = te.hook_key("AfterWorkersUpgrade", [TO_V])
    after_cluster = te.hook_key("AfterClusterUpgrade", [TO_V])

    async def after_cp_blocks() -> bool:
        return (await spec.control_plane())["spec"]["version"] == TO_V and await spec.versions(TO_V, FROM_V) \
            and not await spec.recorded(before_workers) and not await spec.recorded(after_cluster)
    await runtime_hook(spec, "AfterControlPlaneUpgrade", [TO_V], after_cp_blocks,
                       before_unblocking=lambda: machine_set_preflight_checks(spec))

    async def workers_held() -> bool:
        return (await spec.control_plane())["spec"]["version"] == TO_V and await spec.versions(TO_V, FROM_V)
    await runtime_hook(spec, "BeforeWorkersUpgrade", [FROM_V, TO_V], workers_held)
    t = time.monotonic()
    early: list[str] = []

    async def workers_upgraded() -> bool:
        # AfterWorkersUpgrade is due only once no worker is upgrading: never while a Machine of the old version is
        # still there
        old = [m["metadata"]["name"] for m in await spec.of(MACHINE) if m["spec"].get("version") != TO_V]
        if old and await spec.recorded(after_workers):
            early.append(f"{after_workers} called while {old} still run {FROM_V}")
        return await spec.workers_at(TO_V)
    await eventually(workers_upgraded, 120, f"the workers at {TO_V}", spec.state)
    assert not early, early
    times["workers upgraded"] = time.monotonic() - t

    async def after_workers_blocks() -> bool:
        return (await spec.control_plane())["spec"]["version"] == TO_V and await spec.versions(TO_V, TO_V) \
            and not await spec.recorded(after_cluster)
    await runtime_hook(spec, "AfterWorkersUpgrade", [TO_V], after_workers_blocks)

    # AfterClusterUpgrade: while it blocks, the Cluster webhook refuses the next minor (a server-side dry run)
    major, minor, patch = TO_V.lstrip("v").split(".")
    next_v = f"v{major}.{int(minor) + 1}.{patch}"

    async def next_upgrade_refused() -> bool:
        try:
            await kube.acall("PATCH", CLUSTER.path(ns, name), body={"spec": {"topology": {"version": next_v}}},
                             query=[("dryRun", "All")], content_type="application/merge-patch+json")
        except KubeError as e:
            return e.status == 422 and '"AfterClusterUpgrade" hook is still blocking' in e.message
        return False
    await runtime_hook(spec, "AfterClusterUpgrade", [TO_V], next_upgrade_refused)

    # 3. after the upgrade (upstream's WaitForNodesReady, PostUpgrade, VerifyClusterAvailable, VerifyMachinesReady)
    t = time.monotonic()
    await eventually(lambda: spec.nodes_ready(TO_V, 2), CALLED, f"2 Ready Nodes at {TO_V}", spec.state)
    proxy = await (await spec.workload()).get(DAEMON_SET, "kube-system", "kube-proxy") or {}
    assert [c["image"] for c in proxy["spec"]["template"]["spec"]["containers"]] == [
        f"registry.k8s.io/kube-proxy:{TO_V}"], proxy
    before, after = await quiet_versions(spec.manager, spec.objects, window=STABLE, timeout=CALLED,
                                         what="the upgraded cluster's objects stable", namespace=ns)
    assert before == after, {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
    assert cond.is_true(await spec.cluster(), "Available")
    machines = await spec.of(MACHINE)
    assert len(machines) == 2 and all(cond.is_true(m, "Ready") for m in machines), await spec.state()
    times["stable after the upgrade"] = time.monotonic() - t

    # 4. deletion waits for BeforeClusterDelete: nothing but the Cluster is deleting, every Node stays
    t = time.monotonic()
    endpoint = dc["spec"]["controlPlaneEndpoint"]
    await kube.delete(CLUSTER, ns, name)

    async def delete_blocked() -> bool:
        c = await kube.get(CLUSTER, ns, name)
        if c is None or OK_TO_DELETE_ANNOTATION in (c["metadata"].get("annotations") or {}):
            return False
        parts = [*await spec.of(KUBEADM_CONTROL_PLANE), *await spec.of(MACHINE_DEPLOYMENT),
                 *await spec.of(MACHINE), *await spec.of(DEV_CLUSTER)]
        return len(parts) == 5 and not any(p["metadata"].get("deletionTimestamp") for p in parts) \
            and len(await (await spec.workload()).list(NODE)) == 2
    await runtime_hook(spec, "BeforeClusterDelete", [], delete_blocked)
    await eventually(lambda: _gone(kube, CLUSTER, ns, name), CALLED, "the Cluster gone", spec.state)

    async def nothing_left() -> bool:
        left = [f"{g.kind}/{o['metadata']['name']}" for g in TOPOLOGY_KINDS for o in await spec.of(g)]
        return not left and operator_in_memory(spec) is None
    await eventually(nothing_left, CALLED, "no Cluster API object of the cluster, no in-memory cluster", spec.state)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((endpoint["host"], endpoint["port"]), timeout=2).close()
    times["deleted"] = time.monotonic() - t

    # upstream's checkLifecycleHookResponses: every hook called, its last answer a Success
    expected = {
        "BeforeClusterCreate": SUCCESS,
        "AfterControlPlaneInitialized": "Success",
        before_cluster_upgrade: SUCCESS,
        before_cp_upgrade: SUCCESS,
        after_cp: SUCCESS,
        before_workers: SUCCESS,
        after_workers: SUCCESS,
        after_cluster: SUCCESS,
        "BeforeClusterDelete": SUCCESS,
    }
    data = await spec.responses()
    assert {k: data.get(f"{k}-actualResponseStatus") for k in expected} == expected, data

    # and in order, from the extension's record: first calls in upstream's order; each hook blocked (at least
    # twice: asked again after retryAfterSeconds) before it let go, and never blocked again after that; the next
    # hook asked only once the one before it let go
    record = list(spec.calls)
    order = list(dict.fromkeys(c.key for c in record))
    assert te.record_problems(record, list(expected), BLOCKING) == []
    print("\nhook calls in order: " + ", ".join(f"{k} x{sum(1 for c in record if c.key == k)}" for k in order))


def operator_in_memory(spec: Spec) -> object:
    """The controllers' in-memory workload cluster of the spec's Cluster (None once deleted)."""
    return spec.manager.ctx.workload.in_memory.get(spec.ns, spec.name)


async def _all(*checks: Awaitable[bool]) -> bool:
    return all([await c for c in checks])


# -- the MachinePool's part of the workers' upgrade (upstream v1.13's docker flavor, fake node containers) -----------

UPSTREAM_V1_13 = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"


@pytest.fixture
async def fake_nodes(management: EnvTest, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Manager]:
    """The controllers as `operator`'s, with docker-backend clusters on fake node containers and fake workload
    clusters over them (capd_py/testing/fake_workload.py: a Ready Node for every bootstrapped node container)."""
    monkeypatch.setenv("CAPD_PY_FEATURE_GATES", "RuntimeSDK=true")
    runtime = FakeRuntime()

    def on_manager(m: Manager) -> None:
        fakes = FakeWorkloads(m.ctx.kube, runtime)
        m.ctx.workload = fakes
        m.ctx.etcd = FakeWorkloadEtcd(fakes)
    async with operator_in_thread(str(management.kubeconfig_path), runtime, on_manager=on_manager) as m:
        yield m


async def test_workers_upgrade_waits_for_the_machine_pool(fake_nodes: Manager, api: Kube, tmp_path: Path) -> None:
    """upstream v1.13's docker runtime-SDK flavors (clusterclass-quick-start-runtimesdk + cluster-template-upgrades-
    runtimesdk: a MachineDeployment and a MachinePool, 1 replica each), what tests/e2e/test_runtime_sdk.py upgraded
    on real nodes before issue 40, on fake node containers: BeforeWorkersUpgrade holds both the MachineDeployment and
    the MachinePool at the old version (nothing written meanwhile); AfterWorkersUpgrade is never asked while a Machine
    of the old version remains (the pool replaces its instance after the MachineDeployment is done: asking then was
    a bug the docker e2e found); while it blocks, every worker is at the new version, the pool's instance replaced
    (its one Machine new, with its DockerMachine: none left without infrastructure) and nothing is written (no churn:
    the pool once recreated a Machine 177 times in 50 s). The other hooks answer at once (defaultAllHandlersToBlocking
    false); all nine are asked in upstream's order."""
    ns, name = f"rsdk-mp-{secrets.token_hex(3)}", f"rsdk-mp-{secrets.token_hex(3)}"
    await api.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    calls: list[te.HookCall] = []
    server, config = await te.serve_test_extension(api, "127.0.0.1", 0, cert_dir=tmp_path / "certs", name=EXT,
                                                   namespaces=(ns,), calls=calls,
                                                   default_all_handlers_to_blocking=False)
    spec = Spec(api, fake_nodes, calls, name, ns, tmp_path)
    t0 = time.monotonic()
    try:
        await _machine_pool_spec(spec, config)
    finally:
        await api.delete(EXTENSION_CONFIG, None, EXT)
        if await api.delete(CLUSTER, ns, name):
            await eventually(lambda: _gone(api, CLUSTER, ns, name), 60, "the Cluster deleted in the cleanup")
        await server.stop()
        await api.delete(NAMESPACE, None, ns)
        print(f"whole test {time.monotonic() - t0:.1f}s")


async def _machine_pool_spec(spec: Spec, config: dict[str, Any]) -> None:
    kube, ns, name = spec.kube, spec.ns, spec.name
    assert all(o.ok for o in await apply_objects(kube, [config]))

    async def discovered() -> bool:
        ec = await kube.get(EXTENSION_CONFIG, None, EXT) or {}
        return cond.is_true(ec, "Discovered") and len((ec.get("status") or {}).get("handlers") or []) == 13
    await eventually(discovered, CALLED, "the ExtensionConfig discovered with 13 handlers")
    values = {**envsubst.E2E_VARIABLES, "NAMESPACE": ns, "CLUSTER_NAME": name, "KUBERNETES_VERSION": FROM_V,
              "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": "1", "EXTENSION_CONFIG_NAME": EXT}
    klass = envsubst.documents(UPSTREAM_V1_13 / "e2e-clusterclass-quick-start-runtimesdk.yaml", values, ns)
    cluster = envsubst.documents(UPSTREAM_V1_13 / "e2e-cluster-template-upgrades-runtimesdk.yaml", values, ns)
    applied = await apply_objects(kube, klass)
    assert all(o.ok for o in applied), [(o.ref, o.detail) for o in applied if not o.ok]

    async def variables_ready() -> bool:
        return cond.is_true(await kube.get(CLUSTER_CLASS, ns, "quick-start-runtimesdk") or {}, "VariablesReady")
    await eventually(variables_ready, CALLED, "ClusterClass VariablesReady (DiscoverVariables)")
    before_workers = te.hook_key("BeforeWorkersUpgrade", [FROM_V, TO_V])
    after_workers = te.hook_key("AfterWorkersUpgrade", [TO_V])
    await kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": spec.cm, "namespace": ns},
                                   "data": {f"{k}-preloadedResponse": PRELOADED_BLOCKING
                                            for k in (before_workers, after_workers)}})
    applied = await apply_objects(kube, cluster)
    assert all(o.ok for o in applied), [(o.ref, o.detail) for o in applied if not o.ok]

    async def pools() -> list[dict[str, Any]]:
        return await spec.of(MACHINE_POOL)

    async def created() -> bool:
        mps = await pools()
        return cond.is_true(await spec.cluster(), "Available") and len(mps) == 1 \
            and (mps[0].get("status") or {}).get("readyReplicas") == 1 and len(await spec.of(MACHINE)) == 3
    await eventually(created, 120, "Available, the MachinePool's instance ready, 3 Machines", spec.state)
    old_pool_machines = {m["metadata"]["name"] for m in await spec.of(MACHINE) if MACHINE_POOL_NAME in
                         m["metadata"].get("labels", {})}
    assert len(old_pool_machines) == 1

    await kube.merge_patch(CLUSTER, ns, name, {"spec": {"topology": {"version": TO_V}}})

    async def workers(version: str) -> bool:
        """MachineDeployments and MachinePools at `version` (upstream's checkVersions)."""
        mds, mps = await spec.of(MACHINE_DEPLOYMENT), await pools()
        return bool(mds and mps) and all(x["spec"]["template"]["spec"]["version"] == version for x in [*mds, *mps])

    async def held() -> bool:
        return await spec.control_plane_at(TO_V) and await workers(FROM_V) and not await spec.recorded(after_workers)
    await runtime_hook(spec, "BeforeWorkersUpgrade", [FROM_V, TO_V], held)
    early: list[str] = []

    async def upgraded() -> bool:
        # AfterWorkersUpgrade is due only once no worker is upgrading (neither a MachineDeployment nor a
        # MachinePool): never while a Machine of the old version is still there
        old = [m["metadata"]["name"] for m in await spec.of(MACHINE) if m["spec"].get("version") != TO_V]
        if old and await spec.recorded(after_workers):
            early.append(f"{after_workers} asked while {old} still run {FROM_V}")
        mps = await pools()
        return await workers(TO_V) and await spec.workers_at(TO_V) and bool(mps) \
            and (mps[0].get("status") or {}).get("readyReplicas") == 1
    await eventually(upgraded, 120, f"the MachineDeployment and the MachinePool at {TO_V}", spec.state)
    assert not early, early

    async def workers_done() -> bool:
        machines = await spec.of(MACHINE)
        pool = [m for m in machines if MACHINE_POOL_NAME in m["metadata"].get("labels", {})]
        infra = {d["metadata"]["name"] for d in await spec.of(DOCKER_MACHINE)}
        return len(machines) == 3 and all(m["spec"]["version"] == TO_V for m in machines) and len(pool) == 1 \
            and pool[0]["metadata"]["name"] not in old_pool_machines \
            and all(m["spec"]["infrastructureRef"]["name"] in infra for m in machines) \
            and not await spec.recorded(te.hook_key("AfterClusterUpgrade", [TO_V]))
    await runtime_hook(spec, "AfterWorkersUpgrade", [TO_V], workers_done)

    async def finished() -> bool:
        c = await spec.cluster()
        return cond.is_true(c, "TopologyReconciled") \
            and not (c["metadata"].get("annotations") or {}).get("runtime.cluster.x-k8s.io/pending-hooks")
    await eventually(finished, CALLED, "the upgrade finished, no hook pending", spec.state)
    await kube.delete(CLUSTER, ns, name)
    await eventually(lambda: _gone(kube, CLUSTER, ns, name), CALLED, "the Cluster gone", spec.state)

    keys = ["BeforeClusterCreate", "AfterControlPlaneInitialized", te.hook_key("BeforeClusterUpgrade", [FROM_V, TO_V]),
            te.hook_key("BeforeControlPlaneUpgrade", [FROM_V, TO_V]), te.hook_key("AfterControlPlaneUpgrade", [TO_V]),
            before_workers, after_workers, te.hook_key("AfterClusterUpgrade", [TO_V]), "BeforeClusterDelete"]
    assert list(dict.fromkeys(c.key for c in spec.calls)) == keys
    for key in (before_workers, after_workers):
        answers = [c.status for c in spec.calls if c.key == key]
        released = answers.index(SUCCESS)
        assert released >= 2 and set(answers[:released]) == {BLOCKING} and set(answers[released:]) == {SUCCESS}, \
            (key, answers)
