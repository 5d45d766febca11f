"""KCP adoption of standalone control-plane Machines: upstream adoptMachines / adoptOwnedSecrets /
ensureCertificatesOwnerRef rules, as plain data."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api import versions
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import adoption

try:
    from kcp_fixtures import kcp, machine
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import kcp, machine  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

KCP_REF = {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "name": "c1-cp",
           "uid": "kcp-uid", "controller": True, "blockOwnerDeletion": True}
CFG = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
       "metadata": {"name": "cp-0", "namespace": "ns", "uid": "cfg-uid"}, "status": {"dataSecretName": "cp-0"}}
CFG_REF = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig", "name": "cp-0",
           "uid": "cfg-uid", "controller": True, "blockOwnerDeletion": True}


def standalone(name: str = "cp-0", version: str = "v1.34.4", config_kind: str = "KubeadmConfig",
               **labels: str) -> dict[str, Any]:
    m = machine(name, labels={"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/control-plane": "",
                              **labels})
    m["metadata"]["ownerReferences"] = [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1",
                                         "uid": "cluster-uid"}]
    m["spec"]["version"] = version
    m["spec"]["bootstrap"] = {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": config_kind,
                                            "name": name}}
    return m


def secret(name: str, *refs: dict[str, Any], type_: str = "cluster.x-k8s.io/secret") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": type_,
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": list(refs)}}


def test_adoptable_are_the_clusters_control_plane_machines_without_a_controller() -> None:
    worker = standalone("w-0")
    del worker["metadata"]["labels"]["cluster.x-k8s.io/control-plane"]
    other_cluster = standalone("x-0", **{"cluster.x-k8s.io/cluster-name": "c2"})
    owned = machine("cp-1")  # the KCP's (controller owner reference... made controller here)
    owned["metadata"]["ownerReferences"][0]["controller"] = True
    foreign = standalone("cp-2")
    foreign["metadata"]["ownerReferences"].append({"kind": "OtherControlPlane", "name": "o", "uid": "o",
                                                   "controller": True})
    ms = [standalone("cp-0"), worker, other_cluster, owned, foreign]
    assert [m["metadata"]["name"] for m in adoption.adoptable("c1", ms)] == ["cp-0"]
    # once adoption is over, Machines controlled by another owner stop the KCP (upstream's mixed management mode)
    assert adoption.not_owned(kcp(), "c1", [owned, foreign, worker]) == ["cp-2"]
    assert adoption.not_owned(kcp(), "c1", [owned, worker]) == []


@pytest.mark.parametrize(("kcp_v", "machine_v", "ok"), [
    ("v1.34.4", "v1.34.4", True), ("v1.34.4", "v1.33.0", True), ("v1.34.4", "v1.35.1", True),
    ("v1.34.4", "v1.32.9", False), ("v1.34.4", "v1.36.0", False), ("v1.34.4", "v2.34.4", False),
])
def test_version_skew(kcp_v: str, machine_v: str, ok: bool) -> None:
    assert adoption.supported_skew(versions.parse(kcp_v), versions.parse(machine_v)) is ok
    d = adoption.decide(kcp(version=kcp_v), [standalone(version=machine_v)])
    if ok:
        assert d == adoption.Adoption(adopt=["cp-0"])
    else:
        # upstream's event message, word for word; nothing adopted, no error (no retry loop)
        assert d.adopt == [] and not d.error
        assert d.event == (f'Could not adopt Machine ns/cp-0: its version ("{machine_v}") is outside supported '
                           f'+/- one minor version skew from KCP\'s ("{kcp_v}")')


def test_one_refused_machine_refuses_the_whole_adoption() -> None:
    d = adoption.decide(kcp(), [standalone("cp-0"), standalone("cp-1", version="v1.30.0")])
    assert d.adopt == [] and "cp-1" in d.event


def test_machine_without_version_is_adopted() -> None:
    m = standalone()
    del m["spec"]["version"]
    assert adoption.decide(kcp(), [m]).adopt == ["cp-0"]


def test_bootstrap_reference_must_be_a_kubeadm_config() -> None:
    d = adoption.decide(kcp(), [standalone(config_kind="EKSConfig")])
    assert d.adopt == [] and not d.event
    assert d.error.startswith("unable to adopt Machine ns/cp-0: expected a ConfigRef of kind KubeadmConfig but "
                              "instead found {apiGroup:bootstrap.cluster.x-k8s.io kind:EKSConfig name:cp-0}")
    m = standalone()
    m["spec"]["bootstrap"] = {"dataSecretName": "data"}
    assert "expected a ConfigRef of kind KubeadmConfig but instead found {}" in adoption.decide(kcp(), [m]).error


def test_machine_gets_the_kcp_as_controller_keeping_other_owners() -> None:
    m = standalone()
    refs = adoption.machine_owner_refs(m, KCP_REF)
    assert refs == [m["metadata"]["ownerReferences"][0], KCP_REF]
    m["metadata"]["ownerReferences"] = refs
    assert adoption.machine_owner_refs(m, KCP_REF) is None  # stable: no second write


def test_secrets_of_the_adopted_config_pass_to_the_kcp_but_not_its_bootstrap_data() -> None:
    ca = secret("c1-ca", CFG_REF)
    assert adoption.config_secret_owner_refs(ca, CFG, KCP_REF) == [KCP_REF]
    assert adoption.config_secret_owner_refs(secret("cp-0", CFG_REF), CFG, KCP_REF) is None
    assert adoption.config_secret_owner_refs(secret("c1-ca", KCP_REF), CFG, KCP_REF) is None
    other = dict(CFG_REF, name="cp-9", uid="other")
    assert adoption.config_secret_owner_refs(secret("c1-etcd", other), CFG, KCP_REF) is None
    extra = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keep", "uid": "k"}
    assert adoption.config_secret_owner_refs(secret("c1-sa", extra, CFG_REF), CFG, KCP_REF) == [extra, KCP_REF]


def test_cluster_secrets_are_controlled_by_the_kcp_user_ones_left_alone() -> None:
    cluster_ref = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": "cluster-uid"}
    # the kubeconfig the Cluster controller made for the standalone control plane: the Cluster stays an owner
    assert adoption.cluster_secret_owner_refs(secret("c1-kubeconfig", cluster_ref), KCP_REF) == [cluster_ref, KCP_REF]
    # a certificate controlled by a KubeadmConfig: its controller reference goes
    assert adoption.cluster_secret_owner_refs(secret("c1-ca", CFG_REF), KCP_REF) == [KCP_REF]
    old = dict(KCP_REF, apiVersion="controlplane.cluster.x-k8s.io/v1beta1")
    assert adoption.cluster_secret_owner_refs(secret("c1-ca", old), KCP_REF) == [KCP_REF]
    assert adoption.cluster_secret_owner_refs(secret("c1-ca", KCP_REF), KCP_REF) is None
    assert adoption.cluster_secret_owner_refs(secret("c1-ca", CFG_REF, type_="Opaque"), KCP_REF) is None


def test_adopted_machine_gets_the_control_plane_name_label_in_place() -> None:
    m = standalone()
    m["spec"]["deletion"] = {"nodeDeletionTimeoutSeconds": 10}  # upstream's Machine webhook's default
    assert rk.machine_in_place_patch(kcp(), m) == {"metadata": {"labels": {
        "cluster.x-k8s.io/control-plane-name": "c1-cp"}}}
    m["metadata"]["labels"]["cluster.x-k8s.io/control-plane-name"] = "c1-cp"
    assert rk.machine_in_place_patch(kcp(), m) is None


def test_adopted_kubeadm_config_is_up_to_date_with_the_default_feature_gate() -> None:
    """upstream's kcp-adoption flavor: the standalone KubeadmConfig spells out ControlPlaneKubeletLocalMode, the
    KCP leaves it to upstream KCP's default (1.31 <= version < 1.36): no rollout of the adopted Machine."""
    k = kcp(kubeadmConfigSpec={"clusterConfiguration": {"apiServer": {"certSANs": ["localhost", "127.0.0.1"]}}})
    cfg_spec: dict[str, Any]
    cfg_spec = {"clusterConfiguration": {"apiServer": {"certSANs": ["localhost", "127.0.0.1"]},
                                         "featureGates": {"ControlPlaneKubeletLocalMode": True}}}
    assert not rk.kubeadm_spec_differs(k, cfg_spec)
    assert not rk.kubeadm_spec_differs(k, {"clusterConfiguration": {"apiServer": {
        "certSANs": ["localhost", "127.0.0.1"]}}})
    off = copy.deepcopy(cfg_spec)
    off["clusterConfiguration"]["featureGates"]["ControlPlaneKubeletLocalMode"] = False
    assert rk.kubeadm_spec_differs(k, off)
    # from 1.36 on the gate is gone: spelled out, it is a difference
    k36 = copy.deepcopy(k)
    k36["spec"]["version"] = "v1.36.0"
    assert rk.kubeadm_spec_differs(k36, cfg_spec)
