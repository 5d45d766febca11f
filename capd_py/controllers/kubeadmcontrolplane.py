"""The KubeadmControlPlane controller under the name the registry imports; see controllers/kcp/."""

from capd_py.controllers.kcp import controller, reconcile

__all__ = ["controller", "reconcile"]
