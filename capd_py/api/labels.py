"""Label, annotation and finalizer names; upstream's where upstream has one, so tools agree."""

CLUSTER_NAME = "cluster.x-k8s.io/cluster-name"
CONTROL_PLANE = "cluster.x-k8s.io/control-plane"
CONTROL_PLANE_NAME = "cluster.x-k8s.io/control-plane-name"
NODE_ROLE_CONTROL_PLANE = "node-role.kubernetes.io/control-plane"  # kubeadm's mark-control-plane phase
DEPLOYMENT_NAME = "cluster.x-k8s.io/deployment-name"
SET_NAME = "cluster.x-k8s.io/set-name"
MACHINE_POOL_NAME = "cluster.x-k8s.io/pool-name"  # upstream MachinePoolNameLabel (MachinePool Machines)
MACHINE_NAME = "cluster.x-k8s.io/machine-name"  # placed on the container too
MHC_NAME = "cluster.x-k8s.io/mhc-name"
TEMPLATE_HASH = "machine-template-hash"
WATCH_FILTER = "cluster.x-k8s.io/watch-filter"
MANAGEMENT_LABEL = "io.x-k8s.capd-py.management"  # docker label on a capd-py management cluster's node and volumes

PAUSED_ANNOTATION = "cluster.x-k8s.io/paused"
# upstream clusterctl (cmd/clusterctl/api/v1alpha3 labels.go / annotations.go)
PROVIDER_NAME_LABEL = "cluster.x-k8s.io/provider"          # the component's provider, e.g. infrastructure-docker
CLUSTERCTL_LABEL = "clusterctl.cluster.x-k8s.io"           # on every component clusterctl installed (CRDs: move)
CLUSTERCTL_CORE_LABEL = "clusterctl.cluster.x-k8s.io/core"  # "inventory" on the inventory's CRD and Providers
CLUSTERCTL_CORE_INVENTORY = "inventory"
CLUSTERCTL_MOVE_LABEL = "clusterctl.cluster.x-k8s.io/move"
CLUSTERCTL_MOVE_HIERARCHY_LABEL = "clusterctl.cluster.x-k8s.io/move-hierarchy"
DELETE_FOR_MOVE_ANNOTATION = "clusterctl.cluster.x-k8s.io/delete-for-move"  # set by a move on what it deletes
BLOCK_MOVE_ANNOTATION = "clusterctl.cluster.x-k8s.io/block-move"
DELETE_MACHINE_ANNOTATION = "cluster.x-k8s.io/delete-machine"
CLONED_FROM_NAME = "cluster.x-k8s.io/cloned-from-name"
CLONED_FROM_GROUP_KIND = "cluster.x-k8s.io/cloned-from-groupkind"
REVISION_ANNOTATION = "machinedeployment.clusters.x-k8s.io/revision"
REMEDIATE_MACHINE_ANNOTATION = "cluster.x-k8s.io/remediate-machine"
EXCLUDE_NODE_DRAINING_ANNOTATION = "machine.cluster.x-k8s.io/exclude-node-draining"
KCP_ROLLOUT_ANNOTATION = "controlplane.cluster.x-k8s.io/rollout-after"
# On every KCP Machine (upstream's name): its etcd member is removed in this pre-terminate hook, i.e. after the
# Machine's deletion started (the infrastructure provider took it out of the load balancer) and its node drained.
KCP_CLEANUP_HOOK = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/kcp-cleanup"
# KCP remediation (upstream's names, JSON {machine, timestamp, retryCount}): on the KCP while a remediated Machine
# waits for its replacement, then on the replacement Machine (a failure of it is a retry).
KCP_REMEDIATION_IN_PROGRESS = "controlplane.cluster.x-k8s.io/remediation-in-progress"
KCP_REMEDIATION_FOR = "controlplane.cluster.x-k8s.io/remediation-for"

# Managed topology (ClusterClass), upstream's names.
TOPOLOGY_OWNED = "topology.cluster.x-k8s.io/owned"
TOPOLOGY_DEPLOYMENT_NAME = "topology.cluster.x-k8s.io/deployment-name"
TOPOLOGY_POOL_NAME = "topology.cluster.x-k8s.io/pool-name"
TOPOLOGY_HOLD_UPGRADE_SEQUENCE = "topology.cluster.x-k8s.io/hold-upgrade-sequence"
TOPOLOGY_DEFER_UPGRADE = "topology.cluster.x-k8s.io/defer-upgrade"
TOPOLOGY_UPGRADE_CONCURRENCY = "topology.cluster.x-k8s.io/upgrade-concurrency"

# Container labels (docker); mirror upstream CAPD's so `docker ps --filter` recipes carry over.
CONTAINER_CLUSTER = "io.x-k8s.capd-py.cluster"
CONTAINER_ROLE = "io.x-k8s.capd-py.role"
CONTAINER_MACHINE = "io.x-k8s.capd-py.machine"
CONTAINER_NAMESPACE = "io.x-k8s.capd-py.namespace"
CONTAINER_MANAGED = "io.x-k8s.capd-py.managed"

FINALIZER_CLUSTER = "cluster.cluster.x-k8s.io"
FINALIZER_MACHINE = "machine.cluster.x-k8s.io"
FINALIZER_MACHINE_SET = "cluster.x-k8s.io/machineset"
FINALIZER_MACHINE_DEPLOYMENT = "cluster.x-k8s.io/machinedeployment"
# the topology controllers' of MachineDeployments and MachineSets a topology owns: their templates go with them
FINALIZER_MACHINE_DEPLOYMENT_TOPOLOGY = "machinedeployment.topology.cluster.x-k8s.io"
FINALIZER_MACHINE_SET_TOPOLOGY = "machineset.topology.cluster.x-k8s.io"
FINALIZER_MACHINE_POOL = "machinepool.cluster.x-k8s.io"
FINALIZER_KCP = "kubeadm.controlplane.cluster.x-k8s.io"
FINALIZER_KUBEADM_CONFIG = "kubeadmconfig.bootstrap.cluster.x-k8s.io"
FINALIZER_DOCKER_CLUSTER = "dockercluster.infrastructure.cluster.x-k8s.io"
FINALIZER_DOCKER_MACHINE = "dockermachine.infrastructure.cluster.x-k8s.io"
FINALIZER_DOCKER_MACHINE_POOL = "dockermachinepool.infrastructure.cluster.x-k8s.io"
FINALIZER_CLUSTER_RESOURCE_SET = "addons.cluster.x-k8s.io"

FIELD_MANAGER = "capd-py"

# Docker provider (capd-py specific, no upstream equivalent).
# On a DockerCluster: the 127.0.0.1 host port publishing the LB's 6443 (for host kubeconfigs).
LB_HOST_PORT_ANNOTATION = "infrastructure.cluster.x-k8s.io/capd-py-lb-host-port"
# On a DockerCluster: run the cluster on this (shared, pre-existing or created) docker network.
NETWORK_ANNOTATION = "infrastructure.cluster.x-k8s.io/capd-py-network"
# On a Cluster, written by `capd-py stop|start|pause|resume cluster` (capd_py/reconcile/powerstate.py): where the
# cluster's containers are going or are (stopping, stopped, starting, pausing, paused, resuming), so a killed
# command run again knows what it was doing. Absent: running.
POWER_STATE_ANNOTATION = "infrastructure.cluster.x-k8s.io/capd-py-power-state"
# On a Cluster, beside POWER_STATE_ANNOTATION: "true" when `spec.paused` was already set by someone else before
# the command paused the cluster, so starting / resuming leaves it paused.
POWER_USER_PAUSED_ANNOTATION = "infrastructure.cluster.x-k8s.io/capd-py-power-user-paused"
# On a DockerMachine of a DockerMachinePool: the hash of the pool template (Kubernetes version + the pool's
# spec.template) it was made from; an instance with another hash is replaced by a rollout.
POOL_TEMPLATE_HASH_LABEL = "infrastructure.cluster.x-k8s.io/capd-py-pool-template-hash"
