"""The DevMachine / DevCluster `inMemory` backend's decisions (pure), as upstream v1.14's in-memory backend
(test/infrastructure/docker/internal/controllers/backends/inmemory): no container, a machine is a fake VM, a Node,
and on control-plane machines an etcd member and the control-plane Pods, each appearing after its
`spec.backend.inMemory.<part>.provisioning.startupDuration` (+ a share of it, up to `startupJitter`):

    VMProvisioned   startupDuration after the VM record was made (once the cluster infrastructure is provisioned
                    and the Machine has bootstrap data): spec.providerID `in-memory://<name>`,
                    status.initialization.provisioned, the Machine's failure domain
    NodeProvisioned after VMProvisioned: a Ready Node named after the DevMachine (control plane: role label, taint)
    EtcdProvisioned after NodeProvisioned, control plane only: the `etcd-<node>` Pod and an etcd member
    APIServerProvisioned after NodeProvisioned, control plane only: kube-apiserver, kube-controller-manager and
    kube-scheduler Pods, and with the first one what `kubeadm init` uploads (kubeadm-config, kube-proxy, CoreDNS)
    Ready           all of the above True

Upstream draws the jitter anew on every pass; here it is a stable share per machine and part (a hash of the
DevMachine's uid), so the same machine always waits the same time and a pass never moves its deadline.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, godur
from capd_py.reconcile import coreutil

VM_PROVISIONED = "VMProvisioned"
NODE_PROVISIONED = "NodeProvisioned"
ETCD_PROVISIONED = "EtcdProvisioned"
API_SERVER_PROVISIONED = "APIServerProvisioned"
R_WAITING_FOR_CLUSTER_INFRASTRUCTURE = "WaitingForClusterInfrastructureReady"
R_WAITING_FOR_CP_INITIALIZED = "WaitingForControlPlaneInitialized"
R_WAITING_FOR_BOOTSTRAP_DATA = "WaitingForBootstrapData"
R_WAITING_FOR_STARTUP_TIMEOUT = "WaitingForStartupTimeout"
R_WAITING_FOR_VM = "WaitingForVMProvisioned"
R_WAITING_FOR_NODE = "WaitingForNodeProvisioned"
R_PROVISIONED = "Provisioned"
R_READY, R_NOT_READY = "Ready", "NotReady"
R_INVALID = "InvalidProvisioningSettings"

PARTS = {VM_PROVISIONED: "vm", NODE_PROVISIONED: "node", ETCD_PROVISIONED: "etcd", API_SERVER_PROVISIONED: "apiServer"}
CONTROL_PLANE_PODS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")



def provider_id(dev_machine: dict[str, Any]) -> str:
    """upstream calculateProviderID: `in-memory://<DevMachine name>`."""
    return f"in-memory://{dev_machine['metadata']['name']}"


def node_name(dev_machine: dict[str, Any]) -> str:
    """upstream: the Node is named after the DevMachine."""
    return str(dev_machine["metadata"]["name"])


def endpoint(host: str, port: int) -> dict[str, Any]:
    """The DevCluster's spec.controlPlaneEndpoint: its listener's address (capd_py/kube/inmemory_api_server.py)."""
    return {"host": host, "port": port}


def listener_port(current: dict[str, Any] | None, host: str) -> tuple[int | None, bool]:
    """The port to listen on for a DevCluster whose endpoint is `current`, with this process serving at `host`, and
    whether it serves at all: no endpoint yet -> (None, True): any free port, then written as the endpoint; an
    endpoint at `host` -> (its port, True) (a restart keeps the address); an endpoint elsewhere -> (None, False):
    another address was written (before in-memory clusters were served over HTTPS, or by a process at another
    address) and the Cluster's endpoint cannot be moved, so that cluster stays reachable by the controllers only."""
    if not current or not current.get("host"):
        return None, True
    if str(current["host"]) == host and current.get("port"):
        return int(current["port"]), True
    return None, False


def should_serve(o: Observed, plan: Plan, serving: bool) -> bool:
    """Start the cluster's listener from this control-plane machine: its kube-apiserver Pod exists (or is made this
    pass) and the listener is not up (upstream AddAPIServer: the first API server opens the listener; after a
    restart, the next pass of a provisioned control-plane machine opens it again)."""
    return o.control_plane and (o.api_server or plan.create_api_server) and not serving


def parse_duration(text: str) -> float:
    """A metav1.Duration (Go duration) string in seconds: "10s", "1m30s", "500ms", "0" (empty: 0); ValueError
    otherwise."""
    t = text.strip()
    return godur.parse(t) if t else 0.0


def _share(uid: str, part: str) -> float:
    """A stable number in [0, 1) for this machine and part (the jitter's random draw)."""
    h = hashlib.sha256(f"{uid}/{part}".encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def startup_seconds(dev_machine: dict[str, Any], part: str) -> float:
    """startupDuration + share * startupJitter * startupDuration of spec.backend.inMemory.<part>.provisioning; 0
    when the part is not given (upstream). ValueError for an unparsable duration or jitter."""
    prov = contract.dig(dev_machine, "spec", "backend", "inMemory", part, "provisioning") or {}
    base = parse_duration(str(prov.get("startupDuration") or "0"))
    jitter = float(prov.get("startupJitter") or 0)
    if jitter > 0:
        base += _share(str(dev_machine["metadata"].get("uid") or ""), part) * jitter * base
    return base


@dataclass(frozen=True)
class Observed:
    dm: dict[str, Any]
    machine: dict[str, Any]
    cluster: dict[str, Any]
    now: _dt.datetime
    vm_created: _dt.datetime | None = None   # the VM record's creation (None: not made yet)
    node: bool = False                       # the Node exists
    etcd: bool = False                       # the etcd Pod exists
    api_server: bool = False                 # the kube-apiserver Pod exists

    @property
    def control_plane(self) -> bool:
        return "cluster.x-k8s.io/control-plane" in ((self.machine.get("metadata") or {}).get("labels") or {})


@dataclass
class Plan:
    """What to do this pass: the records to create (in this order), the status to have, spec.providerID to set,
    when to look again."""
    status: dict[str, Any]
    create_vm: bool = False
    create_node: bool = False
    create_etcd: bool = False
    create_api_server: bool = False
    provider_id: str | None = None
    requeue_after: float | None = None
    waiting: list[str] = field(default_factory=list)


def _cp_initialized(cluster: dict[str, Any]) -> bool:
    return contract.control_plane_initialized(cluster) or cond.is_true(cluster, "ControlPlaneInitialized")


def decide(o: Observed) -> Plan:
    dm, gen = o.dm, (o.dm.get("metadata") or {}).get("generation")
    st = dict(dm.get("status") or {})
    conds = st.get("conditions")
    now = coreutil.iso(o.now)
    plan = Plan(status=st)
    parts = [VM_PROVISIONED, NODE_PROVISIONED] + ([ETCD_PROVISIONED, API_SERVER_PROVISIONED] if o.control_plane
                                                   else [])

    def put(ctype: str, ok: bool, reason: str, message: str = "") -> None:
        nonlocal conds
        conds = cond.set_condition(conds, ctype, ok, reason, message, observed_generation=gen, now=now)

    def wait_all(reason: str) -> None:
        put(VM_PROVISIONED, False, reason)
        for p in parts[1:]:
            put(p, False, R_WAITING_FOR_VM)

    def later(at: _dt.datetime) -> None:
        left = max((at - o.now).total_seconds(), 0.0)
        plan.requeue_after = left if plan.requeue_after is None else min(plan.requeue_after, left)

    try:
        durations = {p: startup_seconds(dm, PARTS[p]) for p in parts}
    except ValueError as e:
        put(VM_PROVISIONED, False, R_INVALID, str(e))
        return _finish(plan, st, conds, parts, gen, now)
    # spec.providerID is set once the VM is provisioned, and it outlives a status a clusterctl move dropped (as
    # upstream CAPD's docker machines: a machine with a providerID is provisioned)
    provisioned = contract.infra_provisioned(dm) or contract.provider_id(dm) == provider_id(dm)
    if not provisioned and not contract.dig(o.cluster, "status", "initialization", "infrastructureProvisioned"):
        wait_all(R_WAITING_FOR_CLUSTER_INFRASTRUCTURE)
        return _finish(plan, st, conds, parts, gen, now)
    if not provisioned and not contract.dig(o.machine, "spec", "bootstrap", "dataSecretName"):
        worker_waits = not o.control_plane and not _cp_initialized(o.cluster)
        wait_all(R_WAITING_FOR_CP_INITIALIZED if worker_waits else R_WAITING_FOR_BOOTSTRAP_DATA)
        return _finish(plan, st, conds, parts, gen, now)

    # the VM
    started = o.vm_created
    if started is None:
        plan.create_vm, started = True, o.now
    ready_at = started + _dt.timedelta(seconds=durations[VM_PROVISIONED])
    if not provisioned and o.now < ready_at:
        wait_all(R_WAITING_FOR_STARTUP_TIMEOUT)
        put(VM_PROVISIONED, False, R_WAITING_FOR_STARTUP_TIMEOUT)
        later(ready_at)
        return _finish(plan, st, conds, parts, gen, now)
    put(VM_PROVISIONED, True, R_PROVISIONED)
    pid = provider_id(dm)
    if contract.provider_id(dm) != pid:
        plan.provider_id = pid
    st["initialization"] = {**(st.get("initialization") or {}), "provisioned": True}
    fd = contract.dig(o.machine, "spec", "failureDomain")
    if fd:
        st["failureDomain"] = fd

    # the Node, then etcd and the API server on it
    def step(ctype: str, after: str, exists: bool) -> bool:
        """One part: True once it is provisioned (created now if its time has come)."""
        base = cond.get({"status": {"conditions": conds}}, after) or {}
        if base.get("status") != cond.TRUE:
            put(ctype, False, R_WAITING_FOR_NODE if after == NODE_PROVISIONED else R_WAITING_FOR_VM)
            return False
        start = coreutil.parse_time(base.get("lastTransitionTime")) or o.now
        at = start + _dt.timedelta(seconds=durations[ctype])
        if not exists and o.now < at:
            put(ctype, False, R_WAITING_FOR_STARTUP_TIMEOUT)
            later(at)
            return False
        put(ctype, True, R_PROVISIONED)
        return not exists

    plan.create_node = step(NODE_PROVISIONED, VM_PROVISIONED, o.node)
    if o.control_plane:
        plan.create_etcd = step(ETCD_PROVISIONED, NODE_PROVISIONED, o.etcd)
        plan.create_api_server = step(API_SERVER_PROVISIONED, NODE_PROVISIONED, o.api_server)
    return _finish(plan, st, conds, parts, gen, now)


def _finish(plan: Plan, st: dict[str, Any], conds: list[dict[str, Any]] | None, parts: list[str],
            gen: int | None, now: str) -> Plan:
    """Ready: every part True (upstream's summary of VMProvisioned, NodeProvisioned, EtcdProvisioned,
    APIServerProvisioned); else NotReady naming the parts that are not, with their reasons."""
    holder = {"status": {"conditions": conds}}
    not_ready = [f"{p}: {(cond.get(holder, p) or {}).get('reason', 'Unknown')}" for p in parts
                 if not cond.is_true(holder, p)]
    plan.waiting = not_ready
    conds = cond.set_condition(conds, cond.READY, not not_ready, R_NOT_READY if not_ready else R_READY,
                               "; ".join(not_ready), observed_generation=gen, now=now)
    st["conditions"] = conds
    plan.status = st
    return plan


def cluster_status(dc: dict[str, Any]) -> dict[str, Any]:
    """An in-memory DevCluster's status: provisioned and Ready at once (nothing to wait for: no network, no load
    balancer)."""
    st = dict(dc.get("status") or {})
    gen = (dc.get("metadata") or {}).get("generation")
    st["conditions"] = cond.set_condition(st.get("conditions"), cond.READY, True, R_READY, observed_generation=gen)
    st["initialization"] = {**(st.get("initialization") or {}), "provisioned": True}
    return st


@dataclass(frozen=True)
class Restore:
    """What a machine had in its in-memory workload cluster, to make again when this process has none for the
    cluster (`restore`)."""
    vm: bool = False
    node: bool = False
    etcd: bool = False
    api_server: bool = False


def restore(dm: dict[str, Any], machine: dict[str, Any] | None) -> Restore:
    """What to make again, at once, for a provisioned machine of a cluster whose in-memory store this process does not
    have yet: the controllers restarted, or the cluster moved in from another management cluster (capd-py's move
    copies statuses, clusterctl's drops them). Made empty, the store would show Machines whose nodeRef names no Node
    (a MachineHealthCheck remediates those: "Node ... has been deleted") until each machine's next pass; made whole
    before anyone reads it, the cluster is as it was. spec.providerID says the VM was provisioned; the conditions
    say which parts were; without any status (a clusterctl move, which moves only clusters whose Machines all have a
    Node) every part was. Nothing for a machine being deleted, without a Machine, or not provisioned."""
    if machine is None or coreutil.is_deleting(dm) or contract.provider_id(dm) != provider_id(dm):
        return Restore()
    cp = "cluster.x-k8s.io/control-plane" in ((machine.get("metadata") or {}).get("labels") or {})
    conds = contract.dig(dm, "status", "conditions")
    if not conds:
        return Restore(vm=True, node=True, etcd=cp, api_server=cp)
    holder = {"status": {"conditions": conds}}
    node = cond.is_true(holder, NODE_PROVISIONED)
    return Restore(vm=True, node=node, etcd=cp and node and cond.is_true(holder, ETCD_PROVISIONED),
                   api_server=cp and node and cond.is_true(holder, API_SERVER_PROVISIONED))
