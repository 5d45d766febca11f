"""Deleting a KubeadmControlPlane: workers first, then the control-plane Machines, then the finalizer."""

from __future__ import annotations

import pytest

from capd_py.reconcile.kcp import deletion

try:
    from kcp_fixtures import machine
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import machine  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def test_waits_for_workers() -> None:
    cp, worker = machine("cp1"), machine("w1", labels={"cluster.x-k8s.io/cluster-name": "c1"})
    step = deletion.deletion_step([cp, worker], [cp])
    assert not step.done and step.delete == [] and step.reason == "WaitingForWorkersDeletion"
    assert step.message == "Waiting for worker Machines to be deleted (1 left)"


def test_deletes_control_plane_machines_not_yet_deleting() -> None:
    ours = [machine("cp2"), machine("cp1", deleting=True)]
    step = deletion.deletion_step(ours, ours)
    assert not step.done and step.delete == ["cp2"] and step.reason == "WaitingForMachineDeletion"
    assert step.message == "Deleting control-plane Machines (cp1, cp2)"


def test_done_when_nothing_is_left() -> None:
    assert deletion.deletion_step([], []).done
