"""Join tokens in the workload cluster: creating one (and signing cluster-info for it at once), and keeping an
unconsumed one fresh. The maths is `reconcile.kubeadmconfig` (token_secret, token_step); this is the I/O.
The workload API not answering is a state (`Unreachable`: wait and look again), not a failure."""

from __future__ import annotations

import datetime as _dt
import logging
from typing import Any

from capd_py.api.gvk import CONFIG_MAP, SECRET
from capd_py.controllers import entropy
from capd_py.controllers.context import Ctx
from capd_py.kube.client import Kube, Unreachable, WorkloadError
from capd_py.reconcile import kubeadmconfig as kc

log = logging.getLogger("capd_py.kubeadmconfig")
TOKEN_TTL = kc.DEFAULT_TOKEN_TTL
KUBE_SYSTEM = "kube-system"


def now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


async def workload(ctx: Ctx, cluster: dict[str, Any]) -> Kube | None:
    return await ctx.workload.get(cluster["metadata"]["namespace"], cluster["metadata"]["name"])


async def create(wl: Kube) -> str | Unreachable:
    """A new join token's Secret in the workload cluster, cluster-info signed for it; the token, or the
    Unreachable error when the workload API did not answer (an API error propagates)."""
    token = entropy.bootstrap_token()
    try:
        await wl.create(SECRET, kc.token_secret(token, now(), TOKEN_TTL))
    except Unreachable as e:
        return e
    await _sign_cluster_info(wl, token)
    return token


async def _sign_cluster_info(wl: Kube, token: str) -> None:
    """Sign cluster-info for a new token at once, as kube-controller-manager's bootstrap signer will (the
    same bytes): a join right after `kubeadm init` would otherwise wait for the signer plus kubeadm's
    5 s discovery retry. Best effort: the signer does it anyway."""
    ns, name = kc.CLUSTER_INFO
    try:
        ci = await wl.get(CONFIG_MAP, ns, name)
        kubeconfig = ((ci or {}).get("data") or {}).get("kubeconfig")
        if ci is None or not kubeconfig:
            return
        key, value = kc.cluster_info_signature(kubeconfig, token)
        if ci["data"].get(key) != value:
            await wl.merge_patch(CONFIG_MAP, ns, name, {"data": {key: value}})
    except WorkloadError as e:  # the signer in kube-controller-manager covers it
        log.info("signing cluster-info for a new bootstrap token: %s", e)


async def check(wl: Kube, cfg: dict[str, Any], token: str, pool: bool) -> kc.TokenStep | Unreachable:
    """Extend the token's expiry when it needs it (upstream refreshBootstrapTokenIfNeeded); what was found, or
    the Unreachable error when the workload API did not answer."""
    name = kc.token_secret_name(token)
    where = f"{cfg['metadata']['namespace']}/{cfg['metadata']['name']}"
    try:
        step = kc.token_step(await wl.get(SECRET, KUBE_SYSTEM, name), pool, now(), TOKEN_TTL)
        if step.kind == "extend":
            await wl.merge_patch(SECRET, KUBE_SYSTEM, name, {"data": {"expiration": step.expiration}})
            log.info("refreshed bootstrap token %s for %s", name, where)
    except Unreachable as e:
        log.info("workload API not reachable to refresh token for %s: %s", cfg["metadata"]["name"], e)
        return e
    if step.kind == "recreate":
        # upstream: a MachinePool's token secret that is gone is replaced (new token, new join data)
        log.info("bootstrap token secret %s for MachinePool config %s is gone: creating a new token", name, where)
    elif step.kind == "gone":
        log.warning("bootstrap token secret %s for %s is gone; the machine cannot join with it", name, where)
    return step
