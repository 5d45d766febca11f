"""v1beta1 -> v1beta2 field by field for the fields whose shape changed (upstream release-1.13's rules), on
objects a v1beta1 client writes (no conversion-data annotation)."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.conversion import from_hub, to_hub

try:
    from schema_check import check_object
except ImportError:  # pragma: no cover - package-style collection
    from .schema_check import check_object  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

T = "2026-12-03T08:00:00Z"
OLD_READY = {"type": "Ready", "status": "True", "lastTransitionTime": T}
NEW_READY = {"type": "Ready", "status": "True", "lastTransitionTime": T, "reason": "Ready", "message": ""}
META = {"name": "x", "namespace": "ns"}

CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("Machine", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine", "metadata": META,
        "spec": {"clusterName": "c", "bootstrap": {"configRef": {
            "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "x",
            "namespace": "ns", "uid": "u"}},
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerMachine",
                                  "name": "x", "namespace": "ns"},
            "nodeDrainTimeout": "10m0s", "nodeVolumeDetachTimeout": "5m", "nodeDeletionTimeout": "10s"},
        "status": {"bootstrapReady": True, "infrastructureReady": False, "phase": "Running",
                   "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "u"},
                   "failureReason": "r", "conditions": [OLD_READY], "v1beta2": {"conditions": [NEW_READY]}},
    }, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine", "metadata": META,
        "spec": {"clusterName": "c", "bootstrap": {"configRef": {
            "apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "x"}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine", "name": "x"},
            "deletion": {"nodeDrainTimeoutSeconds": 600, "nodeVolumeDetachTimeoutSeconds": 300,
                         "nodeDeletionTimeoutSeconds": 10}},
        "status": {"initialization": {"bootstrapDataSecretCreated": True}, "phase": "Running", "nodeRef": {"name": "n"},
                   "conditions": [NEW_READY],
                   "deprecated": {"v1beta1": {"failureReason": "r", "conditions": [OLD_READY]}}},
    }),
    ("MachineDeployment", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "metadata": META,
        "spec": {"clusterName": "c", "replicas": 2, "minReadySeconds": 0, "paused": False, "revisionHistoryLimit": 1,
                 "progressDeadlineSeconds": 600, "rolloutAfter": T, "selector": {"matchLabels": {"a": "b"}},
                 "machineNamingStrategy": {"template": "{{ .machineSet.name }}-{{ .random }}"},
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0,
                                                                         "deletePolicy": "Oldest"},
                              "remediation": {"maxInFlight": 3}},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                     "clusterName": "c", "bootstrap": {"dataSecretName": "s"},
                     "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                           "kind": "DockerMachineTemplate", "name": "t"}}}},
        "status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 2,
                   "unavailableReplicas": 1, "v1beta2": {"readyReplicas": 2, "availableReplicas": 2,
                                                         "upToDateReplicas": 2}},
    }, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": META,
        "spec": {"clusterName": "c", "replicas": 2, "selector": {"matchLabels": {"a": "b"}},
                 "machineNaming": {"template": "{{ .machineSet.name }}-{{ .random }}"},
                 "rollout": {"after": T, "strategy": {"type": "RollingUpdate",
                                                      "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}},
                 "deletion": {"order": "Oldest"}, "remediation": {"maxInFlight": 3},
                 "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
                     "clusterName": "c", "bootstrap": {"dataSecretName": "s"}, "minReadySeconds": 0,
                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                           "kind": "DockerMachineTemplate", "name": "t"}}}},
        "status": {"replicas": 2, "readyReplicas": 2, "availableReplicas": 2, "upToDateReplicas": 2,
                   "deprecated": {"v1beta1": {"readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 2,
                                              "unavailableReplicas": 1}}},
    }),
    ("MachineSet", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "metadata": META,
        "spec": {"clusterName": "c", "minReadySeconds": 0, "deletePolicy": "Newest", "selector": {},
                 "template": {"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s"},
                                       "infrastructureRef": {
                                           "kind": "DockerMachineTemplate", "name": "t",
                                           "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1"}}}},
        "status": {"fullyLabeledReplicas": 1},
    }, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "metadata": META,
        "spec": {"clusterName": "c", "deletion": {"order": "Newest"}, "selector": {},
                 "template": {"spec": {"clusterName": "c", "bootstrap": {"dataSecretName": "s"},
                                       "infrastructureRef": {"kind": "DockerMachineTemplate", "name": "t",
                                                             "apiGroup": "infrastructure.cluster.x-k8s.io"}}}},
        "status": {"deprecated": {"v1beta1": {"fullyLabeledReplicas": 1}}},
    }),
    ("MachineHealthCheck", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineHealthCheck", "metadata": META,
        "spec": {"clusterName": "c", "selector": {"matchLabels": {"a": "b"}}, "maxUnhealthy": "40%",
                 "unhealthyRange": "[1-2]", "nodeStartupTimeout": "10m",
                 "unhealthyConditions": [{"type": "Ready", "status": "Unknown", "timeout": "300s"}],
                 "remediationTemplate": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                         "kind": "DockerMachineTemplate", "name": "r", "namespace": "ns"}},
    }, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck", "metadata": META,
        "spec": {"clusterName": "c", "selector": {"matchLabels": {"a": "b"}},
                 "checks": {"nodeStartupTimeoutSeconds": 600,
                            "unhealthyNodeConditions": [{"type": "Ready", "status": "Unknown", "timeoutSeconds": 300}]},
                 "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": "40%", "unhealthyInRange": "[1-2]"},
                                 "templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                 "kind": "DockerMachineTemplate", "name": "r"}}},
    }),
    ("Cluster", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "metadata": META,
        "spec": {"paused": True, "topology": {
            "class": "qs", "classNamespace": "classes", "version": "v1.34.4", "rolloutAfter": T,
            "controlPlane": {"replicas": 1, "nodeDrainTimeout": "1m",
                             "machineHealthCheck": {"enable": True, "maxUnhealthy": 1}},
            "workers": {"machineDeployments": [{
                "class": "w", "name": "md", "strategy": {"remediation": {"maxInFlight": 1},
                                                         "rollingUpdate": {"deletePolicy": "Random"}},
                "variables": {"overrides": [{"name": "v", "value": 1, "definitionFrom": "p"}]}}]}}},
        "status": {"controlPlaneReady": True, "infrastructureReady": True, "phase": "Provisioned",
                   "failureDomains": {"b": {"controlPlane": True}, "a": {"attributes": {"k": "v"}}},
                   "v1beta2": {"controlPlane": {"replicas": 1}, "workers": {"replicas": 0}}},
    }, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": META,
        "spec": {"paused": True, "topology": {
            "classRef": {"name": "qs", "namespace": "classes"}, "version": "v1.34.4",
            "controlPlane": {"replicas": 1, "deletion": {"nodeDrainTimeoutSeconds": 60},
                             "healthCheck": {"enabled": True,
                                             "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": 1}}}},
            "workers": {"machineDeployments": [{
                "class": "w", "name": "md", "deletion": {"order": "Random"},
                "healthCheck": {"remediation": {"maxInFlight": 1}},
                "variables": {"overrides": [{"name": "v", "value": 1}]}}]}}},
        "status": {"initialization": {"controlPlaneInitialized": True, "infrastructureProvisioned": True},
                   "phase": "Provisioned", "controlPlane": {"replicas": 1}, "workers": {"replicas": 0},
                   "failureDomains": [{"name": "a", "controlPlane": False, "attributes": {"k": "v"}},
                                      {"name": "b", "controlPlane": True}]},
    }),
    ("KubeadmConfig", {
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "metadata": META,
        "spec": {"useExperimentalRetryJoin": True,
                 "clusterConfiguration": {"apiVersion": "kubeadm.k8s.io/v1beta3", "kind": "ClusterConfiguration",
                                          "kubernetesVersion": "v1.30.0", "clusterName": "c",
                                          "networking": {"podSubnet": "10.0.0.0/16"},
                                          "apiServer": {"timeoutForControlPlane": "4m", "extraArgs": {"v": "2"},
                                                        "extraVolumes": [{"name": "a", "hostPath": "/a",
                                                                          "mountPath": "/a", "readOnly": False}]},
                                          "etcd": {"local": {"extraArgs": {"b": "1", "a": "2"}}}},
                 "initConfiguration": {"bootstrapTokens": [{"token": "abcdef.0123456789abcdef", "ttl": "24h0m0s"}],
                                       "nodeRegistration": {
                                           "kubeletExtraArgs": {"eviction-hard": "nodefs.available<0%"},
                                           "taints": []}},
                 "joinConfiguration": {"discovery": {"timeout": "5m0s",
                                                     "bootstrapToken": {"apiServerEndpoint": "h:6443", "token": "t",
                                                                        "unsafeSkipCAVerification": True}}},
                 "files": [{"path": "/x", "content": "y", "append": False}]},
        "status": {"ready": True, "dataSecretName": "x"},
    }, {
        "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig", "metadata": META,
        "spec": {"clusterConfiguration": {
            "apiServer": {"extraArgs": [{"name": "v", "value": "2"}],
                          "extraVolumes": [{"name": "a", "hostPath": "/a", "mountPath": "/a"}]},
            "etcd": {"local": {"extraArgs": [{"name": "a", "value": "2"}, {"name": "b", "value": "1"}]}}},
            "initConfiguration": {"bootstrapTokens": [{"token": "abcdef.0123456789abcdef", "ttlSeconds": 86400}],
                                  "nodeRegistration": {"kubeletExtraArgs": [
                                      {"name": "eviction-hard", "value": "nodefs.available<0%"}], "taints": []},
                                  "timeouts": {"controlPlaneComponentHealthCheckSeconds": 240}},
            "joinConfiguration": {"discovery": {"bootstrapToken": {"apiServerEndpoint": "h:6443", "token": "t",
                                                                   "unsafeSkipCAVerification": True}},
                                  "timeouts": {"controlPlaneComponentHealthCheckSeconds": 240,
                                               "tlsBootstrapSeconds": 300}},
            "files": [{"path": "/x", "content": "y"}]},
        "status": {"initialization": {"dataSecretCreated": True}, "dataSecretName": "x"},
    }),
    ("KubeadmControlPlane", {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta1", "kind": "KubeadmControlPlane", "metadata": META,
        "spec": {"replicas": 3, "version": "v1.34.4",
                 "machineTemplate": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                           "kind": "DockerMachineTemplate", "name": "t"},
                                     "nodeDrainTimeout": "30s", "readinessGates": [{"conditionType": "G"}]},
                 "kubeadmConfigSpec": {"format": "cloud-config"},
                 "rolloutBefore": {"certificatesExpiryDays": 21}, "rolloutAfter": T,
                 "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
                 "remediationStrategy": {"maxRetry": 3, "retryPeriod": "5m", "minHealthyPeriod": "1h"},
                 "machineNamingStrategy": {"template": "{{ .kubeadmControlPlane.name }}-{{ .random }}"}},
        "status": {"initialized": True, "ready": True, "readyReplicas": 3, "updatedReplicas": 3,
                   "lastRemediation": {"machine": "m", "timestamp": T, "retryCount": 1},
                   "v1beta2": {"readyReplicas": 3, "upToDateReplicas": 3, "availableReplicas": 3}},
    }, {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane", "metadata": META,
        "spec": {"replicas": 3, "version": "v1.34.4",
                 "machineTemplate": {"spec": {"infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                                    "kind": "DockerMachineTemplate", "name": "t"},
                                              "readinessGates": [{"conditionType": "G"}],
                                              "deletion": {"nodeDrainTimeoutSeconds": 30}}},
                 "kubeadmConfigSpec": {"format": "cloud-config"},
                 "rollout": {"before": {"certificatesExpiryDays": 21}, "after": T,
                             "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
                 "remediation": {"maxRetry": 3, "retryPeriodSeconds": 300, "minHealthyPeriodSeconds": 3600},
                 "machineNaming": {"template": "{{ .kubeadmControlPlane.name }}-{{ .random }}"}},
        "status": {"initialization": {"controlPlaneInitialized": True}, "readyReplicas": 3,
                   "upToDateReplicas": 3, "availableReplicas": 3,
                   "lastRemediation": {"machine": "m", "time": T, "retryCount": 1},
                   "deprecated": {"v1beta1": {"readyReplicas": 3, "updatedReplicas": 3}}},
    }),
    ("DockerCluster", {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerCluster", "metadata": META,
        "spec": {"failureDomains": {"fd1": {"controlPlane": True}}},
        "status": {"ready": True, "conditions": [OLD_READY]},
    }, {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster", "metadata": META,
        "spec": {"failureDomains": [{"name": "fd1", "controlPlane": True}]},
        "status": {"initialization": {"provisioned": True}, "deprecated": {"v1beta1": {"conditions": [OLD_READY]}}},
    }),
    ("ClusterClass", {
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "ClusterClass", "metadata": META,
        "spec": {"infrastructure": {"ref": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                            "kind": "DockerClusterTemplate", "name": "i", "namespace": "ns"}},
                 "infrastructureNamingStrategy": {"template": "{{ .cluster.name }}"},
                 "controlPlane": {"ref": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                                          "kind": "KubeadmControlPlaneTemplate", "name": "cp"},
                                  "namingStrategy": {"template": "{{ .cluster.name }}-cp"}},
                 "workers": {"machineDeployments": [{
                     "class": "w", "template": {"metadata": {"labels": {"a": "b"}},
                                                "bootstrap": {"ref": {
                                                    "apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                                                    "kind": "KubeadmConfigTemplate", "name": "b"}},
                                                "infrastructure": {"ref": {
                                                    "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                    "kind": "DockerMachineTemplate", "name": "m"}}},
                     "strategy": {"type": "OnDelete"}, "nodeDeletionTimeout": "1m"}]},
                 "variables": [{"name": "v", "required": False, "metadata": {"labels": {"l": "v"}},
                                "schema": {"openAPIV3Schema": {"type": "string",
                                                               "x-kubernetes-int-or-string": False}}}],
                 "patches": [{"name": "p", "external": {"generateExtension": "g", "validateExtension": "v"}}]},
    }, {
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "ClusterClass", "metadata": META,
        "spec": {"infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                    "kind": "DockerClusterTemplate", "name": "i"},
                                    "naming": {"template": "{{ .cluster.name }}"}},
                 "controlPlane": {"templateRef": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta1",
                                                  "kind": "KubeadmControlPlaneTemplate", "name": "cp"},
                                  "naming": {"template": "{{ .cluster.name }}-cp"}},
                 "workers": {"machineDeployments": [{
                     "class": "w", "metadata": {"labels": {"a": "b"}},
                     "bootstrap": {"templateRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1",
                                                   "kind": "KubeadmConfigTemplate", "name": "b"}},
                     "infrastructure": {"templateRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
                                                        "kind": "DockerMachineTemplate", "name": "m"}},
                     "rollout": {"strategy": {"type": "OnDelete"}}, "deletion": {"nodeDeletionTimeoutSeconds": 60}}]},
                 "variables": [{"name": "v", "required": False, "deprecatedV1Beta1Metadata": {"labels": {"l": "v"}},
                                "schema": {"openAPIV3Schema": {"type": "string"}}}],
                 "patches": [{"name": "p", "external": {"generatePatchesExtension": "g",
                                                        "validateTopologyExtension": "v"}}]},
    }),
]


@pytest.mark.parametrize(("kind", "v1beta1", "v1beta2"), CASES, ids=[c[0] for c in CASES])
def test_v1beta1_fields_move_as_upstream_moves_them(kind: str, v1beta1: dict[str, Any],
                                                    v1beta2: dict[str, Any]) -> None:
    assert check_object(v1beta1) == [], "the v1beta1 input fits upstream's v1beta1 schema"
    assert to_hub(v1beta1) == v1beta2
    assert check_object(v1beta2) == []


@pytest.mark.parametrize(("kind", "v1beta1", "v1beta2"), CASES, ids=[c[0] for c in CASES])
def test_and_back(kind: str, v1beta1: dict[str, Any], v1beta2: dict[str, Any]) -> None:
    spoke = from_hub(v1beta2)
    assert check_object(spoke) == []
    assert to_hub(spoke) == v1beta2
