"""The KubeadmControlPlane controller, split like upstream's internal/controllers: `controller.py` (the
reconcile pass on the skeleton, deletion, watches), `observe.py` (what it reads), `scale.py` (creating /
removing control-plane Machines, etcd membership, the workload's kubeadm-config), `adopt.py` (adoption and
ownership), `machines.py` (the Machines' conditions and in-place changes), `addons.py` (kube-proxy and CoreDNS).
Decisions: capd_py.reconcile.kcp."""

from capd_py.controllers.kcp.controller import controller, reconcile

__all__ = ["controller", "reconcile"]
