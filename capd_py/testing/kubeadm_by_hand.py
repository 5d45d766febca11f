"""kubeadm run by hand in a node container (no controllers, no cloud-init): what the node-image test and the
physical-limit benchmark both do."""

from __future__ import annotations

PREFLIGHT_IGNORE = "SystemVerification,Swap,FileContent--proc-sys-net-bridge-bridge-nf-call-iptables,NumCPU,Mem"
CONFIG_PATH = "/run/kubeadm/kubeadm.yaml"


def init_config(node_ip: str, version: str) -> str:
    """A single control plane whose endpoint is the node itself; no taints so pods run on it."""
    return f"""apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
nodeRegistration:
  kubeletExtraArgs:
  - {{name: node-ip, value: "{node_ip}"}}
  taints: []
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: {version}
controlPlaneEndpoint: "{node_ip}:6443"
networking: {{podSubnet: 10.244.0.0/16, serviceSubnet: 10.96.0.0/12}}
"""


def init_command() -> list[str]:
    return ["kubeadm", "init", "--config", CONFIG_PATH, f"--ignore-preflight-errors={PREFLIGHT_IGNORE}"]
