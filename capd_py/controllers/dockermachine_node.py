"""The workload Node of a docker-backed machine, completed once its container is provisioned: kubelet in a
container sets no providerID (the Machine controller matches Nodes by it), and a Node of an external cloud provider
waits for its addresses and the removal of its uninitialized taint, as upstream CAPD does."""

from __future__ import annotations

import logging

from capd_py.api import contract
from capd_py.api.gvk import NODE
from capd_py.controllers.context import Ctx
from capd_py.kube.client import WorkloadError
from capd_py.reconcile import dockermachine as dmr

log = logging.getLogger("capd_py.dockermachine")


async def patch_node(ctx: Ctx, ns: str, cluster_name: str, node_name: str, pid: str,
                      cp_initialized: bool = True, machine_addresses: list[dict[str, str]] | None = None
                      ) -> float | None:
    """kubelet in a container sets no providerID; the Machine controller matches Nodes by it. A Node of an
    external cloud provider is initialized as upstream CAPD does (dmr.node_patch). Returns when to look again.
    Before the control plane is initialized there is nothing to poll: the Cluster's status change
    (watched) brings us back."""
    try:
        wl = await ctx.workload.get(ns, cluster_name)
        if wl is None:
            return ctx.settings.poll_seconds * 2 if cp_initialized else None
        watched = ctx.workload.nodes(ns, cluster_name)
        node = watched.get(node_name) if watched is not None else await wl.get(NODE, None, node_name)
        if node is None:
            # bootstrap just finished: the kubelet registers its Node within a second or two, and the Machine
            # (and so the Cluster's readiness) waits for the providerID set here; the Node watch, when in
            # sync, brings us back the moment it appears
            return 1 if watched is None else ctx.settings.node_watch_poll_seconds
        if contract.provider_id(node) and contract.provider_id(node) != pid:
            log.warning("%s: node %s has providerID %s, expected %s", ns, node_name, contract.provider_id(node), pid)
            return None
        patch = dmr.node_patch(node, pid, machine_addresses or [])
        if patch.status:  # the addresses first: the taint's removal tells the cluster the Node is complete
            await wl.merge_patch(NODE, None, node_name, {"status": patch.status}, subresource="status")
            log.info("%s: set addresses of workload node %s", ns, node_name)
        if patch.spec:
            await wl.merge_patch(NODE, None, node_name, {"spec": patch.spec})
            log.info("%s: set %s of workload node %s", ns, " and ".join(
                {"providerID": "providerID", "taints": "no uninitialized taint"}[k] for k in patch.spec), node_name)
    except WorkloadError as e:  # the workload API may not be up yet: waiting, not failing
        log.debug("%s: workload node %s not patched yet: %s", ns, node_name, e)
        return 2
    return None
