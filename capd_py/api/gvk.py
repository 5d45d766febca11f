"""The resource kinds capd-py serves or reads, with their REST coordinates."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CLUSTER_GROUP = "cluster.x-k8s.io"
BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"
CONTROLPLANE_GROUP = "controlplane.cluster.x-k8s.io"
INFRA_GROUP = "infrastructure.cluster.x-k8s.io"
ADDONS_GROUP = "addons.cluster.x-k8s.io"
RUNTIME_GROUP = "runtime.cluster.x-k8s.io"  # the Runtime SDK's ExtensionConfig (RuntimeSDK feature gate)
CLUSTERCTL_GROUP = "clusterctl.cluster.x-k8s.io"  # upstream clusterctl's provider inventory
VERSION = "v1beta2"


@dataclass(frozen=True)
class GVK:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


CRD = GVK("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False)
CLUSTER = GVK(CLUSTER_GROUP, VERSION, "Cluster", "clusters")
MACHINE = GVK(CLUSTER_GROUP, VERSION, "Machine", "machines")
MACHINE_SET = GVK(CLUSTER_GROUP, VERSION, "MachineSet", "machinesets")
MACHINE_DEPLOYMENT = GVK(CLUSTER_GROUP, VERSION, "MachineDeployment", "machinedeployments")
MACHINE_HEALTH_CHECK = GVK(CLUSTER_GROUP, VERSION, "MachineHealthCheck", "machinehealthchecks")
MACHINE_POOL = GVK(CLUSTER_GROUP, VERSION, "MachinePool", "machinepools")
CLUSTER_CLASS = GVK(CLUSTER_GROUP, VERSION, "ClusterClass", "clusterclasses")
MACHINE_DRAIN_RULE = GVK(CLUSTER_GROUP, VERSION, "MachineDrainRule", "machinedrainrules")
KUBEADM_CONFIG = GVK(BOOTSTRAP_GROUP, VERSION, "KubeadmConfig", "kubeadmconfigs")
KUBEADM_CONFIG_TEMPLATE = GVK(BOOTSTRAP_GROUP, VERSION, "KubeadmConfigTemplate", "kubeadmconfigtemplates")
KUBEADM_CONTROL_PLANE = GVK(CONTROLPLANE_GROUP, VERSION, "KubeadmControlPlane", "kubeadmcontrolplanes")
KUBEADM_CONTROL_PLANE_TEMPLATE = GVK(
    CONTROLPLANE_GROUP, VERSION, "KubeadmControlPlaneTemplate", "kubeadmcontrolplanetemplates"
)
DOCKER_CLUSTER = GVK(INFRA_GROUP, VERSION, "DockerCluster", "dockerclusters")
DOCKER_CLUSTER_TEMPLATE = GVK(INFRA_GROUP, VERSION, "DockerClusterTemplate", "dockerclustertemplates")
DOCKER_MACHINE = GVK(INFRA_GROUP, VERSION, "DockerMachine", "dockermachines")
DOCKER_MACHINE_TEMPLATE = GVK(INFRA_GROUP, VERSION, "DockerMachineTemplate", "dockermachinetemplates")
DOCKER_MACHINE_POOL = GVK(INFRA_GROUP, VERSION, "DockerMachinePool", "dockermachinepools")
DOCKER_MACHINE_POOL_TEMPLATE = GVK(INFRA_GROUP, VERSION, "DockerMachinePoolTemplate", "dockermachinepooltemplates")
# upstream v1.14's Dev* kinds: one kind per role with a `spec.backend` (docker | inMemory) (docs/dev-kinds.md)
DEV_CLUSTER = GVK(INFRA_GROUP, VERSION, "DevCluster", "devclusters")
DEV_CLUSTER_TEMPLATE = GVK(INFRA_GROUP, VERSION, "DevClusterTemplate", "devclustertemplates")
DEV_MACHINE = GVK(INFRA_GROUP, VERSION, "DevMachine", "devmachines")
DEV_MACHINE_TEMPLATE = GVK(INFRA_GROUP, VERSION, "DevMachineTemplate", "devmachinetemplates")
DEV_MACHINE_POOL = GVK(INFRA_GROUP, VERSION, "DevMachinePool", "devmachinepools")
DEV_MACHINE_POOL_TEMPLATE = GVK(INFRA_GROUP, VERSION, "DevMachinePoolTemplate", "devmachinepooltemplates")
DEV_KINDS: tuple[GVK, ...] = (DEV_CLUSTER, DEV_CLUSTER_TEMPLATE, DEV_MACHINE, DEV_MACHINE_TEMPLATE, DEV_MACHINE_POOL,
                              DEV_MACHINE_POOL_TEMPLATE)
CLUSTER_RESOURCE_SET = GVK(ADDONS_GROUP, VERSION, "ClusterResourceSet", "clusterresourcesets")
CLUSTER_RESOURCE_SET_BINDING = GVK(ADDONS_GROUP, VERSION, "ClusterResourceSetBinding", "clusterresourcesetbindings")
# cluster-scoped as upstream's; not in ALL_CAPI: it belongs to no Cluster (move, describe and export leave it be)
EXTENSION_CONFIG = GVK(RUNTIME_GROUP, VERSION, "ExtensionConfig", "extensionconfigs", namespaced=False)

SECRET = GVK("", "v1", "Secret", "secrets")
NODE = GVK("", "v1", "Node", "nodes", namespaced=False)
POD = GVK("", "v1", "Pod", "pods")
PERSISTENT_VOLUME = GVK("", "v1", "PersistentVolume", "persistentvolumes", namespaced=False)
VOLUME_ATTACHMENT = GVK("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", namespaced=False)
DAEMON_SET = GVK("apps", "v1", "DaemonSet", "daemonsets")
EVENT = GVK("", "v1", "Event", "events")
CONFIG_MAP = GVK("", "v1", "ConfigMap", "configmaps")
LEASE = GVK("coordination.k8s.io", "v1", "Lease", "leases")
NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
# not served by capd-py's controllers: the record upstream clusterctl keeps of what it installed (docs/clusterctl.md)
PROVIDER = GVK(CLUSTERCTL_GROUP, "v1alpha3", "Provider", "providers")

ALL_CAPI: tuple[GVK, ...] = (
    CLUSTER, MACHINE, MACHINE_SET, MACHINE_DEPLOYMENT, MACHINE_HEALTH_CHECK,
    KUBEADM_CONFIG, KUBEADM_CONFIG_TEMPLATE, KUBEADM_CONTROL_PLANE, KUBEADM_CONTROL_PLANE_TEMPLATE,
    DOCKER_CLUSTER, DOCKER_CLUSTER_TEMPLATE, DOCKER_MACHINE, DOCKER_MACHINE_TEMPLATE,
    CLUSTER_RESOURCE_SET, CLUSTER_RESOURCE_SET_BINDING,
    MACHINE_POOL, DOCKER_MACHINE_POOL, DOCKER_MACHINE_POOL_TEMPLATE,
    CLUSTER_CLASS,
    *DEV_KINDS,
)

_BY_GROUP_KIND = {(g.group, g.kind): g
                  for g in (*ALL_CAPI, MACHINE_DRAIN_RULE, EXTENSION_CONFIG, SECRET, NODE, POD, CONFIG_MAP)}


def by_group_kind(group: str, kind: str) -> GVK | None:
    """Resolve a v1beta2 contract reference ({apiGroup, kind, name}) to the kind we know."""
    return _BY_GROUP_KIND.get((group, kind))


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def of_object(obj: dict[str, Any]) -> GVK | None:
    """The kind we know for an unstructured object (its apiVersion's group + kind)."""
    return by_group_kind(group_of(obj["apiVersion"]), obj["kind"])
