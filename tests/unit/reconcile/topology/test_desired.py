"""Topology desired state over upstream's own quick-start ClusterClass (release-1.13, vendored unchanged):
first creation, a stable cluster computing no writes, scaling, a variable change, template rotation, upgrade
order (control plane first, then workers one at a time), removal, and bad input."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api.labels import TOPOLOGY_DEPLOYMENT_NAME
from capd_py.reconcile.topology import desired as D
from capd_py.testing.topology import blueprint as topology_blueprint

pytestmark = pytest.mark.unit

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "upstream" / "docker-clusterclass-quick-start.yaml"


def _docs() -> list[dict[str, Any]]:
    out = []
    for d in yaml.safe_load_all(FIXTURE.read_text()):
        if d:
            d["metadata"]["namespace"] = "ns"
            d["metadata"]["uid"] = f"uid-{d['kind']}-{d['metadata']['name']}"
            out.append(d)
    return out


def blueprint() -> D.Blueprint:
    by = {(d["kind"], d["metadata"]["name"]): d for d in _docs()}
    cc = by[("ClusterClass", "quick-start")]
    return topology_blueprint(cc, by)


def cluster(version: str = "v1.34.4", workers: int = 1, cp: int = 1, **variables: Any) -> dict[str, Any]:
    vs = {"imageRepository": "", "etcdImageTag": "", "coreDNSImageTag": "",
          "podSecurityStandard": {"enabled": True, "enforce": "baseline", "audit": "restricted", "warn": "restricted"}}
    vs.update(variables)
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c1", "namespace": "ns", "uid": "uid-c1", "generation": 1},
            "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]},
                                        "services": {"cidrBlocks": ["10.128.0.0/12"]}},
                     "topology": {"classRef": {"name": "quick-start"}, "version": version,
                                  "controlPlane": {"replicas": cp},
                                  "variables": [{"name": k, "value": v} for k, v in vs.items()],
                                  "workers": {"machineDeployments": [
                                      {"class": "default-worker", "name": "md-0", "replicas": workers}]}}}}


def rand_seq() -> Any:
    n = itertools.count()
    return lambda: f"r{next(n):04d}"


class World:
    """What the API server would hold after applying plans (plus what other controllers report in status)."""

    def __init__(self) -> None:
        self.objs: dict[tuple[str, str], dict[str, Any]] = {}
        self.cluster_refs: dict[str, Any] = {}
        self.rand = rand_seq()

    def apply(self, plan: D.Plan) -> None:
        for w in plan.writes:
            key = (w.obj["kind"], w.obj["metadata"]["name"])
            old = self.objs.get(key)
            new = copy.deepcopy(w.obj)
            new["metadata"]["uid"] = f"uid-{key[1]}"
            if old is not None:
                new["status"] = old.get("status")
            self.objs[key] = new
        for d in plan.deletes:
            self.objs.pop((d["kind"], d["metadata"]["name"]), None)
        if plan.cluster_refs:
            self.cluster_refs.update(plan.cluster_refs)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _), o in sorted(self.objs.items()) if k == kind]

    def current(self) -> D.Current:
        def ref(r: dict[str, Any] | None) -> dict[str, Any] | None:
            return self.objs.get((r["kind"], r["name"])) if r else None
        cur = D.Current(infra_cluster=ref(self.cluster_refs.get("infrastructureRef")),
                        control_plane=ref(self.cluster_refs.get("controlPlaneRef")))
        if cur.control_plane:
            cur.cp_machine_infra_template = ref(cur.control_plane["spec"]["machineTemplate"]["spec"]
                                                ["infrastructureRef"])
        for md in self.of("MachineDeployment"):
            ts = md["spec"]["template"]["spec"]
            cur.machine_deployments[md["metadata"]["labels"][TOPOLOGY_DEPLOYMENT_NAME]] = D.CurrentMD(
                md, ref(ts["bootstrap"]["configRef"]), ref(ts["infrastructureRef"]))
        for mp in self.of("MachinePool"):
            ts = mp["spec"]["template"]["spec"]
            cur.machine_pools[mp["metadata"]["labels"]["topology.cluster.x-k8s.io/pool-name"]] = D.CurrentMP(
                mp, ref(ts["bootstrap"]["configRef"]), ref(ts["infrastructureRef"]))
        for mhc in self.of("MachineHealthCheck"):
            cur.mhcs[mhc["metadata"]["name"]] = mhc
        cur.templates = self.of("DockerMachineTemplate") + self.of("KubeadmConfigTemplate")
        return cur

    def step(self, c: dict[str, Any]) -> D.Plan:
        c = copy.deepcopy(c)
        c["spec"].update(self.cluster_refs)
        plan = D.compute(c, blueprint(), self.current(), self.rand)
        self.apply(plan)
        return plan


def kinds(plan: D.Plan) -> list[str]:
    return [w.obj["kind"] for w in plan.writes]


def test_first_reconcile_creates_everything_from_the_class_with_patches_applied() -> None:
    w = World()
    plan = w.step(cluster())
    assert plan.reconciled, plan.message
    assert sorted(kinds(plan)) == sorted(["DockerCluster", "DockerMachineTemplate", "KubeadmControlPlane",
                                          "KubeadmConfigTemplate", "DockerMachineTemplate", "MachineDeployment",
                                          "MachineHealthCheck", "MachineHealthCheck"])
    assert all(x.create for x in plan.writes)
    assert set(plan.cluster_refs or {}) == {"infrastructureRef", "controlPlaneRef"}
    kcp = w.of("KubeadmControlPlane")[0]
    assert kcp["spec"]["version"] == "v1.34.4" and kcp["spec"]["replicas"] == 1
    # podSecurityStandard (enabled by default) patched the control plane: extraArgs, volume, the file
    cc = kcp["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]
    assert cc["apiServer"]["extraArgs"][0]["name"] == "admission-control-config-file"
    files = kcp["spec"]["kubeadmConfigSpec"]["files"]
    assert 'enforce: "baseline"' in files[0]["content"] and "v1beta1" not in files[0]["content"]
    # empty imageRepository: that patch's enabledIf is false
    assert "imageRepository" not in cc
    cpi = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]
    cp_tpl = w.objs[("DockerMachineTemplate", cpi["name"])]
    assert cp_tpl["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"
    assert cp_tpl["metadata"]["annotations"]["cluster.x-k8s.io/cloned-from-name"] == "quick-start-control-plane"
    md = w.of("MachineDeployment")[0]
    assert md["metadata"]["name"].startswith("c1-md-0-")
    assert md["spec"]["replicas"] == 1 and md["spec"]["template"]["spec"]["version"] == "v1.34.4"
    md_tpl = w.objs[("DockerMachineTemplate", md["spec"]["template"]["spec"]["infrastructureRef"]["name"])]
    assert md_tpl["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"
    assert md["spec"]["selector"]["matchLabels"].items() <= md["spec"]["template"]["metadata"]["labels"].items()
    for o in w.objs.values():
        assert o["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] == "c1"
        assert o["metadata"]["ownerReferences"][0]["uid"] == "uid-c1"


def test_a_stable_topology_computes_no_writes() -> None:
    w = World()
    w.step(cluster())
    plan = w.step(cluster())
    assert plan.writes == [] and plan.deletes == [] and plan.cluster_refs is None


def test_scaling_workers_patches_only_the_machine_deployment() -> None:
    w = World()
    w.step(cluster())
    plan = w.step(cluster(workers=3))
    assert kinds(plan) == ["MachineDeployment"] and not plan.writes[0].create
    assert plan.writes[0].obj["spec"]["replicas"] == 3


def test_a_variable_change_updates_the_control_plane_in_place() -> None:
    w = World()
    w.step(cluster())
    plan = w.step(cluster(podSecurityStandard={"enabled": True, "enforce": "restricted"}))
    assert kinds(plan) == ["KubeadmControlPlane"]
    assert 'enforce: "restricted"' in plan.writes[0].obj["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
    plan = w.step(cluster(etcdImageTag="3.6.5-0"))
    assert kinds(plan) == ["KubeadmControlPlane"]
    etcd = plan.writes[0].obj["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["etcd"]
    assert etcd == {"local": {"imageTag": "3.6.5-0"}}


def test_upgrade_goes_control_plane_first_then_workers_with_template_rotation() -> None:
    w = World()
    w.step(cluster())
    kcp = w.of("KubeadmControlPlane")[0]
    kcp["status"] = {"version": "v1.34.4", "replicas": 1, "upToDateReplicas": 1}
    md = w.of("MachineDeployment")[0]
    md["status"] = {"replicas": 1, "upToDateReplicas": 1}
    old_cp_tpl = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["name"]
    old_md_tpl = md["spec"]["template"]["spec"]["infrastructureRef"]["name"]

    plan = w.step(cluster(version="v1.35.0"))
    kcp = w.of("KubeadmControlPlane")[0]
    assert kcp["spec"]["version"] == "v1.35.0"
    # the CP machine template's customImage follows the version: a new copy, the KCP moved to it
    new_cp_tpl = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]["name"]
    assert new_cp_tpl != old_cp_tpl
    assert w.objs[("DockerMachineTemplate", new_cp_tpl)]["spec"]["template"]["spec"]["customImage"] == \
        "kindest/node:v1.35.0"
    assert ("DockerMachineTemplate", old_cp_tpl) not in w.objs  # unused copy deleted
    assert w.of("MachineDeployment")[0]["spec"]["template"]["spec"]["version"] == "v1.34.4"
    assert plan.reason == D.R_CLUSTER_UPGRADING

    # control plane still rolling: workers wait
    kcp["status"] = {"version": "v1.34.4", "replicas": 2, "upToDateReplicas": 1}
    plan = w.step(cluster(version="v1.35.0"))
    assert w.of("MachineDeployment")[0]["spec"]["template"]["spec"]["version"] == "v1.34.4"
    assert not plan.reconciled

    # control plane done: the MachineDeployment moves, onto a new infrastructure template
    kcp["status"] = {"version": "v1.35.0", "replicas": 1, "upToDateReplicas": 1}
    plan = w.step(cluster(version="v1.35.0"))
    md = w.of("MachineDeployment")[0]
    assert md["spec"]["template"]["spec"]["version"] == "v1.35.0"
    new_md_tpl = md["spec"]["template"]["spec"]["infrastructureRef"]["name"]
    assert new_md_tpl != old_md_tpl
    md["status"] = {"replicas": 1, "upToDateReplicas": 1}
    plan = w.step(cluster(version="v1.35.0"))
    assert plan.reconciled and plan.writes == []


def test_a_machine_deployment_pending_an_upgrade_gets_no_write() -> None:
    """upstream's reconcileMachineDeployment returns early while the MD is pending an upgrade: a replica count set by
    hand stays (upstream's runtime-SDK e2e scales it while AfterControlPlaneUpgrade holds the workers), no template
    rotates, and its templates are not deleted; once the MD may upgrade, the topology's spec comes back."""
    w = World()
    w.step(cluster())
    kcp = w.of("KubeadmControlPlane")[0]
    kcp["spec"]["version"] = "v1.35.0"
    kcp["status"] = {"version": "v1.35.0", "replicas": 1, "upToDateReplicas": 1}
    md = w.of("MachineDeployment")[0]
    md["status"] = {"replicas": 1, "upToDateReplicas": 1}
    md["spec"]["replicas"] = 2   # by hand
    md_tpl = md["spec"]["template"]["spec"]["infrastructureRef"]["name"]
    c = cluster(version="v1.35.0")
    c["spec"].update(w.cluster_refs)
    plan = D.compute(c, blueprint(), w.current(), w.rand, hold_workers=True)
    def of_md(obj: dict[str, Any]) -> bool:   # the MD and its template copies
        return obj["kind"] == "MachineDeployment" or \
            "topology.cluster.x-k8s.io/deployment-name" in obj["metadata"].get("labels", {})
    assert not [x for x in plan.writes if of_md(x.obj)], plan.writes
    assert not [x for x in plan.deletes if of_md(x)], plan.deletes
    assert plan.reason == D.R_MD_UPGRADE_PENDING
    # released: the MD takes the version (on a new template) and the topology's replicas
    plan = D.compute(c, blueprint(), w.current(), w.rand)
    mds = [x.obj for x in plan.writes if x.obj["kind"] == "MachineDeployment"]
    assert len(mds) == 1 and mds[0]["spec"]["template"]["spec"]["version"] == "v1.35.0"
    assert mds[0]["spec"]["replicas"] == 1
    assert mds[0]["spec"]["template"]["spec"]["infrastructureRef"]["name"] != md_tpl


def test_old_template_kept_while_a_machineset_still_uses_it() -> None:
    w = World()
    w.step(cluster())
    kcp = w.of("KubeadmControlPlane")[0]
    kcp["status"] = {"version": "v1.35.0", "replicas": 1, "upToDateReplicas": 1}
    md = w.of("MachineDeployment")[0]
    old = md["spec"]["template"]["spec"]["infrastructureRef"]["name"]
    c = cluster(version="v1.35.0")
    c["spec"].update(w.cluster_refs)
    kcp["spec"]["version"] = "v1.35.0"
    cur = w.current()
    cur.referenced_templates.add(("DockerMachineTemplate", old))
    plan = D.compute(c, blueprint(), cur, w.rand)
    assert not any(d["metadata"]["name"] == old for d in plan.deletes)


def test_workers_upgrade_one_at_a_time() -> None:
    c = cluster()
    c["spec"]["topology"]["workers"]["machineDeployments"].append(
        {"class": "default-worker", "name": "md-1", "replicas": 1})
    w = World()
    w.step(c)
    for o in w.of("MachineDeployment"):
        o["status"] = {"replicas": 1, "upToDateReplicas": 1}
    w.of("KubeadmControlPlane")[0]["status"] = {"version": "v1.35.0", "replicas": 1, "upToDateReplicas": 1}
    w.of("KubeadmControlPlane")[0]["spec"]["version"] = "v1.35.0"
    c2 = copy.deepcopy(c)
    c2["spec"]["topology"]["version"] = "v1.35.0"
    plan = w.step(c2)
    versions = sorted(o["spec"]["template"]["spec"]["version"] for o in w.of("MachineDeployment"))
    assert versions == ["v1.34.4", "v1.35.0"]
    assert plan.reason == D.R_MD_UPGRADE_PENDING
    # the first one is rolling (its new Machine not up to date): the second still waits
    for o in w.of("MachineDeployment"):
        if o["spec"]["template"]["spec"]["version"] == "v1.35.0":
            o["status"] = {"replicas": 2, "upToDateReplicas": 0}
    w.step(c2)
    assert sorted(o["spec"]["template"]["spec"]["version"] for o in w.of("MachineDeployment")) == versions
    for o in w.of("MachineDeployment"):
        o["status"] = {"replicas": 1, "upToDateReplicas": 1}
    w.step(c2)
    assert {o["spec"]["template"]["spec"]["version"] for o in w.of("MachineDeployment")} == {"v1.35.0"}


def test_removing_a_machine_deployment_from_the_topology_deletes_it_and_its_health_check() -> None:
    w = World()
    w.step(cluster())
    c = cluster()
    c["spec"]["topology"]["workers"]["machineDeployments"] = []
    plan = w.step(c)
    assert sorted(d["kind"] for d in plan.deletes) == ["DockerMachineTemplate", "KubeadmConfigTemplate",
                                                        "MachineDeployment", "MachineHealthCheck"]


@pytest.mark.parametrize("mutate, message", [
    (lambda c: c["spec"]["topology"]["variables"].append({"name": "nope", "value": 1}), "nope"),
    (lambda c: c["spec"]["topology"]["variables"].__setitem__(
        3, {"name": "podSecurityStandard", "value": {"enabled": "yes"}}), "enabled"),
    (lambda c: c["spec"]["topology"]["workers"]["machineDeployments"][0].__setitem__("class", "gpu"),
     "'gpu' is not a machineDeployment class"),
])
def test_bad_topology_is_a_clear_error(mutate: Any, message: str) -> None:
    c = cluster()
    mutate(c)
    with pytest.raises(D.TopologyError, match=message):
        D.compute(c, blueprint(), D.Current(), rand_seq())


def test_required_variable_missing_is_an_error_when_it_has_no_default() -> None:
    bp = blueprint()
    bp.clusterclass["spec"]["variables"].append({"name": "must", "required": True,
                                                 "schema": {"openAPIV3Schema": {"type": "string"}}})
    with pytest.raises(D.TopologyError, match="must"):
        D.compute(cluster(), bp, D.Current(), rand_seq())


def test_a_patch_that_cannot_apply_names_patch_and_template() -> None:
    bp = blueprint()
    bp.clusterclass["spec"]["patches"].append({"name": "broken", "definitions": [{
        "selector": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerClusterTemplate",
                     "matchResources": {"infrastructureCluster": True}},
        "jsonPatches": [{"op": "replace", "path": "/spec/template/spec/nothing/here", "value": 1}]}]})
    with pytest.raises(D.TopologyError, match="broken.*DockerClusterTemplate"):
        D.compute(cluster(), bp, D.Current(), rand_seq())


def test_machine_pool_topology_gets_its_bootstrap_config_and_infrastructure_pool() -> None:
    c = cluster()
    c["spec"]["topology"]["workers"]["machinePools"] = [{"class": "default-worker", "name": "mp-0", "replicas": 2}]
    w = World()
    w.step(c)
    [mp] = w.of("MachinePool")
    assert mp["metadata"]["name"].startswith("c1-mp-0-") and mp["spec"]["replicas"] == 2
    ts = mp["spec"]["template"]["spec"]
    assert ts["version"] == "v1.34.4" and ts["bootstrap"]["configRef"]["kind"] == "KubeadmConfig"
    dmp = w.objs[("DockerMachinePool", ts["infrastructureRef"]["name"])]
    # the class's customImage patch on the DockerMachinePoolTemplate reached the pool
    assert dmp["spec"]["template"]["customImage"] == "kindest/node:v1.34.4"
    kc = w.objs[("KubeadmConfig", ts["bootstrap"]["configRef"]["name"])]
    assert kc["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"][0]["name"] == "eviction-hard"
    assert w.step(c).writes == []  # stable
    c["spec"]["topology"]["workers"]["machinePools"][0]["replicas"] = 3
    plan = w.step(c)
    assert kinds(plan) == ["MachinePool"] and plan.writes[0].obj["spec"]["replicas"] == 3
    c["spec"]["topology"]["workers"]["machinePools"] = []
    plan = w.step(c)
    assert [d["kind"] for d in plan.deletes] == ["MachinePool"]


def test_a_machine_pool_pending_an_upgrade_gets_no_write() -> None:
    """As a MachineDeployment: held, a MachinePool (and its KubeadmConfig / DockerMachinePool) is not written; a
    replica count set by hand stays until it may upgrade."""
    c = cluster()
    c["spec"]["topology"]["workers"]["machinePools"] = [{"class": "default-worker", "name": "mp-0", "replicas": 1}]
    w = World()
    w.step(c)
    kcp = w.of("KubeadmControlPlane")[0]
    kcp["spec"]["version"] = "v1.35.0"
    kcp["status"] = {"version": "v1.35.0", "replicas": 1, "upToDateReplicas": 1}
    [mp] = w.of("MachinePool")
    mp["spec"]["replicas"] = 2   # by hand
    c = cluster(version="v1.35.0")
    c["spec"]["topology"]["workers"]["machinePools"] = [{"class": "default-worker", "name": "mp-0", "replicas": 1}]
    c["spec"].update(w.cluster_refs)
    plan = D.compute(c, blueprint(), w.current(), w.rand, hold_workers=True)
    pool_kinds = ("MachinePool", "KubeadmConfig", "DockerMachinePool")
    assert not [x for x in plan.writes if x.obj["kind"] in pool_kinds], plan.writes
    assert not [x for x in plan.deletes if x["kind"] in pool_kinds], plan.deletes
    plan = D.compute(c, blueprint(), w.current(), w.rand)
    [mp] = [x.obj for x in plan.writes if x.obj["kind"] == "MachinePool"]
    assert mp["spec"]["template"]["spec"]["version"] == "v1.35.0" and mp["spec"]["replicas"] == 1


def test_an_autoscaled_machine_deployment_is_left_its_replicas() -> None:
    """Upstream's topology: a MachineDeployment topology without replicas (the autoscaler's min/max annotations
    on it) gives a desired object without replicas, so what the autoscaler wrote is never reset."""
    annotations = {"cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
                   "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3"}
    c = cluster()
    topo = c["spec"]["topology"]["workers"]["machineDeployments"][0]
    del topo["replicas"]
    topo["metadata"] = {"annotations": annotations}
    w = World()
    w.step(c)
    md = w.of("MachineDeployment")[0]
    assert "replicas" not in md["spec"] and annotations.items() <= md["metadata"]["annotations"].items()
    md["spec"]["replicas"] = 2  # the autoscaler, through the scale subresource
    plan = w.step(c)
    assert plan.writes == [] and w.of("MachineDeployment")[0]["spec"]["replicas"] == 2


def test_a_removed_or_stale_owner_reference_is_written_again() -> None:
    """upstream's e2e removes every owner reference (and rewrites them to v1alpha1) and expects the topology's back:
    the desired object is applied again when one of its owner references is missing or at another version."""
    ref = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c", "uid": "u"}
    desired = {"metadata": {"labels": {}, "ownerReferences": [ref]}, "spec": {"x": 1}}
    current = {"metadata": {"labels": {}, "ownerReferences": [{**ref, "controller": True}]}, "spec": {"x": 1}}
    assert not D.needs_write(desired, current)
    assert D.needs_write(desired, {**current, "metadata": {"labels": {}}})
    stale = {**ref, "apiVersion": "cluster.x-k8s.io/v1alpha1"}
    assert D.needs_write(desired, {**current, "metadata": {"labels": {}, "ownerReferences": [stale]}})
