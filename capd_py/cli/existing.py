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


def init_existing(kubeconfig: Path, name: str, controllers: bool, steps: Steps, webhook_url: str | None = None,
                  webhook_bind_address: str | None = None) -> int | None:
    """CRDs, then (unless told not to) the controllers; their pid, None when not started.

    v1beta1 is served when the cluster's API server can reach the controllers' conversion webhook: at
    `webhook_url` (an address of this host as that API server sees it), or the URL its CRDs name already (an
    earlier init). Without one the CRDs serve v1beta2 only: this host's address as seen from an arbitrary cluster
    cannot be guessed. The controllers listen on the URL's address, or on `webhook_bind_address` (behind NAT)."""
    url = webhook_url or mgmt.installed_webhook_url(kubeconfig)
    with steps.step("Installing capd-py CRDs 📜"):
        mgmt.install_crds(kubeconfig, webhook_url=url)
    if url:
        steps.info(f"v1beta1 served through the conversion webhook at {url}")
    else:
        steps.info("v1beta1 not served (v1beta2 only): pass --webhook-url with an address of this host that the "
                   "cluster's API server reaches")
    if not controllers:
        return None
    with steps.step("Starting controllers 🎮"):
        extra = ["--webhook-bind-address", webhook_bind_address] if webhook_bind_address else []
        pid = mgmt.start_controllers(kubeconfig, name, extra_args=extra)
    steps.info(f"controllers running as pid {pid}, logs in {mgmt.log_path(name)}")
    return pid
