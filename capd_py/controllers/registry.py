"""Every controller capd-py runs, imported explicitly: a missing or broken module is a startup error,
never a silently absent controller."""

from __future__ import annotations

from collections.abc import Mapping

from capd_py.api import controllerset, features
from capd_py.api.gvk import (
    CONFIG_MAP,
    GVK,
    KUBEADM_CONFIG_TEMPLATE,
    MACHINE_DRAIN_RULE,
    SECRET,
)
from capd_py.controllers import (
    cluster,
    clusterclass,
    clusterresourceset,
    clusterresourcesetbinding,
    devcluster,
    devmachine,
    devmachinepool,
    devmachinetemplate,
    dockercluster,
    dockermachine,
    dockermachinepool,
    dockermachinetemplate,
    extensionconfig,
    kubeadmconfig,
    kubeadmcontrolplane,
    machine,
    machinedeployment,
    machinehealthcheck,
    machinepool,
    machineset,
    topology,
    topology_machinesets,
)
from capd_py.controllers.mappers import Controller

MODULES = (
    cluster,
    clusterclass,
    topology,
    machine,
    machineset,
    machinedeployment,
    machinehealthcheck,
    machinepool,
    kubeadmconfig,
    kubeadmcontrolplane,
    dockercluster,
    dockermachine,
    dockermachinepool,
    dockermachinetemplate,
    devcluster,
    devmachine,
    devmachinepool,
    devmachinetemplate,
    clusterresourceset,
    clusterresourcesetbinding,
    extensionconfig,
)


# controllers that run only while their feature gate is on (as upstream starts them)
GATED = {clusterclass: features.CLUSTER_TOPOLOGY, topology: features.CLUSTER_TOPOLOGY,
         machinepool: features.MACHINE_POOL, dockermachinepool: features.MACHINE_POOL,
         devmachinepool: features.MACHINE_POOL,
         extensionconfig: features.RUNTIME_SDK}


def all_controllers(gates: Mapping[str, bool] | None = None, only: frozenset[str] | None = None) -> list[Controller]:
    """The controllers to run: those whose feature gate is on, and of them the selection `only` (queue keys,
    `capd_py/api/controllerset.py`; None: all)."""
    on = {**features.DEFAULTS, **(gates or {})}
    out = [m.controller() for m in MODULES if m not in GATED or on[GATED[m]]]
    if on[features.CLUSTER_TOPOLOGY]:
        out += topology_machinesets.controllers()
    keep = set(controllerset.selected([c.key for c in out], only))
    out = [c for c in out if c.key in keep]
    kinds = [c.key for c in out]
    dup = {k for k in kinds if kinds.count(k) > 1}
    if dup:
        raise RuntimeError(f"more than one controller for {sorted(dup)}")
    return out


# Kinds the controllers read but no controller reconciles on: watched only to serve those reads from the cache
# (certificates, kubeconfigs and bootstrap data Secrets; the templates MachineSets and KCP clone; the
# MachineDrainRules a Machine's drain follows). DockerMachineTemplates have a controller of their own
# (status.capacity), so they are watched as its primary kind.
CACHED_KINDS: tuple[GVK, ...] = (SECRET, CONFIG_MAP, KUBEADM_CONFIG_TEMPLATE, MACHINE_DRAIN_RULE)
