"""KubeadmControlPlane adoption against a real API server, driving the real KCP controller (upstream's
adoptMachines / adoptOwnedSecrets): a standalone control-plane Machine (its KubeadmConfig generated the cluster
certificates, the Cluster controller the kubeconfig) is taken over by a new KCP without a Machine being created;
a Machine outside the version skew or without a KubeadmConfig is refused with an AdoptionFailed event."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import contract, gvk
from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_MACHINE,
    EVENT,
    KUBEADM_CONFIG,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    SECRET,
)
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE, CONTROL_PLANE_NAME
from capd_py.controllers import cluster as c_cluster
from capd_py.controllers import kcp as c_kcp
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube
from capd_py.reconcile import certs
from capd_py.testing.core_objects import ENDPOINT, make_cluster, make_kcp
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]
LABELS = {CLUSTER_NAME: "c1", CONTROL_PLANE: ""}


@pytest.fixture
def ctx(kube: Kube) -> Ctx:
    return direct_ctx(kube)


async def standalone_machine(kube: Kube, ns: str, name: str = "cp-0", version: str = "v1.34.4",
                             config_kind: str = "KubeadmConfig") -> tuple[Obj, Obj]:
    """What step 1 of upstream's kcp-adoption flavor leaves once bootstrapped: a control-plane Machine, its
    KubeadmConfig (controlled by the Machine, its bootstrap data Secret its own) and DockerMachine."""
    await kube.create(DOCKER_MACHINE, {"apiVersion": DOCKER_MACHINE.api_version, "kind": "DockerMachine",
                                       "metadata": {"name": name, "namespace": ns, "labels": dict(LABELS)}})
    m = await kube.create(MACHINE, {
        "apiVersion": MACHINE.api_version, "kind": "Machine",
        "metadata": {"name": name, "namespace": ns, "labels": dict(LABELS)},
        "spec": {"clusterName": "c1", "version": version,
                 "bootstrap": {"configRef": {"apiGroup": gvk.BOOTSTRAP_GROUP, "kind": config_kind, "name": name}},
                 "infrastructureRef": {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachine", "name": name}}})
    cfg = await kube.create(KUBEADM_CONFIG, {
        "apiVersion": KUBEADM_CONFIG.api_version, "kind": "KubeadmConfig",
        "metadata": {"name": name, "namespace": ns, "labels": dict(LABELS),
                     "ownerReferences": [contract.owner_ref(m)]},
        "spec": {"clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]},
                                          "featureGates": {"ControlPlaneKubeletLocalMode": True}}}})
    cfg = await kube.patch_status(KUBEADM_CONFIG, cfg, {"dataSecretName": name,
                                                         "initialization": {"dataSecretCreated": True}}) or cfg
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "type": certs.SECRET_TYPE,
                               "metadata": {"name": name, "namespace": ns, "labels": {CLUSTER_NAME: "c1"},
                                            "ownerReferences": [contract.owner_ref(cfg)]},
                               "data": {"value": "", "format": "Y2xvdWQtY29uZmln"}})
    return m, cfg


async def certificates_of(kube: Kube, ns: str, owner: Obj) -> None:
    """The cluster certificates as the KubeadmConfig controller makes them for a cluster without a KCP."""
    for p in certs.PURPOSES:
        await kube.create(SECRET, certs.certificate_secret("c1", ns, p, certs.generate(p), contract.owner_ref(owner)))


async def events(kube: Kube, ns: str, reason: str) -> list[str]:
    """Each Event's message once per time it was recorded (a repeat is one Event whose count grows, as client-go's
    correlator makes it)."""
    return [e["message"] for e in await kube.list(EVENT, ns) if e.get("reason") == reason
            for _ in range(int(e.get("count") or 1))]


async def control_plane_machines(kube: Kube, ns: str) -> list[Obj]:
    return [m for m in await kube.list(MACHINE, ns) if CONTROL_PLANE in m["metadata"].get("labels", {})]


def controller(obj: Obj | None) -> tuple[str, str] | None:
    o = contract.controller_owner(obj or {})
    return (o["kind"], o["name"]) if o else None


async def test_kcp_adopts_standalone_machine_and_the_cluster_pki(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=False)
    m, cfg = await standalone_machine(kube, ns)
    await certificates_of(kube, ns, cfg)
    # without a control plane provider the Cluster controller writes the kubeconfig, owned by the Cluster
    await c_cluster.reconcile(ctx, ns, "c1")
    kubeconfig = await kube.get(SECRET, ns, "c1-kubeconfig")
    assert kubeconfig is not None and kubeconfig["type"] == certs.SECRET_TYPE
    assert [(o["kind"], o.get("controller")) for o in kubeconfig["metadata"]["ownerReferences"]] == [("Cluster", None)]

    # step 2: the KCP, and the Cluster now names it
    cluster = await kube.merge_patch(CLUSTER, ns, "c1", {"spec": {"controlPlaneRef": {
        "apiGroup": gvk.CONTROLPLANE_GROUP, "kind": "KubeadmControlPlane", "name": "c1-cp"}}})
    await make_kcp(kube, ns, cluster, replicas=1)
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp", {"spec": {"kubeadmConfigSpec": {
        "initConfiguration": None, "joinConfiguration": None, "postKubeadmCommands": None}}})
    for _ in range(3):
        await c_kcp.reconcile(ctx, ns, "c1-cp")

    [adopted] = await control_plane_machines(kube, ns)
    assert adopted["metadata"]["uid"] == m["metadata"]["uid"]  # taken over, nothing created
    assert controller(adopted) == ("KubeadmControlPlane", "c1-cp")
    assert adopted["metadata"]["labels"][CONTROL_PLANE_NAME] == "c1-cp"
    cfg_now = await kube.get(KUBEADM_CONFIG, ns, "cp-0")
    assert controller(cfg_now) == ("Machine", "cp-0")  # the KubeadmConfig stays the Machine's, as upstream
    for p in certs.PURPOSES:
        s = await kube.get(SECRET, ns, certs.secret_name("c1", p))
        assert s is not None and controller(s) == ("KubeadmControlPlane", "c1-cp")
        assert len(s["metadata"]["ownerReferences"]) == 1
    assert controller(await kube.get(SECRET, ns, "cp-0")) == ("KubeadmConfig", "cp-0")  # bootstrap data stays
    kubeconfig = await kube.get(SECRET, ns, "c1-kubeconfig")
    assert kubeconfig is not None
    assert [(o["kind"], bool(o.get("controller"))) for o in kubeconfig["metadata"]["ownerReferences"]] == [
        ("Cluster", False), ("KubeadmControlPlane", True)]
    k = await kube.get(KUBEADM_CONTROL_PLANE, ns, "c1-cp")
    assert k is not None and k["status"]["replicas"] == 1
    assert k["status"].get("upToDateReplicas") == 1, k["status"]  # the default feature gate: no rollout
    assert not await events(kube, ns, "AdoptionFailed")
    # stable: another pass writes nothing to the adopted objects
    rvs = {x["metadata"]["name"]: x["metadata"]["resourceVersion"] for x in await kube.list(SECRET, ns)}
    machine_rv = adopted["metadata"]["resourceVersion"]
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert {x["metadata"]["name"]: x["metadata"]["resourceVersion"] for x in await kube.list(SECRET, ns)} == rvs
    [again] = await control_plane_machines(kube, ns)
    assert again["metadata"]["resourceVersion"] == machine_rv
    assert ENDPOINT  # the Cluster's endpoint nothing listens on: the workload is unreachable, adoption is not


async def test_machine_outside_the_version_skew_is_not_adopted(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True)
    _, cfg = await standalone_machine(kube, ns, version="v1.32.3")
    await certificates_of(kube, ns, cfg)
    await make_kcp(kube, ns, cluster, replicas=1)
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m] = await control_plane_machines(kube, ns)
    assert controller(m) is None
    assert await events(kube, ns, "AdoptionFailed") == [
        f'Could not adopt Machine {ns}/cp-0: its version ("v1.32.3") is outside supported +/- one minor version '
        'skew from KCP\'s ("v1.34.4")'] * 2
    assert controller(await kube.get(SECRET, ns, "c1-ca")) == ("KubeadmConfig", "cp-0")  # nothing changed hands
    # the operator brings the KCP within one minor: adopted
    await kube.merge_patch(KUBEADM_CONTROL_PLANE, ns, "c1-cp", {"spec": {"version": "v1.33.1"}})
    await c_kcp.reconcile(ctx, ns, "c1-cp")
    [m] = await control_plane_machines(kube, ns)
    assert controller(m) == ("KubeadmControlPlane", "c1-cp")


async def test_machine_without_kubeadm_config_is_not_adopted(ctx: Ctx, kube: Kube, namespace: str) -> None:
    ns = namespace
    cluster = await make_cluster(kube, ns, cp_ref=True)
    await standalone_machine(kube, ns, config_kind="OtherConfig")
    await make_kcp(kube, ns, cluster, replicas=1)
    res = await c_kcp.reconcile(ctx, ns, "c1-cp")
    assert res is not None and res.requeue_after  # an error: retried
    [m] = await control_plane_machines(kube, ns)
    assert controller(m) is None
    [msg] = await events(kube, ns, "AdoptionFailed")
    assert msg.startswith(f"unable to adopt Machine {ns}/cp-0: expected a ConfigRef of kind KubeadmConfig but "
                          "instead found {apiGroup:bootstrap.cluster.x-k8s.io kind:OtherConfig name:cp-0}")
    # and no control plane beside it: the KCP made no Machine and no certificates
    assert await kube.get(SECRET, ns, "c1-ca") is None
