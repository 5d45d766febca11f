"""Machine taints on the workload Node (pure), as upstream's MachineTaintPropagation (alpha, gate off by default):
`spec.taints` of a Machine with `propagation: Always` are kept on its Node and removed from it when they leave the
Machine; `OnInitialization` taints are put on the Node once, the first time (then the Node is the user's). The
`cluster.x-k8s.io/taints-from-machine` annotation on the Node records the Always taints the controller owns
(`key:effect`, sorted, comma-separated) and that initialization happened (present, maybe empty)."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract

TAINTS_FROM_MACHINE = "cluster.x-k8s.io/taints-from-machine"
ALWAYS, ON_INITIALIZATION = "Always", "OnInitialization"


def _key(t: dict[str, Any]) -> str:
    return f"{t.get('key')}:{t.get('effect')}"


def _core_taint(t: dict[str, Any]) -> dict[str, Any]:
    out = {"key": t["key"], "effect": t["effect"]}
    if t.get("value"):
        out["value"] = t["value"]
    return out


def node_taints_patch(machine: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """A merge patch (with the Node's resourceVersion: optimistic, another writer wins and we retry) bringing the
    Node's taints and tracking annotation in line with the Machine's spec.taints; None when they already are."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    initialized = TAINTS_FROM_MACHINE in annotations
    owned = {k for k in str(annotations.get(TAINTS_FROM_MACHINE) or "").split(",") if k}
    current = [dict(t) for t in contract.dig(node, "spec", "taints", default=[]) or []]
    taints = list(current)
    want_always: set[str] = set()
    on_init: set[str] = set()
    for t in contract.dig(machine, "spec", "taints", default=[]) or []:
        k = _key(t)
        if t.get("propagation") == ON_INITIALIZATION:
            on_init.add(k)
            if initialized:
                continue
        else:
            want_always.add(k)
        want = _core_taint(t)
        i = next((i for i, c in enumerate(taints) if _key(c) == k), None)
        if i is None:
            taints.append(want)
        elif taints[i].get("value") != want.get("value"):
            taints[i] = want
    drop = owned - want_always - on_init
    taints = [t for t in taints if _key(t) not in drop]
    tracking = ",".join(sorted(want_always))
    patch: dict[str, Any] = {}
    if taints != current:
        patch["spec"] = {"taints": taints or None}
    if not initialized or annotations.get(TAINTS_FROM_MACHINE) != tracking:
        patch["metadata"] = {"annotations": {TAINTS_FROM_MACHINE: tracking}}
    if not patch:
        return None
    patch.setdefault("metadata", {})["resourceVersion"] = (node.get("metadata") or {}).get("resourceVersion")
    return patch
