"""Machine taints propagated to the Node as upstream's MachineTaintPropagation: Always kept and owned,
OnInitialization once, removed taints dropped only when they were ours."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile.nodetaints import TAINTS_FROM_MACHINE, node_taints_patch

pytestmark = pytest.mark.unit


def _machine(*taints: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "m"}, "spec": {"taints": list(taints)}}


def _node(taints: list[dict[str, Any]] | None = None, tracking: str | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "n", "resourceVersion": "7"}
    if tracking is not None:
        md["annotations"] = {TAINTS_FROM_MACHINE: tracking}
    return {"metadata": md, "spec": {"taints": taints} if taints is not None else {}}


ALWAYS = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule", "propagation": "Always"}
ONCE = {"key": "init", "effect": "NoExecute", "propagation": "OnInitialization"}
USER = {"key": "user", "effect": "NoSchedule"}


def _apply(node: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    if not patch:
        return node
    md = dict(node["metadata"])
    md["annotations"] = {**(md.get("annotations") or {}), **patch.get("metadata", {}).get("annotations", {})}
    spec = dict(node["spec"])
    if "spec" in patch:
        spec["taints"] = patch["spec"]["taints"] or []
    return {"metadata": md, "spec": spec}


def test_first_sync_sets_both_kinds_and_the_tracking_annotation() -> None:
    p = node_taints_patch(_machine(ALWAYS, ONCE), _node([USER]))
    assert p == {"spec": {"taints": [USER, {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                     {"key": "init", "effect": "NoExecute"}]},
                 "metadata": {"annotations": {TAINTS_FROM_MACHINE: "dedicated:NoSchedule"}, "resourceVersion": "7"}}
    # in line afterwards: no patch
    assert node_taints_patch(_machine(ALWAYS, ONCE), _apply(_node([USER]), p)) is None


def test_on_initialization_taints_are_not_put_back() -> None:
    node = _node([USER, {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], "dedicated:NoSchedule")
    assert node_taints_patch(_machine(ALWAYS, ONCE), node) is None  # the user removed `init`: it stays removed


def test_always_taints_follow_the_machine_and_only_ours_are_removed() -> None:
    node = _node([USER, {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}], "dedicated:NoSchedule")
    # value changed in place
    p = node_taints_patch(_machine({**ALWAYS, "value": "tpu"}), node)
    assert p is not None and p["spec"]["taints"][1] == {"key": "dedicated", "value": "tpu", "effect": "NoSchedule"}
    # gone from the Machine: removed from the Node, the user's taint stays
    p = node_taints_patch(_machine(), node)
    assert p is not None and p["spec"]["taints"] == [USER]
    assert p["metadata"]["annotations"][TAINTS_FROM_MACHINE] == ""
    # a user's taint of the same key is not ours until the Machine names it
    assert node_taints_patch(_machine(), _node([USER], "")) is None
