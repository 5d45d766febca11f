"""Node drain and volume-detach decisions for a Machine's deletion (pure), as upstream Cluster API v1.13's
internal/controllers/machine/drain and the Machine controller's wait for volumes.

Drain: every Pod of the Node gets a behavior, Drain (with an order), Skip or WaitCompleted, decided in upstream's
filter order, the first Skip/WaitCompleted winning, otherwise the last filter's answer:
 1. a deletionTimestamp older than the skip grace (only while the Node is unreachable: 1 s) -> Skip;
 2. a running DaemonSet Pod whose DaemonSet exists -> Skip (an orphaned one is drained);
 3. a mirror (static) Pod -> Skip;
 4./5. local storage, no controller: drained (a warning only);
 6. the Pod label `cluster.x-k8s.io/drain`: `skip` -> Skip, `wait-completed` -> WaitCompleted (case-insensitive);
 7. the first MachineDrainRule (by name) matching the Machine (spec.machines: selector on the Machine's labels
    AND clusterSelector on its Cluster's) and the Pod (spec.pods: selector on the Pod's labels AND
    namespaceSelector on its Namespace's) decides; no rule: Drain, order 0.
Evictions go by order groups: only Pods of the lowest order among those still on the Node (Drain and
WaitCompleted, which always has order 0) are evicted; WaitCompleted Pods are never evicted, only waited for;
the drain is complete when no Drain or WaitCompleted Pod is left.

Volumes: after the drain the Machine waits until the Node's volumes are detached: `node.status.volumesAttached` and
attached VolumeAttachments of the Node, matched to PersistentVolumes; the PersistentVolumeClaims of Pods the drain
skipped do not count.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract
from capd_py.api.selectors import selector_matches
from capd_py.reconcile import coreutil

Obj = dict[str, Any]

DRAIN, SKIP, WAIT_COMPLETED = "Drain", "Skip", "WaitCompleted"
POD_DRAIN_LABEL = "cluster.x-k8s.io/drain"
MIRROR_POD_ANNOTATION = "kubernetes.io/config.mirror"
EXCLUDE_WAIT_FOR_VOLUME_DETACH_ANNOTATION = "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach"

# upstream: a terminating Pod is ignored after this long only while the Node is unreachable (its kubelet will
# never confirm the deletion); a reachable Node's Pods are waited for until they are gone
SKIP_WAIT_FOR_DELETE_UNREACHABLE_SECONDS = 1
DRAIN_RETRY_SECONDS = 20.0            # upstream's drainRetryInterval
VOLUME_DETACH_RETRY_SECONDS = 20.0    # upstream's waitForVolumeDetachRetryInterval

W_DAEMONSET_ORPHANED = "evicting orphaned DaemonSet-managed Pod"
W_DAEMONSET = "ignoring DaemonSet-managed Pod"
W_LOCAL_STORAGE = "evicting Pod with local storage"
W_UNMANAGED = "evicting Pod that has no controller"


def key(obj: Obj) -> str:
    md = obj.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}" if md.get("namespace") else str(md.get("name"))


def list_to_string(items: list[str], n: int) -> str:
    """upstream's clog.ListToString: the first n, then `... (k more)`."""
    shown = list(items[:n])
    if len(items) > n:
        shown.append(f"... ({len(items) - n} more)")
    return ", ".join(shown)


# --- which rules apply --------------------------------------------------------------------------------


def rule_applies_to_machine(rule: Obj, machine: Obj, cluster: Obj | None) -> bool:
    selectors = contract.dig(rule, "spec", "machines") or []
    if not selectors:
        return True
    m_labels = (machine.get("metadata") or {}).get("labels") or {}
    c_labels = ((cluster or {}).get("metadata") or {}).get("labels") or {}
    return any(selector_matches(s.get("selector"), m_labels) and selector_matches(s.get("clusterSelector"), c_labels)
               for s in selectors)


def rules_for_machine(rules: list[Obj], machine: Obj, cluster: Obj | None) -> list[Obj]:
    """The MachineDrainRules of the Machine's namespace that select it, by name (the first match wins)."""
    ns = (machine.get("metadata") or {}).get("namespace")
    return sorted((r for r in rules if (r.get("metadata") or {}).get("namespace") == ns
                   and rule_applies_to_machine(r, machine, cluster)), key=lambda r: str(r["metadata"]["name"]))


def rule_applies_to_pod(rule: Obj, pod: Obj, namespace: Obj) -> bool:
    selectors = contract.dig(rule, "spec", "pods") or []
    if not selectors:
        return True
    p_labels = (pod.get("metadata") or {}).get("labels") or {}
    n_labels = (namespace.get("metadata") or {}).get("labels") or {}
    return any(selector_matches(s.get("selector"), p_labels)
               and selector_matches(s.get("namespaceSelector"), n_labels) for s in selectors)


# --- what happens to each Pod --------------------------------------------------------------------------


@dataclass(frozen=True)
class PodDelete:
    pod: Obj
    behavior: str = DRAIN   # "" when the Pod could not be classified (error)
    order: int = 0
    warnings: tuple[str, ...] = ()
    error: str = ""

    @property
    def key(self) -> str:
        return key(self.pod)


def _finished(pod: Obj) -> bool:
    return contract.dig(pod, "status", "phase") in ("Succeeded", "Failed")


def _controller(pod: Obj) -> Obj | None:
    return next((o for o in (pod.get("metadata") or {}).get("ownerReferences") or [] if o.get("controller")), None)


def _label_behavior(value: str) -> str | None:
    if value.lower() == SKIP.lower():
        return SKIP
    if value.replace("-", "", 1).lower() == WAIT_COMPLETED.lower():
        return WAIT_COMPLETED
    return None  # an unknown value is ignored, as upstream (it only logs it)


def classify(pod: Obj, *, rules: list[Obj], namespaces: dict[str, Obj], daemonsets: set[str],
             now: _dt.datetime, skip_deleted_after: int = 0) -> PodDelete:
    """The behavior of one Pod (upstream's filters, in their order). `rules`: those matching the Machine, by
    name; `namespaces`: the workload cluster's Namespaces by name; `daemonsets`: `ns/name` of its DaemonSets."""
    md = pod.get("metadata") or {}
    warnings: list[str] = []
    # 1. terminating for longer than the grace (set only for an unreachable Node)
    since = coreutil.parse_time(md.get("deletionTimestamp"))
    if skip_deleted_after > 0 and since is not None and int((now - since).total_seconds()) > skip_deleted_after:
        return PodDelete(pod, SKIP)
    # 2. DaemonSet Pods (finished ones are drained)
    ctl = _controller(pod)
    if ctl is not None and ctl.get("kind") == "DaemonSet" and not _finished(pod):
        if f"{md.get('namespace')}/{ctl.get('name')}" not in daemonsets:
            warnings.append(W_DAEMONSET_ORPHANED)
        else:
            return PodDelete(pod, SKIP, warnings=(W_DAEMONSET,))
    # 3. mirror Pods
    if MIRROR_POD_ANNOTATION in (md.get("annotations") or {}):
        return PodDelete(pod, SKIP)
    # 4. local storage, 5. no controller: drained, with a warning
    if not _finished(pod):
        if any("emptyDir" in v for v in contract.dig(pod, "spec", "volumes", default=[]) or []):
            warnings.append(W_LOCAL_STORAGE)
        if ctl is None:
            warnings.append(W_UNMANAGED)
    # 6. the Pod's own label wins over MachineDrainRules
    label = (md.get("labels") or {}).get(POD_DRAIN_LABEL)
    behavior = _label_behavior(label) if label is not None else None
    if behavior is not None:
        return PodDelete(pod, behavior)
    # 7. MachineDrainRules
    namespace = namespaces.get(str(md.get("namespace")))
    if namespace is None:
        return PodDelete(pod, "", error="Pod Namespace does not exist")
    for rule in rules:
        if not rule_applies_to_pod(rule, pod, namespace):
            continue
        behavior = str(contract.dig(rule, "spec", "drain", "behavior") or "")
        if behavior == DRAIN:
            return PodDelete(pod, DRAIN, int(contract.dig(rule, "spec", "drain", "order") or 0), tuple(warnings))
        if behavior in (SKIP, WAIT_COMPLETED):
            return PodDelete(pod, behavior)
        return PodDelete(pod, "", error=f"MachineDrainRule {rule['metadata']['name']!r} has unknown "
                                        f"spec.drain.behavior: {behavior!r}")
    return PodDelete(pod, DRAIN, 0, tuple(warnings))


@dataclass
class PodDeleteList:
    items: list[PodDelete]

    def to_drain(self) -> list[PodDelete]:
        """Pods the drain evicts or waits for (upstream's Pods())."""
        return [i for i in self.items if i.behavior in (DRAIN, WAIT_COMPLETED)]

    def skipped(self) -> list[PodDelete]:
        return [i for i in self.items if i.behavior == SKIP]

    def errors(self) -> list[str]:
        """One message per error, naming its Pods (the drain stops on any, as upstream's GetPodsForEviction)."""
        by_msg: dict[str, list[str]] = {}
        for i in self.items:
            if i.error:
                by_msg.setdefault(i.error, []).append(i.key)
        return [f"Pods with error {msg!r}: {', '.join(pods)}" for msg, pods in sorted(by_msg.items())]


def pods_for_eviction(pods: list[Obj], *, rules: list[Obj], namespaces: dict[str, Obj], daemonsets: set[str],
                      now: _dt.datetime, node_unreachable: bool = False) -> PodDeleteList:
    grace = SKIP_WAIT_FOR_DELETE_UNREACHABLE_SECONDS if node_unreachable else 0
    return PodDeleteList([classify(p, rules=rules, namespaces=namespaces, daemonsets=daemonsets, now=now,
                                   skip_deleted_after=grace) for p in pods])


# --- order groups -------------------------------------------------------------------------------------


@dataclass
class EvictionPlan:
    evict_now: list[PodDelete] = field(default_factory=list)
    evict_later: list[PodDelete] = field(default_factory=list)
    terminating: list[PodDelete] = field(default_factory=list)    # Drain Pods that already have a deletionTimestamp
    wait_now: list[PodDelete] = field(default_factory=list)       # WaitCompleted Pods of the current group
    wait_later: list[PodDelete] = field(default_factory=list)
    ignored: list[PodDelete] = field(default_factory=list)


def plan_evictions(pods: PodDeleteList) -> EvictionPlan:
    """Upstream's EvictPods grouping: the current group is the lowest order among Drain and WaitCompleted Pods
    (terminating ones included: a group is over only when its Pods are gone)."""
    items = sorted(pods.items, key=lambda i: i.key)
    orders = [i.order for i in items if i.behavior in (DRAIN, WAIT_COMPLETED)]
    low = min(orders) if orders else 0
    plan = EvictionPlan()
    for i in items:
        terminating = bool((i.pod.get("metadata") or {}).get("deletionTimestamp"))
        if i.behavior == DRAIN and not terminating:
            (plan.evict_now if i.order == low else plan.evict_later).append(i)
        elif i.behavior == WAIT_COMPLETED:
            (plan.wait_now if i.order == low else plan.wait_later).append(i)
        elif i.behavior == DRAIN:
            plan.terminating.append(i)
        else:
            plan.ignored.append(i)
    return plan


EVICTED, NOT_FOUND = "evicted", "not-found"
PDB_MESSAGE = "cannot evict pod as it would violate the pod's disruption budget."


@dataclass
class EvictionResult:
    """What is left on the Node after this pass's evictions (pod keys), upstream's EvictionResult."""
    deletion_timestamp_set: list[str] = field(default_factory=list)
    failed: dict[str, list[str]] = field(default_factory=dict)   # failure message -> pods
    evict_later: list[str] = field(default_factory=list)
    wait_now: list[str] = field(default_factory=list)
    wait_later: list[str] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)

    @property
    def completed(self) -> bool:
        return not (self.deletion_timestamp_set or self.failed or self.evict_later or self.wait_now
                    or self.wait_later)

    def condition_message(self, started: str) -> str:
        """The Machine's Deleting condition message while the drain is not complete (upstream's wording)."""
        if self.completed:
            return ""
        msg = f"Drain not completed yet (started at {started}):"

        def kind(pods: list[str]) -> str:
            return "Pods" if len(pods) > 1 else "Pod"

        if self.deletion_timestamp_set:
            pods = self.deletion_timestamp_set
            msg += (f"\n* {kind(pods)} {list_to_string(pods, 3)}: deletionTimestamp set, but still not removed "
                    "from the Node")
        failures = sorted(self.failed)
        for failure in failures[:5]:
            pods = self.failed[failure]
            text = failure.replace("Cannot evict pod as it would violate the pod's disruption budget.", PDB_MESSAGE)
            if not text.startswith(PDB_MESSAGE):
                text = "failed to evict Pod, " + text
            msg += f"\n* {kind(pods)} {list_to_string(pods, 3)}: {text}"
        if len(failures) > 5:
            count = sum(len(self.failed[f]) for f in failures[5:])
            msg += "\n* 1 Pod with other issues" if count == 1 else f"\n* {count} Pods with other issues"
        if self.wait_now:
            msg += f"\n* {kind(self.wait_now)} {list_to_string(self.wait_now, 3)}: waiting for completion"
        if self.evict_later:
            msg += ("\nAfter above Pods have been removed from the Node, the following Pods will be evicted: "
                    + list_to_string(self.evict_later, 3))
        if self.wait_later:
            msg += ("\nAfter above Pods have been removed from the Node, waiting for the following Pods to complete "
                    "without eviction: " + list_to_string(self.wait_later, 3))
        return msg


def eviction_result(plan: EvictionPlan, outcomes: dict[str, str]) -> EvictionResult:
    """Fold this pass's eviction outcomes (pod key -> EVICTED, NOT_FOUND or a failure message; the Pods of
    plan.evict_now) into what is left."""
    res = EvictionResult(ignored=[i.key for i in plan.ignored],
                         deletion_timestamp_set=[i.key for i in plan.terminating])
    for i in plan.evict_now:
        out = outcomes.get(i.key, EVICTED)
        if out == EVICTED:
            res.deletion_timestamp_set.append(i.key)
        elif out == NOT_FOUND:
            res.not_found.append(i.key)
        else:
            res.failed.setdefault(out, []).append(i.key)
    res.evict_later = [i.key for i in plan.evict_later]
    res.wait_now = [i.key for i in plan.wait_now]
    res.wait_later = [i.key for i in plan.wait_later]
    return res


def eviction_failure(status: int, message: str, body: Obj | None) -> str:
    """The failure text of an eviction refused by the API server: a 429 (a disruption budget) with its causes,
    a terminating namespace in upstream's words, else the error."""
    causes = [str(c.get("message")) for c in (contract.dig(body, "details", "causes", default=[]) or [])
              if isinstance(c, dict)]
    if status == 429:
        return f"{message} {','.join(causes)}" if contract.dig(body, "details") is not None else message
    if status == 403 and any(c.get("type") == "NamespaceTerminating"
                             for c in contract.dig(body, "details", "causes", default=[]) or []):
        return ("Cannot evict pod from terminating namespace: unable to create eviction (kube-controller-manager "
                "should set deletionTimestamp)")
    return message


def eviction(pod: Obj, grace_period_seconds: int | None = None) -> Obj:
    md = pod["metadata"]
    body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction",
                 "metadata": {"name": md["name"], "namespace": md["namespace"]}}
    if grace_period_seconds is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_period_seconds}
    return body


def node_unreachable(node: Obj | None) -> bool:
    """The node's kubelet stopped reporting (Ready=Unknown), as the node lifecycle controller marks it."""
    for c in contract.dig(node, "status", "conditions", default=[]) or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "Unknown")
    return False


# --- volumes ------------------------------------------------------------------------------------------


def volume_detach_timeout_passed(machine: Obj, now: _dt.datetime) -> bool:
    timeout = contract.dig(machine, "spec", "deletion", "nodeVolumeDetachTimeoutSeconds")
    start = coreutil.parse_time(contract.dig(machine, "status", "deletion", "waitForNodeVolumeDetachStartTime"))
    if not timeout or int(timeout) <= 0 or start is None:
        return False
    return (now - start).total_seconds() >= int(timeout)


def is_volume_detach_wait_allowed(machine: Obj, now: _dt.datetime) -> bool:
    """upstream's isNodeVolumeDetachingAllowed: not excluded by annotation, timeout not passed."""
    ann = (machine.get("metadata") or {}).get("annotations") or {}
    return EXCLUDE_WAIT_FOR_VOLUME_DETACH_ANNOTATION not in ann and not volume_detach_timeout_passed(machine, now)


@dataclass
class AttachedVolumes:
    pvcs: list[str] = field(default_factory=list)                     # ns/name of attached claims still waited for
    pvs_without_claim: list[str] = field(default_factory=list)
    node_volumes_without_pv: list[str] = field(default_factory=list)
    attachment_pvs_without_pv: list[str] = field(default_factory=list)
    error: str = ""

    @property
    def empty(self) -> bool:
        return not (self.pvcs or self.pvs_without_claim or self.node_volumes_without_pv
                    or self.attachment_pvs_without_pv or self.error)

    def condition_message(self, started: str) -> str:
        if self.empty:
            return ""
        if self.error:
            return "Error waiting for volumes to be detached from Node, please check controller logs for errors"
        msg = f"Waiting for Node volumes to be detached (started at {started})"
        for title, items in (
                ("PersistentVolumeClaims", self.pvcs),
                ("PersistentVolumes without a .spec.claimRef to a PersistentVolumeClaim", self.pvs_without_claim),
                ("Node with .status.volumesAttached entries not matching a PersistentVolume",
                 self.node_volumes_without_pv),
                ("VolumeAttachment with .spec.source.persistentVolumeName not matching a PersistentVolume",
                 self.attachment_pvs_without_pv)):
            if items:
                msg += f"\n* {title}: {list_to_string(sorted(items), 5)}"
        return msg


def claims_of_skipped_pods(pods: PodDeleteList) -> set[str]:
    """ns/name of the PersistentVolumeClaims of Pods the drain skips: their volumes stay attached."""
    out = set()
    for i in pods.skipped():
        for v in contract.dig(i.pod, "spec", "volumes", default=[]) or []:
            claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
            if claim:
                out.add(f"{(i.pod.get('metadata') or {}).get('namespace')}/{claim}")
    return out


def attached_volumes(node: Obj, volume_attachments: list[Obj], persistent_volumes: list[Obj],
                     ignore_claims: set[str]) -> AttachedVolumes:
    """What the Machine still waits for (upstream's shouldWaitForNodeVolumes, after the Node lookup)."""
    node_name = (node.get("metadata") or {}).get("name")
    node_volumes = {str(v.get("name")) for v in contract.dig(node, "status", "volumesAttached", default=[]) or []}
    pv_names: set[str] = set()
    for va in volume_attachments:
        if not contract.dig(va, "status", "attached") or contract.dig(va, "spec", "nodeName") != node_name:
            continue
        pv = contract.dig(va, "spec", "source", "persistentVolumeName")
        if not pv:
            return AttachedVolumes(error=f"spec.source.persistentVolumeName for VolumeAttachment "
                                         f"{va['metadata']['name']} is not set")
        pv_names.add(str(pv))
    if not node_volumes and not pv_names:
        return AttachedVolumes()
    claims: set[str] = set()
    without_claim: list[str] = []
    found_node_volumes: set[str] = set()
    found_pvs: set[str] = set()
    for pv in persistent_volumes:
        name = str(pv["metadata"]["name"])
        found = False
        csi = contract.dig(pv, "spec", "csi")
        if csi:
            handle = f"kubernetes.io/csi/{csi.get('driver')}^{csi.get('volumeHandle')}"
            if handle in node_volumes:
                found_node_volumes.add(handle)
                found = True
        if name in pv_names:
            found_pvs.add(name)
            found = True
        if not found:
            continue
        ref = contract.dig(pv, "spec", "claimRef")
        if not ref or ref.get("kind") != "PersistentVolumeClaim":
            without_claim.append(name)
            continue
        claims.add(f"{ref.get('namespace')}/{ref.get('name')}")
    return AttachedVolumes(pvcs=sorted(claims - ignore_claims), pvs_without_claim=sorted(without_claim),
                           node_volumes_without_pv=sorted(node_volumes - found_node_volumes),
                           attachment_pvs_without_pv=sorted(pv_names - found_pvs))
