"""Bootstrap-token helpers of the KubeadmConfig decisions: the cluster-info signature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from capd_py.reconcile import kubeadmconfig as kc

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "cluster-info-signed.json"


def test_cluster_info_signature_is_the_bootstrap_signers_byte_for_byte() -> None:
    """Against cluster-info as kube-controller-manager v1.34.4 signed it in a real workload cluster."""
    f = json.loads(FIXTURE.read_text())
    key, value = kc.cluster_info_signature(f["kubeconfig"], f["token"])
    assert key == "jws-kubeconfig-cghk5f"
    assert value == f[key]


def test_cluster_info_signature_depends_on_token_and_content() -> None:
    f = json.loads(FIXTURE.read_text())
    _, a = kc.cluster_info_signature(f["kubeconfig"], "cghk5f.0000000000000000")
    _, b = kc.cluster_info_signature(f["kubeconfig"] + "\n", f["token"])
    assert a != f["jws-kubeconfig-cghk5f"] and b != f["jws-kubeconfig-cghk5f"]
    with pytest.raises(ValueError):
        kc.cluster_info_signature("x", "not-a-token")
