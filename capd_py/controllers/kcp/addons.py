"""The workload's kube-proxy and CoreDNS follow the KCP (upstream's UpdateKubeProxyImageInfo and UpdateCoreDNS), the
last step of a pass with nothing else to do. The patches are `reconcile.kcp.workload_upgrade`'s."""

from __future__ import annotations

from typing import Any

from capd_py.api.gvk import CONFIG_MAP, GVK
from capd_py.controllers.context import Ctx
from capd_py.controllers.kcp import observe, scale
from capd_py.kube.client import Kube, KubeError, Unreachable
from capd_py.reconcile.kcp import workload_upgrade as wu

DAEMON_SET = GVK("apps", "v1", "DaemonSet", "daemonsets")
DEPLOYMENT = GVK("apps", "v1", "Deployment", "deployments")


async def update_workload_addons(ctx: Ctx, wl: Kube, kcp: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """upstream's UpdateKubeProxyImageInfo and UpdateCoreDNS: the kube-proxy DaemonSet's image follows
    spec.version, the CoreDNS Deployment's image the KCP's dns settings (the kubeadm-config first, as
    upstream). Missing add-ons are left alone; nothing is written when they are in step. Returns a problem."""
    log = ctx.log.getChild("kcp")
    where = f"{cluster['metadata']['namespace']}/{cluster['metadata']['name']}"
    try:
        if not wu.skip_kube_proxy(kcp):
            ds = await _workload_get(wl, DAEMON_SET, wu.KUBE_PROXY)
            patch = wu.kube_proxy_patch(kcp, ds)
            if patch is not None:
                await wl.merge_patch(DAEMON_SET, wu.KUBE_SYSTEM, wu.KUBE_PROXY, patch)
                log.info("updated the kube-proxy image of %s to %s", where, kcp["spec"]["version"])
        if not wu.skip_coredns(kcp):
            dep = await _workload_get(wl, DEPLOYMENT, wu.COREDNS)
            cm = await _workload_get(wl, CONFIG_MAP, wu.COREDNS) if dep is not None else None
            patch = wu.coredns_patch(kcp, dep, cm)
            if patch is not None:
                problem = await scale.sync_kubeadm_config(ctx, wl, kcp, cluster)
                if problem:
                    return f"Cannot update kube-system/kubeadm-config: {problem}"
                await wl.merge_patch(DEPLOYMENT, wu.KUBE_SYSTEM, wu.COREDNS, patch)
                log.info("updated the CoreDNS image of %s", where)
    except wu.WorkloadUpgradeError as e:
        return str(e)
    except KubeError as e:
        return f"Cannot update the workload's kube-proxy / CoreDNS: {e}"
    except Unreachable as e:  # the workload API did not answer: retried
        return f"Cannot update the workload's kube-proxy / CoreDNS: {e}"
    return None


async def _workload_get(wl: Kube, g: GVK, name: str) -> dict[str, Any] | None:
    try:
        return dict(await wl.acall("GET", g.path(wu.KUBE_SYSTEM, name), timeout=observe.WORKLOAD_TIMEOUT))
    except KubeError as e:
        if e.not_found:
            return None
        raise
