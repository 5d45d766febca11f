"""DockerMachinePool decisions (capd_py.reconcile.dockermachinepool): instances, scaling, one-at-a-time rollout,
status."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.labels import CLUSTER_NAME, DELETE_MACHINE_ANNOTATION, MACHINE_POOL_NAME, POOL_TEMPLATE_HASH_LABEL
from capd_py.reconcile import dockermachinepool as rdmp

pytestmark = pytest.mark.unit


def mp(replicas: int = 3, version: str = "v1.34.4") -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "c1-mp-0", "namespace": "ns", "uid": "uid-mp"},
            "spec": {"clusterName": "c1", "replicas": replicas, "template": {"spec": {"version": version}}}}


def dmp(**template: Any) -> dict[str, Any]:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachinePool",
            "metadata": {"name": "c1-dmp-0", "namespace": "ns", "uid": "uid-dmp", "generation": 2},
            "spec": {"template": dict(template)}, "status": {}}


SEQ = iter(range(10_000))


def instance(pool: dict[str, Any], pool_mp: dict[str, Any], name: str, *, provisioned: bool = True,
             current: bool = True, deleting: bool = False, machine: bool = True,
             annotated: bool = False, age: int = 0) -> dict[str, Any]:
    dm = rdmp.new_docker_machine(pool, pool_mp, name)
    dm["metadata"]["uid"] = f"uid-{name}"
    dm["metadata"]["creationTimestamp"] = f"2026-01-01T00:{59 - age:02d}:00Z"
    if not current:
        dm["metadata"]["labels"][POOL_TEMPLATE_HASH_LABEL] = "old"
    if deleting:
        dm["metadata"]["deletionTimestamp"] = "2026-01-01T01:00:00Z"
    if provisioned:
        dm["spec"]["providerID"] = f"docker:////{name}"
        dm["status"] = {"initialization": {"provisioned": True},
                        "addresses": [{"type": "InternalIP", "address": "172.18.0.9"}]}
    if machine:
        dm["metadata"]["ownerReferences"].append({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                                  "name": name, "uid": f"uid-m-{name}", "controller": True})
    if annotated:
        dm["metadata"]["annotations"] = {DELETE_MACHINE_ANNOTATION: ""}
    return dm


def machines_for(dms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in dms:
        for o in d["metadata"]["ownerReferences"]:
            if o["kind"] == "Machine":
                out.append({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                            "metadata": {"name": o["name"], "namespace": "ns", "uid": o["uid"],
                                         "finalizers": [] if d["metadata"].get("annotations", {}).get("test/new")
                                         else ["machine.cluster.x-k8s.io"]},
                            "spec": {"version": "v1.34.4",
                                     "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io",
                                                           "kind": "DockerMachine", "name": d["metadata"]["name"]}}})
    return out


def insts(pool: dict[str, Any], pool_mp: dict[str, Any], dms: list[dict[str, Any]]) -> list[rdmp.Instance]:
    return rdmp.instances(pool, pool_mp, dms, machines_for(dms))


def test_new_instance_shape() -> None:
    pool = dmp(customImage="kindest/node:v1.34.4", preLoadImages=["a"], extraMounts=[])
    dm = rdmp.new_docker_machine(pool, mp(), "c1-mp-0-abcde")
    assert dm["kind"] == "DockerMachine" and dm["metadata"]["name"] == "c1-mp-0-abcde"
    assert dm["metadata"]["labels"] == {MACHINE_POOL_NAME: "c1-mp-0", CLUSTER_NAME: "c1",
                                        POOL_TEMPLATE_HASH_LABEL: rdmp.template_hash(pool, mp())}
    assert dm["metadata"]["ownerReferences"] == [{"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2",
                                                  "kind": "DockerMachinePool", "name": "c1-dmp-0",
                                                  "uid": "uid-dmp"}]  # not controller: its Machine becomes that
    assert dm["spec"] == {"customImage": "kindest/node:v1.34.4", "preLoadImages": ["a"]}
    assert rdmp.instance_name(mp(), "xyz12") == "c1-mp-0-xyz12"
    long = mp()
    long["metadata"]["name"] = "p" * 70
    assert rdmp.instance_name(long, "xyz12") == "p" * 57 + "-xyz12"


def test_template_hash_follows_version_and_template() -> None:
    h = rdmp.template_hash(dmp(), mp())
    assert h == rdmp.template_hash(dmp(), mp(replicas=9))
    assert h != rdmp.template_hash(dmp(), mp(version="v1.35.0"))
    assert h != rdmp.template_hash(dmp(customImage="x"), mp())
    assert h == rdmp.template_hash(dmp(preLoadImages=[]), mp())  # empty is unset
    with_boot = mp()
    with_boot["spec"]["template"]["spec"]["bootstrap"] = {
        "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "cfg-1"}}
    h1 = rdmp.template_hash(dmp(), with_boot)
    with_boot["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] = "cfg-1"  # copied in: no rollout
    with_boot["spec"]["template"]["spec"]["minReadySeconds"] = 5                   # in place: no rollout
    assert rdmp.template_hash(dmp(), with_boot) == h1
    with_boot["spec"]["template"]["spec"]["bootstrap"]["configRef"]["name"] = "cfg-2"  # new join data: rollout
    assert rdmp.template_hash(dmp(), with_boot) != h1


def test_the_pools_instances_are_found_by_labels_as_upstreams() -> None:
    """A DockerMachine of the pool (its cluster and pool labels) whose owner references were removed (a restore;
    upstream's e2e removes them all) is still an instance, so nothing is created in its place; it gets the pool's
    reference back. Another pool's is not one."""
    pool, pool_mp = dmp(), mp()
    mine = instance(pool, pool_mp, "a")
    stripped = instance(pool, pool_mp, "c")
    stripped["metadata"]["ownerReferences"] = []
    other_pool = instance(pool, pool_mp, "b")
    other_pool["metadata"]["labels"][MACHINE_POOL_NAME] = "other"
    got = insts(pool, pool_mp, [mine, stripped, other_pool])
    assert [i.name for i in got] == ["a", "c"] and got[0].machine is not None and got[0].current
    assert rdmp.missing_pool_owner(pool, got) == [stripped]
    assert rdmp.plan(mp(replicas=2), got).create == 0


def test_scale_up_and_down() -> None:
    pool, pool_mp = dmp(), mp(replicas=3)
    one = [instance(pool, pool_mp, "a")]
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, one))
    assert p.create == 2 and not p.delete
    three = [instance(pool, pool_mp, n, age=i) for i, n in enumerate("abc")]
    p = rdmp.plan(mp(replicas=1), insts(pool, pool_mp, three))
    # newest first (a is the newest: age 0)
    assert p.create == 0 and [i.name for i in p.delete] == ["a", "b"]
    assert rdmp.plan(pool_mp, insts(pool, pool_mp, three)) == rdmp.Plan()


def test_scale_down_prefers_annotated_then_not_provisioned() -> None:
    pool, pool_mp = dmp(), mp(replicas=3)
    dms = [instance(pool, pool_mp, "a"), instance(pool, pool_mp, "b", provisioned=False, age=5),
           instance(pool, pool_mp, "c", annotated=True, age=9)]
    p = rdmp.plan(mp(replicas=1), insts(pool, pool_mp, dms))
    assert [i.name for i in p.delete] == ["c", "b"]


def test_instances_being_deleted_do_not_count() -> None:
    pool, pool_mp = dmp(), mp(replicas=2)
    dms = [instance(pool, pool_mp, "a"), instance(pool, pool_mp, "b", deleting=True)]
    assert rdmp.plan(pool_mp, insts(pool, pool_mp, dms)).create == 1


def test_rollout_replaces_one_instance_at_a_time() -> None:
    pool, pool_mp = dmp(), mp(replicas=2, version="v1.35.0")
    old = [instance(pool, pool_mp, "a", current=False), instance(pool, pool_mp, "b", current=False)]
    # 1. all provisioned: one surge instance
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, old))
    assert p.create == 1 and not p.delete and p.rolling
    # 2. the new one is not provisioned yet: wait (no deletion, no second surge)
    new = instance(pool, pool_mp, "c", provisioned=False)
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [*old, new]))
    assert p.create == 0 and not p.delete and "waiting" in p.message
    # 3. provisioned: delete one outdated instance
    new = instance(pool, pool_mp, "c")
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [*old, new]))
    assert [i.name for i in p.delete] == ["a"] or [i.name for i in p.delete] == ["b"]
    assert p.create == 0
    # 4. while it is being deleted: wait
    going = instance(pool, pool_mp, "a", current=False, deleting=True)
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [going, old[1], new]))
    assert p.create == 0 and not p.delete
    # 5. gone: the next surge
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [old[1], new]))
    assert p.create == 1 and not p.delete
    # 6. all current: done
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [new, instance(pool, pool_mp, "d")]))
    assert p == rdmp.Plan()


def test_scale_down_during_a_rollout_removes_outdated_first() -> None:
    pool, pool_mp = dmp(), mp(replicas=1, version="v1.35.0")
    dms = [instance(pool, pool_mp, "a", current=False), instance(pool, pool_mp, "b", current=False),
           instance(pool, pool_mp, "c")]
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, dms))
    assert sorted(i.name for i in p.delete) == ["a", "b"]


def test_an_instance_is_deleted_only_through_its_machine() -> None:
    """The rollout's surge instance, made from a template that changed again at once (the DockerMachinePool and
    then the MachinePool's version written by the topology), is outdated before the MachinePool controller made
    its Machine: it waits for that Machine (upstream CAPD's deleteMachinePoolMachine), never deleted bare."""
    pool, pool_mp = dmp(), mp(replicas=1, version="v1.35.0")
    old = instance(pool, pool_mp, "a", current=False)
    surge = instance(pool, pool_mp, "b", current=False, provisioned=False, machine=False)
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [old, surge]))
    assert p.delete == [] and p.create == 0 and p.rolling and "waiting for the Machine of b" in p.message
    # its Machine exists, not yet taken by the Machine controller (no finalizer): deleting it would drop it at once
    # and leave the DockerMachine for the MachinePool controller to make another Machine for
    surge = instance(pool, pool_mp, "b", current=False, provisioned=False)
    surge["metadata"]["annotations"] = {"test/new": "1"}
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [old, surge]))
    assert p.delete == [] and "waiting for the Machine of b" in p.message
    surge["metadata"]["annotations"] = {}   # the Machine controller added its finalizer
    p = rdmp.plan(pool_mp, insts(pool, pool_mp, [old, surge]))
    assert [(i.name, i.machine is not None) for i in p.delete] == [("b", True)]


def test_status_and_provider_ids() -> None:
    pool, pool_mp = dmp(), mp(replicas=2)
    dms = [instance(pool, pool_mp, "b"), instance(pool, pool_mp, "a")]
    got = insts(pool, pool_mp, dms)
    sp = rdmp.spec_patch(pool, "c1", got)
    assert sp == {"spec": {"providerID": "docker:////c1-dmp-c1-dmp-0",
                           "providerIDList": ["docker:////a", "docker:////b"]}}
    st = rdmp.compute_status(pool, pool_mp, got)
    assert st["replicas"] == 2 and st["ready"] is True and st["initialization"] == {"provisioned": True}
    assert st["infrastructureMachineKind"] == "DockerMachine" and st["observedGeneration"] == 2
    assert st["instances"][0] == {"instanceName": "a", "providerID": "docker:////a", "version": "v1.34.4",
                                  "ready": True, "addresses": [{"type": "InternalIP", "address": "172.18.0.9"}]}
    assert cond.is_true({"status": st}, "Ready") and cond.is_true({"status": st}, "ReplicasReady")
    # scaling up: not ready again, but provisioned stays (initialization happens once)
    pool["status"] = st
    st2 = rdmp.compute_status(pool, mp(replicas=3), got)
    assert st2["ready"] is True and st2["initialization"] == {"provisioned": True}
    c = cond.get({"status": st2}, "ReplicasReady")
    assert c is not None and c["status"] == cond.FALSE and c["message"] == "2 of 3 instance(s) provisioned, 2 exist"


def test_status_before_anything_is_provisioned() -> None:
    pool, pool_mp = dmp(), mp(replicas=1)
    got = insts(pool, pool_mp, [instance(pool, pool_mp, "a", provisioned=False)])
    st = rdmp.compute_status(pool, pool_mp, got)
    assert "ready" not in st and "initialization" not in st and st["replicas"] == 1
    assert rdmp.spec_patch(pool, "c1", got) == {"spec": {"providerID": "docker:////c1-dmp-c1-dmp-0"}}
