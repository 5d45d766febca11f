"""v1beta1 served through what `capd-py init` installs (host mode): the webhook's certificate Secret and the CRDs
serving v1beta1 (cli/management.install_crds), converted by the webhook the controllers process runs
(controllers/operator.run -> kube/conversion_webhook.run_webhook). The controllers run as a process of their own
(with the fake container runtime: nothing reaches docker), so killing it is what a crash does. Also: upstream
v1.10's quick-start ClusterClass (v1beta1), its patches written for v1beta1 templates (topology/patches.py).

Uses an envtest of its own: the shared one's CRDs stay v1beta2-only for every other test."""

from __future__ import annotations

import asyncio
import base64
import copy
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.api.conversion import spoke_version, to_hub
from capd_py.api.gvk import CRD, SECRET
from capd_py.cli import management
from capd_py.cli.existing import init_existing
from capd_py.cli.move import move
from capd_py.cli.steps import Steps
from capd_py.controllers.manager import ACTIVITY_FILE_ENV
from capd_py.kube import admission_webhook
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.crds import load_crds
from capd_py.reconcile import servingcert
from capd_py.testing.conversion import KINDS, at, contains, create_and_read_back, of, upstream_v1beta1
from capd_py.testing.envtest import EnvTest, free_port
from capd_py.testing.quiet import quiet_versions

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

ROOT = Path(__file__).resolve().parents[3]
NAMESPACE = gvk.GVK("", "v1", "Namespace", "namespaces", namespaced=False)
DOCKER_CLUSTER = KINDS[("infrastructure.cluster.x-k8s.io", "DockerCluster")]
REFRESH_SECONDS = 1

# The controllers process, with the fake container runtime (the upstream objects would make containers otherwise).
CONTROLLERS = """
import asyncio, logging, sys
from capd_py.controllers.operator import run
from capd_py.testing.fake_runtime import FakeRuntime
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
asyncio.run(run(sys.argv[1], runtime=FakeRuntime(), webhook_refresh_seconds=float(sys.argv[2])))
"""


class Controllers:
    """`capd-py controllers` as a process: started, killed, started again."""

    def __init__(self, env: EnvTest, log: Path):
        self.env, self.log = env, log
        self.activity = log.with_name("activity.json")  # its writes and reconciles (capd_py/testing/quiet.py)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen([sys.executable, "-c", CONTROLLERS, str(self.env.kubeconfig_path),
                                          str(REFRESH_SECONDS)], stdout=out, stderr=subprocess.STDOUT,
                                         # EXP_RUNTIME_SDK=true at init: ExtensionConfigs admitted and reconciled
                                         env={**os.environ, ACTIVITY_FILE_ENV: str(self.activity),
                                              "CAPD_PY_FEATURE_GATES": "RuntimeSDK=true"})

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


@pytest.fixture(scope="module")
def port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def installed(port: int) -> Iterator[EnvTest]:
    """What `capd-py init` does in host mode, with 127.0.0.1 for the docker network's gateway."""
    env = EnvTest().start()
    try:
        management.install_crds(env.kubeconfig_path, webhook_url=servingcert.host_mode_url("127.0.0.1", port))
        yield env
    finally:
        env.stop()


@pytest.fixture(scope="module")
def controllers(installed: EnvTest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Controllers]:
    c = Controllers(installed, tmp_path_factory.mktemp("controllers") / "controllers.log")
    c.start()
    try:
        yield c
    finally:
        c.kill()


@pytest.fixture
async def kube(installed: EnvTest) -> AsyncIterator[Kube]:
    k = installed.kube()
    try:
        yield k
    finally:
        k.close()


async def new_namespace(kube: Kube) -> str:
    name = f"v1b1-{int(time.time() * 1000) % 10**8}"
    await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def serving(kube: Kube, namespace: str, controllers: Controllers, timeout: float = 60) -> float:
    """Seconds until a v1beta1 read converts (a DockerCluster `probe` made through v1beta2: writes of kinds with
    admission webhooks, DockerCluster among them, fail too until the webhook listens)."""
    started = time.monotonic()
    last: Exception | None = None
    try:
        async with asyncio.timeout(timeout):
            while True:
                try:
                    if await kube.get(DOCKER_CLUSTER, namespace, "probe") is None:
                        await kube.create(DOCKER_CLUSTER, {"apiVersion": DOCKER_CLUSTER.api_version,
                                                           "kind": "DockerCluster",
                                                           "metadata": {"name": "probe", "namespace": namespace}})
                    if await kube.get(at(DOCKER_CLUSTER, "v1beta1"), namespace, "probe") is not None:
                        return time.monotonic() - started
                except KubeError as e:
                    last = e
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"v1beta1 not served within {timeout}s: {last}\ncontrollers log:\n{controllers.tail()}")


async def test_init_installs_the_certificate_and_crds_serving_v1beta1(installed: EnvTest, kube: Kube,
                                                                     port: int) -> None:
    secret = await kube.get(SECRET, "capd-py-system", "capd-py-webhook-cert")
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    cert = servingcert.WebhookCert.from_secret(secret)
    assert cert is not None
    assert not servingcert.serving_cert_needs_renewal(cert.serving.cert, cert.ca.cert, ["127.0.0.1"])
    for manifest in load_crds():
        crd = await kube.get(CRD, None, manifest["metadata"]["name"])
        assert crd is not None
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert crd["spec"]["versions"][0]["name"] == "v1beta2" and versions["v1beta2"]["storage"] is True
        if len(versions) == 1:  # upstream v1.14 serves DevMachinePool(Template) at v1beta2 only: nothing to convert
            assert crd["spec"]["names"]["kind"] in ("DevMachinePool", "DevMachinePoolTemplate"), crd["metadata"]["name"]
            assert (crd["spec"].get("conversion") or {}).get("strategy", "None") == "None"
            continue
        older = spoke_version(crd["spec"]["group"], crd["spec"]["names"]["kind"])  # ExtensionConfig: v1alpha1
        assert versions[older]["served"] is True and versions[older]["storage"] is False
        client = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert client["url"] == f"https://127.0.0.1:{port}/convert"
        assert base64.b64decode(client["caBundle"]) == cert.ca.cert
    # init again (the management cluster reused): the same Secret, the same URL
    url = await asyncio.to_thread(management.host_webhook_url, installed.kubeconfig_path, "127.0.0.1")
    assert url == f"https://127.0.0.1:{port}/convert"
    await asyncio.to_thread(management.install_crds, installed.kubeconfig_path, webhook_url=url)
    again = await kube.get(SECRET, "capd-py-system", "capd-py-webhook-cert")
    assert again is not None and again["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]
    # `capd-py init --kubeconfig` of this cluster without --webhook-url keeps serving v1beta1 at the URL it has
    await asyncio.to_thread(init_existing, installed.kubeconfig_path, "t", False, Steps())
    crd = await kube.get(CRD, None, "machines.cluster.x-k8s.io")
    assert crd is not None and [v["name"] for v in crd["spec"]["versions"]] == ["v1beta2", "v1beta1"]
    assert crd["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == url


async def test_extension_config_v1alpha1_is_served_beside_v1beta2(kube: Kube, controllers: Controllers) -> None:
    """Upstream's runtime group serves v1alpha1 (not v1beta1): a v1alpha1 write is converted, defaulted and
    validated as v1beta2, read back in both versions; the controller's status reads back in v1alpha1's layout."""
    await serving(kube, await new_namespace(kube), controllers)
    old = at(gvk.EXTENSION_CONFIG, "v1alpha1")
    await kube.create(old, {"apiVersion": old.api_version, "kind": "ExtensionConfig", "metadata": {"name": "old-ext"},
                            "spec": {"clientConfig": {"service": {"name": "ext", "namespace": "nowhere"}}}})
    hub = await kube.get(gvk.EXTENSION_CONFIG, None, "old-ext")
    assert hub is not None and hub["apiVersion"].endswith("/v1beta2")
    # the webhook's defaults, applied after conversion
    assert hub["spec"]["namespaceSelector"] == {} and hub["spec"]["clientConfig"]["service"]["port"] == 443
    with pytest.raises(KubeError) as refused:
        await kube.create(old, {"apiVersion": old.api_version, "kind": "ExtensionConfig", "metadata": {"name": "bad"},
                                "spec": {"clientConfig": {"url": "http://insecure"}}})
    assert "'https' is the only allowed URL scheme" in str(refused.value)

    async def not_discovered() -> dict[str, Any] | None:
        got = await kube.get(old, None, "old-ext")
        conds = ((got or {}).get("status") or {}).get("v1beta2", {}).get("conditions") or []
        return got if any(c["type"] == "Discovered" and c["status"] == "False" for c in conds) else None
    async with asyncio.timeout(60):
        while (got := await not_discovered()) is None:
            await asyncio.sleep(0.3)
    assert got["apiVersion"].endswith("/v1alpha1") and "conditions" not in got["status"]  # no v1beta1 conditions
    await kube.delete(gvk.EXTENSION_CONFIG, None, "old-ext")


@pytest.mark.parametrize(("file", "count"), [("e2e-bases.yaml", 11), ("development.yaml", 8)])
async def test_upstream_v1_10_manifests_apply_and_read_back_both_ways(kube: Kube, controllers: Controllers,
                                                                      file: str, count: int) -> None:
    ns = await new_namespace(kube)
    print(f"v1beta1 served {await serving(kube, ns, controllers):.2f}s after asking")
    objs = upstream_v1beta1(ns, file)
    assert len(objs) == count
    started = time.monotonic()
    await create_and_read_back(kube, objs)
    print(f"created and read back {len(objs)} v1beta1 objects ({file}) in {time.monotonic() - started:.2f}s")
    # and a write through v1beta1 of what the controllers keep writing through v1beta2
    cluster = next(o for o in objs if o["kind"] == "Cluster")
    await kube.merge_patch(of(cluster), ns, cluster["metadata"]["name"], {"metadata": {"labels": {
        "edited": "through-v1beta1"}}})
    hub = await kube.get(at(of(cluster), "v1beta2"), ns, cluster["metadata"]["name"])
    assert hub is not None and hub["metadata"]["labels"]["edited"] == "through-v1beta1"


async def test_webhook_down_fails_writes_clearly_and_v1beta2_reads_keep_working(kube: Kube,
                                                                               controllers: Controllers) -> None:
    """The controllers (and so the webhook) down: v1beta2 reads work; a v1beta2 write of a kind with upstream
    admission webhooks fails naming the webhook (failurePolicy Fail), one of a kind without works; v1beta1 fails
    naming the conversion webhook; nothing half-written is stored."""
    ns = await new_namespace(kube)
    await serving(kube, ns, controllers)
    controllers.kill()
    try:
        assert await kube.get(DOCKER_CLUSTER, ns, "probe") is not None
        with pytest.raises(KubeError) as admission:
            await kube.create(DOCKER_CLUSTER, {"apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster",
                                               "metadata": {"name": "while-down", "namespace": ns}})
        assert admission.value.status == 500
        # the defaulting webhook is called first (mutating before validating), as upstream's DockerCluster has both
        assert 'failed calling webhook "default.dockercluster.infrastructure.cluster.x-k8s.io"' in \
            admission.value.message
        template = gvk.DOCKER_MACHINE_TEMPLATE  # no admission webhook here (its rules are CEL in the CRD)
        await kube.create(template, {"apiVersion": template.api_version, "kind": template.kind,
                                     "metadata": {"name": "while-down", "namespace": ns},
                                     "spec": {"template": {"spec": {}}}})
        assert len(await kube.list(DOCKER_CLUSTER, ns)) == 1
        v1beta1 = at(DOCKER_CLUSTER, "v1beta1")
        started = time.monotonic()
        with pytest.raises(KubeError) as read:
            await kube.get(v1beta1, ns, "probe")
        elapsed = time.monotonic() - started
        with pytest.raises(KubeError) as write:
            await kube.create(v1beta1, {"apiVersion": v1beta1.api_version, "kind": "DockerCluster",
                                        "metadata": {"name": "v1beta1-while-down", "namespace": ns}})
        for failed in (read.value, write.value):
            assert failed.status == 500, failed
            assert "conversion webhook for infrastructure.cluster.x-k8s.io" in failed.message, failed
        assert elapsed < 5
        print(f"v1beta1 GET without the webhook: {elapsed:.2f}s, {read.value}")
        print(f"v1beta1 create without the webhook: {write.value}")
        # nothing was lost: the v1beta1 create did not happen, the v1beta2 objects are all there
        assert [o["metadata"]["name"] for o in await kube.list(DOCKER_CLUSTER, ns)] == ["probe"]
    finally:
        controllers.start()
    print(f"v1beta1 served again {await serving(kube, ns, controllers):.2f}s after the controllers' restart")


async def test_a_new_ca_reaches_every_crds_ca_bundle(kube: Kube, controllers: Controllers) -> None:
    """The Secret lost (or its CA replaced): the running controllers make a new CA + serving certificate, put the
    CA into every CRD's caBundle and every admission webhook's, and serve the new certificate, without a restart."""
    ns = await new_namespace(kube)
    await serving(kube, ns, controllers)
    before = servingcert.WebhookCert.from_secret(await kube.get(SECRET, "capd-py-system", "capd-py-webhook-cert"))
    assert before is not None
    await kube.delete(SECRET, "capd-py-system", "capd-py-webhook-cert")
    started = time.monotonic()
    # the CRDs with a conversion webhook (the single-version DevMachinePool(Template) have none)
    names = [str(c["metadata"]["name"]) for c in load_crds() if len(c["spec"]["versions"]) > 1]

    async def bundles() -> set[bytes]:
        crds = await asyncio.gather(*(kube.get(CRD, None, n) for n in names))
        out = {servingcert.ca_bundle_of((c or {}).get("spec", {}).get("conversion")) for c in crds}
        # the admission webhooks' configurations trust the same CA (kube/admission_webhook.ensure_ca_bundle)
        for g, name in ((admission_webhook.MUTATING, admission_webhook.MUTATING_NAME),
                        (admission_webhook.VALIDATING, admission_webhook.VALIDATING_NAME)):
            config = await kube.get(g, None, name)
            assert config is not None, name
            out |= {base64.b64decode(h["clientConfig"]["caBundle"]) for h in config["webhooks"]}
        return out

    try:
        async with asyncio.timeout(30):
            while True:
                after = servingcert.WebhookCert.from_secret(
                    await kube.get(SECRET, "capd-py-system", "capd-py-webhook-cert"))
                if after is not None and await bundles() == {after.ca.cert}:
                    break
                await asyncio.sleep(0.2)
    except TimeoutError:
        pytest.fail(f"caBundle not refreshed within 30s\ncontrollers log:\n{controllers.tail()}")
    assert after.ca != before.ca
    refreshed = time.monotonic() - started
    print(f"new CA in all {len(names)} CRDs {refreshed:.2f}s after the Secret's deletion; "
          f"v1beta1 served with it {await serving(kube, ns, controllers):.2f}s later")


async def test_move_carries_objects_applied_through_v1beta1_and_never_the_webhook_secret(
        kube: Kube, controllers: Controllers, envtest: EnvTest) -> None:
    """`capd-py move` writes v1beta2 only: objects applied through v1beta1 move into a management cluster serving
    v1beta2 only (the shared envtest), and the per-cluster Secret stays where it is. The source's webhook server stays
    up: move pauses the ClusterClass at the source, an update the ClusterClass validating webhook must admit (as
    upstream's clusterctl needs upstream's webhooks)."""
    ns = await new_namespace(kube)
    await serving(kube, ns, controllers)
    await kube.delete(DOCKER_CLUSTER, ns, "probe")
    objs = [o for o in upstream_v1beta1(ns, "development.yaml") if o["kind"] != "Cluster"]  # a ClusterClass + templates
    for obj in objs:
        await kube.create(of(obj), copy.deepcopy(obj))
    target = envtest.kube()
    try:
        out = await move(kube, target, ns, Steps())
        assert out.moved == len(objs)
        for obj in objs:
            g = at(of(obj), "v1beta2")
            moved = await target.get(g, ns, obj["metadata"]["name"])
            assert moved is not None and contains(moved.get("spec"), to_hub(obj).get("spec")), obj["kind"]
            assert await kube.get(g, ns, obj["metadata"]["name"]) is None
        assert await target.get(SECRET, "capd-py-system", "capd-py-webhook-cert") is None
        assert await kube.get(SECRET, "capd-py-system", "capd-py-webhook-cert") is not None
    finally:
        target.close()


async def test_upstream_v1_10_clusterclass_patches_apply_to_its_v1beta1_templates(kube: Kube,
                                                                                  controllers: Controllers) -> None:
    """upstream v1.10's quick-start ClusterClass (v1beta1) patches its templates in v1beta1 shapes (apiServer
    extraArgs as a map): the topology controller applies them in the version the templateRefs name, and the
    control plane it writes (v1beta2) has them as v1beta2's list; read through v1beta1 it is the map again."""
    ns = await new_namespace(kube)
    await serving(kube, ns, controllers)
    objs = upstream_v1beta1(ns, "development.yaml")
    for obj in objs:
        await kube.create(of(obj), copy.deepcopy(obj))
    cluster = next(o for o in objs if o["kind"] == "Cluster")
    name = cluster["metadata"]["name"]
    cluster_v2 = at(of(cluster), "v1beta2")
    started = time.monotonic()
    kcp_gvk = KINDS[("controlplane.cluster.x-k8s.io", "KubeadmControlPlane")]

    async def reconciled() -> dict[str, Any] | None:
        c = await kube.get(cluster_v2, ns, name)
        tr = next((x for x in ((c or {}).get("status") or {}).get("conditions") or []
                   if x["type"] == "TopologyReconciled"), None)
        ref = ((c or {}).get("spec") or {}).get("controlPlaneRef")
        if not tr or tr["status"] != "True" or not ref:
            return None
        return await kube.get(kcp_gvk, ns, ref["name"])
    kcp = None
    try:
        async with asyncio.timeout(60):
            while (kcp := await reconciled()) is None:
                await asyncio.sleep(0.3)
    except TimeoutError:
        c = await kube.get(cluster_v2, ns, name)
        pytest.fail(f"TopologyReconciled not True within 60s: {(c or {}).get('status')}\n{controllers.tail()}")
    print(f"topology of the v1beta1 class reconciled {time.monotonic() - started:.2f}s after the create")
    pss = "/etc/kubernetes/kube-apiserver-admission-pss.yaml"
    api_server = kcp["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]
    assert api_server["extraArgs"] == [{"name": "admission-control-config-file", "value": pss}]
    assert api_server["extraVolumes"][0]["hostPath"] == pss
    assert 'enforce: "baseline"' in kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
    spoke = await kube.get(at(kcp_gvk, "v1beta1"), ns, kcp["metadata"]["name"])
    assert spoke is not None
    assert spoke["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["extraArgs"] == {
        "admission-control-config-file": pss}
    cpi = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]
    dmt = await kube.get(KINDS[("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate")], ns, cpi["name"])
    assert dmt is not None and dmt["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"
    # the class says its refs are not in the latest apiVersion (as upstream) and is used all the same
    cc_obj = next(o for o in objs if o["kind"] == "ClusterClass")
    cc = await kube.get(at(of(cc_obj), "v1beta2"), ns, cc_obj["metadata"]["name"])
    refs = next(x for x in ((cc or {}).get("status") or {}).get("conditions") or []
                if x["type"] == "RefVersionsUpToDate")
    assert (refs["status"], refs["reason"]) == ("False", "RefVersionsNotUpToDate"), refs
    assert "* KubeadmControlPlaneTemplate quick-start-control-plane: current: v1beta1, latest: v1beta2" \
        in refs["message"].splitlines()
    # stable: the topology writes nothing more (generations of what it owns stay)
    md_gvk = KINDS[("cluster.x-k8s.io", "MachineDeployment")]

    async def generations() -> dict[str, int]:
        out = {}
        for g in (kcp_gvk, md_gvk, DOCKER_CLUSTER):
            for o in await kube.list(g, ns):
                out[f"{g.kind}/{o['metadata']['name']}"] = o["metadata"]["generation"]
        return out
    before, after = await quiet_versions(controllers.activity, generations, window=3, timeout=60, interval=0.5,
                                         what="the topology converged")
    assert after == before


async def test_upstream_v1_10_in_memory_clusterclass_through_v1beta1_becomes_available(
        kube: Kube, controllers: Controllers) -> None:
    """upstream v1.10.10's in-memory ClusterClass, all v1beta1 (DevClusterTemplate, DevMachineTemplates with
    `backend.inMemory`, the class's templateRefs at infrastructure.cluster.x-k8s.io/v1beta1) and its topology
    Cluster, created through v1beta1 (1 control plane + 1 worker instead of the fixture's 3 + 2): the topology
    controller follows the v1beta1 refs to the Dev* templates, the cluster becomes Available on the in-memory
    backend (upstream's startup durations: VM 10 s, the rest 2 s), and its DevMachines read back in v1beta1 as
    upstream's v1beta1 controllers would have written them (`ready`, no v1beta2-only field), the Cluster with
    `controlPlaneReady` and `infrastructureReady` (moved here from tests/e2e/test_v1beta1_flavors.py by issue 40)."""
    ns = await new_namespace(kube)
    await serving(kube, ns, controllers)
    objs = upstream_v1beta1(ns, "in-memory.yaml")
    cluster = next(o for o in objs if o["kind"] == "Cluster")
    cluster["spec"]["topology"]["classNamespace"] = ns
    cluster["spec"]["topology"]["controlPlane"]["replicas"] = 1
    cluster["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"] = 1
    started = time.monotonic()
    for obj in objs:
        await kube.create(of(obj), copy.deepcopy(obj))
    name = cluster["metadata"]["name"]
    cluster_v2 = at(of(cluster), "v1beta2")

    async def available() -> bool:
        c = await kube.get(cluster_v2, ns, name)
        return any(x["type"] == "Available" and x["status"] == "True"
                   for x in ((c or {}).get("status") or {}).get("conditions") or [])
    try:
        async with asyncio.timeout(150):
            while not await available():
                await asyncio.sleep(0.5)
    except TimeoutError:
        c = await kube.get(cluster_v2, ns, name)
        pytest.fail(f"in-memory cluster not Available within 150s: {(c or {}).get('status')}\n{controllers.tail()}")
    took = time.monotonic() - started
    # read back in v1beta1: upstream v1.10's status layout, converted from what the controllers wrote
    spoke = await kube.get(at(of(cluster), "v1beta1"), ns, name)
    assert spoke is not None and spoke["apiVersion"] == "cluster.x-k8s.io/v1beta1"
    assert spoke["spec"]["topology"]["class"] == cluster["spec"]["topology"]["class"]
    assert spoke["status"]["controlPlaneReady"] is True and spoke["status"]["infrastructureReady"] is True
    dev_machine = KINDS[("infrastructure.cluster.x-k8s.io", "DevMachine")]
    machines = await kube.list(at(dev_machine, "v1beta1"), ns)
    assert len(machines) == 2
    for m in machines:
        assert m["apiVersion"] == "infrastructure.cluster.x-k8s.io/v1beta1"
        assert m["spec"]["providerID"] == f"in-memory://{m['metadata']['name']}"
        assert m["spec"]["backend"]["inMemory"]["vm"]["provisioning"] == {"startupDuration": "10s",
                                                                          "startupJitter": "0.2"}
        assert m["status"]["ready"] is True and "initialization" not in m["status"]
        assert any(c["type"] == "Ready" for c in m["status"]["v1beta2"]["conditions"])
    cc_obj = next(o for o in objs if o["kind"] == "ClusterClass")
    cc = await kube.get(at(of(cc_obj), "v1beta2"), ns, cc_obj["metadata"]["name"])
    refs = next(x for x in ((cc or {}).get("status") or {}).get("conditions") or []
                if x["type"] == "RefVersionsUpToDate")
    assert "* DevMachineTemplate in-memory-control-plane: current: v1beta1, latest: v1beta2" \
        in refs["message"].splitlines(), refs
    assert took >= 12, took  # the control plane VM's 10 s and its Node's 2 s were waited for
    print(f"upstream v1.10 in-memory ClusterClass (v1beta1) 1 CP + 1 W: Available {took:.1f}s after the creates")
