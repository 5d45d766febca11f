"""Bootstrap cloud-config rendering: parse the YAML, check the kubeadm documents."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from capd_py.reconcile import certs, cloudinit
from capd_py.reconcile import kubeadmconfig as kc

try:
    from bootstrap_fixtures import CLUSTER, SPEC, TEMPLATES, cluster_certs
except ImportError:  # pragma: no cover - when tests/unit/reconcile becomes a package
    from .bootstrap_fixtures import CLUSTER, SPEC, TEMPLATES, cluster_certs  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def _files(cloud: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in cloud["write_files"]}


def _docs(text: str) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in yaml.safe_load_all(text) if d}


def render_init(spec: dict[str, Any] = SPEC) -> dict[str, Any]:
    out = kc.render_init(copy.deepcopy(spec), CLUSTER, "v1.34.4", cluster_certs(), templates=TEMPLATES)
    assert out.startswith("#cloud-config\n")
    return dict(yaml.safe_load(out))


def test_init_cloud_config() -> None:
    cloud = render_init()
    files = _files(cloud)
    for p in ("/etc/kubernetes/pki/ca.crt", "/etc/kubernetes/pki/ca.key", "/etc/kubernetes/pki/etcd/ca.key",
              "/etc/kubernetes/pki/front-proxy-ca.crt", "/etc/kubernetes/pki/sa.pub", "/etc/kubernetes/pki/sa.key"):
        assert p in files
    assert files["/etc/kubernetes/pki/ca.crt"]["content"] == cluster_certs()["ca"].cert.decode()
    assert files["/etc/kubernetes/pki/sa.key"]["content"] == cluster_certs()["sa"].key.decode()
    assert files["/etc/demo.conf"]["content"] == SPEC["files"][0]["content"]  # tricky content survives
    docs = _docs(files[kc.INIT_CONFIG_PATH]["content"])
    cc, ic = docs["ClusterConfiguration"], docs["InitConfiguration"]
    assert cc["apiVersion"] == ic["apiVersion"] == "kubeadm.k8s.io/v1beta4"
    assert cc["controlPlaneEndpoint"] == "172.18.0.3:6443"
    assert cc["clusterName"] == "c1"
    assert cc["kubernetesVersion"] == "v1.34.4"
    assert cc["networking"] == {"dnsDomain": "cluster.local", "podSubnet": "10.244.0.0/16",
                                "serviceSubnet": "10.96.0.0/12"}
    assert cc["apiServer"]["certSANs"] == ["localhost", "127.0.0.1"]
    assert cc["apiServer"]["extraArgs"] == [{"name": "v", "value": "2"}]
    assert ic["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "cgroup-driver", "value": "cgroupfs"}]
    assert ic["nodeRegistration"]["taints"] == []
    run = cloud["runcmd"]
    assert run[0] == SPEC["preKubeadmCommands"][0]
    assert run[1].startswith(f"kubeadm init --config {kc.INIT_CONFIG_PATH} --ignore-preflight-errors=")
    for check in ("SystemVerification", "Swap", "FileContent--proc-sys-net-bridge-bridge-nf-call-iptables"):
        assert check in run[1]
    assert run[1].endswith(f"echo success > {kc.SENTINEL_PATH}")
    assert run[2] == SPEC["postKubeadmCommands"][0]
    assert "users" not in cloud and "bootcmd" not in cloud


def test_worker_join_has_real_ca_hash_and_no_keys() -> None:
    cs = cluster_certs()
    token = "abcdef.0123456789abcdef"
    out = kc.render_join(SPEC, CLUSTER, control_plane=False, token=token, ca_cert=cs["ca"].cert,
                         templates=TEMPLATES)
    cloud = yaml.safe_load(out)
    files = _files(cloud)
    assert not any(p.startswith("/etc/kubernetes/pki") for p in files)
    jc = _docs(files[kc.JOIN_CONFIG_PATH]["content"])["JoinConfiguration"]
    bt = jc["discovery"]["bootstrapToken"]
    assert bt["token"] == token
    assert bt["apiServerEndpoint"] == "172.18.0.3:6443"
    assert bt["caCertHashes"] == [certs.ca_cert_hash(cs["ca"].cert)]
    assert "unsafeSkipCAVerification" not in bt
    assert "controlPlane" not in jc
    assert jc["nodeRegistration"]["name"] == "node-a"
    assert cloud["runcmd"][1].startswith(f"kubeadm join --config {kc.JOIN_CONFIG_PATH}")


def test_control_plane_join_carries_certs() -> None:
    cs = cluster_certs()
    out = kc.render_join(SPEC, CLUSTER, control_plane=True, token="abcdef.0123456789abcdef", ca_cert=cs["ca"].cert,
                         certs=cs, templates=TEMPLATES)
    files = _files(yaml.safe_load(out))
    assert files["/etc/kubernetes/pki/etcd/ca.key"]["content"] == cs["etcd"].key.decode()
    assert files["/etc/kubernetes/pki/front-proxy-ca.key"]["permissions"] == "0600"
    jc = _docs(files[kc.JOIN_CONFIG_PATH]["content"])["JoinConfiguration"]
    assert jc["controlPlane"] == {}


def test_spec_discovery_wins_over_defaults() -> None:
    spec = copy.deepcopy(SPEC)
    spec["joinConfiguration"]["discovery"] = {"bootstrapToken": {"token": "abcdef.0123456789abcdef",
                                                                 "apiServerEndpoint": "lb:7443",
                                                                 "caCertHashes": ["sha256:00"]}}
    jc = kc.join_configuration(spec, control_plane=False, endpoint={"host": "x", "port": 1}, token="zzzzzz.zzzz",
                               ca_cert=cluster_certs()["ca"].cert)
    assert jc["discovery"]["bootstrapToken"] == {"token": "abcdef.0123456789abcdef", "apiServerEndpoint": "lb:7443",
                                                 "caCertHashes": ["sha256:00"]}


def test_timeouts_users_bootcmd_verbosity() -> None:
    spec = copy.deepcopy(SPEC)
    spec["initConfiguration"]["timeouts"] = {"controlPlaneComponentHealthCheckSeconds": 240}
    spec["clusterConfiguration"]["certificateValidityPeriodDays"] = 30
    spec["users"] = [{"name": "capi", "sudo": "ALL=(ALL) NOPASSWD:ALL", "sshAuthorizedKeys": ["ssh-ed25519 AAA"],
                      "lockPassword": False}]
    spec["bootCommands"] = ["echo boot"]
    spec["verbosity"] = 5
    cloud = render_init(spec)
    docs = _docs(_files(cloud)[kc.INIT_CONFIG_PATH]["content"])
    assert docs["InitConfiguration"]["timeouts"] == {"controlPlaneComponentHealthCheck": "240s"}
    assert docs["ClusterConfiguration"]["certificateValidityPeriod"] == "720h0m0s"
    assert cloud["users"] == [{"name": "capi", "sudo": "ALL=(ALL) NOPASSWD:ALL", "lock_passwd": False,
                               "ssh_authorized_keys": ["ssh-ed25519 AAA"]}]
    assert cloud["bootcmd"] == ["echo boot"]
    assert " --v 5 " in cloud["runcmd"][1]


def test_resolve_files_from_secret() -> None:
    spec = {"files": [{"path": "/a", "contentFrom": {"secret": {"name": "s", "key": "k"}}, "permissions": "0600"},
                      {"path": "/b", "content": "x"}]}
    assert kc.spec_files_needing_secrets(spec) == [(0, "s", "k")]
    out = kc.resolve_files(spec, {("s", "k"): "secret text"})
    assert out == [{"path": "/a", "content": "secret text", "permissions": "0600"}, {"path": "/b", "content": "x"}]
    with pytest.raises(KeyError):
        kc.resolve_files(spec, {})


@pytest.mark.parametrize("content", ["", "plain", "trailing\n", "two\n\n", " lead", "\ttab", "a\r\nb", "x\n \ny",
                                     "unicode ✓\n", "# not a comment\n---\n...\n", "{{ not jinja }}", "\x00bin"])
def test_any_file_content_round_trips(content: str) -> None:
    spec = {"files": [{"path": "/f", "content": content}]}
    cloud = yaml.safe_load(kc.render_join(spec, CLUSTER, control_plane=False, token="abcdef.0123456789abcdef",
                                          ca_cert=cluster_certs()["ca"].cert, templates=TEMPLATES))
    assert _files(cloud)["/f"]["content"] == content


def test_docker_provider_parses_the_output() -> None:
    out = kc.render_init(SPEC, CLUSTER, "v1.34.4", cluster_certs(), templates=TEMPLATES)
    parsed = cloudinit.parse(out)
    paths = [f.path for f in parsed.write_files]
    assert kc.INIT_CONFIG_PATH in paths and "/etc/kubernetes/pki/ca.key" in paths
    assert any("kubeadm init" in " ".join(c) for c in parsed.runcmd)


def test_data_secret() -> None:
    cfg = {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
           "metadata": {"name": "m1", "namespace": "ns", "uid": "u"}}
    s = kc.data_secret(cfg, "c1", "#cloud-config\n")
    assert s["type"] == "cluster.x-k8s.io/secret"
    assert s["metadata"]["labels"] == {"cluster.x-k8s.io/cluster-name": "c1"}
    assert s["metadata"]["ownerReferences"][0]["kind"] == "KubeadmConfig"
    assert s["metadata"]["ownerReferences"][0]["controller"] is True
    assert set(s["data"]) == {"value", "format"}
