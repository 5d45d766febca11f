from __future__ import annotations

import io

import pytest

from capd_py.cli.progress import normalize_wait, parse_duration, progress_lines, why
from capd_py.cli.steps import Steps

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("5m", 300), ("1h30m", 5400), ("300", 300), ("0", 0),
                                                ("1.5m", 90), ("2h", 7200), ("1m30s", 90),
                                                ("500ms", 0.5)])  # a Go duration, as kind's --wait
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "5x", "m", "-5s", "5 m"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_bare_wait_means_the_default() -> None:
    assert normalize_wait(["delete", "cluster", "c1", "--wait"]) == ["delete", "cluster", "c1", "--wait=10m"]
    assert normalize_wait(["delete", "cluster", "c1", "--wait", "--timeout", "300"]) == \
        ["delete", "cluster", "c1", "--wait=10m", "--timeout", "300"]
    assert normalize_wait(["delete", "cluster", "--wait", "c1"]) == ["delete", "cluster", "--wait=10m", "c1"]
    assert normalize_wait(["apply", "-f", "x", "--wait", "5m"]) == ["apply", "-f", "x", "--wait", "5m"]


def _m(name: str, phase: str, conds: list[tuple[str, str, str]]) -> dict:
    return {"metadata": {"name": name}, "status": {"phase": phase, "conditions": [
        {"type": t, "status": s, "reason": "R", "message": msg} for t, s, msg in conds]}}


def test_progress_lines_name_the_pending_machines_and_why() -> None:
    cluster = {"status": {"conditions": [{"type": "Available", "status": "False", "reason": "NotAvailable",
                                          "message": "* WorkersAvailable: 0 of 1\n* more"}]}}
    ready = _m("c1-cp-a", "Running", [("Ready", "True", "")])
    joining = _m("c1-md-0-x", "Provisioned", [("BootstrapConfigReady", "True", ""),
                                             ("InfrastructureReady", "False", "* DockerMachine: bootstrap running: "
                                              "step 3/9"), ("Ready", "False", "* InfrastructureReady: ...")])
    fresh = _m("c1-md-0-y", "Pending", [])
    lines = progress_lines(cluster, [ready, joining, fresh])
    assert lines == ["c1-md-0-x  Provisioned   InfrastructureReady: DockerMachine: bootstrap running: step 3/9",
                     "c1-md-0-y  Pending       waiting for the controllers"]
    # every machine Ready: the Cluster's own message
    assert progress_lines(cluster, [ready]) == ["WorkersAvailable: 0 of 1"]
    assert progress_lines(None, []) == []
    many = [_m(f"m{i:02d}", "Pending", []) for i in range(11)]
    assert progress_lines(cluster, many, limit=8)[-1] == "... and 3 more"
    assert why(_m("x", "Running", [("Ready", "False", "* NodeHealthy: kubelet stopped posting")])) == \
        "NodeHealthy: kubelet stopped posting"


def test_steps_details_plain_only_when_they_change() -> None:
    out = io.StringIO()
    st = Steps(stream=out, plain=True)
    with st.step("Waiting"):
        st.details(["a pending"])
        st.details(["a pending"])
        st.details(["b pending"])
    assert out.getvalue().splitlines() == [" • Waiting  ...", "   a pending", "   b pending", " ✓ Waiting"]
