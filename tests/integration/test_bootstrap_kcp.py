"""KubeadmConfig bootstrap and KubeadmControlPlane controllers against a real kube-apiserver + etcd.

Reconcile functions are driven directly; other controllers (Cluster, Machine, providers) are simulated
by writing their status by hand. For the worker join, the envtest API server also plays the workload
cluster (its kubeconfig is stored as `<cluster>-kubeconfig`), so the bootstrap token is really created.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
from typing import Any

import pytest
import yaml

from capd_py.api import gvk
from capd_py.api.gvk import (
    CLUSTER,
    CONFIG_MAP,
    DOCKER_MACHINE,
    DOCKER_MACHINE_TEMPLATE,
    KUBEADM_CONFIG,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    SECRET,
)
from capd_py.api.labels import CLONED_FROM_NAME, CLUSTER_NAME, CONTROL_PLANE, CONTROL_PLANE_NAME, FINALIZER_KCP
from capd_py.controllers import kcp as c_kcp
from capd_py.controllers import kubeadmconfig as c_kc
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube
from capd_py.kube.inmemory_etcd import FakeEtcd
from capd_py.kube.workload import WorkloadClients
from capd_py.reconcile import certs
from capd_py.reconcile import kubeadmconfig as kc
from capd_py.testing.core_objects import make_cluster, make_kcp
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]


@pytest.fixture
def ctx(kube: Kube) -> Ctx:
    c = direct_ctx(kube)
    return c




async def make_machine(kube: Kube, ns: str, name: str, *, control_plane: bool) -> Obj:
    labels = {CLUSTER_NAME: "c1"}
    if control_plane:
        labels[CONTROL_PLANE] = ""
    return await kube.create(MACHINE, {
        "apiVersion": MACHINE.api_version, "kind": "Machine",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"clusterName": "c1", "version": "v1.34.4",
                 "bootstrap": {"configRef": {"apiGroup": gvk.BOOTSTRAP_GROUP, "kind": "KubeadmConfig", "name": name}},
                 "infrastructureRef": {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachine", "name": name}}})


async def make_config(kube: Kube, ns: str, name: str, owner: Obj, spec: Obj) -> Obj:
    return await kube.create(KUBEADM_CONFIG, {
        "apiVersion": KUBEADM_CONFIG.api_version, "kind": "KubeadmConfig",
        "metadata": {"name": name, "namespace": ns, "labels": {CLUSTER_NAME: "c1"},
                     "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                          "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                          "controller": True}]},
        "spec": spec})


def cloud_config(secret: Obj) -> Obj:
    assert base64.b64decode(secret["data"]["format"]).decode() == "cloud-config"
    return dict(yaml.safe_load(base64.b64decode(secret["data"]["value"])))


def kubeadm_docs(cloud: Obj, path: str) -> dict[str, Obj]:
    content = next(f["content"] for f in cloud["write_files"] if f["path"] == path)
    return {d["kind"]: d for d in yaml.safe_load_all(content) if d}


async def rvs(kube: Kube, ns: str, items: list[tuple[gvk.GVK, str]]) -> dict[str, str]:
    out = {}
    for g, name in items:
        o = await kube.get(g, ns, name)
        assert o is not None, (g.kind, name)
        out[f"{g.kind}/{name}"] = o["metadata"]["resourceVersion"]
    return out


INIT_SPEC: Obj = {
    "clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]}},
    "initConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [{"name": "cgroup-driver", "value": "cgroupfs"}]}},
    "postKubeadmCommands": ["echo done"],
    "files": [{"path": "/etc/from-secret", "contentFrom": {"secret": {"name": "extra", "key": "k"}}}],
}


async def test_kubeadmconfig_init_machine_gets_cloud_config(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "extra", "namespace": ns},
                               "data": {"k": base64.b64encode(b"from a secret\n").decode()}})
    await make_cluster(kube, ns, cp_ref=False)
    m = await make_machine(kube, ns, "m1", control_plane=True)
    await make_config(kube, ns, "m1", m, INIT_SPEC)

    await c_kc.reconcile(ctx, ns, "m1")

    cfg = await kube.get(KUBEADM_CONFIG, ns, "m1")
    assert cfg is not None
    assert cfg["status"]["dataSecretName"] == "m1"
    assert cfg["status"]["initialization"] == {"dataSecretCreated": True}
    conds = {c["type"]: c for c in cfg["status"]["conditions"]}
    assert conds["Ready"]["status"] == conds["DataSecretAvailable"]["status"] == "True"
    assert conds["CertificatesAvailable"]["status"] == "True"

    sec = await kube.get(SECRET, ns, "m1")
    assert sec is not None and sec["type"] == "cluster.x-k8s.io/secret"
    assert sec["metadata"]["labels"][CLUSTER_NAME] == "c1"
    assert sec["metadata"]["ownerReferences"][0]["uid"] == cfg["metadata"]["uid"]
    cloud = cloud_config(sec)
    files = {f["path"]: f["content"] for f in cloud["write_files"]}
    assert files["/etc/from-secret"] == "from a secret\n"
    docs = kubeadm_docs(cloud, kc.INIT_CONFIG_PATH)
    assert docs["ClusterConfiguration"]["controlPlaneEndpoint"] == "127.0.0.1:1"
    assert docs["ClusterConfiguration"]["kubernetesVersion"] == "v1.34.4"
    assert docs["ClusterConfiguration"]["networking"]["podSubnet"] == "10.244.0.0/16"
    assert any(c.startswith("kubeadm init") for c in cloud["runcmd"])

    # standalone control plane (no controlPlaneRef): the bootstrap generated the CAs, owned by the config
    for p in certs.PURPOSES:
        s = await kube.get(SECRET, ns, f"c1-{p}")
        assert s is not None and s["type"] == "cluster.x-k8s.io/secret"
        assert s["metadata"]["ownerReferences"][0]["kind"] == "KubeadmConfig"
        assert files["/etc/kubernetes/pki/sa.pub" if p == "sa" else "/etc/kubernetes/pki/ca.crt"]
    ca = certs.keypair_from_secret(await kube.get(SECRET, ns, "c1-ca"))
    assert ca is not None and files["/etc/kubernetes/pki/ca.crt"] == ca.cert.decode()
    lock = await kube.get(CONFIG_MAP, ns, "c1-lock")
    assert lock is not None and kc.lock_holder(lock) == "m1"

    # a second control-plane machine waits on the lock
    m2 = await make_machine(kube, ns, "m2", control_plane=True)
    await make_config(kube, ns, "m2", m2, INIT_SPEC)
    res = await c_kc.reconcile(ctx, ns, "m2")
    assert res is not None and res.requeue_after
    cfg2 = await kube.get(KUBEADM_CONFIG, ns, "m2")
    assert cfg2 is not None
    ds = next(c for c in cfg2["status"]["conditions"] if c["type"] == "DataSecretAvailable")
    assert ds["status"] == "False" and ds["reason"] == "WaitingForInitLock" and "init lock" in ds["message"]
    assert await kube.get(SECRET, ns, "m2") is None

    # stable: reconciling again writes nothing
    items = [(KUBEADM_CONFIG, "m1"), (SECRET, "m1"), (SECRET, "c1-ca"), (CONFIG_MAP, "c1-lock"), (KUBEADM_CONFIG, "m2")]
    before = await rvs(kube, ns, items)
    await c_kc.reconcile(ctx, ns, "m1")
    await c_kc.reconcile(ctx, ns, "m2")
    assert await rvs(kube, ns, items) == before


async def test_kubeadmconfig_waits_with_reasons(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    c = await kube.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                    "metadata": {"name": "c1", "namespace": ns},
                                    "spec": {"infrastructureRef": {"apiGroup": gvk.INFRA_GROUP,
                                                                   "kind": "DockerCluster", "name": "c1"}}})
    assert c
    m = await make_machine(kube, ns, "w1", control_plane=False)
    await make_config(kube, ns, "w1", m, {"joinConfiguration": {"nodeRegistration": {"name": "w1"}}})
    await c_kc.reconcile(ctx, ns, "w1")
    cfg = await kube.get(KUBEADM_CONFIG, ns, "w1")
    assert cfg is not None
    ds = next(x for x in cfg["status"]["conditions"] if x["type"] == "DataSecretAvailable")
    assert ds["status"] == "False" and ds["reason"] == "WaitingForClusterInfrastructure"
    assert "infrastructureProvisioned" in ds["message"]
    ready = next(x for x in cfg["status"]["conditions"] if x["type"] == "Ready")
    assert ready["status"] == "False" and ready["reason"] == "NotReady"


async def test_worker_join_creates_and_refreshes_token(ctx: Ctx, kube: Kube, envtest: EnvTest,
                                                       namespace: str) -> None:
    ns = namespace
    await make_cluster(kube, ns, cp_ref=True, initialized=True)
    ca = certs.new_ca()
    await kube.create(SECRET, certs.certificate_secret("c1", ns, certs.CLUSTER_CA, ca, None))
    # the envtest API server plays the workload cluster
    kubeconfig = open(envtest.kubeconfig_path, "rb").read()  # noqa: SIM115 - tiny file
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "c1-kubeconfig", "namespace": ns},
                               "data": {"value": base64.b64encode(kubeconfig).decode()}})
    m: Obj | None
    m = await make_machine(kube, ns, "w1", control_plane=False)
    await make_config(kube, ns, "w1", m, {"joinConfiguration": {"nodeRegistration": {"name": "w1"}}})

    res = await c_kc.reconcile(ctx, ns, "w1")
    assert res is not None and res.requeue_after == kc.refresh_interval().total_seconds()
    cfg = await kube.get(KUBEADM_CONFIG, ns, "w1")
    assert cfg is not None and cfg["status"]["dataSecretName"] == "w1"
    bt = cfg["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"]
    token = bt["token"]
    assert kc.TOKEN_RE.match(token)
    assert bt["caCertHashes"] == [certs.ca_cert_hash(ca.cert)]
    tok = await kube.get(SECRET, "kube-system", kc.token_secret_name(token))
    assert tok is not None and tok["type"] == "bootstrap.kubernetes.io/token"
    assert base64.b64decode(tok["data"]["auth-extra-groups"]).decode() == kc.TOKEN_EXTRA_GROUPS

    sec = await kube.get(SECRET, ns, "w1")
    assert sec is not None
    jc = kubeadm_docs(cloud_config(sec), kc.JOIN_CONFIG_PATH)["JoinConfiguration"]
    assert jc["discovery"]["bootstrapToken"]["token"] == token
    assert jc["discovery"]["bootstrapToken"]["caCertHashes"] == [certs.ca_cert_hash(ca.cert)]
    assert jc["discovery"]["bootstrapToken"]["apiServerEndpoint"] == "127.0.0.1:1"
    files = {f["path"] for f in cloud_config(sec)["write_files"]}
    assert not any(p.startswith("/etc/kubernetes/pki") for p in files)

    # fresh token: no refresh, nothing written
    before = await rvs(kube, "kube-system", [(SECRET, kc.token_secret_name(token))])
    before_ns = await rvs(kube, ns, [(KUBEADM_CONFIG, "w1"), (SECRET, "w1")])
    await c_kc.reconcile(ctx, ns, "w1")
    assert await rvs(kube, "kube-system", [(SECRET, kc.token_secret_name(token))]) == before
    assert await rvs(kube, ns, [(KUBEADM_CONFIG, "w1"), (SECRET, "w1")]) == before_ns
    cfg = await kube.get(KUBEADM_CONFIG, ns, "w1")
    assert cfg is not None and cfg["status"]["observedGeneration"] == cfg["metadata"]["generation"]

    # nearly expired: refreshed to now + TTL
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    await kube.merge_patch(SECRET, "kube-system", kc.token_secret_name(token),
                           {"data": {"expiration": base64.b64encode(soon.encode()).decode()}})
    await c_kc.reconcile(ctx, ns, "w1")
    exp = kc.parse_expiration(await kube.get(SECRET, "kube-system", kc.token_secret_name(token)))
    assert exp is not None and exp > dt.datetime.now(dt.UTC) + dt.timedelta(minutes=14)

    # once the machine has a node, the token is left alone
    m = await kube.get(MACHINE, ns, "w1")
    assert m is not None
    await kube.patch_status(MACHINE, m, {**(m.get("status") or {}), "nodeRef": {"name": "w1"}})
    await kube.merge_patch(SECRET, "kube-system", kc.token_secret_name(token),
                           {"data": {"expiration": base64.b64encode(soon.encode()).decode()}})
    assert await c_kc.reconcile(ctx, ns, "w1") is None
    exp = kc.parse_expiration(await kube.get(SECRET, "kube-system", kc.token_secret_name(token)))
    assert exp is not None and exp < dt.datetime.now(dt.UTC) + dt.timedelta(minutes=2)
    await kube.delete(SECRET, "kube-system", kc.token_secret_name(token))




async def test_kcp_creates_first_machine_and_secrets(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True)
    kcp: Obj | None
    kcp = await make_kcp(kube, ns, cluster)

    await c_kcp.reconcile(ctx, ns, "c1-cp")

    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None and FINALIZER_KCP in kcp["metadata"]["finalizers"]
    for p in certs.PURPOSES:
        s = await kube.get(SECRET, ns, f"c1-{p}")
        assert s is not None and s["type"] == "cluster.x-k8s.io/secret"
        assert s["metadata"]["labels"][CLUSTER_NAME] == "c1"
        assert s["metadata"]["ownerReferences"][0]["uid"] == kcp["metadata"]["uid"]
        assert set(s["data"]) == {"tls.crt", "tls.key"}
    kcfg = await kube.get(SECRET, ns, "c1-kubeconfig")
    assert kcfg is not None and kcfg["type"] == "cluster.x-k8s.io/secret"
    kubeconfig = yaml.safe_load(base64.b64decode(kcfg["data"]["value"]))
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:1"

    machines = await kube.list(MACHINE, ns)
    assert len(machines) == 1
    m: Obj | None
    m = machines[0]
    name = m["metadata"]["name"]
    assert name.startswith("c1-cp-")
    assert m["metadata"]["labels"][CONTROL_PLANE] == "" and m["metadata"]["labels"][CONTROL_PLANE_NAME] == "c1-cp"
    assert m["metadata"]["ownerReferences"][0]["uid"] == kcp["metadata"]["uid"]
    assert m["spec"]["version"] == "v1.34.4"
    assert m["spec"]["bootstrap"]["configRef"] == {"apiGroup": gvk.BOOTSTRAP_GROUP, "kind": "KubeadmConfig",
                                                   "name": name}
    dm = await kube.get(DOCKER_MACHINE, ns, name)
    assert dm is not None and dm["metadata"]["annotations"][CLONED_FROM_NAME] == "cp-v1"
    # as upstream, the Cluster owns the machine template (garbage-collected with it)
    tpl = await kube.get(DOCKER_MACHINE_TEMPLATE, ns, "cp-v1")
    assert tpl is not None and any(o["kind"] == "Cluster" and o["uid"] == cluster["metadata"]["uid"]
                                   for o in tpl["metadata"].get("ownerReferences") or [])
    assert dm["metadata"]["ownerReferences"][0]["uid"] == m["metadata"]["uid"]
    cfg = await kube.get(KUBEADM_CONFIG, ns, name)
    assert cfg is not None and "initConfiguration" in cfg["spec"] and "joinConfiguration" not in cfg["spec"]
    assert cfg["metadata"]["ownerReferences"][0]["uid"] == m["metadata"]["uid"]

    st = kcp["status"]
    assert st["selector"] == "cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/control-plane"
    assert st["replicas"] == 1 and st["version"] == "v1.34.4"
    conds = {c["type"]: c for c in st["conditions"]}
    assert conds["CertificatesAvailable"]["status"] == "True"
    assert conds["Initialized"]["status"] == "False"
    assert conds["ScalingUp"]["status"] == "True"

    # the bootstrap controller renders kubeadm init from the certificates the KCP generated
    await c_kc.reconcile(ctx, ns, name)
    bs = await kube.get(SECRET, ns, name)
    assert bs is not None
    cloud = cloud_config(bs)
    ca = certs.keypair_from_secret(await kube.get(SECRET, ns, "c1-ca"))
    assert ca is not None
    assert {f["path"]: f["content"] for f in cloud["write_files"]}["/etc/kubernetes/pki/ca.key"] == ca.key.decode()

    # the pass after the machine's creation gives it its UpToDate condition (the control plane owns it)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    m = await kube.get(MACHINE, ns, name)
    assert m is not None and {c["type"]: c["status"] for c in m["status"]["conditions"]}["UpToDate"] == "True"

    # not initialized yet: no second machine, and a stable reconcile writes nothing
    items = [(KUBEADM_CONTROL_PLANE, "c1-cp"), (MACHINE, name), (SECRET, "c1-ca"), (SECRET, "c1-kubeconfig"),
             (KUBEADM_CONFIG, name), (DOCKER_MACHINE, name)]
    before = await rvs(kube, ns, items)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert len(await kube.list(MACHINE, ns)) == 1
    assert await rvs(kube, ns, items) == before


async def test_kcp_even_replicas_and_deletion(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True)
    await make_kcp(kube, ns, cluster, replicas=2)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    warn = next(c for c in kcp["status"]["conditions"] if c["type"] == "ReplicasWarning")
    assert warn["status"] == "True" and "odd" in warn["message"]

    # a worker machine blocks deletion of the control plane
    w = await make_machine(kube, ns, "worker", control_plane=False)
    await kube.delete(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    d = next(c for c in kcp["status"]["conditions"] if c["type"] == "Deleting")
    assert d["reason"] == "WaitingForWorkersDeletion"
    assert all(not m["metadata"].get("deletionTimestamp") for m in await kube.list(MACHINE, ns))
    await kube.delete(MACHINE, ns, w["metadata"]["name"])

    # then the control-plane machines are deleted, and the finalizer goes once they are gone
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await kube.list(MACHINE, ns) == []  # no finalizers on these test machines: deleted at once
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp") is None


async def test_paused_cluster_stops_kcp_deletion_and_bootstrap(ctx: Ctx, kube: Kube, namespace: str) -> None:
    """Pause before deletion, as upstream (paused.EnsurePausedCondition comes before the deletionTimestamp check in
    the KCP and KubeadmConfig reconcilers): clusterctl move deletes a paused cluster's objects from the source, and
    nothing may be cleaned up then. A paused KubeadmConfig gets no data secret either."""
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True)
    await make_kcp(kube, ns, cluster, replicas=1)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m] = await kube.list(MACHINE, ns)
    name = m["metadata"]["name"]
    await kube.merge_patch(CLUSTER, ns, "c1", {"spec": {"paused": True}})

    await c_kc.reconcile(ctx, ns, name)
    cfg = await kube.get(KUBEADM_CONFIG, ns, name)
    assert cfg is not None and await kube.get(SECRET, ns, name) is None
    assert {c["type"]: c["status"] for c in cfg["status"]["conditions"]} == {"Paused": "True"}

    await kube.delete(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None and FINALIZER_KCP in kcp["metadata"]["finalizers"]
    assert next(c for c in kcp["status"]["conditions"] if c["type"] == "Paused")["status"] == "True"
    assert [x["metadata"]["name"] for x in await kube.list(MACHINE, ns)] == [name]

    # unpaused: the deletion goes on
    await kube.merge_patch(CLUSTER, ns, "c1", {"spec": {"paused": False}})
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await kube.list(MACHINE, ns) == []
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp") is None


class _EnvtestAsWorkload(WorkloadClients):
    """The envtest API server plays every workload cluster (nodes and static pods written by hand)."""

    def __init__(self, kube: Kube):
        super().__init__(kube)
        self.kube = kube

    async def get(self, namespace: str, cluster: str) -> Kube:
        return self.kube


NODE = gvk.NODE
POD = gvk.POD


async def make_healthy(kube: Kube, ns: str, machine_name: str) -> None:
    """What kubeadm + kubelet + the Machine controller would do: a Ready node, running static pods, nodeRef."""
    # core kinds: a PUT to /status would drop labels; patch the status instead
    await kube.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": machine_name}})
    await kube.merge_patch(NODE, None, machine_name, {"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "",
         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
        subresource="status")
    for comp in ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"):
        await kube.create(POD, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{comp}-{machine_name}", "namespace": "kube-system",
                         "labels": {"tier": "control-plane", "component": comp}},
            "spec": {"nodeName": machine_name, "automountServiceAccountToken": False,
                     "containers": [{"name": comp, "image": f"registry.k8s.io/{comp}:v1.34.4"}]}})
        await kube.merge_patch(POD, "kube-system", f"{comp}-{machine_name}", {"status": {
            "phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
            subresource="status")
    # the Machine controller copies the infrastructure machine's providerID (upstream's Available counts only
    # Machines that have one) and links the Node
    await kube.merge_patch(MACHINE, ns, machine_name, {"spec": {"providerID": f"docker:////{machine_name}"}})
    m = await kube.get(MACHINE, ns, machine_name)
    assert m is not None
    await kube.patch_status(MACHINE, m, {**(m.get("status") or {}), "nodeRef": {"name": machine_name}})


async def test_kcp_joins_one_at_a_time_then_scales_down(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    ctx.workload = _EnvtestAsWorkload(kube)
    if await kube.get(gvk.GVK("", "v1", "ServiceAccount", "serviceaccounts"), "kube-system", "default") is None:
        await kube.create(gvk.GVK("", "v1", "ServiceAccount", "serviceaccounts"),
                          {"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "default", "namespace": "kube-system"}})
    etcd = FakeEtcd()  # the workload's etcd: kubeadm adds a member for every control-plane node
    ctx.etcd = etcd
    removed = etcd.removed  # (node the removal went through, removed member)

    async def joined(name: str) -> None:
        await make_healthy(kube, ns, name)
        etcd.add(name)
        # as the Machine controller does: its finalizer holds a deleted Machine until the hooks are done
        await kube.merge_patch(MACHINE, ns, name, {"metadata": {"finalizers": ["machine.cluster.x-k8s.io"]}})

    async def machine_controller_runs_hooks_of(name: str) -> None:
        """The Machine controller's part of a deletion: drained, waiting on the KCP's pre-terminate hook; the
        KCP removes the etcd member and the hook; then the Machine goes."""
        m = await kube.get(MACHINE, ns, name)
        assert m is not None and m["metadata"].get("deletionTimestamp")
        assert "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup" in m["metadata"]["annotations"]
        await kube.patch_status(MACHINE, m, {"conditions": [{
            "type": "Deleting", "status": "True", "reason": "WaitingForPreTerminateHook", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]})
        await c_kcp.reconcile(ctx, ns, "c1-cp")
        m = await kube.get(MACHINE, ns, name)
        assert m is not None and "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup" not in \
            (m["metadata"].get("annotations") or {})
        await kube.merge_patch(MACHINE, ns, name, {"metadata": {"finalizers": None}})

    cluster = await make_cluster(kube, ns, cp_ref=True)
    await make_kcp(kube, ns, cluster, replicas=3)
    # what kubeadm init uploads; joins read it, so the KCP keeps its version in step
    cm_gvk = CONFIG_MAP
    await kube.delete(cm_gvk, "kube-system", "kubeadm-config")
    await kube.create(cm_gvk, {"apiVersion": "v1", "kind": "ConfigMap",
                               "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
                               "data": {"ClusterConfiguration": yaml.safe_dump({
                                   "apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
                                   "kubernetesVersion": "v1.34.4", "clusterName": "c1",
                                   "etcd": {"local": {"dataDir": "/var/lib/etcd"}}})}})

    async def names() -> list[str]:
        ms = sorted(await kube.list(MACHINE, ns), key=lambda m: m["metadata"]["creationTimestamp"])
        return [m["metadata"]["name"] for m in ms if not m["metadata"].get("deletionTimestamp")]

    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m1] = await names()
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert len(await names()) == 1  # no node yet: not initialized

    await asyncio.sleep(1.1)  # creationTimestamp has one-second resolution and "oldest" is decided by it
    await joined(m1)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None and kcp["status"]["initialization"] == {"controlPlaneInitialized": True}
    ms = await names()
    assert len(ms) == 2
    # creationTimestamp has one-second resolution: pick the new one by name, not by sort order
    [m2] = [n for n in ms if n != m1]
    cfg2 = await kube.get(KUBEADM_CONFIG, ns, m2)
    assert cfg2 is not None and "initConfiguration" not in cfg2["spec"]
    assert cfg2["spec"]["joinConfiguration"]["controlPlane"] == {}

    # the second is not healthy yet: the third waits
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert len(await names()) == 2
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    up = next(c for c in kcp["status"]["conditions"] if c["type"] == "ScalingUp")
    assert up["status"] == "True" and m2 in up["message"]

    await asyncio.sleep(1.1)  # creationTimestamp has one-second resolution and "oldest" is decided by it
    await joined(m2)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    ms = await names()
    assert len(ms) == 3
    m3 = ms[2]
    await joined(m3)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert len(await names()) == 3
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    conds = {c["type"]: c for c in kcp["status"]["conditions"]}
    assert conds["EtcdClusterHealthy"]["status"] == "True"
    assert conds["ControlPlaneComponentsHealthy"]["status"] == "True"
    assert conds["Available"]["status"] == "True"
    assert conds["MachinesUpToDate"]["status"] == "True"
    assert kcp["status"]["replicas"] == 3 and kcp["status"]["upToDateReplicas"] == 3

    # steady: nothing written
    before = await rvs(kube, ns, [(KUBEADM_CONTROL_PLANE, "c1-cp")])
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await rvs(kube, ns, [(KUBEADM_CONTROL_PLANE, "c1-cp")]) == before

    # scale down to 1: the oldest goes first, after its etcd member is removed through another member
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp", {"spec": {"replicas": 1}})
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert removed == []  # the Machine goes first (out of the load balancer, drained), its member in the hook
    await machine_controller_runs_hooks_of(m1)
    assert [t for _, t in removed] == [m1] and removed[0][0] in (m2, m3)
    assert await names() == [m2, m3]
    via = etcd.by_name(removed[0][0])
    assert etcd.names() == sorted([m2, m3]) and via is not None and etcd.leader == via.id  # leadership moved first

    # a version change makes the rest outdated: rollout (surge one, then remove an outdated one)
    await asyncio.sleep(1.1)  # creationTimestamp has one-second resolution and "oldest" is decided by it
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp", {"spec": {"replicas": 2, "version": "v1.34.5"}})
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    conds = {c["type"]: c for c in kcp["status"]["conditions"]}
    assert conds["RollingOut"]["status"] == "True" and "v1.34.5" in conds["RollingOut"]["message"]
    ms = await names()
    assert len(ms) == 3
    new = [m for m in ms if m not in (m2, m3)][0]
    nm = await kube.get(MACHINE, ns, new)
    assert nm is not None and nm["spec"]["version"] == "v1.34.5"
    cm = await kube.get(cm_gvk, "kube-system", "kubeadm-config")
    assert cm is not None
    cc = yaml.safe_load(cm["data"]["ClusterConfiguration"])
    assert cc["kubernetesVersion"] == "v1.34.5" and cc["etcd"] == {"local": {"dataDir": "/var/lib/etcd"}}
    assert cc["apiServer"] == {"certSANs": ["localhost"]}
    await joined(new)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert await names() == [m3, new]
    await machine_controller_runs_hooks_of(m2)
    assert removed[-1][1] == m2 and removed[-1][0] in (m3, new)


async def test_control_plane_join_copies_certs_and_releases_lock(ctx: Ctx, kube: Kube, envtest: EnvTest,
                                                                 namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True, initialized=True)
    cs = {p: certs.generate(p) for p in certs.PURPOSES}
    for p, kp in cs.items():
        await kube.create(SECRET, certs.certificate_secret("c1", ns, p, kp, None))
    kubeconfig = open(envtest.kubeconfig_path, "rb").read()  # noqa: SIM115 - tiny file
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret",
                               "metadata": {"name": "c1-kubeconfig", "namespace": ns},
                               "data": {"value": base64.b64encode(kubeconfig).decode()}})
    await kube.create(CONFIG_MAP, kc.lock_configmap(cluster, "the-init-machine"))
    m = await make_machine(kube, ns, "cp2", control_plane=True)
    await make_config(kube, ns, "cp2", m, {"joinConfiguration": {"controlPlane": {}}})

    await c_kc.reconcile(ctx, ns, "cp2")

    assert await kube.get(CONFIG_MAP, ns, "c1-lock") is None
    sec = await kube.get(SECRET, ns, "cp2")
    assert sec is not None
    cloud = cloud_config(sec)
    files = {f["path"]: f["content"] for f in cloud["write_files"]}
    assert files["/etc/kubernetes/pki/etcd/ca.key"] == cs["etcd"].key.decode()
    assert files["/etc/kubernetes/pki/sa.key"] == cs["sa"].key.decode()
    jc = kubeadm_docs(cloud, kc.JOIN_CONFIG_PATH)["JoinConfiguration"]
    assert jc["controlPlane"] == {}
    assert jc["discovery"]["bootstrapToken"]["caCertHashes"] == [certs.ca_cert_hash(cs["ca"].cert)]
    token = jc["discovery"]["bootstrapToken"]["token"]
    assert await kube.get(SECRET, "kube-system", kc.token_secret_name(token)) is not None
    await kube.delete(SECRET, "kube-system", kc.token_secret_name(token))
