"""Core Cluster API controllers (Cluster, Machine, MachineSet, MachineDeployment) against a real
kube-apiserver + etcd. The reconcile functions are driven directly; providers are simulated by
writing their status by hand. envtest runs no garbage collector, so every deletion seen here is
one the controllers made."""

from __future__ import annotations

import base64
import copy
import socket
from typing import Any

import pytest
import yaml

from capd_py.api import gvk
from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    KUBEADM_CONFIG,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_HEALTH_CHECK,
    MACHINE_SET,
    NODE,
    POD,
    SECRET,
)
from capd_py.api.labels import (
    CLONED_FROM_GROUP_KIND,
    CLONED_FROM_NAME,
    CLUSTER_NAME,
    DELETE_MACHINE_ANNOTATION,
    FINALIZER_CLUSTER,
    FINALIZER_MACHINE,
    FINALIZER_MACHINE_SET,
    REVISION_ANNOTATION,
)
from capd_py.controllers import cluster as c_cluster
from capd_py.controllers import machine as c_machine
from capd_py.controllers import machinedeployment as c_md
from capd_py.controllers import machinehealthcheck as c_mhc
from capd_py.controllers import machineset as c_ms
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube
from capd_py.testing.core_objects import (
    cluster_obj,
    machine_template,
    machine_with_node,
    machines,
    machineset_obj,
    make_node,
    md_obj,
    provision_machine,
    setup_cluster,
    templates,
    workload_secret,
)
from capd_py.testing.core_objects import meta as _meta
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]
V = "v1beta2"


@pytest.fixture
def ctx(kube: Kube) -> Ctx:
    c = direct_ctx(kube)
    return c


















async def finish_machine_deletions(ctx: Ctx, ns: str) -> None:
    """The Machine controller's part of a deletion (MachineSets create Machines with its finalizer, as
    upstream's do): delete the bootstrap config and infrastructure machine, then drop the finalizer."""
    for _ in range(5):
        deleting = [m for m in await machines(ctx.kube, ns, live_only=False) if m["metadata"].get("deletionTimestamp")]
        if not deleting:
            return
        for m in deleting:
            await c_machine.reconcile(ctx, ns, m["metadata"]["name"])
    raise AssertionError(f"Machines still deleting: {[m['metadata']['name'] for m in deleting]}")


def rv(o: Obj | None) -> str:
    assert o is not None
    return str(o["metadata"]["resourceVersion"])


async def mark_machines_available(kube: Kube, ns: str) -> None:
    """Stand in for a healthy Machine controller + node: Ready and Available True."""
    for m in await machines(kube, ns):
        st = copy.deepcopy(m.get("status") or {})
        conds = [c for c in st.get("conditions") or [] if c["type"] not in ("Ready", "Available")]
        for t in ("Ready", "Available"):
            conds.append({"type": t, "status": "True", "reason": t, "message": "",
                          "lastTransitionTime": "2026-01-01T00:00:00Z"})
        st["conditions"] = conds
        await kube.patch_status(MACHINE, m, st)


# --- MachineSet ------------------------------------------------------------------------------------

async def test_machineset_creates_machines_with_clones(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns)
    await kube.create(MACHINE_SET, machineset_obj(ns, 3))
    await c_ms.reconcile(ctx, ns, "ms1")

    ms = await kube.get(MACHINE_SET, ns, "ms1")
    assert ms is not None
    assert FINALIZER_MACHINE_SET in ms["metadata"]["finalizers"]
    assert ms["metadata"]["labels"][CLUSTER_NAME] == "c1"
    ms_list = await machines(kube, ns)
    assert len(ms_list) == 3
    for m in ms_list:
        name = m["metadata"]["name"]
        assert name.startswith("ms1-")
        owner = m["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == \
            ("MachineSet", "ms1", ms["metadata"]["uid"], True)
        labels = m["metadata"]["labels"]
        assert labels["pool"] == "a" and labels["cluster.x-k8s.io/set-name"] == "ms1" and labels[CLUSTER_NAME] == "c1"
        assert m["spec"]["bootstrap"]["configRef"] == {"apiGroup": gvk.BOOTSTRAP_GROUP, "kind": "KubeadmConfig",
                                                       "name": name}
        assert m["spec"]["infrastructureRef"] == {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachine", "name": name}
        kc = await kube.get(KUBEADM_CONFIG, ns, name)
        dm = await kube.get(DOCKER_MACHINE, ns, name)
        assert kc is not None and dm is not None
        assert kc["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "v", "value": "2"}]
        assert kc["metadata"]["annotations"][CLONED_FROM_NAME] == "workers"
        assert kc["metadata"]["annotations"][CLONED_FROM_GROUP_KIND] == f"KubeadmConfigTemplate.{gvk.BOOTSTRAP_GROUP}"
        assert dm["metadata"]["annotations"][CLONED_FROM_GROUP_KIND] == f"DockerMachineTemplate.{gvk.INFRA_GROUP}"
        for o in (kc, dm):
            assert o["metadata"]["labels"][CLUSTER_NAME] == "c1"
            assert any(r["uid"] == ms["metadata"]["uid"] for r in o["metadata"]["ownerReferences"])

    # stable: reconciling again creates nothing and writes nothing
    ms = await kube.get(MACHINE_SET, ns, "ms1")
    await c_ms.reconcile(ctx, ns, "ms1")
    before = rv(ms := await kube.get(MACHINE_SET, ns, "ms1"))
    m_before = {m["metadata"]["name"]: rv(m) for m in await machines(kube, ns)}
    await c_ms.reconcile(ctx, ns, "ms1")
    await c_ms.reconcile(ctx, ns, "ms1")
    assert rv(await kube.get(MACHINE_SET, ns, "ms1")) == before
    assert {m["metadata"]["name"]: rv(m) for m in await machines(kube, ns)} == m_before
    assert len(await machines(kube, ns)) == 3
    assert ms is not None and ms["status"]["replicas"] == 3
    # upstream's webhook defaults (set-name, cluster-name) are applied by the controller
    assert ms["status"]["selector"] == "cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/set-name=ms1,pool=a"
    assert ms["spec"]["template"]["metadata"]["labels"]["cluster.x-k8s.io/set-name"] == "ms1"


async def test_machineset_scale_down_honours_delete_annotation(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns)
    await kube.create(MACHINE_SET, machineset_obj(ns, 3, order="Newest"))
    await c_ms.reconcile(ctx, ns, "ms1")
    ms_list = await machines(kube, ns)
    marked = ms_list[-1]["metadata"]["name"]
    await kube.merge_patch(MACHINE, ns, marked, {"metadata": {"annotations": {DELETE_MACHINE_ANNOTATION: "yes"}}})
    await mark_machines_available(kube, ns)

    await kube.merge_patch(MACHINE_SET, ns, "ms1", {"spec": {"replicas": 1}})
    await c_ms.reconcile(ctx, ns, "ms1")
    left = await machines(kube, ns)
    assert len(left) == 1
    assert left[0]["metadata"]["name"] != marked
    assert FINALIZER_MACHINE in left[0]["metadata"]["finalizers"]  # set at creation, as upstream's MachineSet
    await finish_machine_deletions(ctx, ns)
    await c_ms.reconcile(ctx, ns, "ms1")
    ms = await kube.get(MACHINE_SET, ns, "ms1")
    assert ms is not None and ms["status"]["replicas"] == 1


async def test_machineset_adopts_orphans_and_deletion(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns)
    for g, o in ((KUBEADM_CONFIG, {"apiVersion": KUBEADM_CONFIG.api_version, "kind": "KubeadmConfig",
                                   "metadata": _meta("orphan", ns),
                                   "spec": {"joinConfiguration": {"nodeRegistration": {"name": "x"}}}}),
                 (DOCKER_MACHINE, {"apiVersion": DOCKER_MACHINE.api_version, "kind": "DockerMachine",
                                   "metadata": _meta("orphan", ns), "spec": {"extraMounts": []}})):
        await kube.create(g, o)
    orphan = copy.deepcopy(machine_template())
    await kube.create(MACHINE, {"apiVersion": MACHINE.api_version, "kind": "Machine",
                                "metadata": _meta("orphan", ns, labels={"pool": "a", CLUSTER_NAME: "c1",
                                                                       "cluster.x-k8s.io/set-name": "ms1"}),
                                "spec": {**orphan["spec"],
                                         "bootstrap": {"configRef": {"apiGroup": gvk.BOOTSTRAP_GROUP,
                                                                     "kind": "KubeadmConfig", "name": "orphan"}},
                                         "infrastructureRef": {"apiGroup": gvk.INFRA_GROUP,
                                                               "kind": "DockerMachine", "name": "orphan"}}})
    await kube.create(MACHINE_SET, machineset_obj(ns, 2))
    await c_ms.reconcile(ctx, ns, "ms1")
    ms_list = await machines(kube, ns)
    assert len(ms_list) == 2
    adopted = await kube.get(MACHINE, ns, "orphan")
    assert adopted is not None and adopted["metadata"]["ownerReferences"][0]["kind"] == "MachineSet"

    # deletion: Machines go, then the finalizer
    await kube.delete(MACHINE_SET, ns, "ms1")
    await c_ms.reconcile(ctx, ns, "ms1")
    assert await machines(kube, ns) == []
    await finish_machine_deletions(ctx, ns)
    assert await machines(kube, ns, live_only=False) == []
    await c_ms.reconcile(ctx, ns, "ms1")
    assert await kube.get(MACHINE_SET, ns, "ms1") is None


# --- Machine ---------------------------------------------------------------------------------------

async def test_machine_lifecycle_and_repair(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    c = await setup_cluster(kube, ns)
    await kube.create(MACHINE_SET, machineset_obj(ns, 1))
    await c_ms.reconcile(ctx, ns, "ms1")
    m: dict[str, Any] | None
    (m,) = await machines(kube, ns)
    name = m["metadata"]["name"]

    await c_machine.reconcile(ctx, ns, name)
    m = await kube.get(MACHINE, ns, name)
    assert m is not None
    assert FINALIZER_MACHINE in m["metadata"]["finalizers"]
    assert m["status"]["phase"] == "Pending"
    conds = {x["type"]: x for x in m["status"]["conditions"]}
    assert conds["BootstrapConfigReady"]["status"] == "False"
    assert conds["InfrastructureReady"]["status"] == "False"
    kc = await kube.get(KUBEADM_CONFIG, ns, name)
    dm = await kube.get(DOCKER_MACHINE, ns, name)
    for o in (kc, dm):
        assert o is not None  # the Machine took over from the on-create MachineSet owner
        assert [(r["kind"], r["uid"], r.get("controller")) for r in o["metadata"]["ownerReferences"]] == \
            [("Machine", m["metadata"]["uid"], True)]

    # providers report progress
    assert kc is not None and dm is not None
    await kube.patch_status(KUBEADM_CONFIG, kc, {"initialization": {"dataSecretCreated": True},
                                                  "dataSecretName": f"{name}-bootstrap"})
    await c_machine.reconcile(ctx, ns, name)
    m = await kube.get(MACHINE, ns, name)
    assert m is not None and m["spec"]["bootstrap"]["dataSecretName"] == f"{name}-bootstrap"
    assert m["status"]["phase"] == "Provisioning"
    assert m["status"]["initialization"]["bootstrapDataSecretCreated"] is True

    dm = await kube.merge_patch(DOCKER_MACHINE, ns, name, {"spec": {"providerID": f"docker:////c1-{name}"}})
    await kube.patch_status(DOCKER_MACHINE, dm, {"initialization": {"provisioned": True},
                                                  "addresses": [{"type": "InternalIP", "address": "172.18.0.9"}]})
    await c_machine.reconcile(ctx, ns, name)
    m = await kube.get(MACHINE, ns, name)
    assert m is not None
    assert m["spec"]["providerID"] == f"docker:////c1-{name}"
    assert m["status"]["phase"] == "Provisioned"
    assert m["status"]["addresses"] == [{"type": "InternalIP", "address": "172.18.0.9"}]
    # no workload kubeconfig: waiting for the node, not an error
    assert {x["type"]: x for x in m["status"]["conditions"]}["NodeReady"]["status"] == "Unknown"

    # stable: no writes
    before = rv(m)
    await c_machine.reconcile(ctx, ns, name)
    await c_machine.reconcile(ctx, ns, name)
    assert rv(await kube.get(MACHINE, ns, name)) == before

    # strip the finalizer and the ownerRef of the infra machine: both are put back
    await kube.json_patch(MACHINE, ns, name, [{"op": "remove", "path": "/metadata/finalizers"}])
    await kube.json_patch(DOCKER_MACHINE, ns, name, [{"op": "remove", "path": "/metadata/ownerReferences"}])
    await c_machine.reconcile(ctx, ns, name)
    m = await kube.get(MACHINE, ns, name)
    dm = await kube.get(DOCKER_MACHINE, ns, name)
    assert m is not None and FINALIZER_MACHINE in m["metadata"]["finalizers"]
    assert dm is not None and [r["uid"] for r in dm["metadata"]["ownerReferences"]] == [m["metadata"]["uid"]]

    # deletion: infra and bootstrap go first, then the finalizer (no node: cluster has no workload)
    _ = c
    await kube.delete(MACHINE, ns, name)
    await c_machine.reconcile(ctx, ns, name)
    m = await kube.get(MACHINE, ns, name)
    assert m is not None
    assert {x["type"]: x for x in m["status"]["conditions"]}["Deleting"]["reason"] == \
        "WaitingForInfrastructureDeletion"
    assert await kube.get(DOCKER_MACHINE, ns, name) is None
    assert await kube.get(KUBEADM_CONFIG, ns, name) is None
    await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(MACHINE, ns, name) is None


# --- MachineDeployment -----------------------------------------------------------------------------

async def drive_md(kube: Kube, ctx: Ctx, ns: str, rounds: int = 12) -> None:
    for _ in range(rounds):
        await c_md.reconcile(ctx, ns, "md1")
        for ms in await kube.list(MACHINE_SET, ns):
            await c_ms.reconcile(ctx, ns, ms["metadata"]["name"])
        await mark_machines_available(kube, ns)
        for m in await machines(kube, ns, live_only=False):
            if m["metadata"].get("deletionTimestamp"):  # finish deletions the Machine controller owns
                for _ in range(3):
                    await c_machine.reconcile(ctx, ns, m["metadata"]["name"])
        for ms in await kube.list(MACHINE_SET, ns):
            await c_ms.reconcile(ctx, ns, ms["metadata"]["name"])


async def test_machinedeployment_rollout(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns)
    await kube.create(MACHINE_DEPLOYMENT, md_obj(ns, 2))
    await drive_md(kube, ctx, ns, rounds=2)
    (ms1,) = await kube.list(MACHINE_SET, ns)
    assert ms1["metadata"]["ownerReferences"][0]["kind"] == "MachineDeployment"
    assert ms1["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
    assert ms1["spec"]["replicas"] == 2
    first = {m["metadata"]["name"] for m in await machines(kube, ns)}
    assert len(first) == 2
    md = await kube.get(MACHINE_DEPLOYMENT, ns, "md1")
    assert md is not None and md["metadata"]["annotations"][REVISION_ANNOTATION] == "1"
    assert md["status"]["availableReplicas"] == 2
    # as upstream, the Cluster owns the templates (not as controller), so they are collected with it
    cluster = await kube.get(CLUSTER, ns, "c1")
    assert cluster is not None
    for g, o in templates(ns):
        t = await kube.get(g, ns, o["metadata"]["name"])
        assert t is not None and t["metadata"]["ownerReferences"] == [
            {"apiVersion": CLUSTER.api_version, "kind": "Cluster", "name": "c1", "uid": cluster["metadata"]["uid"]}]

    # stable MachineDeployment: no writes
    await c_md.reconcile(ctx, ns, "md1")
    before = rv(await kube.get(MACHINE_DEPLOYMENT, ns, "md1"))
    ms_before = rv(await kube.get(MACHINE_SET, ns, ms1["metadata"]["name"]))
    await c_md.reconcile(ctx, ns, "md1")
    await c_md.reconcile(ctx, ns, "md1")
    assert rv(await kube.get(MACHINE_DEPLOYMENT, ns, "md1")) == before
    assert rv(await kube.get(MACHINE_SET, ns, ms1["metadata"]["name"])) == ms_before

    # template change -> a new MachineSet, surge 1 / unavailable 0
    await kube.merge_patch(MACHINE_DEPLOYMENT, ns, "md1", {"spec": {"template": {"spec": {"version": "v1.35.0"}}}})
    await c_md.reconcile(ctx, ns, "md1")
    sets = {s["metadata"]["name"]: s for s in await kube.list(MACHINE_SET, ns)}
    assert len(sets) == 2
    new = next(s for s in sets.values() if s["metadata"]["name"] != ms1["metadata"]["name"])
    assert new["spec"]["replicas"] == 1 and sets[ms1["metadata"]["name"]]["spec"]["replicas"] == 2
    assert new["metadata"]["annotations"][REVISION_ANNOTATION] == "2"
    assert new["spec"]["template"]["spec"]["version"] == "v1.35.0"
    # the Machine controller reports the old Machines as not up to date
    old_m = sorted(first)[0]
    await c_machine.reconcile(ctx, ns, old_m)
    om = await kube.get(MACHINE, ns, old_m)
    assert om is not None
    assert {c["type"]: c for c in om["status"]["conditions"]}["UpToDate"]["reason"] == "NotUpToDate"

    await drive_md(kube, ctx, ns)
    sets = {s["metadata"]["name"]: s for s in await kube.list(MACHINE_SET, ns)}
    assert list(sets) == [new["metadata"]["name"]]  # the old, empty MachineSet was cleaned up
    assert sets[new["metadata"]["name"]]["spec"]["replicas"] == 2
    now = await machines(kube, ns)
    assert len(now) == 2 and not (first & {m["metadata"]["name"] for m in now})
    assert all(m["spec"]["version"] == "v1.35.0" for m in now)
    md = await kube.get(MACHINE_DEPLOYMENT, ns, "md1")
    assert md is not None and md["metadata"]["annotations"][REVISION_ANNOTATION] == "2"
    conds = {c["type"]: c for c in md["status"]["conditions"]}
    assert conds["RollingOut"]["status"] == "False" and conds["Available"]["status"] == "True"
    assert md["status"]["upToDateReplicas"] == 2 and md["status"]["phase"] == "Running"


# --- Cluster ---------------------------------------------------------------------------------------

async def test_cluster_reconcile_and_deletion_order(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns, cp=True)
    await kube.create(KUBEADM_CONTROL_PLANE, {
        "apiVersion": KUBEADM_CONTROL_PLANE.api_version, "kind": "KubeadmControlPlane",
        "metadata": _meta("c1-cp", ns, finalizers=["test.capd-py/hold"]),
        "spec": {"version": "v1.34.4", "replicas": 1,
                 "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": gvk.INFRA_GROUP,
                                                                    "kind": "DockerMachineTemplate",
                                                                    "name": "workers"}}}}})
    await kube.merge_patch(DOCKER_CLUSTER, ns, "c1", {"metadata": {"finalizers": ["test.capd-py/hold"]}})

    await c_cluster.reconcile(ctx, ns, "c1")
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None and FINALIZER_CLUSTER in c["metadata"]["finalizers"]
    conds = {x["type"]: x for x in c["status"]["conditions"]}
    assert conds["InfrastructureReady"]["status"] == "False"
    assert conds["InfrastructureReady"]["reason"] == "NotReady"
    for g, n in ((DOCKER_CLUSTER, "c1"), (KUBEADM_CONTROL_PLANE, "c1-cp")):
        o = await kube.get(g, ns, n)
        assert o is not None and o["metadata"]["labels"][CLUSTER_NAME] == "c1"
        assert [(r["kind"], r["uid"], r.get("controller")) for r in o["metadata"]["ownerReferences"]] == \
            [("Cluster", c["metadata"]["uid"], None)]

    # the infrastructure becomes ready with an endpoint
    dc = await kube.merge_patch(DOCKER_CLUSTER, ns, "c1",
                                {"spec": {"controlPlaneEndpoint": {"host": "172.18.0.2", "port": 6443}}})
    await kube.patch_status(DOCKER_CLUSTER, dc, {"initialization": {"provisioned": True},
                                                  "failureDomains": [{"name": "fd1", "controlPlane": True}]})
    await c_cluster.reconcile(ctx, ns, "c1")
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    assert c["spec"]["controlPlaneEndpoint"] == {"host": "172.18.0.2", "port": 6443}
    assert c["status"]["initialization"]["infrastructureProvisioned"] is True
    assert c["status"]["failureDomains"] == [{"name": "fd1", "controlPlane": True}]
    assert c["status"]["phase"] == "Provisioned"
    before = rv(c)
    await c_cluster.reconcile(ctx, ns, "c1")
    await c_cluster.reconcile(ctx, ns, "c1")
    assert rv(await kube.get(CLUSTER, ns, "c1")) == before

    # workers (the control plane reports its version, as a provisioned KCP does: the MachineSet's preflight
    # checks hold worker Machines while the control plane is still provisioning)
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert kcp is not None
    await kube.patch_status(KUBEADM_CONTROL_PLANE, kcp, {**(kcp.get("status") or {}), "version": "v1.34.4"})
    await kube.create(MACHINE_DEPLOYMENT, md_obj(ns, 2))
    await drive_md(kube, ctx, ns, rounds=2)
    assert len(await machines(kube, ns)) == 2
    for m in await machines(kube, ns):
        await c_machine.reconcile(ctx, ns, m["metadata"]["name"])  # finalizers on the Machines

    await kube.delete(CLUSTER, ns, "c1")

    async def step() -> None:
        await c_cluster.reconcile(ctx, ns, "c1")
        for md in await kube.list(MACHINE_DEPLOYMENT, ns):
            await c_md.reconcile(ctx, ns, md["metadata"]["name"])
        for ms in await kube.list(MACHINE_SET, ns):
            await c_ms.reconcile(ctx, ns, ms["metadata"]["name"])
        for m in await kube.list(MACHINE, ns):
            await c_machine.reconcile(ctx, ns, m["metadata"]["name"])

    def deleting(o: Obj | None) -> bool:
        return bool(o and o["metadata"].get("deletionTimestamp"))

    await c_cluster.reconcile(ctx, ns, "c1")
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    assert {x["type"]: x for x in c["status"]["conditions"]}["Deleting"]["reason"] == "WaitingForWorkersDeletion"
    assert c["status"]["phase"] == "Deleting"
    assert deleting(await kube.get(MACHINE_DEPLOYMENT, ns, "md1"))
    assert not deleting(await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp"))
    assert not deleting(await kube.get(DOCKER_CLUSTER, ns, "c1"))

    for _ in range(6):
        await step()
        if not await kube.list(MACHINE, ns) and not await kube.list(MACHINE_SET, ns) and \
                not await kube.list(MACHINE_DEPLOYMENT, ns):
            break
        c = await kube.get(CLUSTER, ns, "c1")
        assert c is not None  # the Cluster waits for its workers
        assert not deleting(await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp"))
    assert await kube.list(MACHINE, ns) == []
    assert await kube.list(MACHINE_DEPLOYMENT, ns) == []
    await c_cluster.reconcile(ctx, ns, "c1")
    assert deleting(await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp"))
    assert not deleting(await kube.get(DOCKER_CLUSTER, ns, "c1"))
    await c_cluster.reconcile(ctx, ns, "c1")
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    assert {x["type"]: x for x in c["status"]["conditions"]}["Deleting"]["reason"] == "WaitingForControlPlaneDeletion"
    assert not deleting(await kube.get(DOCKER_CLUSTER, ns, "c1"))

    # the control plane provider finishes
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp", {"metadata": {"finalizers": None}})
    await c_cluster.reconcile(ctx, ns, "c1")
    assert deleting(await kube.get(DOCKER_CLUSTER, ns, "c1"))
    assert await kube.get(CLUSTER, ns, "c1") is not None
    await kube.merge_patch(DOCKER_CLUSTER, ns, "c1", {"metadata": {"finalizers": None}})
    await c_cluster.reconcile(ctx, ns, "c1")
    assert await kube.get(CLUSTER, ns, "c1") is None


async def test_cluster_remote_connection_probe(kube: Kube, envtest: Any, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns, cp=False)
    dc = await kube.get(DOCKER_CLUSTER, ns, "c1")
    assert dc is not None
    dc = await kube.merge_patch(DOCKER_CLUSTER, ns, "c1",
                                {"spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}}})
    await kube.patch_status(DOCKER_CLUSTER, dc, {"initialization": {"provisioned": True}})
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    await kube.patch_status(CLUSTER, c, {"initialization": {"controlPlaneInitialized": True}})
    await c_cluster.reconcile(ctx, ns, "c1")
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None and "RemoteConnectionProbe" not in {x["type"] for x in c["status"]["conditions"]}
    await workload_secret(kube, envtest, ns)
    res = await c_cluster.reconcile(ctx, ns, "c1")
    assert res is not None and res.requeue_after
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    conds = {x["type"]: x for x in c["status"]["conditions"]}
    assert conds["RemoteConnectionProbe"]["status"] == "True"
    assert conds["ControlPlaneInitialized"]["status"] == "True"
    assert conds["Available"]["status"] == "True", conds["Available"]
    before = rv(c)
    await c_cluster.reconcile(ctx, ns, "c1")
    assert rv(await kube.get(CLUSTER, ns, "c1")) == before


async def test_cluster_missing_refs_and_repair(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await kube.create(CLUSTER, cluster_obj(ns, cp=True))
    res = await c_cluster.reconcile(ctx, ns, "c1")
    assert res is not None and res.requeue_after  # waiting, not an error
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    conds = {x["type"]: x for x in c["status"]["conditions"]}
    assert conds["InfrastructureReady"]["reason"] == "ObjectDoesNotExist"
    assert "DockerCluster c1" in conds["InfrastructureReady"]["message"]
    assert conds["ControlPlaneAvailable"]["reason"] == "ObjectDoesNotExist"
    assert c["status"]["phase"] == "Provisioning"

    await kube.create(DOCKER_CLUSTER, {"apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster",
                                       "metadata": _meta("c1", ns), "spec": {}})
    await c_cluster.reconcile(ctx, ns, "c1")
    await kube.json_patch(CLUSTER, ns, "c1", [{"op": "remove", "path": "/metadata/finalizers"}])
    await kube.json_patch(DOCKER_CLUSTER, ns, "c1", [{"op": "remove", "path": "/metadata/ownerReferences"}])
    await c_cluster.reconcile(ctx, ns, "c1")
    c = await kube.get(CLUSTER, ns, "c1")
    dc = await kube.get(DOCKER_CLUSTER, ns, "c1")
    assert c is not None and FINALIZER_CLUSTER in c["metadata"]["finalizers"]
    assert dc is not None and dc["metadata"]["ownerReferences"][0]["uid"] == c["metadata"]["uid"]


# --- Machine + workload cluster (the envtest API server doubles as the workload cluster) -------------

async def test_unreachable_workload_api_names_the_address_and_the_error(kube: Kube, envtest: Any, namespace: str,
                                                                        ctx: Ctx) -> None:
    """Before the control plane is initialised too (as upstream's ClusterCache, once the infrastructure is
    provisioned): the kubeconfig's server cannot be reached -> RemoteConnectionProbe False naming it."""
    ns = namespace
    await setup_cluster(kube, ns, cp=False)
    dc = await kube.get(DOCKER_CLUSTER, ns, "c1")
    assert dc is not None
    await kube.patch_status(DOCKER_CLUSTER, dc, {"initialization": {"provisioned": True}})
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = f"https://127.0.0.1:{port}"
    text = yaml.safe_load(envtest.kubeconfig)
    text["clusters"][0]["cluster"]["server"] = server
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": _meta("c1-kubeconfig", ns),
                               "data": {"value": base64.b64encode(yaml.safe_dump(text).encode()).decode()}})
    res = await c_cluster.reconcile(ctx, ns, "c1")
    assert res is not None and res.requeue_after == c_cluster.PROBE_RETRY_SECONDS
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    probe = {x["type"]: x for x in c["status"]["conditions"]}["RemoteConnectionProbe"]
    assert probe["status"] == "False" and probe["reason"] == "ProbeFailed"
    assert probe["message"].startswith(f"Remote connection probe failed: {server}: "), probe
    assert "Connect" in probe["message"], probe  # aiohttp's "Cannot connect to host ... [Connect call failed]"
    before = rv(c)
    await c_cluster.reconcile(ctx, ns, "c1")  # same failure, same text: no write
    assert rv(await kube.get(CLUSTER, ns, "c1")) == before








def pod(ns: str, name: str, node: str, **meta: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, ns, **meta),
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "pause"}]}}


async def test_machine_node_ref_drain_and_node_deletion(kube: Kube, envtest: Any, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    name, node_name, pid = await machine_with_node(kube, ctx, envtest, ns)

    m = await kube.get(MACHINE, ns, name)
    assert m is not None
    assert m["status"]["nodeRef"] == {"name": node_name}
    assert m["status"]["nodeInfo"]["kubeletVersion"] == "v1.34.4"
    assert m["status"]["phase"] == "Running"
    conds = {x["type"]: x for x in m["status"]["conditions"]}
    for t in ("NodeReady", "NodeHealthy", "Ready", "Available", "BootstrapConfigReady", "InfrastructureReady"):
        assert conds[t]["status"] == "True", (t, conds[t])
    node = await kube.get(NODE, None, node_name)
    assert node is not None
    assert node["metadata"]["annotations"]["cluster.x-k8s.io/machine"] == name
    assert node["metadata"]["annotations"]["cluster.x-k8s.io/owner-kind"] == "MachineSet"
    before, node_before = rv(m), rv(node)
    await c_machine.reconcile(ctx, ns, name)
    await c_machine.reconcile(ctx, ns, name)
    assert rv(await kube.get(MACHINE, ns, name)) == before
    assert rv(await kube.get(NODE, None, node_name)) == node_before

    # pods on the node: one to evict, a DaemonSet pod (of a DaemonSet that exists: an orphaned one is evicted, as
    # upstream) and a mirror pod that drain leaves alone
    await kube.create(gvk.DAEMON_SET, {
        "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta("ds", ns),
        "spec": {"selector": {"matchLabels": {"app": "ds"}}, "template": {
            "metadata": {"labels": {"app": "ds"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    await kube.create(POD, pod(ns, "web", node_name))
    await kube.create(POD, pod(ns, "ds", node_name, ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "0d5e0d5e-0000-4000-8000-000000000001",
         "controller": True}]))
    await kube.create(POD, pod(ns, "static", node_name, annotations={"kubernetes.io/config.mirror": "hash"}))

    await kube.delete(MACHINE, ns, name)
    await c_machine.reconcile(ctx, ns, name)
    node = await kube.get(NODE, None, node_name)
    assert node is not None and node["spec"].get("unschedulable") is True
    web = await kube.get(POD, ns, "web")
    assert web is not None and web["metadata"].get("deletionTimestamp")  # evicted; no kubelet to finish it
    for p in ("ds", "static"):
        got = await kube.get(POD, ns, p)
        assert got is not None and not got["metadata"].get("deletionTimestamp")
    m = await kube.get(MACHINE, ns, name)
    assert m is not None
    assert {x["type"]: x for x in m["status"]["conditions"]}["Deleting"]["reason"] == "DrainingNode"
    assert m["status"]["deletion"]["nodeDrainStartTime"]
    assert await kube.get(DOCKER_MACHINE, ns, name) is not None  # infra waits for the drain

    # the "kubelet" finishes the eviction
    await kube.acall("DELETE", POD.path(ns, "web"), body={"gracePeriodSeconds": 0})
    await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(DOCKER_MACHINE, ns, name) is None
    assert await kube.get(KUBEADM_CONFIG, ns, name) is None
    assert await kube.get(NODE, None, node_name) is not None  # node deletion comes after the providers
    await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(NODE, None, node_name) is None
    await c_machine.reconcile(ctx, ns, name)
    assert await kube.get(MACHINE, ns, name) is None


async def test_machinehealthcheck_remediates_through_machineset(kube: Kube, envtest: Any, namespace: str,
                                                                ctx: Ctx) -> None:
    ns = namespace
    c: dict[str, Any] | None
    c = await setup_cluster(kube, ns)
    await workload_secret(kube, envtest, ns)
    c = await kube.get(CLUSTER, ns, "c1")
    assert c is not None
    await kube.patch_status(CLUSTER, c, {"conditions": [
        {"type": t, "status": "True", "reason": r, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        for t, r in (("InfrastructureReady", "Ready"), ("ControlPlaneInitialized", "Initialized"))]})
    await kube.create(MACHINE_SET, machineset_obj(ns, 2))
    await c_ms.reconcile(ctx, ns, "ms1")
    ms_list = await machines(kube, ns)
    for i, m in enumerate(ms_list):
        pid = f"docker:////{ns}-n{i}"
        await make_node(kube, f"{ns}-n{i}", pid, ready="True" if i == 0 else "False")
        await provision_machine(kube, ctx, ns, m["metadata"]["name"], pid)
    sick = ms_list[1]["metadata"]["name"]

    await kube.create(MACHINE_HEALTH_CHECK, {
        "apiVersion": MACHINE_HEALTH_CHECK.api_version, "kind": "MachineHealthCheck", "metadata": _meta("mhc", ns),
        "spec": {"clusterName": "c1", "selector": {"matchLabels": {"pool": "a"}},
                 "checks": {"nodeStartupTimeoutSeconds": 600,
                            "unhealthyNodeConditions": [{"type": "Ready", "status": "False", "timeoutSeconds": 10}]},
                 "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": 1}}}})
    res = await c_mhc.reconcile(ctx, ns, "mhc")
    assert res is not None and res.requeue_after
    mhc = await kube.get(MACHINE_HEALTH_CHECK, ns, "mhc")
    assert mhc is not None
    assert (mhc["status"]["expectedMachines"], mhc["status"]["currentHealthy"],
            mhc["status"]["remediationsAllowed"]) == (2, 1, 0)
    assert {x["type"]: x for x in mhc["status"]["conditions"]}["RemediationAllowed"]["status"] == "True"
    bad = await kube.get(MACHINE, ns, sick)
    assert bad is not None
    bc = {x["type"]: x for x in bad["status"]["conditions"]}
    assert bc["HealthCheckSucceeded"]["status"] == "False" and bc["HealthCheckSucceeded"]["reason"] == "UnhealthyNode"
    assert bc["OwnerRemediated"]["status"] == "False"
    good = await kube.get(MACHINE, ns, ms_list[0]["metadata"]["name"])
    assert good is not None
    assert {x["type"]: x for x in good["status"]["conditions"]}["HealthCheckSucceeded"]["status"] == "True"

    # the Machine controller keeps the MHC's conditions
    await c_machine.reconcile(ctx, ns, sick)
    bad = await kube.get(MACHINE, ns, sick)
    assert bad is not None and "OwnerRemediated" in {x["type"] for x in bad["status"]["conditions"]}

    # stable MHC: no writes
    before = rv(await kube.get(MACHINE_HEALTH_CHECK, ns, "mhc"))
    await c_mhc.reconcile(ctx, ns, "mhc")
    assert rv(await kube.get(MACHINE_HEALTH_CHECK, ns, "mhc")) == before

    # the MachineSet remediates: deletes the sick Machine, and replaces it once it is gone
    await c_ms.reconcile(ctx, ns, "ms1")
    bad = await kube.get(MACHINE, ns, sick)
    assert bad is not None and bad["metadata"].get("deletionTimestamp")
    assert len(await machines(kube, ns)) == 1
    for _ in range(6):
        await c_machine.reconcile(ctx, ns, sick)
        if await kube.get(MACHINE, ns, sick) is None:
            break
    assert await kube.get(MACHINE, ns, sick) is None
    assert await kube.get(NODE, None, f"{ns}-n1") is None  # its Node was deleted from the workload cluster
    await c_ms.reconcile(ctx, ns, "ms1")
    live = await machines(kube, ns)
    assert len(live) == 2 and sick not in {m["metadata"]["name"] for m in live}


async def test_machinedeployment_scale_and_on_delete(kube: Kube, namespace: str, ctx: Ctx) -> None:
    ns = namespace
    await setup_cluster(kube, ns)
    md = md_obj(ns, 2)
    md["spec"]["rollout"] = {"strategy": {"type": "OnDelete"}}
    await kube.create(MACHINE_DEPLOYMENT, md)
    await drive_md(kube, ctx, ns, rounds=2)
    assert len(await machines(kube, ns)) == 2

    # scaling is not a rollout: the same MachineSet grows
    await kube.merge_patch(MACHINE_DEPLOYMENT, ns, "md1", {"spec": {"replicas": 3}})
    await drive_md(kube, ctx, ns, rounds=2)
    (ms1,) = await kube.list(MACHINE_SET, ns)
    assert ms1["spec"]["replicas"] == 3 and len(await machines(kube, ns)) == 3

    # OnDelete: a template change creates the new MachineSet, but nothing is replaced on its own
    await kube.merge_patch(MACHINE_DEPLOYMENT, ns, "md1", {"spec": {"template": {"spec": {"version": "v1.35.0"}}}})
    await drive_md(kube, ctx, ns, rounds=2)
    sets = {s["metadata"]["name"]: s for s in await kube.list(MACHINE_SET, ns)}
    assert len(sets) == 2
    new_name = next(n for n in sets if n != ms1["metadata"]["name"])
    assert sets[new_name]["spec"]["replicas"] == 0 and sets[ms1["metadata"]["name"]]["spec"]["replicas"] == 3
    old_machines = await machines(kube, ns)
    assert len(old_machines) == 3

    # the user deletes one old Machine: it is replaced by one from the new MachineSet
    await kube.delete(MACHINE, ns, old_machines[0]["metadata"]["name"])
    await drive_md(kube, ctx, ns, rounds=3)
    sets = {s["metadata"]["name"]: s for s in await kube.list(MACHINE_SET, ns)}
    assert sets[ms1["metadata"]["name"]]["spec"]["replicas"] == 2
    assert sets[new_name]["spec"]["replicas"] == 1
    versions = sorted(m["spec"]["version"] for m in await machines(kube, ns))
    assert versions == ["v1.34.4", "v1.34.4", "v1.35.0"]
