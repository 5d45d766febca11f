"""Deleting a KubeadmControlPlane (upstream: reconcileDelete): worker Machines go first, then every
control-plane Machine; the finalizer comes off once none is left."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from capd_py.reconcile.kcp.observe import workers


@dataclass(frozen=True)
class DeletionStep:
    done: bool                                          # nothing left: remove the finalizer
    delete: list[str] = field(default_factory=list)     # control-plane Machines to delete now
    reason: str = ""                                    # Deleting condition (True) while not done
    message: str = ""


def deletion_step(cluster_machines: list[dict[str, Any]], ours: list[dict[str, Any]]) -> DeletionStep:
    """`cluster_machines`: every Machine of the cluster; `ours`: the control-plane Machines the KCP owns."""
    w = workers(cluster_machines)
    if w:
        return DeletionStep(False, reason="WaitingForWorkersDeletion",
                            message=f"Waiting for worker Machines to be deleted ({len(w)} left)")
    if ours:
        return DeletionStep(False, delete=[m["metadata"]["name"] for m in ours
                                           if not m["metadata"].get("deletionTimestamp")],
                            reason="WaitingForMachineDeletion",
                            message="Deleting control-plane Machines "
                                    f"({', '.join(sorted(m['metadata']['name'] for m in ours))})")
    return DeletionStep(True)
