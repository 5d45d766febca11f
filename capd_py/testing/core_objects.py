"""Objects the integration tests that drive reconcile functions against a real API server build again and again:
a Cluster with its DockerCluster and worker templates, MachineSets / MachineDeployments, Nodes of the envtest
"workload cluster", a provisioned Machine, a KubeadmControlPlane."""

from __future__ import annotations

import base64
from typing import Any

from capd_py.api import gvk
from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    DOCKER_MACHINE_TEMPLATE,
    KUBEADM_CONFIG,
    KUBEADM_CONFIG_TEMPLATE,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_SET,
    NODE,
    SECRET,
)
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import machine as c_machine
from capd_py.controllers import machineset as c_ms
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube

Obj = dict[str, Any]


def meta(name: str, ns: str, **kw: Any) -> Obj:
    return {"name": name, "namespace": ns, **kw}


def cluster_obj(ns: str, name: str = "c1", cp: bool = True) -> Obj:
    spec: Obj = {"infrastructureRef": {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerCluster", "name": name}}
    if cp:
        spec["controlPlaneRef"] = {"apiGroup": gvk.CONTROLPLANE_GROUP, "kind": "KubeadmControlPlane",
                                   "name": f"{name}-cp"}
    return {"apiVersion": CLUSTER.api_version, "kind": "Cluster", "metadata": meta(name, ns), "spec": spec}


def templates(ns: str) -> list[tuple[gvk.GVK, Obj]]:
    return [
        (KUBEADM_CONFIG_TEMPLATE, {"apiVersion": KUBEADM_CONFIG_TEMPLATE.api_version, "kind": "KubeadmConfigTemplate",
                                   "metadata": meta("workers", ns),
                                   "spec": {"template": {"spec": {"joinConfiguration": {"nodeRegistration": {
                                       "kubeletExtraArgs": [{"name": "v", "value": "2"}]}}}}}}),
        (DOCKER_MACHINE_TEMPLATE, {"apiVersion": DOCKER_MACHINE_TEMPLATE.api_version, "kind": "DockerMachineTemplate",
                                   "metadata": meta("workers", ns),
                                   "spec": {"template": {"spec": {"extraMounts": []}}}}),
    ]


def machine_template(version: str = "v1.34.4", labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"labels": {"pool": "a", **(labels or {})}},
            "spec": {"clusterName": "c1", "version": version,
                     "bootstrap": {"configRef": {"apiGroup": gvk.BOOTSTRAP_GROUP, "kind": "KubeadmConfigTemplate",
                                                 "name": "workers"}},
                     "infrastructureRef": {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachineTemplate",
                                           "name": "workers"}}}


def machineset_obj(ns: str, replicas: int, order: str | None = None) -> Obj:
    spec: Obj = {"clusterName": "c1", "replicas": replicas, "selector": {"matchLabels": {"pool": "a"}},
                 "template": machine_template()}
    if order:
        spec["deletion"] = {"order": order}
    return {"apiVersion": MACHINE_SET.api_version, "kind": "MachineSet", "metadata": meta("ms1", ns), "spec": spec}


def md_obj(ns: str, replicas: int) -> Obj:
    return {"apiVersion": MACHINE_DEPLOYMENT.api_version, "kind": "MachineDeployment", "metadata": meta("md1", ns),
            "spec": {"clusterName": "c1", "replicas": replicas, "selector": {"matchLabels": {"pool": "a"}},
                     "template": machine_template(),
                     "rollout": {"strategy": {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}}}}


async def setup_cluster(kube: Kube, ns: str, cp: bool = False) -> Obj:
    c = await kube.create(CLUSTER, cluster_obj(ns, cp=cp))
    await kube.create(DOCKER_CLUSTER, {"apiVersion": DOCKER_CLUSTER.api_version, "kind": "DockerCluster",
                                       "metadata": meta("c1", ns), "spec": {}})
    for g, o in templates(ns):
        await kube.create(g, o)
    return c


async def machines(kube: Kube, ns: str, live_only: bool = True) -> list[Obj]:
    out = await kube.list(MACHINE, ns)
    if live_only:
        out = [m for m in out if not m["metadata"].get("deletionTimestamp")]
    return sorted(out, key=lambda m: m["metadata"]["name"])


async def workload_secret(kube: Kube, envtest: Any, ns: str) -> None:
    await kube.create(SECRET, {"apiVersion": "v1", "kind": "Secret", "metadata": meta("c1-kubeconfig", ns,
                                                                                       labels={CLUSTER_NAME: "c1"}),
                               "data": {"value": base64.b64encode(envtest.kubeconfig.encode()).decode()}})


async def make_node(kube: Kube, name: str, provider_id: str, ready: str = "True",
                    since: str = "2026-01-01T00:00:00Z") -> Obj:
    node = await kube.create(NODE, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                    "spec": {"providerID": provider_id}})
    st = {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady", "message": "",
                          "lastHeartbeatTime": since, "lastTransitionTime": since}],
          "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6", "osImage": "x",
                       "containerRuntimeVersion": "containerd://2", "kubeletVersion": "v1.34.4",
                       "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}}
    out = await kube.patch_status(NODE, node, st)
    assert out is not None
    return out


async def provision_machine(kube: Kube, ctx: Ctx, ns: str, name: str, provider_id: str) -> None:
    await c_machine.reconcile(ctx, ns, name)
    kc = await kube.get(KUBEADM_CONFIG, ns, name)
    assert kc is not None
    await kube.patch_status(KUBEADM_CONFIG, kc, {"initialization": {"dataSecretCreated": True},
                                                  "dataSecretName": f"{name}-bootstrap"})
    dm = await kube.merge_patch(DOCKER_MACHINE, ns, name, {"spec": {"providerID": provider_id}})
    await kube.patch_status(DOCKER_MACHINE, dm, {"initialization": {"provisioned": True}})
    await c_machine.reconcile(ctx, ns, name)


async def machine_with_node(kube: Kube, ctx: Ctx, envtest: Any, ns: str) -> tuple[str, str, str]:
    """A Cluster whose workload is the envtest, a MachineSet of 1 and its Machine provisioned with a Node: the
    Machine's name, the Node's name and its providerID."""
    await setup_cluster(kube, ns)
    await workload_secret(kube, envtest, ns)
    await kube.create(MACHINE_SET, machineset_obj(ns, 1))
    await c_ms.reconcile(ctx, ns, "ms1")
    (m,) = await machines(kube, ns)
    name = m["metadata"]["name"]
    node_name, pid = f"{ns}-node", f"docker:////{ns}-node"
    await make_node(kube, node_name, pid)
    await provision_machine(kube, ctx, ns, name, pid)
    return name, node_name, pid


# Nothing listens here: workload calls fail fast (connection refused) instead of timing out.
ENDPOINT = {"host": "127.0.0.1", "port": 1}


async def make_cluster(kube: Kube, ns: str, *, cp_ref: bool, initialized: bool = False,
                       endpoint: Obj | None = None) -> Obj:
    spec: Obj = {"infrastructureRef": {"apiGroup": gvk.INFRA_GROUP, "kind": "DockerCluster", "name": "c1"},
                 "controlPlaneEndpoint": endpoint or ENDPOINT,
                 "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]},
                                    "services": {"cidrBlocks": ["10.96.0.0/12"]}}}
    if cp_ref:
        spec["controlPlaneRef"] = {"apiGroup": gvk.CONTROLPLANE_GROUP, "kind": "KubeadmControlPlane", "name": "c1-cp"}
    c = await kube.create(CLUSTER, {"apiVersion": CLUSTER.api_version, "kind": "Cluster",
                                    "metadata": {"name": "c1", "namespace": ns}, "spec": spec})
    init: Obj = {"infrastructureProvisioned": True}
    if initialized:
        init["controlPlaneInitialized"] = True
    c = await kube.patch_status(CLUSTER, c, {"initialization": init}) or c
    return c


async def make_kcp(kube: Kube, ns: str, cluster: Obj, replicas: int = 3) -> Obj:
    await kube.create(DOCKER_MACHINE_TEMPLATE, {
        "apiVersion": DOCKER_MACHINE_TEMPLATE.api_version, "kind": "DockerMachineTemplate",
        "metadata": {"name": "cp-v1", "namespace": ns},
        "spec": {"template": {"spec": {"extraMounts": []}}}})
    return await kube.create(KUBEADM_CONTROL_PLANE, {
        "apiVersion": KUBEADM_CONTROL_PLANE.api_version, "kind": "KubeadmControlPlane",
        "metadata": {"name": "c1-cp", "namespace": ns,
                     "ownerReferences": [{"apiVersion": CLUSTER.api_version, "kind": "Cluster", "name": "c1",
                                          "uid": cluster["metadata"]["uid"]}]},
        "spec": {"replicas": replicas, "version": "v1.34.4",
                 "machineTemplate": {"spec": {"infrastructureRef": {
                     "apiGroup": gvk.INFRA_GROUP, "kind": "DockerMachineTemplate", "name": "cp-v1"}}},
                 "kubeadmConfigSpec": {
                     "clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]}},
                     "initConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [
                         {"name": "cgroup-driver", "value": "cgroupfs"}]}},
                     "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [
                         {"name": "cgroup-driver", "value": "cgroupfs"}]}},
                     "postKubeadmCommands": ["kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f "
                                             "/kind/manifests/default-cni.yaml"]}}})
