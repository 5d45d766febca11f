"""Controllers behind feature gates start only with their gate on (as upstream's manager)."""

from __future__ import annotations

import pytest

from capd_py.controllers.registry import all_controllers

pytestmark = pytest.mark.unit


def _keys(gates: dict[str, bool] | None = None) -> set[str]:
    return {c.key for c in all_controllers(gates)}


def test_gated_controllers() -> None:
    everything = _keys()
    assert {"ClusterClass", "ClusterTopology", "MachinePool", "DockerMachinePool"} <= everything
    # the topology controllers of MachineDeployments and MachineSets too (their finalizers, upstream's)
    assert _keys({"ClusterTopology": False}) == everything - {"ClusterClass", "ClusterTopology",
                                                              "MachineDeploymentTopology", "MachineSetTopology"}
    assert _keys({"MachinePool": False}) == everything - {"MachinePool", "DockerMachinePool", "DevMachinePool"}
    # RuntimeSDK: off by default, as upstream; on, the ExtensionConfig controller runs
    assert "ExtensionConfig" not in everything
    assert _keys({"RuntimeSDK": True}) == everything | {"ExtensionConfig"}


def test_a_subset_runs_beside_upstreams_managers() -> None:
    """`--controllers infrastructure`: only the Docker provider (upstream's core, bootstrap and KCP run the rest)."""
    from capd_py.api import controllerset
    assert _keys({"RuntimeSDK": True}) == controllerset.KNOWN  # every controller is nameable
    infra = {c.key for c in all_controllers(None, controllerset.parse("infrastructure"))}
    assert infra == {"DockerCluster", "DockerMachine", "DockerMachinePool", "DockerMachineTemplate",
                     "DevCluster", "DevMachine", "DevMachinePool", "DevMachineTemplate"}
    assert {c.key for c in all_controllers({"MachinePool": False}, controllerset.parse("infrastructure"))} == \
        infra - {"DockerMachinePool", "DevMachinePool"}
