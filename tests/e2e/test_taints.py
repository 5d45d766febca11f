"""Issue 26 item 6: Machine taints on Nodes (feature gate MachineTaintPropagation) with upstream's own
`cluster-template-kcp-md-taints` flavor, checked as upstream's KCPAndMachineDeploymentRolloutSpec does
(test/e2e/kcp_md_rollout.go, release-1.13): the flavor's Always and OnInitialization taints are on the Machines and
their Nodes; taints added to the KubeadmControlPlane and the MachineDeployment reach the Machines and, in place, the
Nodes (an OnInitialization one added later does not: the Nodes are initialized); taints removed from the Nodes by
hand come back when Always and stay away when OnInitialization; taints removed from the KCP and the
MachineDeployment leave the Nodes; no Machine is replaced along the way.

The gate is off by default (alpha, as upstream); upstream's e2e turns it on (EXP_MACHINE_TAINT_PROPAGATION) for the
whole run. Here a management plane of the test's own runs the controllers with `--feature-gates`' environment form,
so the rest of the tier keeps the defaults.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.testing.e2e import (
    Mgmt,
    docker_leftovers,
    management_plane,
    nodes_ready,
    wait_for,
    workload_kubectl,
)
from capd_py.testing.upstream import render

pytestmark = pytest.mark.e2e

NAME = "e2e-taints"
CP_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def _taint(key: str, propagation: str) -> dict[str, str]:
    value = "always-value" if propagation == "Always" else "on-initialization-value"
    return {"key": key, "value": value, "effect": "PreferNoSchedule", "propagation": propagation}


PRE_ALWAYS = _taint("pre-existing-always-taint", "Always")
PRE_ON_INIT = _taint("pre-existing-on-initialization-taint", "OnInitialization")
ADD_ALWAYS = _taint("added-always-taint", "Always")
ADD_ON_INIT = _taint("added-on-initialization-taint", "OnInitialization")


def _node_taint(t: dict[str, str]) -> dict[str, str]:
    return {k: t[k] for k in ("key", "value", "effect")}


@pytest.fixture
def gated_mgmt(tmp_path: Path) -> Iterator[Mgmt]:
    with management_plane(tmp_path / "controllers.log", {"CAPD_PY_FEATURE_GATES": "MachineTaintPropagation=true"}) as m:
        try:
            yield m
        finally:
            m.capd("delete", "cluster", NAME, "--wait", "--timeout", "300", check=False)


def _machines(mgmt: Mgmt) -> list[dict[str, Any]]:
    return list(json.loads(mgmt.kubectl("get", "machines", "-n", "default", "-l",
                                        f"cluster.x-k8s.io/cluster-name={NAME}", "-o", "json"))["items"])


def _sorted(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(taints, key=lambda t: (t["key"], t["effect"]))


def verify(mgmt: Mgmt, kc: Path, machine_taints: list[dict[str, str]], node_taints: list[dict[str, str]],
           what: str) -> None:
    """As upstream's verify*MachineAndNodeTaints: every Machine has exactly `machine_taints`, its Node exactly
    `node_taints` (and a control plane's Node the control-plane taint)."""
    def ok() -> bool:
        items = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
        nodes = {n["metadata"]["name"]: n for n in items}
        for m in _machines(mgmt):
            assert _sorted(m["spec"].get("taints") or []) == _sorted(machine_taints), (m["metadata"]["name"], m["spec"])
            node = nodes[m["status"]["nodeRef"]["name"]]
            cp = "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]
            want = [*node_taints, CP_TAINT] if cp else node_taints
            got = [{k: v for k, v in t.items() if k != "timeAdded"} for t in node["spec"].get("taints") or []]
            assert _sorted(got) == _sorted([_node_taint(t) if "propagation" in t else t for t in want]), (
                node["metadata"]["name"], got)
        return True
    wait_for(ok, 60, what, interval=1)


def test_upstream_kcp_md_taints_flavor(clusterctl: str, gated_mgmt: Mgmt, tmp_path: Path) -> None:
    mgmt = gated_mgmt
    t0 = time.monotonic()
    path = render(clusterctl, "e2e-cluster-template-kcp-md-taints.yaml", NAME, tmp_path, 1)
    mgmt.kubectl("apply", "-f", str(path))
    wait_for(lambda: mgmt.condition("cluster", NAME, "Available"), 600, f"cluster {NAME} Available", 5)
    kc = tmp_path / f"{NAME}.kubeconfig"
    mgmt.capd("get", "kubeconfig", NAME, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, 2), 180, "2 Ready nodes")
    available = time.monotonic() - t0
    before = sorted(m["metadata"]["uid"] for m in _machines(mgmt))
    assert len(before) == 2

    verify(mgmt, kc, [PRE_ALWAYS, PRE_ON_INIT], [PRE_ALWAYS, PRE_ON_INIT], "the flavor's taints on Machines and Nodes")

    # added in place to the KCP and the MachineDeployment: Machines get both, Nodes only the Always one
    t1 = time.monotonic()
    four = [PRE_ALWAYS, PRE_ON_INIT, ADD_ALWAYS, ADD_ON_INIT]
    mgmt.kubectl("patch", "kubeadmcontrolplane", f"{NAME}-control-plane", "-n", "default", "--type", "merge", "-p",
                 json.dumps({"spec": {"machineTemplate": {"spec": {"taints": four}}}}))
    mgmt.kubectl("patch", "machinedeployment", f"{NAME}-md-0", "-n", "default", "--type", "merge", "-p",
                 json.dumps({"spec": {"template": {"spec": {"taints": four}}}}))
    verify(mgmt, kc, four, [PRE_ALWAYS, PRE_ON_INIT, ADD_ALWAYS], "added taints propagated in place")
    added = time.monotonic() - t1

    # removed from the Nodes by hand: the Always one comes back, the OnInitialization one stays away
    for n in json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]:
        keep = [t for t in n["spec"].get("taints") or [] if t["key"] not in (PRE_ALWAYS["key"], PRE_ON_INIT["key"])]
        workload_kubectl(kc, "patch", "node", n["metadata"]["name"], "--type", "merge", "-p",
                         json.dumps({"spec": {"taints": keep}}))
    verify(mgmt, kc, four, [PRE_ALWAYS, ADD_ALWAYS], "Always taints put back on the Nodes, OnInitialization not")

    # removed from the KCP and the MachineDeployment: the Always ones leave the Nodes
    mgmt.kubectl("patch", "kubeadmcontrolplane", f"{NAME}-control-plane", "-n", "default", "--type", "json", "-p",
                 json.dumps([{"op": "remove", "path": "/spec/machineTemplate/spec/taints"}]))
    mgmt.kubectl("patch", "machinedeployment", f"{NAME}-md-0", "-n", "default", "--type", "json", "-p",
                 json.dumps([{"op": "remove", "path": "/spec/template/spec/taints"}]))
    verify(mgmt, kc, [], [], "taints removed from Machines and Nodes")

    # all of it in place: no Machine was replaced (upstream checks the same for 30 s)
    assert sorted(m["metadata"]["uid"] for m in _machines(mgmt)) == before
    assert mgmt.condition("cluster", NAME, "Available")
    t2 = time.monotonic()
    mgmt.capd("delete", "cluster", NAME, "--wait", "--timeout", "300")
    wait_for(lambda: not docker_leftovers(NAME), 120, "no docker leftovers")
    print(f"\nupstream kcp-md-taints flavor: Available after {available:.0f}s, added taints on Nodes in {added:.0f}s, "
          f"deleted in {time.monotonic() - t2:.0f}s; whole test {time.monotonic() - t0:.0f}s")
