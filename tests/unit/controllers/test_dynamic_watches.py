"""Dynamic watches (issue 25): a kind the core's objects reference, found through the contract, is watched from its
first sight, and its events reach the objects that reference or own it."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import gvk
from capd_py.api.gvk import GVK
from capd_py.controllers import cluster, machine, machinedeployment, machinepool, machineset
from capd_py.controllers import kubeadmcontrolplane as kcp
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.registry import CACHED_KINDS
from capd_py.kube.cache import Store
from capd_py.kube.workload import WorkloadClients

pytestmark = pytest.mark.unit

MC = GVK("infrastructure.example.com", "v1alpha1", "MinimalCluster", "minimalclusters")
MM = GVK("infrastructure.example.com", "v1alpha1", "MinimalMachine", "minimalmachines")
MMT = GVK("infrastructure.example.com", "v1alpha1", "MinimalMachineTemplate", "minimalmachinetemplates")


def obj(g: GVK, name: str, owners: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": g.api_version, "kind": g.kind,
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "resourceVersion": "1",
                         "ownerReferences": owners or []}, "spec": spec}


def ref(g: GVK, name: str) -> dict[str, str]:
    return {"apiGroup": g.group, "kind": g.kind, "name": name}


def manager() -> tuple[Manager, list[tuple[tuple[str, str, str], float]]]:
    ctx = Ctx(kube=None, runtime=None, settings=Settings(),  # type: ignore[arg-type]
              workload=WorkloadClients(None))  # type: ignore[arg-type]
    m = Manager(ctx, [cluster.controller(), machine.controller(), machineset.controller(),
                      machinedeployment.controller(), machinepool.controller(), kcp.controller()],
                cached=CACHED_KINDS)
    added: list[tuple[tuple[str, str, str], float]] = []
    m.queue.add = lambda key, after=0.0: added.append((key, after))  # type: ignore[method-assign]
    return m, added


def test_every_referencing_controller_has_a_ref_mapper() -> None:
    for mod in (cluster, machine, machineset, machinedeployment, machinepool, kcp):
        assert mod.controller().ref_mapper is not None, mod.__name__


def test_a_kind_seen_once_is_watched_and_its_events_reach_the_referrers() -> None:
    m, added = manager()
    m.store.serve(gvk.CLUSTER)
    m.store.replace(gvk.CLUSTER, [obj(gvk.CLUSTER, "c1", infrastructureRef=ref(MC, "c1"))])
    assert (MC.group, MC.kind) not in m.informers
    m.ctx.watch_kind("Cluster", MC)
    m.ctx.watch_kind("Cluster", MC)  # once is enough
    assert list(m.informers) == [(MC.group, MC.kind)] and m.dynamic["Cluster"] == [(MC, m.controllers["Cluster"]
                                                                                    .ref_mapper)]
    m.dispatch(MC, obj(MC, "c1"))
    assert (("Cluster", "ns", "c1"), m.ctx.settings.aggregate_seconds) in added
    # nobody else listens to it
    assert {k[0] for k, _ in added} == {"Cluster"}


def test_a_statically_watched_kind_starts_no_second_watch() -> None:
    m, _ = manager()
    m.ctx.watch_kind("Cluster", gvk.DOCKER_CLUSTER)
    m.ctx.watch_kind("Machine", gvk.KUBEADM_CONFIG_TEMPLATE)
    assert m.informers == {}


def test_machine_hears_its_infra_machine_before_and_after_adoption() -> None:
    s = Store()
    s.serve(gvk.MACHINE)
    s.replace(gvk.MACHINE, [obj(gvk.MACHINE, "m1", infrastructureRef=ref(MM, "mm1"))])
    rm = machine.controller().ref_mapper
    assert rm is not None
    assert rm(obj(MM, "mm1"), s) == [("ns", "m1")]
    owned = obj(MM, "other", owners=[{"kind": "Machine", "name": "m2", "uid": "u", "controller": True}])
    assert rm(owned, s) == [("ns", "m2")]


def test_machineset_and_deployment_hear_their_templates() -> None:
    s = Store()
    for g in (gvk.MACHINE_SET, gvk.MACHINE_DEPLOYMENT):
        s.serve(g)
        s.replace(g, [obj(g, "w", template={"spec": {"infrastructureRef": ref(MMT, "tpl")}})])
    for mod in (machineset, machinedeployment):
        rm = mod.controller().ref_mapper
        assert rm is not None
        assert rm(obj(MMT, "tpl"), s) == [("ns", "w")]
        assert rm(obj(MMT, "other"), s) == []


def test_a_crd_change_requeues_the_referencing_controllers_objects() -> None:
    m, added = manager()
    m._started = True
    m.store.serve(gvk.CLUSTER)
    m.store.replace(gvk.CLUSTER, [obj(gvk.CLUSTER, "c1", infrastructureRef=ref(MC, "c1"))])
    crd: dict[str, Any]
    crd = {"metadata": {"name": "minimalclusters.infrastructure.example.com",
                        "labels": {"cluster.x-k8s.io/v1beta2": "v1alpha1"}},
           "spec": {"group": MC.group, "names": {"kind": MC.kind, "plural": MC.plural},
                    "versions": [{"name": "v1alpha1", "served": True}]}}
    m.dispatch_crd(crd)
    assert ("Cluster", "ns", "c1") in {k for k, _ in added}
    added.clear()
    m.dispatch_crd({**crd, "metadata": {**crd["metadata"], "resourceVersion": "2"}})  # nothing the core reads
    assert added == []


async def test_a_relabelled_crd_moves_the_watch_to_the_new_version() -> None:
    m, _ = manager()
    m._started = True
    crd: dict[str, Any]
    crd = {"metadata": {"name": "minimalclusters.infrastructure.example.com",
                        "labels": {"cluster.x-k8s.io/v1beta2": "v1alpha1"}},
           "spec": {"group": MC.group, "names": {"kind": MC.kind, "plural": MC.plural},
                    "versions": [{"name": "v1alpha1", "served": True}, {"name": "v1alpha2", "served": True}]}}
    m.ctx.contracts.replace([crd])
    m.watch_kind("Cluster", MC)
    old = m.informers[(MC.group, MC.kind)]
    relabelled = {"cluster.x-k8s.io/v1beta2": "v1alpha1_v1alpha2"}
    m.dispatch_crd({**crd, "metadata": {**crd["metadata"], "labels": relabelled}})
    new = m.informers[(MC.group, MC.kind)]
    assert new is not old and new.gvk.version == "v1alpha2"
    new.stop()


def test_machine_drain_rules_are_watched_to_serve_the_drains_reads_from_the_cache() -> None:
    m, _ = manager()
    assert gvk.MACHINE_DRAIN_RULE in m.watched()
