"""`capd-py stop|start|pause|resume cluster NAME`: observe, ask capd_py/reconcile/powerstate.decide for the next step,
do it, observe again. Thin: the order and the resumability are decide's; this reads and writes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    LEASE,
    NODE,
    POD,
)
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTAINER_CLUSTER,
    CONTAINER_NAMESPACE,
    CONTAINER_ROLE,
    POWER_STATE_ANNOTATION,
    POWER_USER_PAUSED_ANNOTATION,
)
from capd_py.cli.kubeconfig import KubeconfigError, workload_kubeconfig
from capd_py.cli.steps import Steps
from capd_py.kube.client import Kube
from capd_py.reconcile import powerstate as ps
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_

# how long the controllers get to report Paused before the command goes on without them (they may be down: then
# nothing acts on the cluster anyway), and the poll interval of every wait
PAUSE_REPORT_SECONDS = 30.0
POLL = 0.25
# the load balancer's image stops on SIGUSR1, haproxy's soft stop, which waits for open connections to end (the
# controllers' watches through it never do): it holds nothing to save, so it gets 1 s before SIGKILL, not 10
LB_STOP_SECONDS = 1.0


class PowerError(Exception):
    pass


@dataclass
class Run:
    """One command's run: what it learned that the next observation needs."""
    kube: Kube
    rt: ContainerRuntime
    namespace: str
    name: str
    steps: Steps
    deadline: float
    stop_timeout: float = 10.0
    back_since: float | None = None     # when the containers were all running again (epoch)
    restarted_at: float | None = None   # when this run started stopped containers (a thaw restarts nothing)
    pause_unreported: bool = False      # the controllers did not report Paused in time: go on
    api_answered: float | None = None   # seconds from back_since to the workload API's first answer

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())


async def _cluster_objects(run: Run) -> list[dict[str, Any]]:
    """The objects whose Paused report is waited for besides the Cluster's: the Docker kinds, which act on the
    containers (and watch Clusters, so they report at once). The Cluster controller's report already proves the
    controllers' shared cache holds the paused Cluster, so every reconcile of any kind that starts afterwards sees
    it; Machines, MachineHealthChecks and KubeadmControlPlanes do not watch Clusters and would only report at the
    next resync (up to a minute) while having nothing left to do."""
    ns, sel = run.namespace, {CLUSTER_NAME: run.name}
    out: list[dict[str, Any]] = []
    for gvk in (DOCKER_MACHINE, DOCKER_CLUSTER):
        out += await run.kube.list(gvk, ns, labels=sel)
    return out


async def _workload(run: Run, node_names: list[str]) -> list[str]:
    """What keeps the workload from being ready ([] = ready); notes the API's first answer."""
    assert run.back_since is not None
    try:
        text = await workload_kubeconfig(run.kube, run.rt, run.namespace, run.name)
    except KubeconfigError as e:
        return [str(e)]
    wl = Kube.from_kubeconfig_text(text)
    try:
        async with asyncio.timeout(3):
            nodes = await wl.list(NODE)
            if run.api_answered is None:
                run.api_answered = time.time() - run.back_since
            leases = await wl.list(LEASE, "kube-node-lease")
            pods = await wl.list(POD, "kube-system") if run.restarted_at is not None else []
    except Exception as e:  # noqa: BLE001 - any failure to answer (refused, TLS, timeout) is "not yet"
        return [f"workload API: {type(e).__name__}: {e}".rstrip(": ")]
    finally:
        wl.close()
    waiting = ps.workload_ready(node_names, nodes, leases, run.back_since)
    if run.restarted_at is not None and not waiting:
        waiting = ps.static_pods_restarted(node_names, nodes, pods, run.restarted_at)
    return waiting


async def observe(run: Run, need_workload: bool = True) -> tuple[ps.Observed, list[str]]:
    cluster = await run.kube.get(CLUSTER, run.namespace, run.name)
    if cluster is None:
        raise PowerError(f"cluster {run.namespace}/{run.name} not found")
    ann = (cluster.get("metadata") or {}).get("annotations") or {}
    boxes = tuple(ps.Box(c.name, c.labels.get(CONTAINER_ROLE, ""), c.status)
                  for c in await asyncio.to_thread(run.rt.list_containers,
                                                   {CONTAINER_CLUSTER: run.name, CONTAINER_NAMESPACE: run.namespace}))
    spec_paused = bool((cluster.get("spec") or {}).get("paused"))
    reported = run.pause_unreported or (spec_paused and ps.paused_reported(cluster, await _cluster_objects(run)))
    waiting: list[str] = []
    ready = False
    if need_workload and boxes and all(b.status == "running" for b in boxes):
        if run.back_since is None:  # found running (a re-run): heartbeats from now on count
            run.back_since = time.time()
        waiting = await _workload(run, [b.name for b in boxes if b.role != ps.LB])
        ready = not waiting
    o = ps.Observed(state=ann.get(POWER_STATE_ANNOTATION) or None,
                    user_paused=ann.get(POWER_USER_PAUSED_ANNOTATION) == "true",
                    spec_paused=spec_paused, paused_reported=reported, containers=boxes,
                    workload_ready=ready, available=ps.available(cluster))
    return o, waiting


async def _each(rt_call: Callable[[str], None], names: list[str]) -> None:
    await asyncio.gather(*(asyncio.to_thread(rt_call, n) for n in names))


def _tier(role: str) -> str:
    return "lb" if role == ps.LB else "node"


async def _by_tier(names: tuple[str, ...], o: ps.Observed, call: Callable[[str], None]) -> None:
    """`names` in decide's order, the load balancer apart from the nodes, which go all at once (a node's
    shutdown is mostly waiting for systemd: one at a time they would add up)."""
    role = {b.name: b.role for b in o.containers}
    group: list[str] = []
    for n in names:
        if group and _tier(role.get(group[0], "")) != _tier(role.get(n, "")):
            await _each(call, group)
            group = []
        group.append(n)
    if group:
        await _each(call, group)


def _title(step: ps.Step) -> str:
    match step:
        case ps.SetState(state=None):
            return "Clearing the power state 📝"
        case ps.SetState(state=s):
            return f"Recording the power state: {s} 📝"
        case ps.PauseObjects():
            return "Pausing the cluster's objects for the controllers ⏸"
        case ps.WaitPaused():
            return "Waiting for the controllers to report Paused ⏳"
        case ps.StopContainers(names=n):
            return f"Stopping {len(n)} container(s): {', '.join(n)} ⏹"
        case ps.StartContainers(names=n):
            return f"Starting {len(n)} container(s): {', '.join(n)} ▶"
        case ps.Freeze(names=n):
            return f"Freezing {len(n)} container(s) 🧊"
        case ps.Thaw(names=n):
            return f"Thawing {len(n)} container(s) 🌡"
        case ps.WaitWorkload():
            return "Waiting for the API server and Ready nodes ⏳"
        case ps.Unpause():
            return "Unpausing the cluster's objects ▶"
        case ps.WaitAvailable():
            return "Waiting for the cluster to be Available ⏳"
    return str(step)


async def _do(run: Run, step: ps.Step, o: ps.Observed, waiting: list[str]) -> None:
    kube, ns, name = run.kube, run.namespace, run.name
    match step:
        case ps.SetState(state=s, user_paused=u):
            await kube.merge_patch(CLUSTER, ns, name, {"metadata": {"annotations": {
                POWER_STATE_ANNOTATION: s, POWER_USER_PAUSED_ANNOTATION: ("true" if u and s else None)}}})
        case ps.PauseObjects():
            await kube.merge_patch(CLUSTER, ns, name, {"spec": {"paused": True}})
        case ps.Unpause():
            await kube.merge_patch(CLUSTER, ns, name, {"spec": {"paused": None}})
        case ps.WaitPaused():
            limit = time.monotonic() + min(PAUSE_REPORT_SECONDS, run.left())
            while time.monotonic() < limit:
                now, _ = await observe(run, need_workload=False)
                if now.paused_reported:
                    return
                await asyncio.sleep(POLL)
            run.pause_unreported = True
            run.steps.info(f"WARNING: the controllers did not report Paused within {PAUSE_REPORT_SECONDS:.0f}s "
                           "(not running?); going on")
        case ps.StopContainers(names=n):
            role = {b.name: b.role for b in o.containers}
            await _by_tier(n, o, lambda c: run.rt.stop_container(
                c, min(LB_STOP_SECONDS, run.stop_timeout) if role.get(c) == ps.LB else run.stop_timeout))
        case ps.StartContainers(names=n):
            run.restarted_at = time.time()
            await _by_tier(n, o, run.rt.start_container)
            run.back_since = time.time()
        case ps.Freeze(names=n):
            await _each(run.rt.pause_container, list(n))
        case ps.Thaw(names=n):
            await _each(run.rt.unpause_container, list(n))
            run.back_since = time.time()
        case ps.WaitWorkload() | ps.WaitAvailable():
            run.steps.details(waiting[:8])
            await asyncio.sleep(POLL)


async def drive(run: Run, verb: str) -> str:
    """Run `verb` to its end: decide's Done message, or PowerError."""
    shown: ps.Step | None = None
    while True:
        o, waiting = await observe(run, need_workload=verb in (ps.START, ps.RESUME))
        step = ps.decide(verb, o)
        if isinstance(step, ps.Done):
            _end(run, shown)
            return step.message
        if isinstance(step, ps.Fail):
            if shown is not None:
                run.steps.end(False)
            raise PowerError(step.message)
        if run.left() <= 0:
            if shown is not None:
                run.steps.end(False)
            raise PowerError(f"timed out at: {_title(step)}" + (f" ({'; '.join(waiting[:4])})" if waiting else ""))
        # a wait repeats (one step line for all its rounds); an action's line ends as soon as it is done
        if step != shown:
            _end(run, shown)
            run.steps.start(_title(step))
            shown = step
        try:
            await _do(run, step, o, waiting)
        except RuntimeError_ as e:  # docker refused (a container removed meanwhile, dockerd down): say which step
            run.steps.end(False)
            raise PowerError(f"{_title(step)}: {e}") from e
        if not isinstance(step, _WAITS):
            _end(run, shown)
            shown = None


_WAITS = (ps.WaitPaused, ps.WaitWorkload, ps.WaitAvailable)


def _end(run: Run, shown: ps.Step | None) -> None:
    if shown is None:
        return
    run.steps.end(True)
    if isinstance(shown, ps.WaitWorkload) and run.api_answered is not None:
        run.steps.info(f"   workload API answered {run.api_answered:.1f}s after the containers were back")


async def command(kube: Kube, rt: ContainerRuntime, verb: str, namespace: str, name: str, steps: Steps,
                  timeout: float, stop_timeout: float = 10.0) -> str:
    run = Run(kube, rt, namespace, name, steps, time.monotonic() + timeout, stop_timeout)
    try:
        return await drive(run, verb)
    finally:
        kube.close()
