"""DockerMachinePool decisions (pure). Upstream CAPD's DockerMachinePool (release-1.13,
test/infrastructure/docker/internal/controllers/backends/docker/dockermachinepool_backend.go) opts in to
"MachinePool Machines": every replica is a DockerMachine labelled with the pool's name and owned by the
DockerMachinePool, `status.infrastructureMachineKind` is `DockerMachine`, and the core MachinePool controller
makes a Machine for each. capd-py keeps that shape but lets the DockerMachine path do the container work:
the pool creates DockerMachines (not containers); each DockerMachine, once its Machine exists, creates,
boots and bootstraps its node container exactly like any other.

- scale up: new DockerMachines from `spec.template` (customImage, preLoadImages, extraMounts);
- scale down: Machines are deleted (so the Node is drained and the DockerMachine with its container goes);
  candidates in order: `cluster.x-k8s.io/delete-machine` on the Machine, outdated, not provisioned, newest;
- rollout: an instance made from another template (the hash of the MachinePool's version and this pool's
  `spec.template`, a label on the DockerMachine) is replaced one at a time: one new instance above the
  desired count, the old one deleted once every new one is provisioned (no unavailable replica);
- status: `spec.providerIDList` (sorted), `status.replicas`, `status.ready` and `initialization.provisioned`
  once every desired replica is provisioned, `status.instances`, `infrastructureMachineKind`.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.infrakinds import instance_spec, kinds_of, pool_template
from capd_py.api.labels import DELETE_MACHINE_ANNOTATION, FINALIZER_MACHINE, POOL_TEMPLATE_HASH_LABEL
from capd_py.reconcile import coreutil
from capd_py.reconcile import machinepool as rmp

INFRASTRUCTURE_MACHINE_KIND = "DockerMachine"
REPLICAS_READY = "ReplicasReady"
R_READY, R_NOT_READY = "Ready", "NotReady"
R_REPLICAS_READY, R_WAITING_FOR_REPLICAS = "ReplicasReady", "WaitingForReplicasReady"

TEMPLATE_FIELDS = ("customImage", "preLoadImages", "extraMounts")


def machine_kind(pool: dict[str, Any]) -> str:
    """The kind of the pool's instances: DockerMachine for a DockerMachinePool, DevMachine for a DevMachinePool."""
    return kinds_of(pool).machine.kind


def template_hash(dmp: dict[str, Any], mp: dict[str, Any]) -> str:
    """What an instance is made from: the MachinePool's Kubernetes version and bootstrap config (a new one means
    new join data) and this pool's spec.template. Not the data secret name (the MachinePool controller copies it
    in) nor what changes in place (labels, annotations, minReadySeconds, deletion timeouts)."""
    tpl = pool_template(dmp)
    h: dict[str, Any] = {"version": contract.dig(mp, "spec", "template", "spec", "version") or "",
                         "template": {k: tpl.get(k) for k in TEMPLATE_FIELDS if tpl.get(k)}}
    boot = rmp.bootstrap_ref(mp)
    if boot is not None:  # only when set, so that pools without a bootstrap config keep their hash
        h["bootstrap"] = boot
    return coreutil.stable_hash(h)


def instance_name(mp: dict[str, Any], suffix: str) -> str:
    """`<MachinePool name>-<random>` (the DockerMachine, its Machine and, prefixed with the cluster name unless
    it starts with it, its container)."""
    base = mp["metadata"]["name"]
    rnd = suffix
    name = f"{base}-{rnd}"
    return name if len(name) <= 63 else f"{base[:57]}-{rnd}"


def new_docker_machine(dmp: dict[str, Any], mp: dict[str, Any], name: str) -> dict[str, Any]:
    """One instance: owned by the DockerMachinePool (not as controller: its Machine becomes that), labelled with
    the pool name, the cluster name and the template hash."""
    tpl = pool_template(dmp)
    spec = instance_spec(dmp, {k: tpl[k] for k in TEMPLATE_FIELDS if tpl.get(k)})
    labels = {**rmp.pool_labels(mp), POOL_TEMPLATE_HASH_LABEL: template_hash(dmp, mp)}
    return {"apiVersion": dmp["apiVersion"], "kind": machine_kind(dmp),
            "metadata": {"name": name, "namespace": dmp["metadata"]["namespace"], "labels": labels,
                         "ownerReferences": [contract.owner_ref(dmp, controller=False)]},
            "spec": spec}


def instances_of(dmp: dict[str, Any], mp: dict[str, Any], dms: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pool's DockerMachines: labelled with its Cluster's and MachinePool's names, as upstream lists them (not by
    owner reference: one whose owner references were removed, e.g. by a restore, is still an instance, and is not
    replaced by a new one; `missing_pool_owner` says which get the pool's reference back)."""
    want = rmp.pool_labels(mp)
    return sorted((d for d in dms if all((d["metadata"].get("labels") or {}).get(k) == v for k, v in want.items())),
                  key=lambda d: d["metadata"]["name"])


def missing_pool_owner(dmp: dict[str, Any], insts: list[Instance]) -> list[dict[str, Any]]:
    """Instances without the pool's owner reference at its served version (upstream computeDesiredDevMachine
    ensures it on every pass), not being deleted."""
    ref = contract.owner_ref(dmp, controller=False)
    return [i.dm for i in insts if not i.deleting and not any(
        o.get("uid") == ref["uid"] and o.get("apiVersion") == ref["apiVersion"]
        for o in i.dm["metadata"].get("ownerReferences") or [])]


def machine_of(dm: dict[str, Any], machines: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Machine standing for a DockerMachine: its controller owner, else the Machine pointing at it."""
    o = contract.controller_owner(dm, "Machine")
    for m in machines:
        if o and m["metadata"].get("uid") == o.get("uid"):
            return m
    name = dm["metadata"]["name"]
    for m in machines:
        r = contract.ref(m, "spec", "infrastructureRef")
        if r and r["kind"] == dm.get("kind", INFRASTRUCTURE_MACHINE_KIND) and r["name"] == name:
            return m
    return None


@dataclass
class Instance:
    dm: dict[str, Any]
    machine: dict[str, Any] | None
    current: bool      # made from the current template

    @property
    def name(self) -> str:
        return str(self.dm["metadata"]["name"])

    @property
    def deleting(self) -> bool:
        return coreutil.is_deleting(self.dm) or coreutil.is_deleting(self.machine)

    @property
    def provisioned(self) -> bool:
        return contract.infra_provisioned(self.dm)

    @property
    def delete_annotated(self) -> bool:
        return any(DELETE_MACHINE_ANNOTATION in ((o or {}).get("metadata", {}).get("annotations") or {})
                   for o in (self.machine, self.dm))


def instances(dmp: dict[str, Any], mp: dict[str, Any], dms: list[dict[str, Any]],
              machines: list[dict[str, Any]]) -> list[Instance]:
    h = template_hash(dmp, mp)
    return [Instance(d, machine_of(d, machines), (d["metadata"].get("labels") or {}).get(POOL_TEMPLATE_HASH_LABEL) == h)
            for d in instances_of(dmp, mp, dms)]


@dataclass
class Plan:
    create: int = 0
    delete: list[Instance] = field(default_factory=list)
    rolling: bool = False     # outdated instances remain
    message: str = ""


def delete_order(insts: list[Instance]) -> list[Instance]:
    """Scale-down candidates, first to go first: the delete-machine annotation, outdated, not provisioned, then
    the newest (creationTimestamp, then name)."""
    newest = sorted(insts, key=lambda i: (i.dm["metadata"].get("creationTimestamp") or "", i.name), reverse=True)
    return sorted(newest, key=lambda i: (not i.delete_annotated, i.current, i.provisioned))


def deletable(inst: Instance) -> bool:
    """An instance is deleted through its Machine, once the Machine controller has taken that Machine (finalizer)."""
    return inst.machine is not None and FINALIZER_MACHINE in (inst.machine["metadata"].get("finalizers") or [])


def plan(mp: dict[str, Any], insts: list[Instance]) -> Plan:
    """How many instances to create and which to delete (through their Machines) to reach the MachinePool's
    replicas, replacing outdated instances one at a time (surge 1, none unavailable)."""
    want = coreutil.replicas_of(mp)
    active = [i for i in insts if not i.deleting]
    in_flight = [i for i in insts if i.deleting]
    old = [i for i in active if not i.current]
    p = Plan(rolling=bool(old))
    excess = len(active) - want
    if excess < 0:
        p.create = -excess
        p.message = f"scaling up from {len(active)} to {want} instances"
        return p
    unready_new = [i for i in active if i.current and not i.provisioned]
    if excess > 0:
        if old and unready_new and excess == 1:
            p.message = f"rollout: waiting for instance(s) {', '.join(i.name for i in unready_new)} to be provisioned"
            return p
        chosen = delete_order(active)[:excess]
        # upstream CAPD's deleteMachinePoolMachine: an instance whose Machine the MachinePool controller has not
        # made yet is left until it has one (deleting the DockerMachine then raced that creation and left a
        # Machine without infrastructure for good: "Waiting for spec.providerID"); it goes through its Machine,
        # once the Machine controller holds it (its finalizer): a Machine deleted before that vanished at once,
        # the DockerMachine stayed, the MachinePool controller made it a new Machine, and so on (177 times in
        # 50 s, and the instance's Node was left behind)
        p.delete = [i for i in chosen if deletable(i)]
        p.message = f"scaling down from {len(active)} to {want} instances" if not old or \
            all(i.current for i in chosen) else f"rollout: deleting outdated instance(s), {len(old)} left"
        waiting = [i.name for i in chosen if not deletable(i)]
        if waiting:
            p.message += f"; waiting for the Machine of {', '.join(waiting)}"
        return p
    if old:
        if in_flight or unready_new or any(not i.provisioned for i in active):
            busy = [i.name for i in in_flight + [i for i in active if not i.provisioned]]
            p.message = f"rollout: {len(old)} outdated instance(s), waiting for {', '.join(sorted(busy))}"
            return p
        p.create = 1
        p.message = f"rollout: replacing {len(old)} outdated instance(s) one at a time"
    return p


# --- status ---------------------------------------------------------------------------------------


def pool_provider_id(cluster_name: str, dmp: dict[str, Any]) -> str:
    return f"docker:////{cluster_name}-dmp-{dmp['metadata']['name']}"


def spec_patch(dmp: dict[str, Any], cluster_name: str, insts: list[Instance]) -> dict[str, Any] | None:
    """spec.providerID (the pool's) and spec.providerIDList (sorted, the instances' that have one)."""
    spec = dmp.get("spec") or {}
    ids = sorted({pid for i in insts if (pid := contract.provider_id(i.dm))})
    patch: dict[str, Any] = {}
    pid = pool_provider_id(cluster_name, dmp)
    if spec.get("providerID") != pid:
        patch["providerID"] = pid
    if list(spec.get("providerIDList") or []) != ids:
        patch["providerIDList"] = ids or None
    return {"spec": patch} if patch else None


def compute_status(dmp: dict[str, Any], mp: dict[str, Any], insts: list[Instance],
                   now: _dt.datetime | None = None) -> dict[str, Any]:
    """The whole status (the `Paused` condition is the reconcile skeleton's)."""
    st = dict(dmp.get("status") or {})
    gen = dmp["metadata"].get("generation")
    ts = coreutil.iso(now) if now else None
    want = coreutil.replicas_of(mp)
    ids = [contract.provider_id(i.dm) for i in insts if contract.provider_id(i.dm)]
    st["replicas"] = len(insts)
    st["infrastructureMachineKind"] = machine_kind(dmp)
    ready_count = sum(1 for i in insts if i.provisioned and not i.deleting)
    all_ready = len(ids) == want and len(insts) == want and ready_count == want
    if all_ready:  # as upstream: once ready, the pool stays ready (initialization is done once)
        st["ready"] = True
        st["initialization"] = {"provisioned": True}
    st["instances"] = [{k: v for k, v in {
        "instanceName": i.name,
        "providerID": contract.provider_id(i.dm),
        "version": contract.dig(i.machine, "spec", "version"),
        "ready": i.provisioned,
        "addresses": contract.addresses(i.dm) or None,
    }.items() if v is not None} for i in insts]
    if not st["instances"]:
        st.pop("instances")
    conds = st.get("conditions")
    if all_ready:
        conds = cond.set_condition(conds, REPLICAS_READY, True, R_REPLICAS_READY, observed_generation=gen, now=ts)
        conds = cond.set_condition(conds, cond.READY, True, R_READY, observed_generation=gen, now=ts)
    else:
        msg = f"{ready_count} of {want} instance(s) provisioned"
        if len(insts) != want:
            msg += f", {len(insts)} exist"
        conds = cond.set_condition(conds, REPLICAS_READY, False, R_WAITING_FOR_REPLICAS, msg,
                                   observed_generation=gen, now=ts)
        conds = cond.set_condition(conds, cond.READY, False, R_NOT_READY, msg, observed_generation=gen, now=ts)
    st["conditions"] = conds
    if gen is not None:
        st["observedGeneration"] = gen
    return st
