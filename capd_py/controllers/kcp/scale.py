"""Applying one scaling step: creating a control-plane Machine from the desired state, removing one, and
keeping the workload's kubeadm-config in step before a join.

Removal follows upstream's order: the Machine is deleted first (its infrastructure provider stops sending API
traffic to it, the node drains), and its etcd member goes in the Machine's pre-terminate hook
(`run_cleanup_hooks`), so no request reaches an API server whose etcd member is already gone."""

from __future__ import annotations

import logging
from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import CONFIG_MAP, KUBEADM_CONFIG, MACHINE
from capd_py.api.labels import KCP_CLEANUP_HOOK
from capd_py.controllers.context import Ctx
from capd_py.controllers.coreio import gvk_of, read_ref
from capd_py.controllers.entropy import random_suffix
from capd_py.kube import events
from capd_py.kube.client import Kube, KubeError, Unreachable, WorkloadError
from capd_py.kube.etcd import EtcdClient, EtcdError
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.machineset import instance_kind

# what removing an etcd member through the workload fails with: etcdctl's answer (EtcdError), the workload API
# (WorkloadError), the exec stream's socket (OSError)
ETCD_FAILURES = (EtcdError, *WorkloadError, OSError)


async def create_machine(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], *, init: bool,
                         failure_domain: str) -> str | None:
    """Clone the infrastructure template, create the KubeadmConfig and the Machine; returns a problem
    message when the template is missing."""
    kube = ctx.kube
    log = ctx.log.getChild("kcp")
    ns, kname = kcp["metadata"]["namespace"], kcp["metadata"]["name"]
    tref = rk.infra_template_ref(kcp)
    if tref is None:
        return "spec.machineTemplate.spec.infrastructureRef is not set"
    read = await read_ref(ctx, ns, tref, watcher="KubeadmControlPlane")
    tpl = read.obj
    if tpl is None:
        return read.missing
    infra_gvk = await gvk_of(ctx, {"apiVersion": tpl["apiVersion"], "kind": instance_kind(tpl["kind"])})
    if infra_gvk is None:
        return f"{instance_kind(tpl['kind'])}.{tref['apiGroup']} is not served (no CustomResourceDefinition)"
    name = rk.machine_name(kcp, cluster["metadata"]["name"], random_suffix())
    want = rk.desired_machine(kcp, cluster, tpl, name, init=init, failure_domain=failure_domain,
                              infra_gvk=infra_gvk)
    if isinstance(want, str):
        return want
    created_infra = await kube.create(want.infra_gvk, want.infra)
    try:
        created_cfg = await kube.create(KUBEADM_CONFIG, want.config)
    except (KubeError, Unreachable):  # what a create fails with: undo the half-made Machine, then report
        await kube.delete(want.infra_gvk, ns, name)
        raise
    try:
        created_m = await kube.create(MACHINE, want.machine)
    except (KubeError, Unreachable):
        await kube.delete(want.infra_gvk, ns, name)
        await kube.delete(KUBEADM_CONFIG, ns, name)
        raise
    # The Machine now controls its bootstrap config and infrastructure machine (upstream's end state).
    mref = contract.owner_ref(created_m)
    for g, obj in ((want.infra_gvk, created_infra), (KUBEADM_CONFIG, created_cfg)):
        try:
            await kube.merge_patch(g, ns, name, {"metadata": {"ownerReferences": [mref]}})
        except KubeError as e:
            log.info("could not hand %s %s/%s to its Machine yet: %s", obj.get("kind"), ns, name, e)
    log.info("KCP %s/%s: created control-plane Machine %s (%s)", ns, kname, name, "init" if init else "join")
    return None


async def remove_etcd_member(etcd: EtcdClient, via_node: str, target_node: str,
                             log: logging.Logger | None = None) -> str:
    """Remove `target_node`'s etcd member, moving leadership away first; `etcd` talks through the member
    on `via_node`. Returns what was done."""
    members = await etcd.members()
    target = rk.member_of_node(members, target_node)
    if target is None:
        return f"no etcd member named {target_node}"
    try:
        leader = (await etcd.status()).leader
    except EtcdError:
        leader = 0
    to = rk.leadership_target(members, target, leader, via_node)
    if to is not None:
        try:
            await etcd.move_leader(target, to)
        except EtcdError as e:  # removing the leader still works: etcd elects another one
            if log:
                log.info("could not move etcd leadership off %s: %s", target_node, e)
    await etcd.remove_member(target.id)
    return f"removed etcd member {target.hex_id} ({target_node})"


async def scale_down(ctx: Ctx, kcp: dict[str, Any], views: list[rk.MachineView], action: rk.Action,
                     workload: Kube | None) -> str | None:
    """Delete the Machine `action` names, with the cleanup hook on it (Machines made before the hook existed
    get it here), so its etcd member is removed once it is drained (`run_cleanup_hooks`)."""
    kube = ctx.kube
    log = ctx.log.getChild("kcp")
    ns = kcp["metadata"]["namespace"]
    m = await kube.get(MACHINE, ns, action.machine)
    if m is None:
        return None
    if KCP_CLEANUP_HOOK not in (m["metadata"].get("annotations") or {}):
        m = await kube.merge_patch(MACHINE, ns, action.machine, {"metadata": {"annotations": {KCP_CLEANUP_HOOK: ""}}})
    await kube.delete(MACHINE, ns, action.machine, uid=m["metadata"].get("uid"))
    log.info("KCP %s/%s: deleting control-plane Machine %s", ns, kcp["metadata"]["name"], action.machine)
    return None


async def run_cleanup_hooks(ctx: Ctx, kcp: dict[str, Any], machines: list[dict[str, Any]],
                            views: list[rk.MachineView], workload: Kube | None, kcp_deleting: bool) -> str | None:
    """KCP's pre-terminate hook on its deleting Machines (decided by `rk.hook_step`, upstream's order): once a
    Machine is drained, its etcd member is removed through a member that carries etcd on, then the hook. A
    deleting KCP (the whole cluster goes) only drops the hooks. Returns why a Machine still holds the hook
    (waiting, or an etcd failure: recorded as an event), for the ScalingDown condition; retried."""
    kube = ctx.kube
    log = ctx.log.getChild("kcp")
    ns = kcp["metadata"]["namespace"]
    by_name = {m["metadata"]["name"]: m for m in machines}
    if kcp_deleting:
        for m in machines:
            md = m["metadata"]
            if md.get("deletionTimestamp") and KCP_CLEANUP_HOOK in (md.get("annotations") or {}):
                await _drop_hook(kube, ns, m)
        return None
    step = rk.hook_step(machines, views, workload is not None)
    if step.kind == "wait":
        log.info("KCP %s/%s: %s", ns, kcp["metadata"]["name"], step.message)
        return step.message
    if step.kind == "remove-member":
        assert workload is not None  # hook_step removes a member only with the workload reachable
        try:
            done = await remove_etcd_member(ctx.etcd.for_node(workload, step.via), step.via, step.node, log)
            log.info("KCP %s/%s: %s", ns, kcp["metadata"]["name"], done)
        except ETCD_FAILURES as e:
            problem = f"Cannot remove the etcd member of Machine {step.machine}: {e}"
            await events.record(kube, kcp, "EtcdMemberRemovalFailed", problem)
            return problem
    if step.kind in ("drop", "remove-member"):
        await _drop_hook(kube, ns, by_name[step.machine])
    return None


async def _drop_hook(kube: Kube, ns: str, m: dict[str, Any]) -> None:
    md = m["metadata"]
    await kube.merge_patch(MACHINE, ns, md["name"], {"metadata": {
        "resourceVersion": md["resourceVersion"], "annotations": {KCP_CLEANUP_HOOK: None}}})


async def sync_kubeadm_config(ctx: Ctx, wl: Kube, kcp: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """Before a join: kubeadm reads ClusterConfiguration from the workload cluster (version, settings)."""
    try:
        cm = await wl.get(CONFIG_MAP, "kube-system", rk.KUBEADM_CONFIG_MAP)
        if cm is None:
            return "not found (kubeadm init has not uploaded it yet)"
        patch = rk.kubeadm_config_map_patch(cm, kcp, cluster)
        if patch is not None:
            await wl.merge_patch(CONFIG_MAP, "kube-system", rk.KUBEADM_CONFIG_MAP, patch)
            ctx.log.getChild("kcp").info("updated the workload kubeadm-config of %s/%s",
                                         cluster["metadata"]["namespace"], cluster["metadata"]["name"])
    except KubeError as e:
        return str(e)
    except Unreachable as e:  # workload API unreachable: retried
        return f"{e.__class__.__name__}: {e}"
    return None
