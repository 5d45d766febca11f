"""The topology controller's lifecycle-hook calls (RuntimeSDK gate on): what it shows the decisions of
capd_py.reconcile.topology.hooks, the calls they ask for one at a time, and the pending-hooks annotation written
as hooks leave it."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from capd_py.api import contract
from capd_py.api import runtime_hooks as RH
from capd_py.api.gvk import CLUSTER
from capd_py.api.runtime_sdk import HookResult, RuntimeSDKError
from capd_py.controllers.context import Ctx
from capd_py.reconcile.topology import desired as D
from capd_py.reconcile.topology import hooks as H

LIFECYCLE_HOOKS = tuple(h for h in RH.HOOKS.values() if h.family == "lifecycle")


def holds(hk: H.Decision | None) -> dict[str, bool]:
    return {} if hk is None else {"hold_control_plane": hk.hold_control_plane, "hold_workers": hk.hold_workers}


async def ask(ctx: Ctx, cluster: dict[str, Any],
               decide: Callable[[Mapping[str, HookResult], str | None], H.Call | H.Decision]
               ) -> tuple[H.Decision, RuntimeSDKError | None]:
    """Make the calls `decide` asks for, one at a time, until it decides; blocking answers go into the hook cache
    so that the hook is not asked again before its retryAfterSeconds. A failed call ends the walk there: the
    decision so far (its pending-hooks edits are still written) and the error."""
    ns, name = cluster["metadata"].get("namespace") or "default", cluster["metadata"]["name"]
    answers: dict[str, HookResult] = {}
    while True:
        step = decide(answers, None)
        if isinstance(step, H.Decision):
            return step, None
        try:
            r = await ctx.runtime_sdk.call_all(step.hook, step.request, ns)
        except RuntimeSDKError as e:
            d = decide(answers, step.hook.name)  # every hook before the failed one is answered: a Decision
            return (d if isinstance(d, H.Decision) else H.Decision(create=False, failed=step.hook.name)), e
        answers[step.hook.name] = r
        if step.hook.blocking and r.blocking:
            ctx.hook_cache.add(ns, name, step.hook.name, r.retry_after_seconds, r.message, time.monotonic())
            ctx.log.info("topology %s/%s: %s hook blocks, retry after %ds", ns, name, step.hook.name,
                         r.retry_after_seconds)
        else:
            ctx.log.info("topology %s/%s: %s hook called", ns, name, step.hook.name)


def registered(ctx: Ctx) -> frozenset[str]:
    return frozenset(h.name for h in LIFECYCLE_HOOKS if ctx.runtime_sdk.registered(h.name))


def _stale(obj: dict[str, Any]) -> bool:
    return int(contract.dig(obj, "status", "observedGeneration") or 0) < int(obj["metadata"].get("generation") or 0)


def hook_view(ctx: Ctx, cluster: dict[str, Any], cur: D.Current) -> H.View:
    version = D.topology_of(cluster).get("version") or ""
    mds = [c.md for c in cur.machine_deployments.values()]
    workers = mds + [c.mp for c in cur.machine_pools.values()]
    wversions = [str(contract.dig(w, "spec", "template", "spec", "version") or "") for w in workers]
    # a status not yet written for the newest spec says nothing: the version just moved, its rollout is ahead.
    # MachinePools count as MachineDeployments do (upstream: AfterWorkersUpgrade waits for neither MachineDeployments
    # nor MachinePools upgrading; their status has the same replicas / upToDateReplicas): the runtime-SDK e2e saw
    # AfterWorkersUpgrade asked while the MachinePool still replaced its instance
    upgrading = any(_stale(w) or D.md_rolling(w) and not D.never_scaled(w) for w in workers)
    settled = (D.cp_stable_at(cur.control_plane, version) and all(v == version for v in wversions)
               and not any(_stale(w) for w in workers) and not any(D.md_rolling(w) for w in workers))
    ns, name = cluster["metadata"].get("namespace") or "default", cluster["metadata"]["name"]
    return H.View(cluster=cluster, version=version, control_plane=cur.control_plane, worker_versions=wversions,
                  workers_upgrading=upgrading, settled=settled, registered=registered(ctx),
                  cached=ctx.hook_cache.blocking(ns, name, time.monotonic()))


async def lifecycle_hooks(ctx: Ctx, cluster: dict[str, Any], cur: D.Current) -> tuple[H.Decision, dict[str, Any]]:
    """The hooks due in this pass, called; the pending-hooks annotation written as they leave it (before the
    objects move, as upstream marks the After* hooks before the control plane takes a version)."""
    view = hook_view(ctx, cluster, cur)
    d, err = await ask(ctx, cluster, lambda answers, failed: H.decide(view, answers, failed))
    patch = H.pending_patch(cluster, d.pending)
    if patch is not None:
        md = cluster["metadata"]
        cluster = await ctx.kube.merge_patch(CLUSTER, md.get("namespace") or "default", md["name"], patch)
    if err is not None:
        raise err
    return d, cluster


def upgrade_message(hk: H.Decision, cluster: dict[str, Any], cur: D.Current) -> str:
    version = D.topology_of(cluster).get("version") or ""
    cp = cur.control_plane or {}
    mds = [c.md for c in cur.machine_deployments.values()]
    def v(o: dict[str, Any]) -> Any:
        return contract.dig(o, "spec", "template", "spec", "version")
    return H.upgrade_message(
        hk, version, str(cp.get("kind") or "ControlPlane"), str(contract.dig(cp, "spec", "version") or ""),
        contract.dig(cp, "status", "version"),
        pending_mds=[md["metadata"]["name"] for md in mds if v(md) != version],
        upgrading_mds=[md["metadata"]["name"] for md in mds if v(md) == version and D.md_rolling(md)
                       and not D.never_scaled(md)],
        pending_mps=[c.mp["metadata"]["name"] for c in cur.machine_pools.values() if v(c.mp) != version])
