"""MachineTaintPropagation against a real API server (the envtest plays the workload cluster too): with the gate
on, a MachineDeployment's template taints reach its Machines in place (no new MachineSet) and the Machine controller
puts them on the Node (Always kept, OnInitialization once); with the gate off (upstream's default) Nodes get none."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import features
from capd_py.api.gvk import MACHINE, MACHINE_DEPLOYMENT, MACHINE_SET, NODE
from capd_py.controllers import machine as c_machine
from capd_py.controllers import machinedeployment as c_md
from capd_py.controllers import machineset as c_ms
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube
from capd_py.reconcile.nodetaints import TAINTS_FROM_MACHINE
from capd_py.testing.core_objects import (
    machines,
    make_node,
    md_obj,
    provision_machine,
    setup_cluster,
    workload_secret,
)
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]
Obj = dict[str, Any]
ALWAYS = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule", "propagation": "Always"}
ONCE = {"key": "init", "effect": "PreferNoSchedule", "propagation": "OnInitialization"}


def _ctx(kube: Kube, taints: bool) -> Ctx:
    c = direct_ctx(kube)
    c.settings.feature_gates = {**c.settings.feature_gates, features.MACHINE_TAINT_PROPAGATION: taints}
    return c


def _node_taints(node: Obj | None) -> list[tuple[str, str]]:
    """The Node's taints but the ones Kubernetes' node lifecycle controller manages (envtest runs one)."""
    return sorted((t["key"], t["effect"]) for t in ((node or {}).get("spec") or {}).get("taints") or []
                  if not t["key"].startswith("node.kubernetes.io/"))


async def _one_machine(kube: Kube, ctx: Ctx, ns: str, envtest: Any, taints: list[Obj]) -> tuple[str, str]:
    await setup_cluster(kube, ns)
    await workload_secret(kube, envtest, ns)
    md = md_obj(ns, 1)
    md["spec"]["template"]["spec"]["taints"] = taints
    await kube.create(MACHINE_DEPLOYMENT, md)
    await c_md.reconcile(ctx, ns, "md1")
    [ms] = await kube.list(MACHINE_SET, ns)
    await c_ms.reconcile(ctx, ns, ms["metadata"]["name"])
    [m] = await machines(kube, ns)
    node_name, pid = f"{ns}-node", f"docker:////{ns}-node"
    await make_node(kube, node_name, pid)
    await provision_machine(kube, ctx, ns, m["metadata"]["name"], pid)
    return m["metadata"]["name"], node_name


async def test_taints_reach_machines_in_place_and_nodes(kube: Kube, envtest: Any, namespace: str) -> None:
    ns = namespace
    ctx = _ctx(kube, taints=True)
    name, node_name = await _one_machine(kube, ctx, ns, envtest, [ALWAYS, ONCE])
    node = await kube.get(NODE, None, node_name)
    assert _node_taints(node) == [("dedicated", "NoSchedule"), ("init", "PreferNoSchedule")]
    assert node is not None and node["metadata"]["annotations"][TAINTS_FROM_MACHINE] == "dedicated:NoSchedule"
    rv = node["metadata"]["resourceVersion"]
    await c_machine.reconcile(ctx, ns, name)
    assert (await kube.get(NODE, None, node_name) or {})["metadata"]["resourceVersion"] == rv  # stable: no write

    # the user removes the OnInitialization taint: it stays removed
    node = await kube.get(NODE, None, node_name)
    assert node is not None
    await kube.merge_patch(NODE, None, node_name, {"spec": {"taints": [
        t for t in node["spec"]["taints"] if t["key"] != "init"]}})
    await c_machine.reconcile(ctx, ns, name)
    assert _node_taints(await kube.get(NODE, None, node_name)) == [("dedicated", "NoSchedule")]

    # the MachineDeployment's taint changes: same MachineSet, same Machine, new taint on the Node
    [ms_before] = await kube.list(MACHINE_SET, ns)
    await kube.merge_patch(MACHINE_DEPLOYMENT, ns, "md1", {"spec": {"template": {"spec": {"taints": [
        {"key": "team", "value": "a", "effect": "NoExecute", "propagation": "Always"}]}}}})
    await c_md.reconcile(ctx, ns, "md1")
    [ms_after] = await kube.list(MACHINE_SET, ns)
    assert ms_after["metadata"]["name"] == ms_before["metadata"]["name"]  # no rollout
    await c_ms.reconcile(ctx, ns, ms_after["metadata"]["name"])
    m = await kube.get(MACHINE, ns, name)
    assert m is not None and [t["key"] for t in m["spec"]["taints"]] == ["team"]
    await c_machine.reconcile(ctx, ns, name)
    node = await kube.get(NODE, None, node_name)
    assert _node_taints(node) == [("team", "NoExecute")]  # ours replaced, the removed one not put back
    assert node is not None and node["metadata"]["annotations"][TAINTS_FROM_MACHINE] == "team:NoExecute"
    await kube.delete(NODE, None, node_name)


async def test_gate_off_leaves_nodes_untainted(kube: Kube, envtest: Any, namespace: str) -> None:
    ns = namespace
    ctx = _ctx(kube, taints=False)
    name, node_name = await _one_machine(kube, ctx, ns, envtest, [ALWAYS])
    node = await kube.get(NODE, None, node_name)
    assert _node_taints(node) == [] and TAINTS_FROM_MACHINE not in ((node or {})["metadata"].get("annotations") or {})
    await kube.delete(NODE, None, node_name)
