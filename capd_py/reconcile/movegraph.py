"""The object graph of `capd-py move` (clusterctl move's objectgraph.go + mover.go rules, our own code).

Pure: the listed objects of one namespace in, the move set, its creation order, the owner references to
write at the target and the dry-run tree out.

- Nodes are objects; edges are owner references (with their controller/blockOwnerDeletion attributes) and
  *soft* ownership, links Cluster API keeps without an owner reference, as upstream:
  a Secret without owners named `<cluster>-<purpose>` (ca, etcd, sa, proxy, kubeconfig,
  apiserver-etcd-client) belongs to that Cluster; a Cluster with `spec.topology` belongs to its ClusterClass;
  a ClusterResourceSetBinding belongs to the Cluster it names. Beyond upstream (whose ClusterResourceSet and
  ClusterClass controllers set those owner references, as ours do, but only once they have run): the
  Secrets/ConfigMaps a ClusterResourceSet lists belong to it, and the templates a ClusterClass names belong to
  it; and an object without any owner belongs to the object that references it (a KubeadmControlPlane's or
  MachineDeployment's templates, whose owner references the controllers set only once they ran), or else to
  the Cluster its `cluster.x-k8s.io/cluster-name` label or `spec.clusterName` names (a MachineHealthCheck).
- Tenants: Clusters, ClusterClasses and ClusterResourceSets ("force move hierarchy" in clusterctl); everything
  reachable from one through (soft) ownership moves. Other objects of the namespace (unrelated Secrets,
  ConfigMaps) stay.
- Order: an object is created only after every moved object it is (softly) owned by, so owner references
  can carry the owners' new UIDs; deletion at the source runs the groups backwards.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract
from capd_py.api.labels import CLUSTER_NAME, PAUSED_ANNOTATION
from capd_py.reconcile import clusterclass as rcc
from capd_py.reconcile import clusterresourceset as rcrs
from capd_py.reconcile.topology.desired import class_ref

# upstream util/secret allSecretPurposes
SECRET_PURPOSES = ("kubeconfig", "ca", "etcd", "sa", "proxy", "apiserver-etcd-client")
TENANT_KINDS = ("Cluster", "ClusterClass", "ClusterResourceSet")
# where objects name the templates/objects they use (v1beta2 {apiGroup, kind, name})
REFERENCE_PATHS = (("spec", "infrastructureRef"), ("spec", "controlPlaneRef"),
                   ("spec", "machineTemplate", "spec", "infrastructureRef"),
                   ("spec", "template", "spec", "infrastructureRef"),
                   ("spec", "template", "spec", "bootstrap", "configRef"))
# metadata the API server owns: a create at the target must not carry it
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "selfLink", "deletionTimestamp",
                   "deletionGracePeriodSeconds", "ownerReferences")


@dataclass(frozen=True)
class Identity:
    api_version: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


@dataclass
class Node:
    obj: dict[str, Any]
    identity: Identity
    uid: str
    owners: dict[str, dict[str, Any]] = field(default_factory=dict)  # owner uid -> its ownerReference
    soft_owners: set[str] = field(default_factory=set)
    tenants: set[str] = field(default_factory=set)

    @property
    def kind(self) -> str:
        return self.identity.kind

    @property
    def name(self) -> str:
        return self.identity.name

    def all_owners(self) -> set[str]:
        return set(self.owners) | self.soft_owners


def identity_of(obj: dict[str, Any]) -> Identity:
    md = obj["metadata"]
    return Identity(obj.get("apiVersion", ""), obj.get("kind", ""), md.get("namespace") or "", md["name"])


def secret_cluster_name(name: str) -> str | None:
    """`<cluster>` of a cluster secret `<cluster>-<purpose>` (upstream secret.ParseSecretName), else None."""
    for purpose in SECRET_PURPOSES:
        suffix = f"-{purpose}"
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[:-len(suffix)]
    return None


class Graph:
    def __init__(self, objects: Iterable[dict[str, Any]]):
        self.nodes: dict[str, Node] = {}
        for o in objects:
            uid = o["metadata"].get("uid") or ""
            if uid and uid not in self.nodes:
                self.nodes[uid] = Node(o, identity_of(o), uid)
        for n in self.nodes.values():
            for ref in n.obj["metadata"].get("ownerReferences") or []:
                if ref.get("uid") in self.nodes:  # an owner we did not list cannot be moved with it
                    n.owners[ref["uid"]] = ref
        self._soft_ownership()
        self._tenants()

    # -- lookups ---------------------------------------------------------------------------------------
    def of_kind(self, kind: str) -> list[Node]:
        return sorted((n for n in self.nodes.values() if n.kind == kind),
                      key=lambda n: (n.identity.namespace, n.name))

    def find(self, kind: str, namespace: str, name: str) -> Node | None:
        return next((n for n in self.nodes.values() if n.kind == kind and n.identity.namespace == namespace
                     and n.name == name), None)

    # -- building ---------------------------------------------------------------------------------------
    def _soft_ownership(self) -> None:
        clusters = {(c.identity.namespace, c.name): c for c in self.of_kind("Cluster")}
        for n in self.nodes.values():
            ns = n.identity.namespace
            if n.kind == "Secret" and not n.owners:
                cn = secret_cluster_name(n.name)
                if cn is not None and (ns, cn) in clusters:
                    n.soft_owners.add(clusters[(ns, cn)].uid)
            if n.kind == "Cluster" and contract.dig(n.obj, "spec", "topology"):
                cc_ns, cc_name = class_ref(n.obj)
                cc = self.find("ClusterClass", cc_ns, cc_name)
                if cc is not None:
                    n.soft_owners.add(cc.uid)
            if n.kind == "ClusterResourceSetBinding":
                c = clusters.get((ns, contract.dig(n.obj, "spec", "clusterName") or ""))
                if c is not None:
                    n.soft_owners.add(c.uid)
        for crs in self.of_kind("ClusterResourceSet"):
            for kind, name in rcrs.refs(crs.obj):
                r = self.find(kind, crs.identity.namespace, name)
                if r is not None:
                    r.soft_owners.add(crs.uid)
        for cc in self.of_kind("ClusterClass"):
            for ref in rcc.template_refs(cc.obj):
                t = self.find(ref.kind, cc.identity.namespace, ref.name)
                if t is not None:
                    t.soft_owners.add(cc.uid)
        referrers: dict[tuple[str, str, str], str] = {}
        for n in self.nodes.values():
            for path in REFERENCE_PATHS:
                target_ref = contract.dig(n.obj, *path) or {}
                if target_ref.get("kind") and target_ref.get("name"):
                    referrers.setdefault((n.identity.namespace, target_ref["kind"], target_ref["name"]), n.uid)
        for n in self.nodes.values():
            n.soft_owners.discard(n.uid)
            referrer = referrers.get((n.identity.namespace, n.kind, n.name))
            if referrer and referrer != n.uid and not n.owners and not n.soft_owners:
                n.soft_owners.add(referrer)
            label = (n.obj["metadata"].get("labels") or {}).get(CLUSTER_NAME) or \
                contract.dig(n.obj, "spec", "clusterName")
            key = (n.identity.namespace, label or "")
            if label and not n.owners and not n.soft_owners and n.kind not in TENANT_KINDS and key in clusters:
                n.soft_owners.add(clusters[key].uid)  # only what nothing else claims: the tree stays readable

    def _tenants(self) -> None:
        owned: dict[str, list[Node]] = {}
        for n in self.nodes.values():
            for o in n.all_owners():
                owned.setdefault(o, []).append(n)
        for root in self.nodes.values():
            if root.kind not in TENANT_KINDS:
                continue
            stack = [root]
            while stack:  # owner references may form cycles (the API server allows them): visit once
                n = stack.pop()
                if root.uid in n.tenants:
                    continue
                n.tenants.add(root.uid)
                stack.extend(owned.get(n.uid, []))

    # -- what moves, in which order ------------------------------------------------------------------------
    def move_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.tenants]

    def cluster_nodes(self, namespace: str, name: str) -> list[Node]:
        """What belongs to one Cluster (its tenant tree: what a move of it would take), the Cluster included;
        [] when there is no such Cluster. A snapshot keeps these to recreate the cluster."""
        c = self.find("Cluster", namespace, name)
        return [] if c is None else [n for n in self.move_nodes() if c.uid in n.tenants]

    def outside_owners(self) -> list[tuple[str, dict[str, Any]]]:
        """Owner references to objects outside the graph, each UID once, as (namespace, reference): a cluster's
        objects restored from a snapshot reference e.g. their ClusterResourceSet, which outlives the cluster;
        the restore links them to today's object of that kind and name."""
        out: dict[str, tuple[str, dict[str, Any]]] = {}
        for n in sorted(self.nodes.values(), key=_sort_key):
            for ref in n.obj["metadata"].get("ownerReferences") or []:
                uid = ref.get("uid", "")
                if uid and uid not in self.nodes and uid not in out:
                    out[uid] = (n.identity.namespace, ref)
        return list(out.values())

    def children(self, uid: str) -> list[Node]:
        return sorted((n for n in self.move_nodes() if uid in n.all_owners()), key=_sort_key)

    def sequence(self) -> list[list[Node]]:
        """Groups to create one after the other: each object after all the moved objects owning it. Objects
        in an ownership cycle (which nothing would ever order) come last, together."""
        todo = {n.uid: n for n in self.move_nodes()}
        done: set[str] = set()
        groups: list[list[Node]] = []
        while todo:
            group = [n for n in todo.values() if all(o in done or o not in todo for o in n.all_owners())]
            if not group:
                group = list(todo.values())
            group.sort(key=_sort_key)
            groups.append(group)
            for n in group:
                done.add(n.uid)
                del todo[n.uid]
        return groups

    # -- checks --------------------------------------------------------------------------------------------
    def not_ready(self) -> list[str]:
        """Why moving now would interrupt provisioning (clusterctl's checkProvisioningCompleted): after the
        move the target picks up from status, and a half-done step would be repeated or lost."""
        out: list[str] = []
        for c in self.of_kind("Cluster"):
            if not contract.dig(c.obj, "status", "initialization", "infrastructureProvisioned"):
                out.append(f"Cluster {c.identity.namespace}/{c.name}: infrastructure is not provisioned yet")
            elif contract.dig(c.obj, "spec", "controlPlaneRef", "name") and \
                    not contract.dig(c.obj, "status", "initialization", "controlPlaneInitialized"):
                out.append(f"Cluster {c.identity.namespace}/{c.name}: control plane is not initialized yet")
        for m in self.of_kind("Machine"):
            if m.tenants and not contract.dig(m.obj, "status", "nodeRef", "name"):
                out.append(f"Machine {m.identity.namespace}/{m.name}: no node yet (status.nodeRef)")
        return out

    def already_paused(self) -> list[str]:
        """Tenants the user paused: unpausing them at the target would undo the user's pause (clusterctl
        refuses these too)."""
        return [f"{n.kind} {n.identity.namespace}/{n.name}" for n in self.move_nodes() if is_pause_root(n)
                and paused(n.obj)]

    # -- dry run ---------------------------------------------------------------------------------------------
    def tree(self) -> list[str]:
        """The move set as an indented tree: each object under its first (controller) owner, roots first;
        an object with several owners names the others."""
        moving = {n.uid: n for n in self.move_nodes()}
        lines: list[str] = []
        shown: set[str] = set()

        def parent(n: Node) -> str | None:
            ctrl = [u for u, r in n.owners.items() if r.get("controller") and u in moving]
            rest = sorted((u for u in n.all_owners() if u in moving), key=lambda u: _sort_key(moving[u]))
            first = ctrl or rest
            return first[0] if first else None

        kids: dict[str | None, list[Node]] = {}
        for n in moving.values():
            kids.setdefault(parent(n), []).append(n)

        def walk(n: Node, prefix: str, last: bool, top: bool) -> None:
            shown.add(n.uid)
            others = sorted(str(moving[u].identity) for u in n.all_owners() if u in moving and u != parent(n))
            label = str(n.identity) + (f"  (also owned by {', '.join(others)})" if others else "")
            lines.append(label if top else f"{prefix}{'└── ' if last else '├── '}{label}")
            sub = sorted(kids.get(n.uid, []), key=_sort_key)
            for i, k in enumerate(sub):
                if k.uid not in shown:
                    walk(k, prefix if top else prefix + ("    " if last else "│   "), i == len(sub) - 1, False)

        for root in sorted(kids.get(None, []), key=_sort_key):
            walk(root, "", True, True)
        for n in sorted(moving.values(), key=_sort_key):  # only cycles are left: still list them
            if n.uid not in shown:
                walk(n, "", True, True)
        return lines


_KIND_ORDER = {k: i for i, k in enumerate((
    "ClusterClass", "ClusterResourceSet", "Cluster", "DockerCluster", "DevCluster", "KubeadmControlPlane",
    "MachineDeployment", "MachinePool", "MachineSet", "Machine", "MachineHealthCheck", "KubeadmConfig",
    "DockerMachine", "DevMachine"))}


def _sort_key(n: Node) -> tuple[int, str, str, str]:
    return (_KIND_ORDER.get(n.kind, len(_KIND_ORDER)), n.kind, n.identity.namespace, n.name)


# -- pausing ---------------------------------------------------------------------------------------------------

def is_pause_root(n: Node) -> bool:
    """Objects the move pauses itself: Clusters by `spec.paused` (every object of the cluster follows it), and
    ClusterClasses (as clusterctl) and ClusterResourceSets by the paused annotation: neither belongs to one
    Cluster, and a target ClusterResourceSet reconciled before its bindings arrive would apply its resources
    to the workload cluster a second time."""
    return n.kind in TENANT_KINDS


def paused(obj: dict[str, Any]) -> bool:
    if obj.get("kind") == "Cluster":
        return bool(contract.dig(obj, "spec", "paused"))
    return PAUSED_ANNOTATION in (obj["metadata"].get("annotations") or {})


def pause_patch(kind: str, value: bool) -> dict[str, Any]:
    """A merge patch pausing (or resuming) a pause root; resuming drops the field, as clusterctl does, so no
    field ownership is left behind."""
    if kind == "Cluster":
        return {"spec": {"paused": True if value else None}}
    return {"metadata": {"annotations": {PAUSED_ANNOTATION: "true" if value else None}}}


# -- the objects written at the target ---------------------------------------------------------------------------

def owner_references(n: Node, new_uids: dict[str, str]) -> list[dict[str, Any]]:
    """n's owner references with the owners' UIDs at the target (clusterctl's buildOwnerChain); references to
    owners that do not move are dropped (nothing with their UID exists there)."""
    out: list[dict[str, Any]] = []
    for ref in n.obj["metadata"].get("ownerReferences") or []:
        new = new_uids.get(ref.get("uid", ""))
        if new:
            out.append({**ref, "uid": new})
    return out


def target_object(obj: dict[str, Any], owner_refs: list[dict[str, Any]]) -> dict[str, Any]:
    """The body to create at the target: the source object without server-set metadata and status (written
    through the status subresource afterwards), with the rebuilt owner references."""
    out = copy.deepcopy(obj)
    md = out["metadata"]
    for k in SERVER_METADATA:
        md.pop(k, None)
    if md.get("name") and md.get("generateName"):
        md.pop("generateName")  # kubernetes#32220, as clusterctl: a name collision must say AlreadyExists
    if owner_refs:
        md["ownerReferences"] = owner_refs
    out.pop("status", None)
    return out
