"""MachineSet decisions (pure): which Machines belong, how many to create, which to delete (per
spec.deletion.order), which orphans to adopt, which unhealthy Machines to remediate, how to clone
the bootstrap/infrastructure templates, and the status/conditions.

Upstream v1beta2 names: spec.deletion.order Random|Newest|Oldest (default Random); the
`cluster.x-k8s.io/delete-machine` annotation and unhealthy Machines go first.
"""

from __future__ import annotations

import copy
import datetime as _dt
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, selectors
from capd_py.api.admission.core import machine_deletion
from capd_py.api.labels import (
    CLONED_FROM_GROUP_KIND,
    CLONED_FROM_NAME,
    CLUSTER_NAME,
    DELETE_MACHINE_ANNOTATION,
    DEPLOYMENT_NAME,
    FINALIZER_MACHINE,
    SET_NAME,
)
from capd_py.reconcile import coreutil

ORDER_RANDOM, ORDER_NEWEST, ORDER_OLDEST = "Random", "Newest", "Oldest"

MACHINES_READY = "MachinesReady"
MACHINES_UP_TO_DATE = "MachinesUpToDate"
SCALING_UP = "ScalingUp"
SCALING_DOWN = "ScalingDown"
REMEDIATING = "Remediating"
OWNER_REMEDIATED = "OwnerRemediated"
UP_TO_DATE = "UpToDate"

_MUST_DELETE, _DELETE_FIRST, _BETTER, _COULD, _MUST_NOT = 100.0, 80.0, 50.0, 20.0, 0.0
_TEN_DAYS = 864000.0


# --- membership ---------------------------------------------------------------------------------


def cluster_adopts(ms: dict[str, Any]) -> bool:
    """Whether the Cluster becomes the MachineSet's owner: a stand-alone MachineSet only (upstream's shouldAdopt);
    one a MachineDeployment made (its deployment-name label) waits for the MachineDeployment to adopt it again."""
    if contract.core_owner_name(ms, "MachineDeployment") or contract.core_owner_name(ms, "Cluster"):
        return False
    return DEPLOYMENT_NAME not in (ms["metadata"].get("labels") or {})


def owns(ms: dict[str, Any], machine: dict[str, Any]) -> bool:
    o = contract.controller_owner(machine, "MachineSet")
    return bool(o and o.get("uid") == ms["metadata"]["uid"])


def machines_of(ms: dict[str, Any], machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in machines if owns(ms, m)]


def orphans_to_adopt(ms: dict[str, Any], machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Machines of the same cluster matching the selector that have no controller owner."""
    sel = contract.dig(ms, "spec", "selector")
    if selectors.selector_is_empty(sel):
        return []
    cn = contract.dig(ms, "spec", "clusterName")
    out = []
    for m in machines:
        if contract.controller_owner(m) is not None or coreutil.is_deleting(m):
            continue
        if contract.dig(m, "spec", "clusterName") != cn:
            continue
        if selectors.selector_matches(sel, m["metadata"].get("labels")):
            out.append(m)
    return out


def spec_defaults_patch(ms: dict[str, Any]) -> dict[str, Any] | None:
    return coreutil.selector_defaults_patch(ms, SET_NAME)


# --- deletion order -----------------------------------------------------------------------------


def is_machine_healthy(m: dict[str, Any]) -> bool:
    if not contract.dig(m, "status", "nodeRef", "name"):
        return False
    nh = cond.get(m, "NodeHealthy")
    if nh and nh.get("status") == cond.FALSE:
        return False
    hc = cond.get(m, "HealthCheckSucceeded")
    return not (hc and hc.get("status") == cond.FALSE)


def _age_seconds(m: dict[str, Any], now: _dt.datetime) -> float | None:
    t = coreutil.parse_time(m["metadata"].get("creationTimestamp"))
    return None if t is None else (now - t).total_seconds()


def delete_priority(m: dict[str, Any], order: str, now: _dt.datetime) -> float:
    if coreutil.is_deleting(m):
        return _MUST_DELETE
    if DELETE_MACHINE_ANNOTATION in (m["metadata"].get("annotations") or {}):
        return _DELETE_FIRST
    if not is_machine_healthy(m):
        return _BETTER
    if order == ORDER_RANDOM or not order:
        return _COULD
    age = _age_seconds(m, now)
    oldest = _MUST_NOT if age is None or age < 0 else _BETTER * (1.0 - math.exp(-age / _TEN_DAYS))
    if order == ORDER_OLDEST:
        return oldest
    return _BETTER - oldest  # Newest


def machines_to_delete(machines: list[dict[str, Any]], count: int, order: str | None,
                       now: _dt.datetime | None = None) -> list[dict[str, Any]]:
    """The `count` Machines to delete, highest priority first; ties broken by name."""
    if count <= 0:
        return []
    now = now or coreutil.utcnow()
    o = order or ORDER_RANDOM
    if o not in (ORDER_RANDOM, ORDER_NEWEST, ORDER_OLDEST):
        raise ValueError(f"unsupported deletion order {o!r}; must be one of Random, Newest, Oldest")
    ranked = sorted(machines, key=lambda m: (-delete_priority(m, o, now), m["metadata"]["name"]))
    return ranked[:count]


# --- planning -----------------------------------------------------------------------------------


@dataclass
class Plan:
    create: int = 0
    delete: list[dict[str, Any]] = field(default_factory=list)
    remediate: list[dict[str, Any]] = field(default_factory=list)


def needs_remediation(m: dict[str, Any]) -> bool:
    c = cond.get(m, OWNER_REMEDIATED)
    return bool(c and c.get("status") == cond.FALSE) and not coreutil.is_deleting(m)


def plan(ms: dict[str, Any], owned: list[dict[str, Any]], now: _dt.datetime | None = None) -> Plan:
    """Remediate Machines the MHC marked (OwnerRemediated=False) by deleting them; create or delete
    to reach spec.replicas. As upstream, Machines being deleted still count (a replacement is created
    once the old Machine is gone), and they are the first picked when scaling down."""
    p = Plan()
    p.remediate = [m for m in owned if needs_remediation(m)]
    want = coreutil.replicas_of(ms)
    if len(owned) < want:
        p.create = want - len(owned)
    elif len(owned) > want:
        order = contract.dig(ms, "spec", "deletion", "order")
        rem = {m["metadata"]["name"] for m in p.remediate}
        picked = machines_to_delete(owned, len(owned) - want, order, now)
        p.delete = [m for m in picked if not coreutil.is_deleting(m) and m["metadata"]["name"] not in rem]
    return p


def limit_remediation(candidates: list[dict[str, Any]], deployment_machines: list[dict[str, Any]],
                      max_in_flight: int | str | None, replicas: int) -> list[dict[str, Any]]:
    """MachineDeployment spec.remediation.maxInFlight: how many of `candidates` may be remediated now,
    given the deployment's Machines already being remediated (deleting with OwnerRemediated=False)."""
    if max_in_flight is None:
        return candidates
    limit = coreutil.scaled_value(max_in_flight, replicas, round_up=True)
    in_flight = sum(1 for m in deployment_machines if coreutil.is_deleting(m)
                    and (cond.get(m, OWNER_REMEDIATED) or {}).get("status") == cond.FALSE)
    room = max(0, limit - in_flight)
    return sorted(candidates, key=lambda m: m["metadata"]["name"])[:room]


# --- cloning ------------------------------------------------------------------------------------

# the letters of a random name suffix (upstream's utilrand: consonants and digits; drawn by controllers/entropy.py)
SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


_NAMING_VAR = re.compile(r"\{\{\s*\.(cluster\.name|machineSet\.name|random)\s*\}\}")


def machine_name(ms: dict[str, Any], suffix: str) -> str:
    """spec.machineNaming.template (variables .cluster.name, .machineSet.name, .random: `suffix`, five random
    characters), default `{{ .machineSet.name }}-{{ .random }}`; over 63 characters: cut to 58 plus the suffix."""
    rnd = suffix
    tpl = contract.dig(ms, "spec", "machineNaming", "template") or "{{ .machineSet.name }}-{{ .random }}"
    values = {"cluster.name": contract.dig(ms, "spec", "clusterName") or "",
              "machineSet.name": ms["metadata"]["name"], "random": rnd}
    name = _NAMING_VAR.sub(lambda mt: values[mt.group(1)], tpl)
    if len(name) > 63:
        name = name[:58] + rnd[:5]
    return name


def instance_kind(template_kind: str) -> str:
    return template_kind[: -len("Template")] if template_kind.endswith("Template") else template_kind


def clone_from_template(template: dict[str, Any], name: str, namespace: str, cluster_name: str,
                        owner: dict[str, Any], extra_labels: dict[str, str] | None = None) -> dict[str, Any]:
    """An object built from a *Template's spec.template (metadata + spec), with cloned-from
    annotations, the cluster-name label and an owner reference to the MachineSet.

    The clone's spec is the template's as is (upstream's external.GenerateTemplate copies spec.template): a
    template without one (upstream's e2e `-md-0` KubeadmConfigTemplate has no spec at all) gives an object
    without spec, never `spec: {}`, which KubeadmConfig's schema rejects (`minProperties: 1`)."""
    tpl = contract.dig(template, "spec", "template", default={}) or {}
    tmd = tpl.get("metadata") or {}
    group = template["apiVersion"].rpartition("/")[0]
    labels = {**(tmd.get("labels") or {}), **(extra_labels or {}), CLUSTER_NAME: cluster_name}
    annotations = {**(tmd.get("annotations") or {}), CLONED_FROM_NAME: template["metadata"]["name"],
                   CLONED_FROM_GROUP_KIND: f"{template['kind']}.{group}"}
    out: dict[str, Any] = {
        "apiVersion": template["apiVersion"],
        "kind": instance_kind(template["kind"]),
        "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations,
                     "ownerReferences": [owner]},
    }
    if tpl.get("spec") is not None:
        out["spec"] = copy.deepcopy(tpl["spec"])
    return out


def machine_labels(ms: dict[str, Any]) -> dict[str, str]:
    tl = dict(contract.dig(ms, "spec", "template", "metadata", "labels", default={}) or {})
    tl[SET_NAME] = ms["metadata"]["name"][:63]
    tl[CLUSTER_NAME] = contract.dig(ms, "spec", "clusterName")
    dep = (ms["metadata"].get("labels") or {}).get(DEPLOYMENT_NAME)
    if dep:
        tl[DEPLOYMENT_NAME] = dep
    return tl


def new_machine(ms: dict[str, Any], name: str, bootstrap_obj: dict[str, Any] | None,
                infra_obj: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(contract.dig(ms, "spec", "template", "spec", default={}) or {})
    spec["clusterName"] = contract.dig(ms, "spec", "clusterName")
    boot = dict(spec.get("bootstrap") or {})
    if bootstrap_obj is not None:
        boot["configRef"] = coreutil.ref_of(bootstrap_obj)
        boot.pop("dataSecretName", None)
    spec["bootstrap"] = boot
    spec["infrastructureRef"] = coreutil.ref_of(infra_obj)
    ann = dict(contract.dig(ms, "spec", "template", "metadata", "annotations", default={}) or {})
    md: dict[str, Any] = {"name": name, "namespace": ms["metadata"]["namespace"], "labels": machine_labels(ms),
                          "ownerReferences": [contract.owner_ref(ms, controller=True)],
                          # as upstream's MachineSet: saves the Machine controller's first patch per Machine
                          "finalizers": [FINALIZER_MACHINE]}
    if ann:
        md["annotations"] = ann
    return {"apiVersion": ms["apiVersion"], "kind": "Machine", "metadata": md, "spec": spec}


IN_PLACE_MACHINE_FIELDS = ("minReadySeconds", "deletion", "readinessGates", "taints")


def in_place_machine_patch(ms: dict[str, Any], m: dict[str, Any]) -> dict[str, Any] | None:
    """Spec fields upstream propagates to existing Machines without replacing them (a merge patch: a deletion
    timeout the template no longer sets is removed, and the Machine webhook's default counts as set)."""
    tspec = contract.dig(ms, "spec", "template", "spec", default={}) or {}
    want = {**{f: tspec.get(f) for f in IN_PLACE_MACHINE_FIELDS}, "deletion": machine_deletion(tspec.get("deletion"))}
    return coreutil.in_place_spec_patch(want, m.get("spec") or {})


def is_up_to_date(ms: dict[str, Any], m: dict[str, Any]) -> bool:
    """The Machine's UpToDate condition when it has one (set for MachineDeployment Machines), else the
    Machine matches its MachineSet's template version (template changes roll out via new MachineSets)."""
    c = cond.get(m, UP_TO_DATE)
    if c is not None:
        return c.get("status") == cond.TRUE
    tspec = contract.dig(ms, "spec", "template", "spec", default={}) or {}
    return (tspec.get("version") or None) == (contract.dig(m, "spec", "version") or None)


# --- status -------------------------------------------------------------------------------------


def aggregate(machines: list[dict[str, Any]], ctype: str, ok: str, bad: str, unknown: str,
              none_reason: str = "NoReplicas") -> tuple[str, str, str]:
    """(status, reason, message) aggregating a Machine condition over Machines."""
    if not machines:
        return cond.TRUE, none_reason, ""
    src = {"MachinesReady": cond.READY, "MachinesUpToDate": UP_TO_DATE}.get(ctype, ctype)
    false_, unk = [], []
    for m in machines:
        c = cond.get(m, src)
        if c is None or c.get("status") == cond.UNKNOWN:
            unk.append(m["metadata"]["name"])
        elif c.get("status") == cond.FALSE:
            false_.append(m["metadata"]["name"])
    if false_:
        return cond.FALSE, bad, f"{src} is False on Machine(s) {', '.join(sorted(false_)[:5])}"
    if unk:
        return cond.UNKNOWN, unknown, f"{src} is Unknown on Machine(s) {', '.join(sorted(unk)[:5])}"
    return cond.TRUE, ok, ""


def v1beta1_counters(ms: dict[str, Any], owned: list[dict[str, Any]]) -> dict[str, int]:
    """Upstream's v1beta1 MachineSet counters (reconcileV1Beta1Status): Machines carrying every label of the
    template, Machines whose Node is Ready, and of those the available ones. Upstream reads each Node; the
    Machine's NodeReady condition mirrors it, and its Available condition already holds minReadySeconds."""
    template = contract.dig(ms, "spec", "template", "metadata", "labels") or {}
    labelled = sum(1 for m in owned if template.items() <= (m["metadata"].get("labels") or {}).items())
    node_ready = [m for m in owned if contract.dig(m, "status", "nodeRef") and cond.is_true(m, cond.NODE_READY)]
    return {"fullyLabeledReplicas": labelled, "readyReplicas": len(node_ready),
            "availableReplicas": sum(1 for m in node_ready if cond.is_true(m, cond.AVAILABLE))}


V1B1_MACHINES_CREATED, V1B1_RESIZED = "MachinesCreated", "Resized"


def v1beta1_conditions(ms: dict[str, Any], owned: list[dict[str, Any]], ready: int, preflight: Sequence[str] = (),
                       creation_error: str = "") -> list[dict[str, Any]]:
    """status.deprecated.v1beta1.conditions as upstream's MachineSet controller keeps them (syncReplicas and
    reconcileV1Beta1Status): MachinesCreated False while the preflight checks hold a scale up or a Machine cannot be
    made, True once the count is reached or going down; Resized False while scaling, True when every Machine's Node
    is Ready; Ready their summary. `ready`: the v1beta1 readyReplicas. (Upstream also aggregates the Machines'
    v1beta1 Ready conditions as MachinesReady; capd-py's Machines carry v1beta2 conditions only.)"""
    conds = list(contract.dig(ms, "status", "deprecated", "v1beta1", "conditions") or [])
    if preflight:
        conds = cond.set_v1beta1(conds, V1B1_MACHINES_CREATED, False, "PreflightCheckFailed", "; ".join(preflight),
                                 cond.SEVERITY_ERROR)
    elif creation_error:
        conds = cond.set_v1beta1(conds, V1B1_MACHINES_CREATED, False, "MachineCreationFailed", creation_error,
                                 cond.SEVERITY_ERROR)
    desired = 0 if coreutil.is_deleting(ms) else coreutil.replicas_of(ms)
    current = len(owned)
    if current < desired:
        conds = cond.set_v1beta1(conds, V1B1_RESIZED, False, "ScalingUp", f"Scaling up MachineSet to {desired} "
                                 f"replicas (actual {current})", cond.SEVERITY_WARNING)
    elif current > desired:
        conds = cond.set_v1beta1(conds, V1B1_RESIZED, False, "ScalingDown", f"Scaling down MachineSet to {desired} "
                                 f"replicas (actual {current})", cond.SEVERITY_WARNING)
        conds = cond.set_v1beta1(conds, V1B1_MACHINES_CREATED, True)
    else:
        if ready == current:
            conds = cond.set_v1beta1(conds, V1B1_RESIZED, True)
        conds = cond.set_v1beta1(conds, V1B1_MACHINES_CREATED, True)
    return cond.v1beta1_summary(conds, (V1B1_MACHINES_CREATED, V1B1_RESIZED))


def compute_status(ms: dict[str, Any], owned: list[dict[str, Any]], p: Plan | None = None,
                   preflight: Sequence[str] = (), creation_error: str = "") -> dict[str, Any]:
    old = dict(ms.get("status") or {})
    st = dict(old)
    gen = ms["metadata"].get("generation")
    conds = list(old.get("conditions") or [])

    def setc(ctype: str, status: bool | str, reason: str, msg: str = "") -> None:
        nonlocal conds
        conds = cond.set_condition(conds, ctype, status, reason, msg, observed_generation=gen)

    want = coreutil.replicas_of(ms)
    st["replicas"] = len(owned)
    st["readyReplicas"] = sum(1 for m in owned if cond.is_true(m, cond.READY))
    st["availableReplicas"] = sum(1 for m in owned if cond.is_true(m, cond.AVAILABLE))
    st["upToDateReplicas"] = sum(1 for m in owned if is_up_to_date(ms, m) and not coreutil.is_deleting(m))
    counters = v1beta1_counters(ms, owned)
    st = coreutil.with_v1beta1_counters(st, **counters)
    st["deprecated"]["v1beta1"]["conditions"] = v1beta1_conditions(ms, owned, counters["readyReplicas"], preflight,
                                                                   creation_error)
    st["selector"] = selectors.selector_string(contract.dig(ms, "spec", "selector"))
    if not st["selector"]:
        st.pop("selector")  # the CRD wants at least one character
    if gen is not None:
        st["observedGeneration"] = gen
    up, down = coreutil.scaling_conditions(len(owned), want)
    setc(SCALING_UP, *up)
    setc(SCALING_DOWN, *down)
    s, r, msg = aggregate(owned, MACHINES_READY, "Ready", "NotReady", "ReadyUnknown")
    setc(MACHINES_READY, s, r, msg)
    setc(MACHINES_UP_TO_DATE, *coreutil.machines_up_to_date_condition(len(owned), st["upToDateReplicas"]))
    rem = [m["metadata"]["name"] for m in owned if needs_remediation(m)] if p is None else \
        [m["metadata"]["name"] for m in p.remediate]
    if rem:
        setc(REMEDIATING, True, "Remediating", f"Remediating Machine(s) {', '.join(sorted(rem))}")
    else:
        setc(REMEDIATING, False, "NotRemediating")
    if coreutil.is_deleting(ms):
        setc(cond.DELETING, True, "Deleting", f"Deleting {len(owned)} Machine(s)")
    else:
        setc(cond.DELETING, False, "NotDeleting")
    st["conditions"] = conds
    return st
