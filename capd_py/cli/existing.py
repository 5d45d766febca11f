"""`capd-py init --kubeconfig FILE`: make an existing Kubernetes cluster (a workload cluster, say, to become
self-hosted, or any API server) a management cluster: the CRDs, and the controllers as a host process.

No node container is created, so there is nothing to load an image into: `--in-cluster` is for the
management cluster `capd-py init` creates itself."""

from __future__ import annotations

import hashlib
from pathlib import Path

from capd_py.cli import management as mgmt
from capd_py.cli.steps import Steps


def default_name(kubeconfig: Path) -> str:
    """The controllers' name (pid and log files) for this kubeconfig: stable, and never the default management
    cluster's, whose running controllers `start_controllers` would otherwise take for these."""
    return "ext-" + hashlib.sha256(str(kubeconfig.resolve()).encode()).hexdigest()[:8]


def init_existing(kubeconfig: Path, name: str, controllers: bool, steps: Steps) -> int | None:
    """CRDs, then (unless told not to) the controllers; their pid, None when not started."""
    with steps.step("Installing capd-py CRDs 📜"):
        mgmt.install_crds(kubeconfig)
    if not controllers:
        return None
    with steps.step("Starting controllers 🎮"):
        pid = mgmt.start_controllers(kubeconfig, name)
    steps.info(f"controllers running as pid {pid}, logs in {mgmt.log_path(name)}")
    return pid
