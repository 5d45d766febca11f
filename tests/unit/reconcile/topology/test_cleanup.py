"""Which templates go with a deleted topology MachineDeployment or MachineSet (reconcile/topology/cleanup.py,
upstream's CalculateTemplatesInUse + DeleteTemplateIfUnused)."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.reconcile.topology import cleanup

pytestmark = pytest.mark.unit


def _owner(name: str, boot: str, infra: str, deleting: bool = False) -> dict[str, Any]:
    md: dict[str, Any] = {"name": name}
    if deleting:
        md["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    return {"metadata": md, "spec": {"template": {"spec": {
        "bootstrap": {"configRef": {"kind": "KubeadmConfigTemplate", "name": boot}},
        "infrastructureRef": {"kind": "DevMachineTemplate", "name": infra}}}}}


def test_a_deleted_machinesets_templates_go_unless_the_deployment_or_another_set_uses_them() -> None:
    md = _owner("md", "boot-2", "infra-2")
    old = _owner("ms-old", "boot-1", "infra-1", deleting=True)
    new = _owner("ms-new", "boot-2", "infra-2")
    in_use = cleanup.templates_in_use(md, [old, new])
    assert [r["name"] for r in cleanup.unused(old, in_use)] == ["boot-1", "infra-1"]
    assert cleanup.unused(new, in_use) == []


def test_a_deleted_deployment_leaves_only_what_live_sets_use() -> None:
    md = _owner("md", "boot-2", "infra-2", deleting=True)
    assert [r["name"] for r in cleanup.unused(md, cleanup.templates_in_use(md, []))] == ["boot-2", "infra-2"]
    live = _owner("ms", "boot-2", "infra-1")
    assert [r["name"] for r in cleanup.unused(md, cleanup.templates_in_use(md, [live]))] == ["infra-2"]
