"""capd_py.api.controllerset: naming the part of capd-py a process runs (beside upstream's managers)."""

from __future__ import annotations

import pytest

from capd_py.api import controllerset as cs

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", [None, "", " ", "all", "infrastructure,all"])
def test_everything_by_default(text: str | None) -> None:
    assert cs.parse(text) is None


def test_groups_are_upstreams_managers_and_kinds_add_up() -> None:
    assert cs.parse("infrastructure") == {"DockerCluster", "DockerMachine", "DockerMachinePool",
                                          "DockerMachineTemplate", "DevCluster", "DevMachine", "DevMachinePool",
                                          "DevMachineTemplate"}
    assert cs.parse("bootstrap, controlplane,ClusterTopology") == {"KubeadmConfig", "KubeadmControlPlane",
                                                                    "ClusterTopology"}
    assert frozenset().union(*cs.GROUPS.values()) == cs.KNOWN  # every controller is in exactly one manager
    assert sum(len(g) for g in cs.GROUPS.values()) == len(cs.KNOWN)


def test_an_unknown_name_says_what_is_known() -> None:
    with pytest.raises(ValueError, match=r"unknown controller 'DockerMachines'.*infrastructure.*DockerMachine"):
        cs.parse("DockerMachines")


def test_selected_keeps_order() -> None:
    assert cs.selected(["Cluster", "DockerMachine", "Machine"], frozenset({"Machine", "Cluster"})) == [
        "Cluster", "Machine"]
    assert cs.selected(["a", "b"], None) == ["a", "b"]
