"""ClusterClass status with templateRefs in v1beta1 (upstream v1.10's quick-start class, stored as v1beta2 with its
refs as written): RefVersionsUpToDate False with upstream's message, variables listed, the topology not held."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import conditions as cond
from capd_py.api import conversion
from capd_py.reconcile import clusterclass as rcc

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"


def _class(path: Path) -> dict[str, Any]:
    cc = next(d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ClusterClass")
    cc["metadata"]["generation"] = 1
    return conversion.to_hub(cc) if cc["apiVersion"].endswith("/v1beta1") else cc


def test_v1beta1_refs_are_reported_as_upstream_and_do_not_hold_the_topology() -> None:
    cc = _class(FIXTURES / "v1beta1" / "development.yaml")
    assert {r.api_version.rpartition("/")[2] for r in rcc.template_refs(cc)} == {"v1beta1"}
    cc["status"] = rcc.compute_status(cc, [], [])
    c = cond.get(cc, rcc.REF_VERSIONS_UP_TO_DATE)
    assert c is not None and c["status"] == "False" and c["reason"] == rcc.R_REFS_NOT_UP_TO_DATE
    assert c["message"].splitlines() == [
        "The following templateRefs are not using the latest apiVersion:",
        "* DockerClusterTemplate quick-start-cluster: current: v1beta1, latest: v1beta2",
        "* KubeadmControlPlaneTemplate quick-start-control-plane: current: v1beta1, latest: v1beta2",
        "* DockerMachineTemplate quick-start-control-plane: current: v1beta1, latest: v1beta2",
        "* KubeadmConfigTemplate quick-start-default-worker-bootstraptemplate: current: v1beta1, latest: v1beta2",
        "* DockerMachineTemplate quick-start-default-worker-machinetemplate: current: v1beta1, latest: v1beta2",
        "* DockerMachinePoolTemplate quick-start-default-worker-machinepooltemplate: current: v1beta1, "
        "latest: v1beta2",
    ]
    assert cond.is_true(cc, rcc.VARIABLES_READY)
    # sorted by name, as upstream's reconcileVariables lists them
    assert [v["name"] for v in cc["status"]["variables"]] == [
        "coreDNSImageTag", "etcdImageTag", "imageRepository", "podSecurityStandard"]
    assert rcc.ready_for_topology(cc) is None


def test_a_missing_template_still_holds_the_topology_and_v1beta2_refs_are_up_to_date() -> None:
    cc = _class(FIXTURES / "v1beta1" / "development.yaml")
    missing = rcc.template_refs(cc)[:1]
    cc["status"] = rcc.compute_status(cc, missing, [])
    c = cond.get(cc, rcc.REF_VERSIONS_UP_TO_DATE)
    assert c is not None and c["status"] == "False" and "not found" in c["message"]
    assert rcc.ready_for_topology(cc) is not None
    v1beta2 = _class(FIXTURES / "docker-clusterclass-quick-start.yaml")
    v1beta2["status"] = rcc.compute_status(v1beta2, [], [])
    assert cond.is_true(v1beta2, rcc.REF_VERSIONS_UP_TO_DATE)
    assert rcc.ready_for_topology(v1beta2) is None
