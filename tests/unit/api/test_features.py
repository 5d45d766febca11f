"""Feature gates: upstream's names and syntax, capd-py's defaults, gates it cannot honour refused."""

from __future__ import annotations

import pytest

from capd_py.api import features as f

pytestmark = pytest.mark.unit


def test_defaults_are_upstreams_but_cluster_topology() -> None:
    g = f.parse("")
    assert g[f.MACHINE_POOL] and g[f.MACHINE_SET_PREFLIGHT_CHECKS] and g[f.CLUSTER_TOPOLOGY]
    assert not g[f.MACHINE_TAINT_PROPAGATION] and not g[f.RUNTIME_SDK]


def test_parse_overrides_and_render_only_differences() -> None:
    g = f.parse("MachineTaintPropagation=true, MachinePool=false,ClusterTopology=True")
    assert g[f.MACHINE_TAINT_PROPAGATION] and not g[f.MACHINE_POOL]
    assert f.render(g) == "MachinePool=false,MachineTaintPropagation=true"
    assert f.parse(f.render(g)) == g


@pytest.mark.parametrize(("text", "says"), [
    ("Nope=true", "unrecognized feature gate: Nope"),
    ("MachinePool", "missing bool value for MachinePool"),
    ("MachinePool=yes", "invalid value of MachinePool: 'yes'"),
    ("InPlaceUpdates=true", "InPlaceUpdates=true is not supported by capd-py: in-place updates are not "
                            "implemented yet (issue 29)"),
    ("PriorityQueue=false", "PriorityQueue is GA upstream and cannot be turned off"),
])
def test_bad_values_are_named(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        f.parse(text)


def test_clusterctl_variables() -> None:
    env = {"EXP_MACHINE_TAINT_PROPAGATION": "true", "CLUSTER_TOPOLOGY": "false", "EXP_MACHINE_POOL": " ",
           "UNRELATED": "x"}
    assert f.from_variables(env) == "ClusterTopology=false,MachineTaintPropagation=true"
    assert f.from_variables({}) == ""
