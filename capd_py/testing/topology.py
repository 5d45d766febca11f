"""Test helper for the topology's pure decisions: a Blueprint from a ClusterClass and the templates it names."""

from __future__ import annotations

import copy
from typing import Any

from capd_py.reconcile.topology import desired as D


def blueprint(cc: dict[str, Any], by: dict[tuple[str, str], dict[str, Any]]) -> D.Blueprint:
    """The Blueprint of ClusterClass `cc` (v1beta2), its templates looked up in `by` by (kind, name) and copied."""
    spec = cc["spec"]

    def t(ref: dict[str, Any]) -> dict[str, Any]:
        return copy.deepcopy(by[(ref["kind"], ref["name"])])
    bp = D.Blueprint(cc, t(spec["infrastructure"]["templateRef"]), t(spec["controlPlane"]["templateRef"]),
                     t(spec["controlPlane"]["machineInfrastructure"]["templateRef"]))
    for c in spec["workers"].get("machineDeployments") or []:
        bp.md_classes[c["class"]] = D.WorkerClass(c, t(c["bootstrap"]["templateRef"]),
                                                  t(c["infrastructure"]["templateRef"]))
    for c in spec["workers"].get("machinePools") or []:
        bp.mp_classes[c["class"]] = D.WorkerClass(c, t(c["bootstrap"]["templateRef"]),
                                                  t(c["infrastructure"]["templateRef"]))
    return bp
