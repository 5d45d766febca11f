"""What `capd-py stop|start|pause|resume cluster` does next, given what it observed (pure).

Each command is a loop: observe (the Cluster, its containers, the workload cluster) -> `decide(verb, observed)` ->
one step -> observe again, until `Done` or `Fail`. Every step is idempotent and the intent is recorded on the
Cluster first (labels.POWER_STATE_ANNOTATION), so a command killed at any point and run again continues from what
it finds: nothing is decided from memory of an earlier run.

Order, and why:
- The Cluster gets `spec.paused` (every controller then leaves the cluster's objects alone, as upstream: no
  MachineHealthCheck remediation of NotReady nodes, no DockerMachine "container stopped -> start it" or
  "container gone", no load balancer re-creation) and the command waits until the controllers report Paused
  before it touches a container.
- Stop: the nodes (workers listed first, then control planes; the CLI stops all nodes at once), then the load
  balancer last (the workers' kubelets keep reaching the API through it until they are down). etcd fsyncs its WAL
  on every commit, so control planes stopped together or in any order stay consistent.
- Start / resume: the load balancer first (the workers' kubelets reach the API servers through it), then
  control planes, then workers; started at once, they are ordered only by how fast they come up.
- The cluster stays paused until every Node's kubelet has renewed its Lease after the containers came back and
  reports Ready (the node lifecycle controller would otherwise see old heartbeats, and the MachineHealthCheck a
  NotReady node), then `spec.paused` goes back to what it was (a cluster the user had paused stays paused).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions
from capd_py.reconcile.kcp.common import STATIC_PODS

# the verbs
STOP, START, PAUSE, RESUME = "stop", "start", "pause", "resume"
VERBS = (STOP, START, PAUSE, RESUME)

# POWER_STATE_ANNOTATION values (absent = running)
STOPPING, STOPPED, STARTING = "stopping", "stopped", "starting"
PAUSING, PAUSED, RESUMING = "pausing", "paused", "resuming"

# container roles (labels.CONTAINER_ROLE values)
LB, CONTROL_PLANE, WORKER = "load-balancer", "control-plane", "worker"
_UP_ORDER = {LB: 0, CONTROL_PLANE: 1, WORKER: 2}


@dataclass(frozen=True)
class Box:
    """One container of the cluster: its name, role label and docker status."""
    name: str
    role: str
    status: str     # created | running | exited | paused | restarting | dead


@dataclass(frozen=True)
class Observed:
    state: str | None = None           # POWER_STATE_ANNOTATION
    user_paused: bool = False          # POWER_USER_PAUSED_ANNOTATION
    spec_paused: bool = False          # Cluster spec.paused
    paused_reported: bool = False      # the controllers say Paused=True on the cluster's objects
    containers: tuple[Box, ...] = ()
    workload_ready: bool = False       # every Node Ready, its Lease renewed since the containers came back
    available: bool = False            # Cluster Available=True and Paused=False (reconciled since unpaused)


# -- steps ------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SetState:
    state: str | None                  # None: remove both annotations (running)
    user_paused: bool = False          # recorded only when the command starts from "running"


@dataclass(frozen=True)
class PauseObjects:
    """spec.paused=true on the Cluster."""


@dataclass(frozen=True)
class WaitPaused:
    """Until the controllers report Paused on the cluster's objects."""


@dataclass(frozen=True)
class StopContainers:
    names: tuple[str, ...]             # in this order


@dataclass(frozen=True)
class StartContainers:
    names: tuple[str, ...]


@dataclass(frozen=True)
class Freeze:
    names: tuple[str, ...]


@dataclass(frozen=True)
class Thaw:
    names: tuple[str, ...]


@dataclass(frozen=True)
class WaitWorkload:
    """Until the workload API answers and every Node is Ready with a Lease renewed since the containers came back."""


@dataclass(frozen=True)
class Unpause:
    """spec.paused=false on the Cluster."""


@dataclass(frozen=True)
class WaitAvailable:
    """Until the controllers have reconciled the unpaused Cluster and it is Available."""


@dataclass(frozen=True)
class Done:
    message: str


@dataclass(frozen=True)
class Fail:
    message: str


Step = (SetState | PauseObjects | WaitPaused | StopContainers | StartContainers | Freeze | Thaw | WaitWorkload
        | Unpause | WaitAvailable | Done | Fail)


@dataclass(frozen=True)
class _View:
    """What decide reads of the containers."""
    boxes: tuple[Box, ...] = field(default_factory=tuple)

    def with_status(self, *statuses: str) -> list[Box]:
        return [b for b in self.boxes if b.status in statuses]

    def down_order(self, boxes: list[Box]) -> tuple[str, ...]:
        return tuple(b.name for b in sorted(boxes, key=lambda b: (-_UP_ORDER.get(b.role, 1), b.name)))

    def up_order(self, boxes: list[Box]) -> tuple[str, ...]:
        return tuple(b.name for b in sorted(boxes, key=lambda b: (_UP_ORDER.get(b.role, 1), b.name)))


_NOT_RUNNING = ("created", "exited", "dead")


def decide(verb: str, o: Observed) -> Step:
    if verb not in VERBS:
        raise ValueError(f"unknown verb {verb!r}")
    if not o.containers:
        return Fail("the cluster has no containers (not provisioned yet, or deleted)")
    return {STOP: _stop, START: _start, PAUSE: _pause, RESUME: _resume}[verb](o, _View(o.containers))


def _enter(o: Observed, state: str) -> SetState:
    # spec.paused set before any power command ran is the user's: it survives start / resume
    user = o.spec_paused if o.state is None else o.user_paused
    return SetState(state, user_paused=user)


def _pause_first(o: Observed) -> Step | None:
    if not o.spec_paused:
        return PauseObjects()
    if not o.paused_reported:
        return WaitPaused()
    return None


def _stop(o: Observed, v: _View) -> Step:
    if o.state not in (STOPPING, STOPPED):
        return _enter(o, STOPPING)
    step = _pause_first(o)
    if step:
        return step
    frozen = v.with_status("paused")
    if frozen:  # a paused (frozen) container is thawed first: its processes then get the stop signal
        return Thaw(v.up_order(frozen))
    up = v.with_status("running", "restarting")
    if up:
        return StopContainers(v.down_order(up))
    if o.state != STOPPED:
        return SetState(STOPPED, o.user_paused)
    return Done(f"stopped ({len(v.boxes)} containers)")


def _come_back(o: Observed, v: _View) -> Step:
    """The second half of start and resume: containers up, workload ready, unpaused, Available, state cleared."""
    frozen = v.with_status("paused")
    down = v.with_status(*_NOT_RUNNING)
    if frozen or down:
        step = _pause_first(o)   # a cluster found stopped without a power state: paused before it comes back
        if step:
            return step
        if frozen:
            return Thaw(v.up_order(frozen))
        return StartContainers(v.up_order(down))
    if not o.workload_ready:
        return WaitWorkload()
    if o.spec_paused and not o.user_paused:
        return Unpause()
    if not o.spec_paused and not o.available:
        return WaitAvailable()
    if o.state is not None:
        return SetState(None)
    return _running(o, v)


def _running(o: Observed, v: _View) -> Done:
    return Done(f"running ({len(v.boxes)} containers)"
                + (" (the cluster stays paused: spec.paused was set before)" if o.spec_paused else ""))


def _start(o: Observed, v: _View) -> Step:
    if o.state in (PAUSING, PAUSED, RESUMING):
        return Fail(f"the cluster is {o.state} (frozen): `capd-py resume cluster` brings it back")
    if o.state is None and not v.with_status(*_NOT_RUNNING, "paused"):
        return _running(o, v)
    if o.state != STARTING:
        return _enter(o, STARTING)
    return _come_back(o, v)


def _pause(o: Observed, v: _View) -> Step:
    if o.state in (STOPPING, STOPPED, STARTING):
        return Fail(f"the cluster is {o.state}: `capd-py start cluster` first")
    if o.state == RESUMING:
        return Fail("a resume is in progress: run `capd-py resume cluster` again first")
    if o.state not in (PAUSING, PAUSED):
        if v.with_status(*_NOT_RUNNING):
            return Fail("some containers are not running: "
                        + ", ".join(b.name for b in v.with_status(*_NOT_RUNNING)) + " (start the cluster first)")
        return _enter(o, PAUSING)
    step = _pause_first(o)
    if step:
        return step
    up = v.with_status("running", "restarting")
    if up:
        return Freeze(v.down_order(up))
    if o.state != PAUSED:
        return SetState(PAUSED, o.user_paused)
    return Done(f"paused ({len(v.boxes)} containers frozen)")


def _resume(o: Observed, v: _View) -> Step:
    if o.state in (STOPPING, STOPPED, STARTING):
        return Fail(f"the cluster is {o.state}, not paused: `capd-py start cluster` brings it back")
    if o.state is None and not v.with_status("paused"):
        return _running(o, v)
    if o.state != RESUMING:
        return _enter(o, RESUMING)
    return _come_back(o, v)


def delete_refusal(name: str, state: str | None) -> str | None:
    """Why `capd-py delete cluster` refuses (None: it may go on). A stopped or frozen cluster is paused for the
    controllers, which then do nothing, its deletion included (as upstream): the delete would wait forever."""
    if state is None:
        return None
    verb = "resume" if state in (PAUSING, PAUSED, RESUMING) else "start"
    return (f"cluster {name} is {state} (its objects are paused for the controllers, so nothing would delete it): "
            f"`capd-py {verb} cluster {name}` first")


def phase(state: str | None) -> str | None:
    """What `capd-py get clusters` shows as the phase while a power state is recorded (None: the Cluster's own)."""
    return {STOPPING: "Stopping", STOPPED: "Stopped", STARTING: "Starting", PAUSING: "Pausing", PAUSED: "Paused",
            RESUMING: "Resuming"}.get(state or "")


# -- observations (pure: the CLI reads, these judge) -------------------------------------------------------------

def paused_reported(cluster: dict[str, Any], objects: list[dict[str, Any]]) -> bool:
    """The controllers have seen the pause: the Cluster says Paused=True for its current generation (spec.paused
    bumps it), and every other object of the cluster that has a Paused condition says True. An object that never
    got one (its controller has not run yet, or its kind reports none) is not waited for."""
    c = conditions.get(cluster, conditions.PAUSED)
    if c is None or c.get("status") != conditions.TRUE:
        return False
    gen = (cluster.get("metadata") or {}).get("generation")
    if gen is not None and c.get("observedGeneration") not in (None, gen):
        return False
    for o in objects:
        p = conditions.get(o, conditions.PAUSED)
        if p is not None and p.get("status") != conditions.TRUE:
            return False
    return True


def available(cluster: dict[str, Any]) -> bool:
    """Available=True, written by a Cluster controller that has reconciled it unpaused (Paused=False)."""
    p = conditions.get(cluster, conditions.PAUSED)
    return conditions.is_true(cluster, conditions.AVAILABLE) and (p is None or p.get("status") == conditions.FALSE)


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def workload_ready(node_names: list[str], nodes: list[dict[str, Any]], leases: list[dict[str, Any]],
                   since: float) -> list[str]:
    """What still keeps the workload from being ready ([] = ready): each node container must have its Node Ready=True
    and its kubelet's Lease (kube-node-lease) renewed at or after `since` (epoch seconds: when the containers came
    back), so neither an old Ready nor an old heartbeat counts."""
    by_node = {n["metadata"]["name"]: n for n in nodes}
    renewed = {le["metadata"]["name"]: _ts((le.get("spec") or {}).get("renewTime")) for le in leases}
    waiting = []
    for name in sorted(node_names):
        node = by_node.get(name)
        if node is None:
            waiting.append(f"{name}: no Node")
            continue
        ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
                     None)
        if not ready or ready.get("status") != "True":
            waiting.append(f"{name}: Ready={(ready or {}).get('status', 'missing')}")
            continue
        t = renewed.get(name)
        if t is None or t < since:
            waiting.append(f"{name}: kubelet Lease not renewed yet")
    return waiting


def static_pods_restarted(node_names: list[str], nodes: list[dict[str, Any]], pods: list[dict[str, Any]],
                          since: float) -> list[str]:
    """After the node containers were started again: what keeps each control-plane Node's static pods from being
    reported Ready by the restarted kubelet ([] = nothing). Until the kubelet re-reports them, the API still holds
    their statuses from before the stop (Ready, running): the control plane's health computed from those flips to
    not ready moments later, after `start` has already said the cluster is running. A pod counts when it is Ready
    and each of its containers started at or after `since` (epoch seconds)."""
    wanted = set(node_names)
    by_name = {p["metadata"]["name"]: p for p in pods}
    waiting = []
    for node in nodes:
        name = node["metadata"]["name"]
        if name not in wanted or "node-role.kubernetes.io/control-plane" not in (node["metadata"].get("labels") or {}):
            continue
        for component in STATIC_PODS:  # kubeadm names them `<component>-<node>` in kube-system
            pod = by_name.get(f"{component}-{name}")
            if pod is None:
                continue  # not run as a static pod there (external etcd, ...)
            status = pod.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            started = [_ts(((s.get("state") or {}).get("running") or {}).get("startedAt"))
                       for s in status.get("containerStatuses") or []]
            # startedAt has whole seconds: a container started in the second of `since` counts
            if not ready or not started or any(t is None or t < int(since) for t in started):
                waiting.append(f"{name}: {component} not Ready since the restart yet")
    return waiting
