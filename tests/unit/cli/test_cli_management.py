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
    assert kinds == ["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"]
    pod = docs[-1]["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "capd-py/controllers:dev"
    assert pod["containers"][0]["imagePullPolicy"] == "Never"
    assert pod["volumes"][0]["hostPath"]["path"] == "/run/capd-py/docker.sock"


def test_check_objects() -> None:
    check_objects([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}])
    with pytest.raises(ApplyError, match="document 2 .* lacks apiVersion, metadata.name"):
        check_objects([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}, {"kind": "X"}])
