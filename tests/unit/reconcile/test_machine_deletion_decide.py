"""The Machine deletion sequence (capd_py.reconcile.machine_deletion.decide_deletion): one row per state of the
table, then the rules of the sequence (order, hooks, timeouts) as capd-py's earlier `deletion_step` tests had them,
against upstream v1.13's Machine controller reconcileDelete."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from capd_py.reconcile import coreutil
from capd_py.reconcile import drain as rd
from capd_py.reconcile import machine_deletion as md

try:
    from core_fixtures import NOW, machine, ts
except ImportError:  # pragma: no cover
    from .core_fixtures import NOW, machine, ts  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

Obj = dict[str, Any]
NS = {"ns": {"metadata": {"name": "ns", "labels": {"kubernetes.io/metadata.name": "ns"}}}}
PRE_DRAIN = "pre-drain.delete.hook.machine.cluster.x-k8s.io/etcd"
PRE_TERMINATE = "pre-terminate.delete.hook.machine.cluster.x-k8s.io/x"
EXCLUDE_DRAIN = "machine.cluster.x-k8s.io/exclude-node-draining"
EXCLUDE_VOLUMES = "machine.cluster.x-k8s.io/exclude-wait-for-node-volume-detach"


def dm(**kw: Any) -> Obj:
    """A deleting Machine with a Node and both providers."""
    m = machine("m1", deleting=True, node="c1-m1", **kw)
    m["spec"]["bootstrap"] = {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                            "name": "m1"}}
    m["spec"]["infrastructureRef"] = {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachine",
                                      "name": "m1"}
    return m


def node(cordoned: bool = True, ready: str = "True", volumes: list[str] | None = None) -> Obj:
    n: Obj = {"metadata": {"name": "c1-m1"}, "spec": {"unschedulable": True} if cordoned else {},
              "status": {"conditions": [{"type": "Ready", "status": ready}]}}
    if volumes:
        n["status"]["volumesAttached"] = [{"name": v, "devicePath": ""} for v in volumes]
    return n


def pod(name: str, *, drain: str | None = None, deleted: bool = False, claim: str | None = None) -> Obj:
    p: Obj = {"metadata": {"name": name, "namespace": "ns", "labels": {},
                           "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
              "spec": {"nodeName": "c1-m1"}, "status": {"phase": "Running"}}
    if drain:
        p["metadata"]["labels"]["cluster.x-k8s.io/drain"] = drain
    if deleted:
        p["metadata"]["deletionTimestamp"] = ts(1)
    if claim:
        p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
    return p


def pods(*ps: Obj, namespaces: dict[str, Obj] = NS) -> rd.PodDeleteList:
    return rd.pods_for_eviction(list(ps), rules=[], namespaces=namespaces, daemonsets=set(), now=NOW)


def attachment(pv: str | None = "pv1", node_name: str = "c1-m1") -> Obj:
    spec: Obj = {"nodeName": node_name, "source": {"persistentVolumeName": pv} if pv else {}}
    return {"metadata": {"name": f"va-{pv}"}, "spec": spec, "status": {"attached": True}}


def pv(name: str = "pv1", claim: str = "data") -> Obj:
    return {"metadata": {"name": name}, "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "namespace": "ns",
                                                              "name": claim}}}


def seen(m: Obj | None = None, **kw: Any) -> md.Observed:
    """A deleting Machine whose Node may be deleted, its providers there, nothing of the Node read yet."""
    base: dict[str, Any] = dict(machine=m if m is not None else dm(), now=NOW, infra_exists=True,
                                bootstrap_exists=True, node_delete_allowed=True, node=node(cordoned=False))
    base.update(kw)
    return md.Observed(**base)


def deleted_ago(m: Obj, seconds: float) -> Obj:
    m["metadata"]["deletionTimestamp"] = ts(seconds)
    return m


DRAINED: dict[str, Any] = dict(node=node(), pods=pods())          # cordoned, nothing left on the Node
DETACHED: dict[str, Any] = dict(DRAINED, volume_attachments=[])   # ... and no volume attached
GONE: dict[str, Any] = dict(DETACHED, infra_exists=False, bootstrap_exists=False)
DRAIN_MSG = f"Drain not completed yet (started at {coreutil.iso(NOW)}):"
VOLUME_MSG = f"Waiting for Node volumes to be detached (started at {coreutil.iso(NOW)})"

Check = Callable[[md.Action], bool]
ROWS: list[tuple[str, md.Observed, type[md.Action], str, str | Check]] = [
    # (state, observed, action, Deleting reason, Deleting message or a check of the action)
    ("pre-drain hook", seen(dm(annotations={PRE_DRAIN: "kcp"})), md.WaitForHooks, "WaitingForPreDrainHook",
     f"Waiting for pre-drain hooks to succeed (hooks: {PRE_DRAIN})"),
    ("pre-drain hook, Node not to be deleted", seen(dm(annotations={PRE_DRAIN: "kcp"}), node_delete_allowed=False),
     md.DeleteInfra, "WaitingForInfrastructureDeletion", "Waiting for DockerMachine m1 to be deleted"),
    ("drain: Node not cordoned", seen(), md.Cordon, "DrainingNode",
     lambda a: isinstance(a, md.Cordon) and a.node == "c1-m1" and a.started == {"nodeDrainStartTime":
                                                                                  coreutil.iso(NOW)}),
    ("drain: Pods not read", seen(node=node()), md.Observe, "DrainingNode",
     lambda a: isinstance(a, md.Observe) and a.what == md.PODS and a.message == DRAIN_MSG),
    ("drain: Pods cannot be read", seen(node=node(), pods=pods(pod("a"), namespaces={})), md.WaitForDrain,
     "DrainingNode", lambda a: isinstance(a, md.WaitForDrain) and a.message == md.DRAIN_ERROR and
     "Pod Namespace does not exist" in a.log),
    ("drain: Pods to evict", seen(node=node(), pods=pods(pod("a"), pod("b"))), md.Evict, "DrainingNode",
     lambda a: isinstance(a, md.Evict) and [p.key for p in a.pods] == ["ns/a", "ns/b"] and
     a.grace_period_seconds is None),
    ("drain: Pods to evict from an unreachable Node", seen(node=node(ready="Unknown"), pods=pods(pod("a"))),
     md.Evict, "DrainingNode", lambda a: isinstance(a, md.Evict) and a.grace_period_seconds == 1),
    ("drain: evicted, not gone yet", seen(node=node(), pods=pods(pod("a")), evictions={"ns/a": rd.EVICTED}),
     md.WaitForDrain, "DrainingNode",
     f"{DRAIN_MSG}\n* Pod ns/a: deletionTimestamp set, but still not removed from the Node"),
    ("drain: terminating Pods only (nothing to evict)", seen(node=node(), pods=pods(pod("a", deleted=True))),
     md.WaitForDrain, "DrainingNode",
     f"{DRAIN_MSG}\n* Pod ns/a: deletionTimestamp set, but still not removed from the Node"),
    ("drain: a WaitCompleted Pod", seen(node=node(), pods=pods(pod("job", drain="wait-completed"))),
     md.WaitForDrain, "DrainingNode", f"{DRAIN_MSG}\n* Pod ns/job: waiting for completion"),
    ("drain: evictions found the Pods gone", seen(node=node(), pods=pods(pod("a")), evictions={"ns/a": rd.NOT_FOUND}),
     md.Observe, "WaitingForVolumeDetach",
     lambda a: isinstance(a, md.Observe) and a.what == md.VOLUME_ATTACHMENTS and a.message == VOLUME_MSG),
    ("drain: nothing left on the Node", seen(**DRAINED), md.Observe, "WaitingForVolumeDetach",
     lambda a: isinstance(a, md.Observe) and a.what == md.VOLUME_ATTACHMENTS and
     dict(a.started) == {"nodeDrainStartTime": coreutil.iso(NOW), "waitForNodeVolumeDetachStartTime":
                         coreutil.iso(NOW)}),
    ("drain excluded by annotation", seen(dm(annotations={EXCLUDE_DRAIN: ""})), md.Observe,
     "WaitingForVolumeDetach", lambda a: isinstance(a, md.Observe) and a.what == md.VOLUME_ATTACHMENTS and
     "nodeDrainStartTime" not in a.started),
    ("volumes: nothing attached", seen(**DETACHED), md.DeleteInfra, "WaitingForInfrastructureDeletion",
     "Waiting for DockerMachine m1 to be deleted"),
    ("volumes: attached, Pods not read (drain excluded)",
     seen(dm(annotations={EXCLUDE_DRAIN: ""}), volume_attachments=[attachment()]), md.Observe,
     "WaitingForVolumeDetach", lambda a: isinstance(a, md.Observe) and a.what == md.PODS),
    ("volumes: on the Node's status, PersistentVolumes not read",
     seen(**dict(DETACHED, node=node(volumes=["kubernetes.io/csi/d^h"]))), md.Observe, "WaitingForVolumeDetach",
     lambda a: isinstance(a, md.Observe) and a.what == md.PERSISTENT_VOLUMES),
    ("volumes: a drained Pod's claim attached",
     seen(**dict(DRAINED, volume_attachments=[attachment()], persistent_volumes=[pv()])), md.WaitForVolumeDetach,
     "WaitingForVolumeDetach", f"{VOLUME_MSG}\n* PersistentVolumeClaims: ns/data"),
    ("volumes: only a skipped Pod's claim attached",
     seen(**dict(DRAINED, pods=pods(pod("db", drain="skip", claim="data")), volume_attachments=[attachment()],
                 persistent_volumes=[pv()])), md.DeleteInfra, "WaitingForInfrastructureDeletion",
     "Waiting for DockerMachine m1 to be deleted"),
    ("volumes: an attachment without a PersistentVolume name",
     seen(**dict(DRAINED, volume_attachments=[attachment(pv=None)], persistent_volumes=[])),
     md.WaitForVolumeDetach, "WaitingForVolumeDetach",
     lambda a: isinstance(a, md.WaitForVolumeDetach) and a.message == md.VOLUME_ERROR and "va-None" in a.log),
    ("volumes: another Node's attachment", seen(**dict(DRAINED, volume_attachments=[attachment(node_name="n2")])),
     md.DeleteInfra, "WaitingForInfrastructureDeletion", "Waiting for DockerMachine m1 to be deleted"),
    ("volumes: an unreachable Node is not waited for", seen(node=node(ready="Unknown"), pods=pods()),
     md.DeleteInfra, "WaitingForInfrastructureDeletion", "Waiting for DockerMachine m1 to be deleted"),
    ("pre-terminate hook", seen(dm(annotations={PRE_TERMINATE: ""}), **DETACHED), md.WaitForHooks,
     "WaitingForPreTerminateHook", f"Waiting for pre-terminate hooks to succeed (hooks: {PRE_TERMINATE})"),
    ("pre-terminate hook, providers gone", seen(dm(annotations={PRE_TERMINATE: ""}), **GONE), md.DeleteNode,
     "DeletingNode", "Deleting Node c1-m1"),
    ("infrastructure and bootstrap there", seen(**DETACHED), md.DeleteInfra, "WaitingForInfrastructureDeletion",
     lambda a: isinstance(a, md.DeleteInfra) and a.with_bootstrap),
    ("infrastructure gone, bootstrap there", seen(**dict(DETACHED, infra_exists=False)), md.DeleteBootstrap,
     "WaitingForBootstrapDeletion", "Waiting for KubeadmConfig m1 to be deleted"),
    ("providers gone: delete the Node", seen(**GONE), md.DeleteNode, "DeletingNode", "Deleting Node c1-m1"),
    ("Node deletion failed, within nodeDeletionTimeoutSeconds", seen(**GONE, node_delete_failed=True),
     md.DeleteNode, "DeletingNode", "Deleting Node c1-m1"),
    ("Node deletion failed, out of time", seen(deleted_ago(dm(), 30), **GONE, node_delete_failed=True),
     md.RemoveFinalizer, "DeletionCompleted", ""),
    ("Node gone", seen(**dict(GONE, node=None)), md.RemoveFinalizer, "DeletionCompleted", ""),
    ("Node not to be deleted, providers gone", seen(**dict(GONE, node_delete_allowed=False)), md.RemoveFinalizer,
     "DeletionCompleted", ""),
]


@pytest.mark.parametrize(("state", "obs", "want", "reason", "message"), ROWS, ids=[r[0] for r in ROWS])
def test_decide_deletion(state: str, obs: md.Observed, want: type[md.Action], reason: str,
                         message: str | Check) -> None:
    a = md.decide_deletion(copy.deepcopy(obs))
    assert (type(a), a.reason) == (want, reason)
    if callable(message):
        assert message(a), a
    else:
        assert a.message == message


def test_every_question_is_asked_once() -> None:
    """The controller's loop ends: answering what the decision asks for never brings the same question back."""
    o = seen()
    asked: list[str] = []
    for _ in range(10):
        a = md.decide_deletion(o)
        asked.append(type(a).__name__ + (f":{a.what}" if isinstance(a, md.Observe) else ""))
        if isinstance(a, md.Cordon):
            assert o.node is not None
            o.node["spec"]["unschedulable"] = True
        elif isinstance(a, md.Observe) and a.what == md.PODS:
            o.pods = pods(pod("a"))
        elif isinstance(a, md.Evict):
            o.evictions = {"ns/a": rd.NOT_FOUND}
        elif isinstance(a, md.Observe) and a.what == md.VOLUME_ATTACHMENTS:
            o.volume_attachments = []
        else:
            break
    assert asked == ["Cordon", "Observe:pods", "Evict", "Observe:volumeattachments", "DeleteInfra"]


# --- the sequence's rules (capd-py's earlier deletion_step tests, same assertions) ----------------------------


def step_of(a: md.Action) -> str:
    """The step an action belongs to, in the words of the earlier tests."""
    return {"DrainingNode": "drain", "WaitingForVolumeDetach": "wait_volumes", "WaitingForPreDrainHook": "wait_hook",
            "WaitingForPreTerminateHook": "wait_hook", "WaitingForInfrastructureDeletion": "delete_providers",
            "WaitingForBootstrapDeletion": "delete_providers", "DeletingNode": "delete_node",
            "DeletionCompleted": "remove_finalizer"}[a.reason]


def observed(m: Obj, *, node_delete_allowed: bool = True, drain_done: bool = False, infra_exists: bool = True,
             bootstrap_exists: bool = True, node_exists: bool = True, volumes_done: bool = True,
             node_delete_failed: bool = False, volumes_read: bool = True) -> md.Observed:
    """The earlier flags as observations: a drained Node is cordoned with nothing on it; volumes done means no
    VolumeAttachment of the Node; not done, one attached, for a claim of a drained Pod."""
    n = node(cordoned=drain_done) if node_exists else None
    return md.Observed(machine=m, now=NOW, infra_exists=infra_exists, bootstrap_exists=bootstrap_exists,
                       node_delete_allowed=node_delete_allowed, node=n, node_delete_failed=node_delete_failed,
                       pods=pods() if drain_done else None,
                       volume_attachments=[] if volumes_done else [attachment()],
                       persistent_volumes=[pv()] if volumes_read else None)


def decide(m: Obj, **kw: Any) -> md.Action:
    return md.decide_deletion(observed(m, **kw))


def step(m: Obj, **kw: Any) -> str:
    return step_of(decide(m, **kw))


def test_deletion_order() -> None:
    m = dm()
    assert step(m) == "drain"
    assert step(m, drain_done=True, volumes_done=False) == "wait_volumes"
    assert step(m, drain_done=True) == "delete_providers"
    assert decide(m, drain_done=True, infra_exists=False).reason == "WaitingForBootstrapDeletion"


def test_volume_wait_comes_after_the_drain_and_before_the_infrastructure() -> None:
    m = dm()
    m["status"]["deletion"] = {"nodeDrainStartTime": ts(30)}
    st = decide(m, volumes_done=False)
    assert (step_of(st), st.reason, st.message) == ("drain", "DrainingNode",
                                                    f"Drain not completed yet (started at {ts(30)}):")
    st = decide(m, drain_done=True, volumes_done=False, volumes_read=False)
    assert (step_of(st), st.reason) == ("wait_volumes", "WaitingForVolumeDetach")
    assert st.message == f"Waiting for Node volumes to be detached (started at {coreutil.iso(NOW)})"
    assert step(m, drain_done=True, volumes_done=False, node_exists=False) == "delete_providers"
    assert step(m, drain_done=True, volumes_done=False, node_delete_allowed=False) == "delete_providers"
    excluded = dm(annotations={EXCLUDE_VOLUMES: ""})
    assert step(excluded, drain_done=True, volumes_done=False) == "delete_providers"
    timed = dm()
    timed["spec"]["deletion"] = {"nodeVolumeDetachTimeoutSeconds": 30}
    timed["status"]["deletion"] = {"waitForNodeVolumeDetachStartTime": ts(29)}
    assert step(timed, drain_done=True, volumes_done=False) == "wait_volumes"
    timed["status"]["deletion"] = {"waitForNodeVolumeDetachStartTime": ts(30)}
    assert step(timed, drain_done=True, volumes_done=False) == "delete_providers"   # >= the timeout, as upstream
    timed["spec"]["deletion"] = {"nodeVolumeDetachTimeoutSeconds": 0}                # 0: wait forever
    assert step(timed, drain_done=True, volumes_done=False) == "wait_volumes"
    assert step(m, drain_done=True, infra_exists=False, bootstrap_exists=False) == "delete_node"
    assert step(m, drain_done=True, infra_exists=False, bootstrap_exists=False, node_exists=False) == \
        "remove_finalizer"


def test_exclude_drain_annotation() -> None:
    m = dm(annotations={EXCLUDE_DRAIN: ""})
    assert step(m) == "delete_providers"


def test_drain_timeout() -> None:
    m = dm()
    m["spec"]["deletion"] = {"nodeDrainTimeoutSeconds": 60}
    m["status"]["deletion"] = {"nodeDrainStartTime": ts(30)}
    assert step(m) == "drain"
    m["status"]["deletion"] = {"nodeDrainStartTime": ts(120)}
    assert step(m) == "delete_providers"


def test_node_deletion_timeout_bounds_retries_only() -> None:
    m = dm()
    m["metadata"]["deletionTimestamp"] = ts(5)
    kw: dict[str, Any] = dict(drain_done=True, infra_exists=False, bootstrap_exists=False)
    assert step(m, **kw) == "delete_node"  # default timeout 10s
    assert step(m, node_delete_failed=True, **kw) == "delete_node"  # within the timeout: retry
    # a long drain must not cost the Node its deletion: the first attempt always happens
    m["metadata"]["deletionTimestamp"] = ts(30)
    assert step(m, **kw) == "delete_node"
    assert step(m, node_delete_failed=True, **kw) == "remove_finalizer"  # failed and out of time: give up
    m["spec"]["deletion"] = {"nodeDeletionTimeoutSeconds": 0}  # 0: wait forever
    assert step(m, node_delete_failed=True, **kw) == "delete_node"


def test_node_delete_not_allowed_skips_node_steps() -> None:
    m = dm()
    assert step(m, node_delete_allowed=False) == "delete_providers"
    assert step(m, node_delete_allowed=False, infra_exists=False, bootstrap_exists=False) == "remove_finalizer"


def test_is_delete_node_allowed() -> None:
    cluster = {"metadata": {"name": "c1"}}
    m = dm()
    assert md.is_delete_node_allowed(m, cluster, 0)[0]
    assert not md.is_delete_node_allowed(m, {"metadata": {"deletionTimestamp": ts(1)}}, 0)[0]
    assert not md.is_delete_node_allowed(m, None, 0)[0]
    cp = dm(labels={"cluster.x-k8s.io/control-plane": ""})
    assert not md.is_delete_node_allowed(cp, cluster, 0)[0]
    assert md.is_delete_node_allowed(cp, cluster, 2)[0]
    no_node = machine("m1", deleting=True)
    assert not md.is_delete_node_allowed(no_node, cluster, 0)[0]


def test_delete_hooks() -> None:
    m = dm(annotations={PRE_DRAIN: "kcp"})
    st = decide(m)
    assert (step_of(st), st.reason) == ("wait_hook", "WaitingForPreDrainHook")
    assert step(m, node_delete_allowed=False) == "delete_providers"  # pre-drain only gates the node steps
    m = dm(annotations={PRE_TERMINATE: ""})
    assert step(m) == "drain"
    st = decide(m, drain_done=True, volumes_done=True)
    assert (step_of(st), st.reason) == ("wait_hook", "WaitingForPreTerminateHook")
