"""In-memory workload clusters: what the controllers read from and write to a workload cluster's API server, kept in
the controllers' memory, with no API server, kubelet or etcd behind it. The DevCluster / DevMachine `inMemory`
backend (upstream v1.14's in-memory provider, capd_py/controllers/inmemory_backend_*.py) keeps one `InMemoryAPI` per
cluster in `InMemoryClusters` (on `WorkloadClients.in_memory`): the machines write their Node, control-plane Pods
and etcd member into it, and every controller reaching the cluster through `ctx.workload` / `ctx.etcd` gets it.

- `InMemoryAPI` is a `Kube` whose raw `call` (which every Kube method funnels through) is a tiny REST store:
  GET item / list (labelSelector; fieldSelector `spec.nodeName=`), POST create (`pods/<name>/eviction` deletes
  the pod), PATCH (merge; apply treated as merge; json-patch not supported), PUT, DELETE; 404 / 409 as
  `KubeError`. `GET /version` and API discovery answer. Its `etcd` is a `FakeEtcd` (the cluster's members).
- `InMemoryEtcdClients` is an `EtcdClients` answering for in-memory clusters and passing the others on.

Like upstream's in-memory provider, the state lives in the controllers process: a restarted process starts with
empty workload clusters (docs/dev-kinds.md).
"""

from __future__ import annotations

import copy
import datetime as _dt
import hashlib
import itertools
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from capd_py.api import selectors
from capd_py.api.labels import NODE_ROLE_CONTROL_PLANE
from capd_py.api.versions import DEFAULT_VERSION, parse
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.etcd import EtcdClient, EtcdClients
from capd_py.kube.inmemory_etcd import FakeEtcd
from capd_py.reconcile import inmemory_api

KUBE_SYSTEM = "kube-system"
CONTROL_PLANE_ROLE_LABEL = NODE_ROLE_CONTROL_PLANE
# The CoreDNS image tag `kubeadm config images list` gives per Kubernetes minor (others: the v1.34 one).
COREDNS_TAGS = {"v1.34": "v1.12.1", "v1.35": "v1.13.1"}


def now_text() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _merge(dst: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(dst) if isinstance(dst, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _merge(out.get(k), v)
    return out


def _err(status: int, reason: str, message: str) -> KubeError:
    return KubeError(status, reason, message, {"kind": "Status", "status": "Failure", "reason": reason,
                                               "message": message, "code": status})


def _discovery(path: str) -> dict[str, Any] | None:
    """The discovery document at `path` (what the HTTPS server answers too: capd_py/reconcile/inmemory_api.py)."""
    found = inmemory_api.discovery(path.split("?")[0])
    if found is None:
        return None
    if found.status != 200:
        raise _err(found.status, found.body["reason"], found.body["message"])
    return dict(found.body)


def _parse(path: str) -> tuple[str, str | None, str | None, str | None]:
    """(resource, namespace, name, subresource) of a REST path."""
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts[:2] == ["api", "v1"]:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        rest = parts[3:]
    else:
        raise _err(404, "NotFound", f"the server could not find the requested resource ({path})")
    ns = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    if not rest:
        raise _err(404, "NotFound", f"the server could not find the requested resource ({path})")
    return rest[0], ns, rest[1] if len(rest) > 1 else None, rest[2] if len(rest) > 2 else None


class InMemoryAPI(Kube):
    """One workload cluster's API, in memory (Kube's async methods call `call` directly; thread-safe too)."""

    def __init__(self, namespace: str, cluster: str):
        super().__init__(None)  # type: ignore[arg-type]  # no HTTP client behind it
        self.namespace, self.cluster = namespace, cluster
        # the name of the DevCluster that holds it (set by its reconcile): when that object goes without its
        # deletion running here (moved to another management cluster), the store goes with it
        self.infrastructure = ""
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.etcd = FakeEtcd()
        self.requests: Counter[str] = Counter()   # calls by method (bounded memory at benchmark scale)
        self._lock = threading.RLock()
        self._rv = itertools.count(1)
        # told of every Node written or deleted (node, deleted): the controllers hear of in-memory Nodes at once,
        # as a real cluster's Node watch tells them (WorkloadClients wires it to the Manager)
        self.on_node: Callable[[dict[str, Any], bool], None] | None = None
        # told of every write (resource, ADDED / MODIFIED / DELETED, the object): the HTTPS server's watches
        self.watchers: list[Callable[[str, str, dict[str, Any]], None]] = []
        # the Kubernetes version `/version` answers: the control plane's, once kubeadm's objects are written
        self.version = DEFAULT_VERSION

    @property
    def host(self) -> str:
        return f"in-memory://{self.namespace}/{self.cluster}"

    def close(self) -> None:
        return None

    def sync(self) -> None:
        """Called before every request: a subclass brings the store up to date (capd_py/testing/fake_workload.py
        makes Nodes of fake containers)."""
        return None

    # -- objects ------------------------------------------------------------------------------------
    def _stamp(self, resource: str, ns: str | None, obj: dict[str, Any], new: bool) -> dict[str, Any]:
        md = obj.setdefault("metadata", {})
        if new:
            md.setdefault("uid", str(uuid.uuid4()))
            md.setdefault("creationTimestamp", now_text())
        if ns is not None:
            md["namespace"] = ns
        md["resourceVersion"] = str(next(self._rv))
        key = (resource, ns, md["name"])
        event = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        if resource == "nodes" and self.on_node is not None:
            self.on_node(copy.deepcopy(obj), False)
        self._tell(resource, event, obj)
        return obj

    def _tell(self, resource: str, event: str, obj: dict[str, Any]) -> None:
        for w in list(self.watchers):
            w(resource, event, copy.deepcopy(obj))

    def _drop(self, key: tuple[str, str | None, str]) -> dict[str, Any] | None:
        """Delete one object (a Node takes its Pods with it), telling the watchers; the deleted object gets a new
        resourceVersion, as kube-apiserver's DELETED events carry."""
        cur = self.objects.pop(key, None)
        if cur is None:
            return None
        cur["metadata"]["resourceVersion"] = str(next(self._rv))
        self._tell(key[0], "DELETED", cur)
        if key[0] == "nodes":
            if self.on_node is not None:
                self.on_node(copy.deepcopy(cur), True)
            for pk, p in list(self.objects.items()):
                if pk[0] == "pods" and (p.get("spec") or {}).get("nodeName") == key[2]:
                    self._drop(pk)
        return cur

    def nodes(self) -> dict[str, dict[str, Any]]:
        """The cluster's Nodes by name (what a Node watch in sync would hold)."""
        with self._lock:
            self.sync()
            return {k[2]: copy.deepcopy(o) for k, o in self.objects.items() if k[0] == "nodes"}

    def put_object(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object directly (tests)."""
        with self._lock:
            return copy.deepcopy(self._stamp(resource, obj["metadata"].get("namespace"), copy.deepcopy(obj), True))

    def remove_object(self, resource: str, namespace: str | None, name: str) -> None:
        """Delete an object directly if it exists (a Node takes its Pods with it)."""
        with self._lock:
            self._drop((resource, namespace, name))

    def object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self._lock:
            self.sync()
            o = self.objects.get((resource, namespace, name))
            return copy.deepcopy(o) if o is not None else None

    # -- what the kubelet and kubeadm would create (the in-memory backend's machines, and the test fakes) -----------
    def add_node(self, node: str, provider_id: str, control_plane: bool, version: str, ip: str = "",
                 taints: list[dict[str, str]] | None = None) -> None:
        """A Ready Node (and the namespaces a drain reads), as a kubelet registers it."""
        labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        if control_plane:
            labels[CONTROL_PLANE_ROLE_LABEL] = ""
        now = now_text()
        addresses = [{"type": "Hostname", "address": node}]
        if ip:
            addresses.insert(0, {"type": "InternalIP", "address": ip})
        self._stamp("nodes", None, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": labels},
            "spec": {"providerID": provider_id, **({"taints": taints} if taints else {})},
            "status": {
                "conditions": [{"type": t, "status": "False", "reason": r, "lastHeartbeatTime": now,
                                "lastTransitionTime": now, "message": ""}
                               for t, r in (("MemoryPressure", "KubeletHasSufficientMemory"),
                                            ("DiskPressure", "KubeletHasNoDiskPressure"),
                                            ("PIDPressure", "KubeletHasSufficientPID"))]
                + [{"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": now,
                    "lastTransitionTime": now, "message": "kubelet is posting ready status"}],
                "addresses": addresses,
                "nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": version, "operatingSystem": "linux",
                             "architecture": "amd64", "containerRuntimeVersion": "containerd://fake"},
            },
        }, True)
        for ns in ("default", "kube-node-lease", "kube-public", KUBE_SYSTEM):  # a drain reads their labels
            if ("namespaces", None, ns) not in self.objects:
                self._stamp("namespaces", None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                    "name": ns, "labels": {"kubernetes.io/metadata.name": ns}}}, True)

    def add_static_pods(self, node: str, components: Iterable[str]) -> None:
        """kubeadm's control-plane static pods on `node` (Running, Ready, `tier=control-plane`), as the API server
        shows a kubelet's static pods: mirror pods (`kubernetes.io/config.mirror`), which a drain skips. Evicted, they
        would be made again by their machine's next pass (its etcd member added back after KCP removed it, `/version`
        going back to the old machine's version during an upgrade), as a kubelet recreates a deleted mirror pod."""
        now = now_text()
        for comp in components:
            digest = hashlib.sha256(f"{self.namespace}/{self.cluster}/{node}/{comp}".encode()).hexdigest()[:32]
            self._stamp("pods", KUBE_SYSTEM, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{comp}-{node}", "labels": {"component": comp, "tier": "control-plane"},
                             "annotations": {"kubernetes.io/config.source": "file",
                                             "kubernetes.io/config.hash": digest,
                                             "kubernetes.io/config.mirror": digest, "kubernetes.io/config.seen": now},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                  "uid": self.objects[("nodes", None, node)]["metadata"]["uid"],
                                                  "controller": True}]},
                "spec": {"nodeName": node, "containers": [{"name": comp, "image": f"registry.k8s.io/{comp}"}]},
                "status": {"phase": "Running", "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]},
            }, True)

    def add_kubeadm_objects(self, version: str) -> None:
        """What `kubeadm init` uploads and installs, once: the kubeadm-config ConfigMap, kube-proxy and CoreDNS."""
        self.version = version or self.version
        if ("configmaps", KUBE_SYSTEM, "kubeadm-config") not in self.objects:
            self._stamp("configmaps", KUBE_SYSTEM, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "kubeadm-config"},
                "data": {"ClusterConfiguration": (
                    "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\n"
                    f"clusterName: {self.cluster}\nkubernetesVersion: {version}\n")},
            }, True)
        self._add_addons(version)

    def _add_addons(self, version: str) -> None:
        """kubeadm init's add-ons: the kube-proxy DaemonSet and CoreDNS (Deployment + Corefile ConfigMap)."""
        if ("daemonsets", KUBE_SYSTEM, "kube-proxy") not in self.objects:
            self._stamp("daemonsets", KUBE_SYSTEM, {
                "apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "kube-proxy", "labels": {"k8s-app": "kube-proxy"}},
                "spec": {"selector": {"matchLabels": {"k8s-app": "kube-proxy"}}, "template": {
                    "metadata": {"labels": {"k8s-app": "kube-proxy"}},
                    "spec": {"containers": [{"name": "kube-proxy", "image": f"registry.k8s.io/kube-proxy:{version}",
                                             "command": ["/usr/local/bin/kube-proxy",
                                                         "--config=/var/lib/kube-proxy/config.conf"]}]}}},
            }, True)
        if ("configmaps", KUBE_SYSTEM, "coredns") not in self.objects:
            self._stamp("configmaps", KUBE_SYSTEM, {
                "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns"},
                "data": {"Corefile": ".:53 {\n    errors\n    health\n    ready\n    kubernetes cluster.local "
                                     "in-addr.arpa ip6.arpa\n    forward . /etc/resolv.conf\n    cache 30\n}\n"},
            }, True)
        if ("deployments", KUBE_SYSTEM, "coredns") not in self.objects:
            tag = COREDNS_TAGS.get(parse(version).minor_version, COREDNS_TAGS["v1.34"])
            self._stamp("deployments", KUBE_SYSTEM, {
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "coredns", "labels": {"k8s-app": "kube-dns"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"k8s-app": "kube-dns"}}, "template": {
                    "metadata": {"labels": {"k8s-app": "kube-dns"}},
                    "spec": {"containers": [{"name": "coredns", "image": f"registry.k8s.io/coredns/coredns:{tag}",
                                             "args": ["-conf", "/etc/coredns/Corefile"]}],
                             "volumes": [{"name": "config-volume", "configMap": {
                                 "name": "coredns", "items": [{"key": "Corefile", "path": "Corefile"}]}}]}}},
            }, True)

    # -- the REST store -------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, query: Iterable[tuple[str, Any]] = (),
             content_type: str | None = None, timeout: float = 30) -> Any:
        with self._lock:
            self.requests[method] += 1
            if path.rstrip("/") == "/version":
                return inmemory_api.version_info(self.version)
            found = _discovery(path) if method == "GET" else None
            if found is not None:
                return found
            self.sync()
            q = dict(query)
            resource, ns, name, sub = _parse(path)
            if resource == "namespaces" and name is None and ns is not None:  # /api/v1/namespaces/<name>
                resource, ns, name = "namespaces", None, ns
            key = (resource, ns, name or "")
            if method == "GET":
                if name is None:
                    return self._list(resource, ns, q)
                return copy.deepcopy(self._get(key))
            if method == "POST":
                if resource == "pods" and sub == "eviction" and name:
                    self._get(key)
                    self._drop(key)
                    return {"kind": "Status", "status": "Success"}
                obj = copy.deepcopy(body)
                oname = (obj.get("metadata") or {}).get("name")
                if not oname:
                    raise _err(422, "Invalid", "metadata.name: Required value")
                if (resource, ns, oname) in self.objects:
                    raise _err(409, "AlreadyExists", f'{resource} "{oname}" already exists')
                if q.get("dryRun"):
                    return obj
                return copy.deepcopy(self._stamp(resource, ns, obj, True))
            if method == "PATCH":
                if content_type == "application/json-patch+json":
                    raise _err(415, "UnsupportedMediaType", "json-patch is not supported by the fake")
                if content_type == "application/apply-patch+yaml" and key not in self.objects:  # SSA creates
                    if q.get("dryRun"):
                        return copy.deepcopy(body)
                    return copy.deepcopy(self._stamp(resource, ns, copy.deepcopy(body), True))
                if q.get("dryRun"):
                    return _merge(self._get(key), body)
                cur = self._get(key)
                self._precondition(cur, body)
                new = _merge(cur, body)
                new["metadata"]["uid"] = cur["metadata"]["uid"]
                return copy.deepcopy(self._stamp(resource, ns, new, False))
            if method == "PUT":
                cur = self._get(key)
                self._precondition(cur, body)
                new = copy.deepcopy(body)
                if sub == "status":
                    new = {**cur, "status": new.get("status")}
                new.setdefault("metadata", {})["uid"] = cur["metadata"]["uid"]
                new["metadata"]["creationTimestamp"] = cur["metadata"].get("creationTimestamp")
                return copy.deepcopy(self._stamp(resource, ns, new, False))
            if method == "DELETE":
                self._get(key)
                return copy.deepcopy(self._drop(key))
            raise _err(405, "MethodNotAllowed", f"{method} {path}")

    def _get(self, key: tuple[str, str | None, str]) -> dict[str, Any]:
        obj = self.objects.get(key)
        if obj is None:
            raise _err(404, "NotFound", f'{key[0]} "{key[2]}" not found')
        return obj

    @staticmethod
    def _precondition(cur: dict[str, Any], body: Any) -> None:
        rv = ((body or {}).get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if rv and rv != cur["metadata"]["resourceVersion"]:
            raise _err(409, "Conflict", "the object has been modified; please apply your changes to the latest "
                                        "version and try again")

    def _list(self, resource: str, ns: str | None, q: dict[str, Any]) -> dict[str, Any]:
        lsel, fsel = str(q.get("labelSelector") or ""), str(q.get("fieldSelector") or "")
        try:
            wanted = selectors.parse(lsel)  # once per list, not per object
        except ValueError as e:  # refused whether or not anything would be listed, as kube-apiserver does
            raise _err(400, "BadRequest", f"unable to parse requirement: {e}") from e
        items = [copy.deepcopy(o) for (r, n, _), o in sorted(self.objects.items(), key=lambda kv: kv[0][2])
                 if r == resource and (ns is None or n == ns)
                 and selectors.selector_matches(wanted, (o.get("metadata") or {}).get("labels"))
                 and (not fsel or inmemory_api.field_match(o, fsel))]
        for it in items:
            it.pop("apiVersion", None)
            it.pop("kind", None)
        return {"kind": "List", "metadata": {"resourceVersion": str(next(self._rv))}, "items": items}




class InMemoryClusters:
    """The in-memory workload clusters of one controllers process, by (namespace, cluster name)."""

    def __init__(self) -> None:
        self._clusters: dict[tuple[str, str], InMemoryAPI] = {}
        self._lock = threading.Lock()

    def ensure(self, namespace: str, cluster: str) -> InMemoryAPI:
        with self._lock:
            api = self._clusters.get((namespace, cluster))
            if api is None:
                api = self._clusters[(namespace, cluster)] = InMemoryAPI(namespace, cluster)
            return api

    def get(self, namespace: str, cluster: str) -> InMemoryAPI | None:
        return self._clusters.get((namespace, cluster))

    def remove(self, namespace: str, cluster: str) -> None:
        with self._lock:
            self._clusters.pop((namespace, cluster), None)

    def __len__(self) -> int:
        return len(self._clusters)

    def all(self) -> list[InMemoryAPI]:
        with self._lock:
            return list(self._clusters.values())


class InMemoryEtcdClients:
    """`Ctx.etcd`: an in-memory cluster's `FakeEtcd`, else the `EtcdClients` it wraps (etcdctl in the etcd pod)."""

    def __init__(self, other: EtcdClients):
        self.other = other

    def for_node(self, workload: Kube, node: str) -> EtcdClient:
        if isinstance(workload, InMemoryAPI):
            workload.sync()
            calls = workload.etcd.calls
            if len(calls) > 1000:  # the fake records every call (tests read them); a long-lived cluster keeps few
                del calls[:-100]
            return workload.etcd.for_node(workload, node)
        return self.other.for_node(workload, node)
