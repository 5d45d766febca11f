"""The topology's external patches (ClusterClass `spec.patches[].external`): the I/O half of the patch engine.

`reconcile/topology/desired.compute_steps` is pure and yields each Runtime Extension call it needs (GeneratePatches
for an external patch, in the class's patch order between the inline ones; ValidateTopology after the last patch);
this drives it, making each call through `ctx.runtime_sdk` for the Cluster's namespace (the ExtensionConfig's
namespaceSelector applies to it, as upstream's CallExtension for the Cluster). A failed call goes back into the
steps, which turn it into the TopologyError the topology controller reports in TopologyReconciled.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capd_py.api.runtime_sdk import RuntimeSDKError
from capd_py.controllers.context import Ctx
from capd_py.reconcile.topology import desired as D
from capd_py.reconcile.topology import patches as P


async def compute(ctx: Ctx, cluster: dict[str, Any], bp: D.Blueprint, cur: D.Current,
                  rand: Callable[[], str], **holds: bool) -> D.Plan:
    """desired.compute with the external patches' calls made. Raises TopologyError as compute does. `holds`:
    compute_steps' hold_control_plane / hold_workers (lifecycle hooks)."""
    sdk = ctx.runtime_sdk
    namespace = cluster["metadata"].get("namespace") or "default"
    steps = D.compute_steps(cluster, bp, cur, rand, runtime_sdk=sdk.enabled(), **holds)
    try:
        call = next(steps)
        while True:
            try:
                response = await sdk.call(call.extension, call.hook, call.request, namespace)
            except RuntimeSDKError as e:
                ctx.log.info("topology %s/%s: %s of patch %r (%s) failed: %s", namespace,
                             cluster["metadata"]["name"], call.hook.name, call.patch, call.extension, e)
                call = steps.throw(P.ExtensionCallError(str(e)))
                continue
            call = steps.send(response)
    except StopIteration as stop:
        plan: D.Plan = stop.value
        return plan
