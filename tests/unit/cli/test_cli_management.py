from __future__ import annotations

import pytest
import yaml

from capd_py.cli.apply import ApplyError, check_objects
from capd_py.cli.management import IGNORE_PREFLIGHT, in_cluster_manifest, kubeadm_config

pytestmark = pytest.mark.unit


def test_kubeadm_config_for_cgroup_v1_node() -> None:
    docs = {d["kind"]: d for d in yaml.safe_load_all(kubeadm_config("capd-mgmt-control-plane", "172.18.0.2",
                                                                  "v1.34.4"))}
    cc = docs["ClusterConfiguration"]
    assert cc["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert cc["kubernetesVersion"] == "v1.34.4" and cc["controlPlaneEndpoint"] == "172.18.0.2:6443"
    assert {"localhost", "127.0.0.1", "172.18.0.2"} <= set(cc["apiServer"]["certSANs"])
    assert cc["networking"] == {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"}
    kl = docs["KubeletConfiguration"]
    assert kl["cgroupDriver"] == "systemd" and kl["cgroupRoot"] == "/kubelet"
    assert kl["failCgroupV1"] is False and kl["failSwapOn"] is False
    assert kl["evictionHard"]["nodefs.available"] == "0%"
    init = docs["InitConfiguration"]
    assert init["localAPIEndpoint"]["advertiseAddress"] == "172.18.0.2"
    assert init["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "node-ip", "value": "172.18.0.2"}]
    assert docs["KubeProxyConfiguration"]["conntrack"]["maxPerCore"] == 0


def test_preflight_errors_ignored_like_kind() -> None:
    assert set(IGNORE_PREFLIGHT) == {"SystemVerification", "Swap", "NumCPU", "Mem",
                                     "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables"}


def test_in_cluster_manifest() -> None:
    docs = [d for d in yaml.safe_load_all(in_cluster_manifest("capd-py/controllers:dev", "restricted")) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRole", "Role", "RoleBinding",
                     "ClusterRoleBinding", "Service", "Deployment"]
    dep = docs[-1]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == "capd-py/controllers:dev"
    assert c["imagePullPolicy"] == "Never"
    assert pod["volumes"][0]["hostPath"]["path"] == "/run/capd-py/docker.sock"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["CAPD_PY_NETWORK_POOL"] == "172.16.0.0/12:20,10.208.0.0/12:20,fd00:ca9d:7000::/40:64"
    assert env["CAPD_PY_NETWORK"] == "capd-py"
    # two replicas, one active through the Lease (RBAC for it in the controllers' namespace)
    assert dep["spec"]["replicas"] == 2 and "--leader-elect" in c["args"]
    role = next(d for d in docs if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == dep["metadata"]["namespace"]
    assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                              "verbs": ["get", "list", "watch", "create", "update", "patch"]}]
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") for e in c["env"]}
    assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace"
    # the node container (named as the node) joins the workload clusters' networks
    assert env["CAPD_PY_CONTROLLERS_CONTAINER"] == "spec.nodeName" and pod["hostNetwork"] is True
    # the conversion webhook: the Service the CRDs name, in front of both replicas' port 9443 (no containerPort:
    # with hostNetwork it would be a hostPort and the second replica would not schedule)
    service = next(d for d in docs if d["kind"] == "Service")
    assert (service["metadata"]["namespace"], service["metadata"]["name"]) == ("capd-py-system", "capd-py-webhook")
    assert service["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert service["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": 9443, "protocol": "TCP"}]
    assert "ports" not in c
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
    crds = roles["capd-py-controllers"]["rules"]
    assert "patch" in next(r for r in crds if r["resources"] == ["customresourcedefinitions"])["verbs"]
    # as upstream: the controllers are bound to the aggregation of every aggregate-to-manager ClusterRole (a
    # third-party provider's included), capd-py's own rules being one of them
    aggregate = {"cluster.x-k8s.io/aggregate-to-manager": "true"}
    assert roles["capd-py-controllers"]["metadata"]["labels"] == aggregate
    assert roles["capd-py-controllers-aggregated"]["aggregationRule"] == {"clusterRoleSelectors": [
        {"matchLabels": aggregate}]}
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == "capd-py-controllers-aggregated"


def test_check_objects() -> None:
    check_objects([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}])
    with pytest.raises(ApplyError, match="document 2 .* lacks apiVersion, metadata.name"):
        check_objects([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, {"kind": "X"}])


def test_in_cluster_manifest_carries_the_network_pool_and_management_network() -> None:
    from capd_py.reconcile import subnets

    text = in_cluster_manifest("img", "restricted", "mgmt-net", subnets.parse_pool("10.1.0.0/16:24"))
    c = [d for d in yaml.safe_load_all(text) if d][-1]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["CAPD_PY_NETWORK_POOL"] == "10.1.0.0/16:24" and env["CAPD_PY_NETWORK"] == "mgmt-net"


def test_a_bad_network_pool_is_a_management_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from capd_py.cli.management import ManagementError, network_pool

    monkeypatch.setenv("CAPD_PY_NETWORK_POOL", "10.1.0.0/16:8")
    with pytest.raises(ManagementError, match="CAPD_PY_NETWORK_POOL: '10.1.0.0/16:8'"):
        network_pool()


def test_feature_gates_from_clusterctl_variables_reach_the_controllers() -> None:
    from capd_py.cli.management import ManagementError, feature_gates
    assert feature_gates({}) == ""
    assert feature_gates({"EXP_MACHINE_TAINT_PROPAGATION": "true"}) == "MachineTaintPropagation=true"
    # CAPD_PY_FEATURE_GATES first, the variables after (clusterctl's variables win, as its manifest substitutes them)
    assert feature_gates({"CAPD_PY_FEATURE_GATES": "MachinePool=false", "EXP_MACHINE_POOL": "true"}) == ""
    # EXP_RUNTIME_SDK=true turns the RuntimeSDK gate on (off by default, as upstream)
    assert feature_gates({"EXP_RUNTIME_SDK": "true"}) == "RuntimeSDK=true"
    assert feature_gates({"EXP_RUNTIME_SDK": "false"}) == ""  # the default: nothing to say
    with pytest.raises(ManagementError, match="feature gates: feature gate InPlaceUpdates=true is not supported"):
        feature_gates({"EXP_IN_PLACE_UPDATES": "true"})
    docs = [d for d in yaml.safe_load_all(in_cluster_manifest("img", "restricted", gates="MachinePool=false")) if d]
    dep = next(d for d in docs if d["kind"] == "Deployment")
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["CAPD_PY_FEATURE_GATES"] == "MachinePool=false"
