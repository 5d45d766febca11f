"""The Machine deletion sequence as one pure decision, `decide_deletion(observed) -> action` (upstream v1.13's
internal/controllers/machine reconcileDelete):

  pre-drain hooks -> drain the Node (cordon, evict by order groups) -> wait for the Node's volumes to detach
  -> pre-terminate hooks -> delete the infrastructure machine and the bootstrap config and wait for them
  -> delete the Node (retried until nodeDeletionTimeoutSeconds) -> remove the finalizer.

The Node steps (hooks, drain, volumes, Node deletion) only run when deleting the Node is allowed (the Machine has
a Node, its Cluster is not going away, it is not the last control plane Machine: `is_delete_node_allowed`) and
the workload cluster answered.

The controller reads, asks, applies. Some actions only ask for more of the world before the decision can be made
(`Observe`: the Node's Pods, the VolumeAttachments, the PersistentVolumes) or change it on the way (`Cordon`,
`Evict`): the controller applies them, puts what it learned into the Observed and asks again in the same pass.
Every `Observe`/`Cordon`/`Evict` is asked for only while its field of the Observed is still empty, so a pass ends
after a few questions with one of the other actions, whose `reason`/`message` are the Machine's Deleting
condition and whose `started` are the `status.deletion` times to record.

Difference from upstream, kept from capd-py's earlier sequence: the infrastructure machine and the bootstrap config
are deleted in the same pass (`DeleteInfra.with_bootstrap`); upstream deletes the bootstrap config only once the
infrastructure machine is gone. The reasons reported are the same (infrastructure first).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract
from capd_py.api.admission.core import NODE_DELETION_TIMEOUT_SECONDS
from capd_py.api.labels import EXCLUDE_NODE_DRAINING_ANNOTATION
from capd_py.reconcile import coreutil, drain
from capd_py.reconcile.machine import (
    PRE_DRAIN_HOOK_PREFIX,
    PRE_TERMINATE_HOOK_PREFIX,
    R_DELETING_NODE,
    R_DELETION_COMPLETED,
    R_DRAINING_NODE,
    R_WAITING_BOOTSTRAP_DELETION,
    R_WAITING_INFRA_DELETION,
    R_WAITING_PRE_DRAIN_HOOK,
    R_WAITING_PRE_TERMINATE_HOOK,
    R_WAITING_VOLUME_DETACH,
    is_control_plane,
)

Obj = dict[str, Any]

DRAIN_START, VOLUME_DETACH_START = "nodeDrainStartTime", "waitForNodeVolumeDetachStartTime"
PODS, VOLUME_ATTACHMENTS, PERSISTENT_VOLUMES = "pods", "volumeattachments", "persistentvolumes"
DRAIN_ERROR = "Error draining Node, please check controller logs for errors"
VOLUME_ERROR = "Error waiting for volumes to be detached from Node, please check controller logs for errors"


@dataclass
class Observed:
    """What the controller has read of a deleting Machine (and, asked by the decision, of its Node)."""
    machine: Obj
    now: _dt.datetime
    infra_exists: bool = False
    bootstrap_exists: bool = False
    # is_delete_node_allowed, and the workload cluster answered the Node lookup
    node_delete_allowed: bool = False
    node: Obj | None = None                             # the Machine's Node (None: there is none)
    pods: drain.PodDeleteList | None = None             # the Node's Pods, classified (None: not read yet)
    evictions: dict[str, str] | None = None             # this pass's eviction outcomes (None: none made)
    volume_attachments: list[Obj] | None = None         # (None: not read yet)
    persistent_volumes: list[Obj] | None = None         # (None: not read yet)
    node_delete_failed: bool = False                    # this pass's attempt to delete the Node failed


# --- actions ------------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Action:
    reason: str = ""
    message: str = ""
    started: Mapping[str, str] = field(default_factory=dict)   # status.deletion times to record


@dataclass(frozen=True, kw_only=True)
class WaitForHooks(Action):
    """A pre-drain or pre-terminate hook annotation holds the deletion; its owner removes it."""
    hooks: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Observe(Action):
    """Read `what` (PODS, VOLUME_ATTACHMENTS, PERSISTENT_VOLUMES) of the workload cluster, then decide again."""
    what: str = PODS


@dataclass(frozen=True, kw_only=True)
class Cordon(Action):
    """Mark the Node unschedulable, then decide again (with the patched Node)."""
    node: str = ""


@dataclass(frozen=True, kw_only=True)
class Evict(Action):
    """Evict these Pods (the lowest order group's, not terminating yet), then decide again with the outcomes."""
    pods: tuple[drain.PodDelete, ...] = ()
    grace_period_seconds: int | None = None   # 1 for an unreachable Node, as upstream


@dataclass(frozen=True, kw_only=True)
class WaitForDrain(Action):
    """The drain is not complete; look again in drain.DRAIN_RETRY_SECONDS. `log`: an error for the logs."""
    log: str = ""


@dataclass(frozen=True, kw_only=True)
class WaitForVolumeDetach(Action):
    """Volumes are still attached to the Node; look again in drain.VOLUME_DETACH_RETRY_SECONDS."""
    log: str = ""


@dataclass(frozen=True, kw_only=True)
class DeleteInfra(Action):
    """Delete the infrastructure machine (and the bootstrap config with it) and wait for it to go."""
    with_bootstrap: bool = False


@dataclass(frozen=True, kw_only=True)
class DeleteBootstrap(Action):
    """Delete the bootstrap config and wait for it to go."""


@dataclass(frozen=True, kw_only=True)
class DeleteNode(Action):
    """Delete the Node (after a failed attempt in this pass: try again shortly)."""
    node: str = ""


@dataclass(frozen=True, kw_only=True)
class RemoveFinalizer(Action):
    """Cleanup is complete."""


TERMINAL = (WaitForHooks, WaitForDrain, WaitForVolumeDetach, DeleteInfra, DeleteBootstrap, DeleteNode,
            RemoveFinalizer)


# --- rules --------------------------------------------------------------------------------------------


def node_drain_timeout_passed(machine: Obj, now: _dt.datetime) -> bool:
    timeout = contract.dig(machine, "spec", "deletion", "nodeDrainTimeoutSeconds")
    start = coreutil.parse_time(contract.dig(machine, "status", "deletion", DRAIN_START))
    if not timeout or not start:
        return False
    return (now - start).total_seconds() > int(timeout)


def node_deletion_timeout_passed(machine: Obj, now: _dt.datetime) -> bool:
    timeout = contract.dig(machine, "spec", "deletion", "nodeDeletionTimeoutSeconds")
    timeout = NODE_DELETION_TIMEOUT_SECONDS if timeout is None else int(timeout)
    if timeout == 0:  # 0 means wait forever
        return False
    since = coreutil.parse_time(machine.get("metadata", {}).get("deletionTimestamp"))
    return since is not None and (now - since).total_seconds() > timeout


def is_drain_allowed(machine: Obj, now: _dt.datetime) -> bool:
    ann = machine.get("metadata", {}).get("annotations") or {}
    if EXCLUDE_NODE_DRAINING_ANNOTATION in ann:
        return False
    return not node_drain_timeout_passed(machine, now)


def is_delete_node_allowed(machine: Obj, cluster: Obj | None, other_cp_machines: int) -> tuple[bool, str]:
    """Upstream rules: no node -> nothing to do; the Cluster is going away -> skip (the whole
    workload cluster goes); the last control-plane Machine keeps its node."""
    if not (contract.dig(machine, "status", "nodeRef", "name")):
        return False, "Machine has no nodeRef"
    if cluster is None or coreutil.is_deleting(cluster):
        return False, "Cluster is being deleted"
    if is_control_plane(machine) and other_cp_machines == 0:
        return False, "last control plane Machine"
    return True, ""


def _hooks(machine: Obj, prefix: str) -> tuple[str, ...]:
    return tuple(sorted(k for k in (machine.get("metadata", {}).get("annotations") or {}) if k.startswith(prefix)))


def _since(machine: Obj, name: str, now: _dt.datetime) -> str:
    """status.deletion.<name>, or now (the first pass that reaches the step)."""
    return str(contract.dig(machine, "status", "deletion", name) or coreutil.iso(now))


# --- the decision ---------------------------------------------------------------------------------------


def decide_deletion(obs: Observed) -> Action:
    """The next thing to do for a deleting Machine (see the module docstring for the order)."""
    m, now = obs.machine, obs.now
    started: dict[str, str] = {}
    node = obs.node if obs.node_delete_allowed else None
    if obs.node_delete_allowed:
        hooks = _hooks(m, PRE_DRAIN_HOOK_PREFIX)
        if hooks:
            return WaitForHooks(reason=R_WAITING_PRE_DRAIN_HOOK, hooks=hooks,
                                message=f"Waiting for pre-drain hooks to succeed (hooks: {', '.join(hooks)})")
    if node is not None and is_drain_allowed(m, now):
        started[DRAIN_START] = _since(m, DRAIN_START, now)
        step = _drain(obs, node, started)
        if step is not None:
            return step
    if node is not None and drain.is_volume_detach_wait_allowed(m, now):
        started[VOLUME_DETACH_START] = _since(m, VOLUME_DETACH_START, now)
        step = _volumes(obs, node, started)
        if step is not None:
            return step
    hooks = _hooks(m, PRE_TERMINATE_HOOK_PREFIX)
    if hooks and (obs.infra_exists or obs.bootstrap_exists):
        return WaitForHooks(reason=R_WAITING_PRE_TERMINATE_HOOK, hooks=hooks, started=started,
                            message=f"Waiting for pre-terminate hooks to succeed (hooks: {', '.join(hooks)})")
    if obs.infra_exists:
        ref = contract.ref(m, "spec", "infrastructureRef")
        return DeleteInfra(reason=R_WAITING_INFRA_DELETION, with_bootstrap=obs.bootstrap_exists, started=started,
                           message=f"Waiting for {coreutil.ref_str(ref)} to be deleted")
    if obs.bootstrap_exists:
        ref = contract.ref(m, "spec", "bootstrap", "configRef")
        return DeleteBootstrap(reason=R_WAITING_BOOTSTRAP_DELETION, started=started,
                               message=f"Waiting for {coreutil.ref_str(ref)} to be deleted")
    # The Node is always deleted at least once; nodeDeletionTimeoutSeconds (counted from the Machine's
    # deletionTimestamp) only bounds the retries after a failed attempt, as upstream does.
    if node is not None and not (obs.node_delete_failed and node_deletion_timeout_passed(m, now)):
        name = str(node["metadata"]["name"])
        return DeleteNode(reason=R_DELETING_NODE, node=name, started=started, message=f"Deleting Node {name}")
    return RemoveFinalizer(reason=R_DELETION_COMPLETED, started=started)


def _drain(obs: Observed, node: Obj, started: dict[str, str]) -> Action | None:
    """Upstream's drainNode: cordon, then evict the Pods of the lowest order group still on the Node; None when
    nothing is left to drain."""
    since = started[DRAIN_START]
    msg = f"Drain not completed yet (started at {since}):"
    if not contract.dig(node, "spec", "unschedulable"):
        return Cordon(reason=R_DRAINING_NODE, message=msg, started=started, node=str(node["metadata"]["name"]))
    if obs.pods is None:
        return Observe(reason=R_DRAINING_NODE, message=msg, started=started, what=PODS)
    errors = obs.pods.errors()
    if errors:
        return WaitForDrain(reason=R_DRAINING_NODE, message=DRAIN_ERROR, started=started,
                            log="failed to get Pods for eviction: " + "; ".join(errors))
    if not obs.pods.to_drain():
        return None
    plan = drain.plan_evictions(obs.pods)
    if plan.evict_now and obs.evictions is None:
        return Evict(reason=R_DRAINING_NODE, message=msg, started=started, pods=tuple(plan.evict_now),
                     grace_period_seconds=1 if drain.node_unreachable(node) else None)
    result = drain.eviction_result(plan, obs.evictions or {})
    if result.completed:
        return None
    return WaitForDrain(reason=R_DRAINING_NODE, message=result.condition_message(since), started=started)


def _volumes(obs: Observed, node: Obj, started: dict[str, str]) -> Action | None:
    """Upstream's shouldWaitForNodeVolumes: the Node's attached volumes, less those of Pods the drain skipped;
    None when nothing is waited for (an unreachable Node is not waited for)."""
    since = started[VOLUME_DETACH_START]
    msg = f"Waiting for Node volumes to be detached (started at {since})"
    if drain.node_unreachable(node):
        return None
    if obs.volume_attachments is None:
        return Observe(reason=R_WAITING_VOLUME_DETACH, message=msg, started=started, what=VOLUME_ATTACHMENTS)
    name = node["metadata"]["name"]
    if not contract.dig(node, "status", "volumesAttached") and not any(
            contract.dig(va, "spec", "nodeName") == name and contract.dig(va, "status", "attached")
            for va in obs.volume_attachments):
        return None
    if obs.pods is None:
        return Observe(reason=R_WAITING_VOLUME_DETACH, message=msg, started=started, what=PODS)
    if obs.persistent_volumes is None:
        return Observe(reason=R_WAITING_VOLUME_DETACH, message=msg, started=started, what=PERSISTENT_VOLUMES)
    attached = drain.attached_volumes(node, obs.volume_attachments, obs.persistent_volumes,
                                      drain.claims_of_skipped_pods(obs.pods))
    if attached.error or obs.pods.errors():
        return WaitForVolumeDetach(reason=R_WAITING_VOLUME_DETACH, message=VOLUME_ERROR, started=started,
                                   log=attached.error or "; ".join(obs.pods.errors()))
    if attached.empty:
        return None
    return WaitForVolumeDetach(reason=R_WAITING_VOLUME_DETACH, message=attached.condition_message(since),
                               started=started)
