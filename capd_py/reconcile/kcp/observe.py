"""From the objects the KCP controller reads to the `MachineView`s the decisions work on: which
Machines the KCP owns, which Node and static pods belong to each, whether the Machine is outdated."""

from __future__ import annotations

import datetime as _dt
from typing import Any

from capd_py.api import conditions, contract
from capd_py.api.labels import (
    CONTROL_PLANE,
    DELETE_MACHINE_ANNOTATION,
    KCP_REMEDIATION_FOR,
    NODE_ROLE_CONTROL_PLANE,
)
from capd_py.reconcile.kcp.common import ETCD_MEMBER_HEALTHY, STATIC_PODS, MachineView, parse_time
from capd_py.reconcile.kcp.rollout import outdated_reasons

# what the controller lists in the workload cluster's kube-system namespace
CONTROL_PLANE_POD_SELECTOR = "tier=control-plane"


def owned(kcp: dict[str, Any], machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Machines carrying an owner reference to this KCP (by uid)."""
    uid = kcp["metadata"]["uid"]
    return [m for m in machines if any(o.get("uid") == uid for o in m["metadata"].get("ownerReferences") or [])]


def workers(machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in machines if CONTROL_PLANE not in (m["metadata"].get("labels") or {})]


def pod_ready(pod: dict[str, Any]) -> bool:
    if contract.dig(pod, "status", "phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in contract.dig(pod, "status", "conditions", default=[]) or [])


def node_concerns_control_plane(node: dict[str, Any], cluster: dict[str, Any]) -> bool:
    """Whether a workload Node's change can change the control plane's state: any Node while the control
    plane is not initialized (the first one's registration ends the wait), control-plane Nodes after."""
    return (not contract.control_plane_initialized(cluster)
            or NODE_ROLE_CONTROL_PLANE in (contract.dig(node, "metadata", "labels") or {}))


def node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in contract.dig(node, "status", "conditions", default=[]) or [])


def cond_status(obj: dict[str, Any], ctype: str) -> bool | None:
    c = conditions.get(obj, ctype)
    return None if c is None else c.get("status") == conditions.TRUE


def node_for(machine: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Machine's Node: by status.nodeRef, else by providerID, else by name."""
    ref = contract.dig(machine, "status", "nodeRef", "name")
    pid = contract.provider_id(machine)
    for n in nodes:
        if ref and n["metadata"]["name"] == ref:
            return n
    for n in nodes:
        if pid and contract.dig(n, "spec", "providerID") == pid:
            return n
    for n in nodes:
        if n["metadata"]["name"] == machine["metadata"]["name"]:
            return n
    return None


def node_internal_ip(node: dict[str, Any]) -> str | None:
    return next((a["address"] for a in contract.dig(node, "status", "addresses", default=[]) or []
                 if a.get("type") == "InternalIP"), None)


def machine_view(kcp: dict[str, Any], machine: dict[str, Any], config: dict[str, Any] | None,
                 infra: dict[str, Any] | None, nodes: list[dict[str, Any]], pods: dict[str, dict[str, Any]],
                 now: _dt.datetime) -> MachineView:
    """`pods`: the workload's kube-system control-plane pods by name (static pods are `<component>-<node>`)."""
    md = machine["metadata"]
    node = node_for(machine, nodes)
    nname = node["metadata"]["name"] if node else ""
    return MachineView(
        name=md["name"], created=parse_time(md.get("creationTimestamp")) or now,
        failure_domain=contract.dig(machine, "spec", "failureDomain") or "",
        deleting=bool(md.get("deletionTimestamp")),
        delete_annotation=DELETE_MACHINE_ANNOTATION in (md.get("annotations") or {}),
        node_name=nname, node_ready=bool(node and node_ready(node)),
        pods_ready={p: bool(nname and f"{p}-{nname}" in pods and pod_ready(pods[f"{p}-{nname}"]))
                    for p in STATIC_PODS},
        outdated_reasons=outdated_reasons(kcp, machine, (config or {}).get("spec") if config else None, infra, now,
                                          config_meta=(config or {}).get("metadata")),
        machine_ready=cond_status(machine, conditions.READY),
        machine_available=cond_status(machine, conditions.AVAILABLE),
        remediate=cond_status(machine, "OwnerRemediated") is False,
        remediation_for=str((md.get("annotations") or {}).get(KCP_REMEDIATION_FOR) or ""),
        node_ref=str(contract.dig(machine, "status", "nodeRef", "name") or ""),
        provider_id=contract.provider_id(machine) or "",
        infra_kind=str(contract.dig(machine, "spec", "infrastructureRef", "kind") or ""),
        node_created=parse_time(node["metadata"].get("creationTimestamp")) if node else None,
        etcd_member=conditions.get(machine, ETCD_MEMBER_HEALTHY),
    )
