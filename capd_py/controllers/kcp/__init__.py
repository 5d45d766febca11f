"""The KubeadmControlPlane controller, split like upstream's internal/controllers: `controller.py` (the
reconcile pass, deletion, watches), `observe.py` (what it reads), `scale.py` (creating / removing
control-plane Machines, etcd membership, the workload's kubeadm-config). Decisions: capd_py.reconcile.kcp."""

from capd_py.controllers.kcp.controller import controller, reconcile

__all__ = ["controller", "reconcile"]
