"""Plain-data Cluster / Machine / KubeadmConfig objects for the bootstrap and KCP unit tests."""

from __future__ import annotations

import copy
from typing import Any

from capd_py.controllers.services.bootstrap_templates import BootstrapTemplates
from capd_py.reconcile import certs
from capd_py.testing import builders

CLUSTER: dict[str, Any] = {
    "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
    "metadata": {"name": "c1", "namespace": "ns", "uid": "cluster-uid"},
    "spec": {"controlPlaneEndpoint": {"host": "172.18.0.3", "port": 6443},
             "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]},
                                "services": {"cidrBlocks": ["10.96.0.0/12"]}, "serviceDomain": "cluster.local"},
             "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane",
                                 "name": "c1-cp"}},
    "status": {"initialization": {"infrastructureProvisioned": True}},
}

SPEC: dict[str, Any] = {
    "clusterConfiguration": {"apiServer": {"certSANs": ["localhost", "127.0.0.1"],
                                           "extraArgs": [{"name": "v", "value": "2"}]}},
    "initConfiguration": {"nodeRegistration": {
        "kubeletExtraArgs": [{"name": "cgroup-driver", "value": "cgroupfs"}],
        "taints": [], "criSocket": "unix:///run/containerd/containerd.sock"}},
    "joinConfiguration": {"nodeRegistration": {"name": "node-a",
                                               "kubeletExtraArgs": [{"name": "cgroup-driver", "value": "cgroupfs"}]}},
    "files": [{"path": "/etc/demo.conf", "content": "  indented first\n\nwith: colon # hash\n", "permissions": "0644"}],
    "preKubeadmCommands": ["echo 'pre' \"quoted\" && true"],
    "postKubeadmCommands": [
        "kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f /kind/manifests/default-cni.yaml"],
}


# the cloud-config templates as the controllers read them (templates/bootstrap)
TEMPLATES = BootstrapTemplates().get()


def cluster(**status: Any) -> dict[str, Any]:
    c = copy.deepcopy(CLUSTER)
    c["status"].update(status)
    return c


def machine(name: str = "m1", control_plane: bool = True, version: str = "v1.34.4") -> dict[str, Any]:
    return builders.machine(name, control_plane=control_plane, uid=f"{name}-uid", spec={
        "version": version,
        "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": name}}})


def config(spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    return {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
            "metadata": {"name": "m1", "namespace": "ns", "uid": "cfg-uid", "generation": 1,
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": copy.deepcopy(SPEC if spec is None else spec), "status": dict(status)}


_CERTS: dict[str, certs.KeyPair] = {}


def cluster_certs() -> dict[str, certs.KeyPair]:
    if not _CERTS:
        _CERTS.update({p: certs.generate(p) for p in certs.PURPOSES})
    return dict(_CERTS)
