"""KubeadmControlPlane decisions: init, one-at-a-time joins, scale-down choice, rollout need."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.reconcile import kcp as rk

pytestmark = pytest.mark.unit

try:
    from kcp_fixtures import ALL_PODS, NOW, view
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import ALL_PODS, NOW, view  # type: ignore[no-redef]

KCP: dict[str, Any] = {
    "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
    "metadata": {"name": "c1-cp", "namespace": "ns", "uid": "kcp-uid"},
    "spec": {"replicas": 3, "version": "v1.34.4",
             "machineTemplate": {"spec": {"infrastructureRef": {
                 "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "cp-v1"}}},
             "kubeadmConfigSpec": {"clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]}},
                                   "initConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [
                                       {"name": "cgroup-driver", "value": "cgroupfs"}]}},
                                   "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [
                                       {"name": "cgroup-driver", "value": "cgroupfs"}]}},
                                   "postKubeadmCommands": ["echo hi"]}},
}
CLUSTER: dict[str, Any] = {"metadata": {"name": "c1", "namespace": "ns"}, "spec": {}, "status": {}}


def kcp(**spec: Any) -> dict[str, Any]:
    k = copy.deepcopy(KCP)
    k["spec"].update(spec)
    return k


def test_first_machine_is_init() -> None:
    a = rk.next_action(kcp(), CLUSTER, [], initialized=False)
    assert a.kind == "create-init"
    assert rk.next_action(kcp(replicas=0), CLUSTER, [], initialized=False).kind == "none"


def test_nothing_else_until_initialized() -> None:
    a = rk.next_action(kcp(), CLUSTER, [view("m1", healthy=False)], initialized=False)
    assert a.kind == "wait" and a.reason == "WaitingForControlPlaneInitialized"


def test_join_one_at_a_time() -> None:
    a = rk.next_action(kcp(), CLUSTER, [view("m1")], initialized=True)
    assert a.kind == "scale-up"
    # the second one is not healthy yet: the third waits
    a = rk.next_action(kcp(), CLUSTER, [view("m1"), view("m2", 1, healthy=False)], initialized=True)
    assert a.kind == "wait" and "m2" in a.message
    a = rk.next_action(kcp(), CLUSTER, [view("m1"), view("m2", 1)], initialized=True)
    assert a.kind == "scale-up"
    assert rk.next_action(kcp(), CLUSTER, [view("m1"), view("m2", 1), view("m3", 2)], initialized=True).kind == "none"


def test_the_next_join_waits_for_static_pods_not_for_node_ready() -> None:
    """Upstream's preflight (checkHealthiness): a Node linked and the static pods Ready; the Node's own Ready
    (CNI, kubelet's runtime-status loop) comes seconds later and is not waited for."""
    joined = view("m2", 1, node_ready=False)
    assert not joined.healthy and joined.passes_preflight
    assert rk.next_action(kcp(), CLUSTER, [view("m1"), joined], initialized=True).kind == "scale-up"
    starting = view("m2", 1, pods_ready={**ALL_PODS, "kube-apiserver": False})
    a = rk.next_action(kcp(), CLUSTER, [view("m1"), starting], initialized=True)
    assert a.kind == "wait" and "m2" in a.message and "static pods Ready" in a.message
    unlinked = view("m2", 1, node_name="")
    assert rk.next_action(kcp(), CLUSTER, [view("m1"), unlinked], initialized=True).kind == "wait"


def test_waits_for_deletion() -> None:
    a = rk.next_action(kcp(), CLUSTER, [view("m1"), view("m2", deleting=True)], initialized=True)
    assert a.kind == "wait" and a.reason == "WaitingForMachineDeletion"


def test_scale_down_picks_oldest_in_most_crowded_failure_domain() -> None:
    ms = [view("a1", 0, "a"), view("b1", 1, "b"), view("b2", 2, "b"), view("c1", 3, "c")]
    a = rk.next_action(kcp(replicas=3), CLUSTER, ms, initialized=True)
    assert a.kind == "scale-down" and a.machine == "b1"
    # the delete annotation wins, then outdated machines
    ms2 = [view("a1", 0, "a"), view("b1", 1, "b"), view("b2", 2, "b", delete_annotation=True), view("c1", 3, "c")]
    assert rk.pick_machine_for_scale_down(ms2).name == "b2"  # type: ignore[union-attr]
    ms3 = [view("a1", 0, "a"), view("b1", 1, "b"), view("b2", 2, "b"), view("c1", 3, "c", outdated=True)]
    assert rk.pick_machine_for_scale_down(ms3).name == "c1"  # type: ignore[union-attr]
    # no failure domains: plain oldest
    assert rk.pick_machine_for_scale_down([view("x", 5), view("y", 1), view("z", 3)]).name == "y"  # type: ignore[union-attr]


def test_scale_down_waits_for_health_of_the_others_only() -> None:
    a = rk.next_action(kcp(replicas=1), CLUSTER, [view("m1"), view("m2", 1, healthy=False)], initialized=True)
    assert a.kind == "wait" and "m2" in a.message
    # the target itself may be unhealthy (its etcd member was removed on an earlier pass)
    a = rk.next_action(kcp(replicas=1), CLUSTER, [view("m1", healthy=False), view("m2", 1)], initialized=True)
    assert a.kind == "scale-down" and a.machine == "m1"


def test_failure_domain_spread() -> None:
    c = {"status": {"failureDomains": [{"name": "a", "controlPlane": True}, {"name": "b", "controlPlane": True},
                                       {"name": "w", "controlPlane": False}]}}
    assert rk.control_plane_failure_domains(c) == ["a", "b"]
    assert rk.next_action(kcp(), c, [], initialized=False).failure_domain == "a"
    a = rk.next_action(kcp(), c, [view("m1", fd="a")], initialized=True)
    assert a.failure_domain == "b"
    a = rk.next_action(kcp(), c, [view("m1", fd="a"), view("m2", fd="b")], initialized=True)
    assert a.failure_domain == "a"


def test_rollout_surge_then_remove_outdated() -> None:
    ms = [view("m1", 0, outdated=True), view("m2", 1, outdated=True), view("m3", 2, outdated=True)]
    a = rk.next_action(kcp(), CLUSTER, ms, initialized=True)
    assert a.kind == "scale-up" and a.rollout
    ms.append(view("m4", 3))
    a = rk.next_action(kcp(), CLUSTER, ms, initialized=True)
    assert a.kind == "scale-down" and a.machine == "m1" and a.rollout
    # maxSurge 0 removes first
    k0 = kcp(rollout={"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0}}})
    a = rk.next_action(k0, CLUSTER, ms[:3], initialized=True)
    assert a.kind == "scale-down" and a.machine == "m1"
    # a single replica always surges (never goes to zero)
    a = rk.next_action(kcp(replicas=1, rollout={"strategy": {"rollingUpdate": {"maxSurge": 0}}}), CLUSTER,
                       [view("m1", outdated=True)], initialized=True)
    assert a.kind == "scale-up"


def _machine(version: str = "v1.34.4", created: str = "2026-01-01T10:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": "m1", "creationTimestamp": created}, "spec": {"version": version}}


def _infra(cloned_from: str = "cp-v1") -> dict[str, Any]:
    return {"kind": "DockerMachine", "metadata": {"annotations": {"cluster.x-k8s.io/cloned-from-name": cloned_from}}}


def test_outdated_reasons() -> None:
    k = kcp()
    init_spec = rk.init_config_spec(k)
    join_spec = rk.join_config_spec(k)
    assert rk.outdated_reasons(k, _machine(), init_spec, _infra(), NOW) == []
    # the bootstrap controller filling in discovery is not a change
    join_spec["joinConfiguration"]["discovery"] = {"bootstrapToken": {"token": "abcdef.0123456789abcdef"}}
    assert rk.outdated_reasons(k, _machine(), join_spec, _infra(), NOW) == []
    assert "Version" in rk.outdated_reasons(k, _machine("v1.33.1"), init_spec, _infra(), NOW)[0]
    assert "DockerMachine" in rk.outdated_reasons(k, _machine(), init_spec, _infra("cp-v0"), NOW)[0]
    changed = kcp()
    changed["spec"]["kubeadmConfigSpec"]["postKubeadmCommands"] = ["echo changed"]
    assert rk.outdated_reasons(changed, _machine(), join_spec, _infra(), NOW) == ["KubeadmConfig is not up-to-date"]
    changed_join = kcp()
    changed_join["spec"]["kubeadmConfigSpec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] = []
    assert rk.outdated_reasons(changed_join, _machine(), join_spec, _infra(), NOW)
    assert rk.outdated_reasons(changed_join, _machine(), init_spec, _infra(), NOW) == []  # init machine: join n/a
    after = kcp(rollout={"after": "2026-01-01T11:00:00Z"})
    assert rk.outdated_reasons(after, _machine(), init_spec, _infra(), NOW) == [
        "Machine was created before spec.rollout.after"]
    future = kcp(rollout={"after": "2026-01-02T11:00:00Z"})
    assert rk.outdated_reasons(future, _machine(), init_spec, _infra(), NOW) == []


def test_init_and_join_config_specs() -> None:
    init = rk.init_config_spec(kcp())
    assert "joinConfiguration" not in init and init["initConfiguration"]
    join = rk.join_config_spec(kcp())
    assert "initConfiguration" not in join and join["joinConfiguration"]["controlPlane"] == {}
    # the CRD rejects an empty spec: format keeps it non-empty, and does not count as a change
    # (v1.36: no default feature gate either, see below)
    bare = kcp(kubeadmConfigSpec={}, version="v1.36.0")
    assert rk.init_config_spec(bare) == {"format": "cloud-config"}
    assert not rk.kubeadm_spec_differs(bare, rk.init_config_spec(bare))
    bare = kcp(kubeadmConfigSpec={})
    assert not rk.kubeadm_spec_differs(bare, rk.init_config_spec(bare))


GATE = "ControlPlaneKubeletLocalMode"


@pytest.mark.parametrize(("version", "gates", "want"), [
    ("v1.30.9", None, None),                       # the gate does not exist before 1.31
    ("v1.31.0", None, {GATE: True}),               # upstream's KCP turns it on (desiredstate.DefaultFeatureGates)
    ("v1.34.4", {"Other": True}, {"Other": True, GATE: True}),
    ("v1.34.4", {GATE: False}, {GATE: False}),     # set by the user: kept
    ("v1.36.0", None, None),                       # GA in 1.36: the gate is gone
])
def test_new_kubeadm_configs_get_the_kubelet_local_mode_gate(version: str, gates: dict[str, bool] | None,
                                                              want: dict[str, bool] | None) -> None:
    cc = {"featureGates": gates} if gates else {}
    k = kcp(version=version, kubeadmConfigSpec={"clusterConfiguration": cc})
    for spec in (rk.init_config_spec(k), rk.join_config_spec(k)):
        assert (spec.get("clusterConfiguration") or {}).get("featureGates") == want
        assert not rk.kubeadm_spec_differs(k, spec)


def test_status_helpers() -> None:
    assert rk.selector("c1") == "cluster.x-k8s.io/cluster-name=c1,cluster.x-k8s.io/control-plane"
    assert rk.min_version(["v1.34.4", "v1.33.10", "v1.34.0"]) == "v1.33.10"
    assert rk.even_replicas_message(kcp(replicas=2))
    assert rk.even_replicas_message(kcp(replicas=3)) is None
    labels = rk.machine_labels(kcp(), "c1")
    assert labels == {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/control-plane": "",
                      "cluster.x-k8s.io/control-plane-name": "c1-cp"}
    assert rk.max_surge(kcp()) == 1


def test_etcd_member_lookup() -> None:
    members = [{"ID": 1311536963209744723, "name": "n1"}, {"ID": 255, "name": "n2"}]
    m = rk.etcd_member_to_remove(members, "n2")
    assert m is not None and rk.member_id_hex(m) == "ff"
    assert rk.etcd_member_to_remove(members, "n3") is None


def test_health() -> None:
    v = view("m1")
    assert v.healthy and v.ready and v.available
    v.pods_ready["etcd"] = False
    assert not v.healthy
    v2 = view("m2", machine_ready=False)
    assert v2.healthy and not v2.ready


def test_remediation() -> None:
    ms = [view("m1"), view("m2", 1, healthy=False, remediate=True), view("m3", 2)]
    a = rk.next_action(kcp(), CLUSTER, ms, initialized=True)
    assert a.kind == "scale-down" and a.machine == "m2" and a.reason == "Remediating"
    # never the last machine; never while another member is unhealthy
    a = rk.next_action(kcp(replicas=1), CLUSTER, [view("m1", remediate=True)], initialized=True)
    assert a.kind == "wait" and a.reason == "CannotBeRemediated"
    ms = [view("m1", healthy=False), view("m2", 1, healthy=False, remediate=True), view("m3", 2)]
    a = rk.next_action(kcp(), CLUSTER, ms, initialized=True)
    assert a.kind == "wait" and a.reason == "RemediationDeferred" and "m1" in a.message


def test_kubeadm_config_map_follows_version_and_given_sections() -> None:
    import yaml
    cur = yaml.safe_dump({"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
                          "kubernetesVersion": "v1.34.4", "etcd": {"local": {"dataDir": "/var/lib/etcd"}},
                          "networking": {"podSubnet": "10.244.0.0/16"}})
    assert rk.updated_cluster_configuration(cur, kcp(version="v1.34.4", kubeadmConfigSpec={}), CLUSTER) is None
    new = rk.updated_cluster_configuration(cur, kcp(version="v1.35.0"), CLUSTER)
    assert new is not None
    doc = yaml.safe_load(new)
    assert doc["kubernetesVersion"] == "v1.35.0"
    assert doc["apiServer"] == {"certSANs": ["localhost"]}
    assert doc["etcd"] == {"local": {"dataDir": "/var/lib/etcd"}}  # not in the KCP spec: left alone
    assert doc["networking"] == {"podSubnet": "10.244.0.0/16"}


def test_machine_naming() -> None:
    assert rk.machine_name(kcp(), "c1", "abcde") == "c1-cp-abcde"
    named = kcp(machineNaming={"template": "{{ .cluster.name }}-cp-{{ .random }}"})
    assert rk.machine_name(named, "c1", "abcde") == "c1-cp-abcde"
    odd = kcp(machineNaming={"template": "{{ .unknown }}-x"})
    assert rk.machine_name(odd, "c1", "abcde") == "c1-cp-abcde"


def test_certificates_expiry_rollout() -> None:
    k = kcp(rollout={"before": {"certificatesExpiryDays": 30}})
    spec = rk.init_config_spec(k)
    soon = {"annotations": {rk.CERTIFICATES_EXPIRY_ANNOTATION: "2026-01-20T00:00:00Z"}}
    later = {"annotations": {rk.CERTIFICATES_EXPIRY_ANNOTATION: "2026-06-01T00:00:00Z"}}
    assert "Certificates expire on 2026-01-20" in rk.outdated_reasons(k, _machine(), spec, _infra(), NOW, soon)[0]
    assert rk.outdated_reasons(k, _machine(), spec, _infra(), NOW, later) == []
    assert rk.outdated_reasons(kcp(), _machine(), spec, _infra(), NOW, soon) == []
