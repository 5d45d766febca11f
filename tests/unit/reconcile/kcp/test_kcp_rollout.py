"""Rollout inputs: certificate expiry bookkeeping and the workload kubeadm-config patch."""

from __future__ import annotations

import pytest
import yaml

from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import rollout

try:
    from kcp_fixtures import CLUSTER, kcp, machine
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import CLUSTER, kcp, machine  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def test_certificate_expiry_is_noted_once_and_only_when_asked_for() -> None:
    assert not rollout.tracks_certificate_expiry(kcp())
    assert rollout.tracks_certificate_expiry(kcp(rollout={"before": {"certificatesExpiryDays": 7}}))
    cfg = {"metadata": {"name": "m1", "annotations": {}}}
    assert rollout.needs_certificate_expiry(machine("m1"), cfg)
    assert not rollout.needs_certificate_expiry(machine("m1"), None)
    assert not rollout.needs_certificate_expiry(machine("m1", deleting=True), cfg)
    noted = {"metadata": {"name": "m1", "annotations": {rk.CERTIFICATES_EXPIRY_ANNOTATION: "2027-01-01T00:00:00Z"}}}
    assert not rollout.needs_certificate_expiry(machine("m1"), noted)
    patch = rollout.certificate_expiry_patch("2027-01-01T00:00:00Z")
    assert patch == {"metadata": {"annotations": noted["metadata"]["annotations"]}}


def test_kubeadm_config_map_patch() -> None:
    cur = yaml.safe_dump({"kind": "ClusterConfiguration", "kubernetesVersion": "v1.34.4"})
    cm = {"metadata": {"name": "kubeadm-config", "resourceVersion": "7"}, "data": {"ClusterConfiguration": cur}}
    same = kcp(kubeadmConfigSpec={})
    assert rollout.kubeadm_config_map_patch(cm, same, CLUSTER) is None
    patch = rollout.kubeadm_config_map_patch(cm, kcp(version="v1.35.0", kubeadmConfigSpec={}), CLUSTER)
    assert patch is not None and patch["metadata"] == {"resourceVersion": "7"}
    assert yaml.safe_load(patch["data"]["ClusterConfiguration"])["kubernetesVersion"] == "v1.35.0"
    assert rollout.updated_cluster_configuration("- a list", kcp(), CLUSTER) is None
