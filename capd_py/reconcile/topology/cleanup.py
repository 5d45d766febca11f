"""Which templates go with a deleted MachineDeployment or MachineSet a topology owns (pure; upstream's
topology/machineset util CalculateTemplatesInUse + DeleteTemplateIfUnused): a template is in use while a
MachineSet of the deployment that is not being deleted, or the deployment itself while it is not being deleted,
references it."""

from __future__ import annotations

from typing import Any

from capd_py.api import contract
from capd_py.reconcile import coreutil

Ref = tuple[str, str]  # (kind, name)


def template_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The bootstrap config and infrastructure template references of a MachineDeployment or MachineSet."""
    spec = contract.dig(obj, "spec", "template", "spec") or {}
    return [r for r in (contract.dig(spec, "bootstrap", "configRef"), spec.get("infrastructureRef")) if r]


def _key(ref: dict[str, Any]) -> Ref:
    return str(ref.get("kind", "")), str(ref.get("name", ""))


def templates_in_use(md: dict[str, Any] | None, machine_sets: list[dict[str, Any]]) -> set[Ref]:
    used = {_key(r) for ms in machine_sets if not coreutil.is_deleting(ms) for r in template_refs(ms)}
    if md is not None and not coreutil.is_deleting(md):
        used |= {_key(r) for r in template_refs(md)}
    return used


def unused(obj: dict[str, Any], in_use: set[Ref]) -> list[dict[str, Any]]:
    """`obj`'s template references that nothing in `in_use` holds: the ones to delete."""
    return [r for r in template_refs(obj) if _key(r) not in in_use]
