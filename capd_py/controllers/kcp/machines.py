"""What a KCP pass writes to its Machines besides creating and deleting them (scale.py): their UpToDate,
EtcdMemberHealthy and OwnerRemediated conditions (the control plane's to set, as upstream KCP) and the
machine-template fields changed in place without a rollout. The values are `reconcile.kcp`'s."""

from __future__ import annotations

from typing import Any

from capd_py.api.gvk import MACHINE
from capd_py.controllers import lifecycle
from capd_py.kube.client import Kube
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kcp import etcdhealth
from capd_py.reconcile.kcp import status as kcp_status

Obj = dict[str, Any]


async def set_conditions(kube: Kube, machines: list[Obj], views: list[rk.MachineView],
                         etcd: etcdhealth.Assessment | None) -> None:
    """The UpToDate and EtcdMemberHealthy conditions of every owned Machine."""
    by_name = {v.name: v for v in views}
    members = etcd.members if etcd is not None else {}
    for m in machines:
        name = m["metadata"]["name"]
        v = by_name.get(name)
        status = kcp_status.machine_conditions_status(m, v, members.get(name)) if v is not None else None
        if status is not None and not m["metadata"].get("deletionTimestamp"):
            await lifecycle.write_status(kube, MACHINE, m, status)


async def patch_in_place(kube: Kube, kcp: Obj, machines: list[Obj]) -> None:
    """Taints, readiness gates, deletion timeouts: changed on the Machines in place, no rollout."""
    for m in machines:
        ip = None if m["metadata"].get("deletionTimestamp") else rk.machine_in_place_patch(kcp, m)
        if ip:
            await kube.merge_patch(MACHINE, m["metadata"]["namespace"], m["metadata"]["name"], ip)


async def set_owner_remediated(kube: Kube, machines: list[Obj], action: rk.Action) -> None:
    """The remediated (or waiting) Machine says why, in its OwnerRemediated condition."""
    assert action.machine_condition is not None
    known = next((x for x in machines if x["metadata"]["name"] == action.machine), None)
    # read again: this pass may have written its UpToDate condition already
    m = await kube.get(MACHINE, known["metadata"]["namespace"], action.machine) if known else None
    if m is not None:
        await lifecycle.write_status(kube, MACHINE, m, rk.owner_remediated_status(m, *action.machine_condition))
