"""KubeadmControlPlane decisions (pure: observed state in, desired state / one next action out), split
the way upstream splits its KCP controller:

- `common`       condition types, `MachineView` (one observed control-plane Machine), `Action`, spec accessors
- `observe`      owned Machines, their Nodes and static pods -> `MachineView`
- `desiredstate` the infrastructure machine, KubeadmConfig and Machine of a new control-plane machine
- `scale`        the next step: init, scale up / down, rollout surge, failure domains, scale-down choice
- `rollout`      when a machine is outdated; certificate expiry; the workload's kubeadm-config
- `workload_upgrade` the workload's kube-proxy DaemonSet and CoreDNS Deployment after an upgrade
- `remediation`  replacing machines a MachineHealthCheck marked
- `etcd`         which etcd member goes with a machine, moving leadership off it
- `etcdhealth`   what etcd's member list and alarms say: EtcdMemberHealthy, EtcdClusterHealthy, Available's etcd half
- `status`       status and conditions
- `deletion`     deleting the KCP

`from capd_py.reconcile import kcp as rk` gives all of them under one name.
"""

from capd_py.reconcile.kcp.common import (
    AVAILABLE,
    CERTIFICATES_AVAILABLE,
    CERTIFICATES_EXPIRY_ANNOTATION,
    COMPONENTS_HEALTHY,
    DELETING,
    ETCD_CLUSTER_HEALTHY,
    INITIALIZED,
    MACHINES_READY,
    MACHINES_UP_TO_DATE,
    REMEDIATING,
    REPLICAS_WARNING,
    ROLLING_OUT,
    SCALING_DOWN,
    SCALING_UP,
    STATIC_PODS,
    Action,
    MachineView,
    infra_template_ref,
    max_surge,
    parse_time,
    replicas,
    selector,
)
from capd_py.reconcile.kcp.deletion import DeletionStep, deletion_step
from capd_py.reconcile.kcp.desiredstate import (
    DesiredMachine,
    desired_machine,
    init_config_spec,
    join_config_spec,
    machine_in_place_patch,
    machine_labels,
    machine_name,
    template_gvk,
)
from capd_py.reconcile.kcp.etcd import (
    HookStep,
    etcd_member_to_remove,
    hook_step,
    leadership_target,
    member_id,
    member_id_hex,
    member_of_node,
)
from capd_py.reconcile.kcp.observe import machine_view, node_for, node_internal_ip, owned
from capd_py.reconcile.kcp.remediation import (
    last_remediation,
    machines_to_remediate,
    remediation_action,
    remediation_step,
    replacement_annotation,
    stale_in_progress,
)
from capd_py.reconcile.kcp.rollout import (
    KUBEADM_CONFIG_MAP,
    kubeadm_config_map_patch,
    kubeadm_spec_differs,
    outdated_reasons,
    updated_cluster_configuration,
)
from capd_py.reconcile.kcp.scale import (
    control_plane_failure_domains,
    next_action,
    pick_failure_domain_for_scale_up,
    pick_machine_for_scale_down,
)
from capd_py.reconcile.kcp.status import even_replicas_message, min_version
from capd_py.reconcile.machine import owner_remediated_status

__all__ = [
    "AVAILABLE", "CERTIFICATES_AVAILABLE", "CERTIFICATES_EXPIRY_ANNOTATION", "COMPONENTS_HEALTHY", "DELETING",
    "ETCD_CLUSTER_HEALTHY", "INITIALIZED", "KUBEADM_CONFIG_MAP", "MACHINES_READY", "MACHINES_UP_TO_DATE",
    "REMEDIATING", "REPLICAS_WARNING", "ROLLING_OUT", "SCALING_DOWN", "SCALING_UP", "STATIC_PODS",
    "Action", "DeletionStep", "DesiredMachine", "HookStep", "MachineView", "hook_step",
    "control_plane_failure_domains", "deletion_step", "desired_machine", "etcd_member_to_remove",
    "even_replicas_message", "infra_template_ref", "init_config_spec", "join_config_spec",
    "kubeadm_config_map_patch", "kubeadm_spec_differs", "leadership_target", "machine_labels", "machine_name",
    "machine_view", "machines_to_remediate", "max_surge", "member_id", "member_id_hex", "member_of_node",
    "min_version", "next_action", "node_for", "node_internal_ip", "outdated_reasons", "owned", "parse_time",
    "pick_failure_domain_for_scale_up", "pick_machine_for_scale_down", "remediation_action", "replicas",
    "last_remediation", "machine_in_place_patch", "owner_remediated_status", "remediation_step",
    "replacement_annotation", "stale_in_progress",
    "selector", "template_gvk", "updated_cluster_configuration",
]
