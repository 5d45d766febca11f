"""MachineDeployment decisions (pure): template hash, desired MachineSet for the current template,
RollingUpdate (maxSurge/maxUnavailable) and OnDelete maths, revision bookkeeping, cleanup of old
empty MachineSets, status and conditions.

Upstream v1beta2 field paths: spec.rollout.strategy.{type, rollingUpdate.{maxSurge,maxUnavailable}}
(defaults RollingUpdate, 1, 0), spec.rollout.after, spec.deletion.order, spec.paused; there is no
revisionHistoryLimit: old MachineSets scaled to zero are deleted.
"""

from __future__ import annotations

import copy
import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, selectors
from capd_py.api.labels import CLUSTER_NAME, DEPLOYMENT_NAME, REVISION_ANNOTATION, SET_NAME, TEMPLATE_HASH
from capd_py.reconcile import coreutil
from capd_py.reconcile.machineset import aggregate

ROLLING_UPDATE, ON_DELETE = "RollingUpdate", "OnDelete"
ROLLING_OUT = "RollingOut"
MACHINES_READY = "MachinesReady"
MACHINES_UP_TO_DATE = "MachinesUpToDate"
SCALING_UP, SCALING_DOWN = "ScalingUp", "ScalingDown"

PHASE_SCALING_UP, PHASE_SCALING_DOWN, PHASE_RUNNING = "ScalingUp", "ScalingDown", "Running"

# Machine spec fields upstream propagates in place (no rollout when they change).
_IN_PLACE_FIELDS = ("minReadySeconds", "deletion", "readinessGates", "taints")


def spec_defaults_patch(md: dict[str, Any]) -> dict[str, Any] | None:
    return coreutil.selector_defaults_patch(md, DEPLOYMENT_NAME)


def template_refs(md: dict[str, Any]) -> list[dict[str, str]]:
    """The *Template objects the MachineDeployment's machines are cloned from (infrastructure, then bootstrap).
    Upstream's MachineDeployment controller (reconcileExternalTemplateReference) makes the Cluster an owner of
    each, so they are garbage-collected with the Cluster."""
    spec = contract.dig(md, "spec", "template", "spec", default={}) or {}
    refs = [contract.ref(spec, "infrastructureRef"), contract.ref(spec, "bootstrap", "configRef")]
    return [r for r in refs if r and r.get("name") and str(r.get("kind", "")).endswith("Template")]


def template_hash(md: dict[str, Any], now: _dt.datetime | None = None) -> str:
    """Stable hash of the Machine template spec; once spec.rollout.after has passed it is mixed in,
    so a single new MachineSet is rolled out after that time."""
    spec = copy.deepcopy(contract.dig(md, "spec", "template", "spec", default={}) or {})
    for f in _IN_PLACE_FIELDS:
        spec.pop(f, None)
    data: dict[str, Any] = {"spec": spec}
    after = coreutil.parse_time(contract.dig(md, "spec", "rollout", "after"))
    if after is not None and (now or coreutil.utcnow()) >= after:
        data["rolloutAfter"] = coreutil.iso(after)
    return coreutil.stable_hash(data, 10)


def strategy(md: dict[str, Any]) -> tuple[str, int | str, int | str]:
    s = contract.dig(md, "spec", "rollout", "strategy", default={}) or {}
    ru = s.get("rollingUpdate") or {}
    ms = ru.get("maxSurge")
    mu = ru.get("maxUnavailable")
    return (s.get("type") or ROLLING_UPDATE, 1 if ms is None else ms, 0 if mu is None else mu)


def surge_unavailable(replicas: int, max_surge: int | str, max_unavailable: int | str) -> tuple[int, int]:
    """Resolve percentages (surge rounds up, unavailable rounds down); both zero → unavailable 1."""
    s = coreutil.scaled_value(max_surge, replicas, round_up=True)
    u = coreutil.scaled_value(max_unavailable, replicas, round_up=False)
    if s == 0 and u == 0:
        u = 1
    return s, u


def owns(md: dict[str, Any], ms: dict[str, Any]) -> bool:
    o = contract.controller_owner(ms, "MachineDeployment")
    return bool(o and o.get("uid") == md["metadata"]["uid"])


def revision(obj: dict[str, Any]) -> int:
    try:
        return int((obj["metadata"].get("annotations") or {}).get(REVISION_ANNOTATION) or 0)
    except ValueError:
        return 0


def machine_set_name(md: dict[str, Any], h: str) -> str:
    return f"{md['metadata']['name'][:52]}-{h}"


def desired_machine_set(md: dict[str, Any], h: str, replicas: int, rev: int) -> dict[str, Any]:
    """The MachineSet for the current template (labels + selector carry machine-template-hash)."""
    name = md["metadata"]["name"]
    ms_name = machine_set_name(md, h)
    cn = contract.dig(md, "spec", "clusterName")
    tpl = copy.deepcopy(contract.dig(md, "spec", "template", default={}) or {})
    tmd = dict(tpl.get("metadata") or {})
    tmd["labels"] = {**(tmd.get("labels") or {}), TEMPLATE_HASH: h, DEPLOYMENT_NAME: name[:63],
                     SET_NAME: ms_name[:63]}
    tpl["metadata"] = tmd
    tspec = dict(tpl.get("spec") or {})
    tspec["clusterName"] = cn
    tpl["spec"] = tspec
    sel = copy.deepcopy(contract.dig(md, "spec", "selector", default={}) or {})
    sel["matchLabels"] = {**(sel.get("matchLabels") or {}), TEMPLATE_HASH: h, SET_NAME: ms_name[:63]}
    labels = {**(contract.dig(md, "spec", "template", "metadata", "labels", default={}) or {}),
              CLUSTER_NAME: cn, DEPLOYMENT_NAME: name[:63], TEMPLATE_HASH: h}
    spec: dict[str, Any] = {"clusterName": cn, "replicas": replicas, "selector": sel, "template": tpl}
    order = contract.dig(md, "spec", "deletion", "order")
    if order:
        spec["deletion"] = {"order": order}
    naming = contract.dig(md, "spec", "machineNaming")
    if naming:
        spec["machineNaming"] = copy.deepcopy(naming)
    return {
        "apiVersion": md["apiVersion"], "kind": "MachineSet",
        "metadata": {"name": ms_name, "namespace": md["metadata"]["namespace"], "labels": labels,
                     "annotations": {REVISION_ANNOTATION: str(rev)},
                     "ownerReferences": [contract.owner_ref(md, controller=True)]},
        "spec": spec,
    }


def in_place_updates(md: dict[str, Any], ms: dict[str, Any]) -> dict[str, Any] | None:
    """Merge patch propagating fields that do not need a rollout (template labels/annotations,
    minReadySeconds, deletion timeouts, deletion order) to the current MachineSet."""
    want_tmd = contract.dig(md, "spec", "template", "metadata", default={}) or {}
    cur_tmd = contract.dig(ms, "spec", "template", "metadata", default={}) or {}
    patch_t: dict[str, Any] = {}
    wl = {**(want_tmd.get("labels") or {}), TEMPLATE_HASH: (cur_tmd.get("labels") or {}).get(TEMPLATE_HASH),
          DEPLOYMENT_NAME: md["metadata"]["name"][:63], SET_NAME: ms["metadata"]["name"][:63]}
    wl = {k: v for k, v in wl.items() if v is not None}
    if wl != (cur_tmd.get("labels") or {}):
        patch_t.setdefault("metadata", {})["labels"] = {**{k: None for k in cur_tmd.get("labels") or {}}, **wl}
    wa = want_tmd.get("annotations") or {}
    if wa != (cur_tmd.get("annotations") or {}):
        patch_t.setdefault("metadata", {})["annotations"] = {**{k: None for k in cur_tmd.get("annotations") or {}},
                                                             **wa}
    tspec_w = contract.dig(md, "spec", "template", "spec", default={}) or {}
    tspec_c = contract.dig(ms, "spec", "template", "spec", default={}) or {}
    for f in _IN_PLACE_FIELDS:
        if tspec_w.get(f) != tspec_c.get(f):
            patch_t.setdefault("spec", {})[f] = tspec_w.get(f)
    patch: dict[str, Any] = {}
    if patch_t:
        patch["template"] = patch_t
    order = contract.dig(md, "spec", "deletion", "order")
    if order and contract.dig(ms, "spec", "deletion", "order") != order:
        patch["deletion"] = {"order": order}
    naming = contract.dig(md, "spec", "machineNaming")
    if naming and contract.dig(ms, "spec", "machineNaming") != naming:
        patch["machineNaming"] = naming
    return {"spec": patch} if patch else None


@dataclass
class MS:
    """The numbers the rollout maths needs from one MachineSet."""
    name: str
    replicas: int           # spec.replicas
    available: int = 0      # status.availableReplicas
    actual: int = 0         # status.replicas (Machines that exist)
    created: str = ""       # creationTimestamp, for oldest-first ordering

    @classmethod
    def of(cls, ms: dict[str, Any]) -> MS:
        return cls(ms["metadata"]["name"], coreutil.replicas_of(ms, 0), coreutil.status_int(ms, "availableReplicas"),
                   coreutil.status_int(ms, "replicas"), ms["metadata"].get("creationTimestamp") or "")


@dataclass
class Scale:
    """Desired spec.replicas per MachineSet name."""
    replicas: dict[str, int] = field(default_factory=dict)


def _scale_down_excess(olds: list[MS], new: MS, want: dict[str, int], excess: int) -> int:
    """Remove `excess` replicas, old MachineSets first (newest old first), then the new one."""
    for ms in sorted(olds, key=lambda m: m.created, reverse=True) + [new]:
        if excess <= 0:
            break
        d = min(want[ms.name], excess)
        want[ms.name] -= d
        excess -= d
    return excess


def rolling_update(replicas: int, max_surge: int | str, max_unavailable: int | str, new: MS,
                   olds: list[MS]) -> Scale:
    """One step of the RollingUpdate strategy (Kubernetes Deployment semantics):
    1) scale the new MachineSet up within replicas + maxSurge;
    2) scale old MachineSets down while at least replicas - maxUnavailable stay available, removing
       unavailable old replicas first."""
    surge, unavail = surge_unavailable(replicas, max_surge, max_unavailable)
    want = {ms.name: ms.replicas for ms in [new, *olds]}
    total = sum(want.values())
    # A scale down of the MachineDeployment during a rollout: drop what is above the surge limit.
    if total > replicas + surge:
        _scale_down_excess(olds, new, want, total - (replicas + surge))
        total = sum(want.values())
    # 1) new MachineSet up
    if want[new.name] < replicas:
        room = replicas + surge - total
        if room > 0:
            want[new.name] += min(room, replicas - want[new.name])
    elif want[new.name] > replicas:
        want[new.name] = replicas
    # 2) old MachineSets down
    min_available = replicas - unavail
    new_unavailable = want[new.name] - new.available
    total = sum(want.values())
    max_scale_down = total - min_available - new_unavailable
    if max_scale_down > 0:
        olds_sorted = sorted(olds, key=lambda m: (m.created, m.name))
        # a) unhealthy (unavailable) old replicas first
        for ms in olds_sorted:
            if max_scale_down <= 0:
                break
            unhealthy = want[ms.name] - ms.available
            if unhealthy <= 0:
                continue
            d = min(max_scale_down, unhealthy)
            want[ms.name] -= d
            max_scale_down -= d
        # b) then available old replicas, as long as enough stay available
        available_total = new.available + sum(min(ms.available, want[ms.name]) for ms in olds)
        can_remove = min(available_total - min_available, max_scale_down)
        for ms in olds_sorted:
            if can_remove <= 0:
                break
            d = min(want[ms.name], can_remove)
            want[ms.name] -= d
            can_remove -= d
    return Scale(want)


def on_delete(replicas: int, new: MS, olds: list[MS]) -> Scale:
    """OnDelete: old MachineSets shrink only as their Machines are deleted by someone else (their
    spec follows the Machines that still exist); the new MachineSet fills up to spec.replicas."""
    want = {ms.name: ms.replicas for ms in [new, *olds]}
    for ms in olds:
        want[ms.name] = min(ms.replicas, ms.actual)
    old_total = sum(want[ms.name] for ms in olds)
    if old_total > replicas:  # MachineDeployment scaled down: shrink old ones, oldest first
        excess = old_total - replicas
        for ms in sorted(olds, key=lambda m: (m.created, m.name)):
            d = min(want[ms.name], excess)
            want[ms.name] -= d
            excess -= d
        old_total = sum(want[ms.name] for ms in olds)
    want[new.name] = max(0, replicas - old_total)
    return Scale(want)


def cleanup(olds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Old MachineSets that are empty (spec and status zero, status caught up) and may be deleted."""
    out = []
    for ms in olds:
        if coreutil.is_deleting(ms):
            continue
        if coreutil.replicas_of(ms, 0) != 0 or coreutil.status_int(ms, "replicas") != 0:
            continue
        if (ms["metadata"].get("generation") or 0) > int(contract.dig(ms, "status", "observedGeneration") or 0):
            continue
        out.append(ms)
    return out


# --- status -------------------------------------------------------------------------------------


def compute_status(md: dict[str, Any], mss: list[dict[str, Any]], new_name: str | None,
                   machines: list[dict[str, Any]]) -> dict[str, Any]:
    old = dict(md.get("status") or {})
    st = dict(old)
    gen = md["metadata"].get("generation")
    conds = list(old.get("conditions") or [])

    def setc(ctype: str, status: bool | str, reason: str, msg: str = "") -> None:
        nonlocal conds
        conds = cond.set_condition(conds, ctype, status, reason, msg, observed_generation=gen)

    want = coreutil.replicas_of(md)
    st["replicas"] = sum(coreutil.status_int(m, "replicas") for m in mss)
    st["readyReplicas"] = sum(coreutil.status_int(m, "readyReplicas") for m in mss)
    st["availableReplicas"] = sum(coreutil.status_int(m, "availableReplicas") for m in mss)
    new = next((m for m in mss if m["metadata"]["name"] == new_name), None)
    st["upToDateReplicas"] = coreutil.status_int(new, "upToDateReplicas") if new else 0
    # upstream's calculateV1Beta1Status: from the MachineSets' own v1beta1 counters; unavailable against their
    # spec.replicas, never below zero (a scale-down has more available than desired)
    available = sum(coreutil.v1beta1_int(m, "availableReplicas") for m in mss)
    st = coreutil.with_v1beta1_counters(
        st, updatedReplicas=coreutil.status_int(new, "replicas") if new else 0,
        readyReplicas=sum(coreutil.v1beta1_int(m, "readyReplicas") for m in mss), availableReplicas=available,
        unavailableReplicas=max(0, sum(coreutil.replicas_of(m, 0) for m in mss) - available))
    st["selector"] = selectors.selector_string(contract.dig(md, "spec", "selector"))
    if not st["selector"]:
        st.pop("selector")  # the CRD wants at least one character
    if gen is not None:
        st["observedGeneration"] = gen
    cur = st["replicas"]
    st["phase"] = PHASE_SCALING_UP if cur < want else PHASE_SCALING_DOWN if cur > want else PHASE_RUNNING

    _, surge, unavail = strategy(md)
    _, max_unavail = surge_unavailable(want, surge, unavail)
    min_avail = max(0, want - max_unavail)
    if st["availableReplicas"] >= min_avail:
        setc(cond.AVAILABLE, True, "Available")
    else:
        setc(cond.AVAILABLE, False, "NotAvailable",
             f"{st['availableReplicas']} available replicas, at least {min_avail} required "
             f"(spec.rollout.strategy.rollingUpdate.maxUnavailable is {unavail}, spec.replicas is {want})")

    s, r, msg = aggregate(machines, MACHINES_READY, "Ready", "NotReady", "ReadyUnknown")
    setc(MACHINES_READY, s, r, msg)
    not_up = st["replicas"] - st["upToDateReplicas"]
    if not machines and cur == 0:
        setc(MACHINES_UP_TO_DATE, True, "NoReplicas")
    elif not_up <= 0:
        setc(MACHINES_UP_TO_DATE, True, "UpToDate")
    else:
        setc(MACHINES_UP_TO_DATE, False, "NotUpToDate", f"{not_up} Machine(s) not up to date")
    old_mss = [m for m in mss if m["metadata"]["name"] != new_name
               and (coreutil.replicas_of(m, 0) > 0 or coreutil.status_int(m, "replicas") > 0)]
    if old_mss:
        setc(ROLLING_OUT, True, "RollingOut",
             f"Rolling out {not_up} not up-to-date replica(s) from MachineSet(s) "
             + ", ".join(sorted(m["metadata"]["name"] for m in old_mss)))
    else:
        setc(ROLLING_OUT, False, "NotRollingOut")
    up, down = coreutil.scaling_conditions(cur, want)
    setc(SCALING_UP, *up)
    setc(SCALING_DOWN, *down)
    remediating = sorted(m["metadata"]["name"] for m in mss if cond.is_true(m, "Remediating"))
    if remediating:
        setc("Remediating", True, "Remediating", "Remediating Machines of MachineSet(s) " + ", ".join(remediating))
    else:
        setc("Remediating", False, "NotRemediating")
    if coreutil.is_deleting(md):
        setc(cond.DELETING, True, "Deleting", f"Deleting {len(mss)} MachineSet(s)")
    else:
        setc(cond.DELETING, False, "NotDeleting")
    st["conditions"] = conds
    return st
