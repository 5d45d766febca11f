"""Fake workload clusters for benchmarks and tests, as upstream's in-memory backend: no API server, no
kubelet, just what the controllers read from and write to a workload cluster, kept in memory.

- `FakeWorkloads` is a `WorkloadClients`: `get(namespace, cluster)` answers (once the `<cluster>-kubeconfig`
  Secret exists, like the real one) with one `FakeWorkloadKube` per cluster.
- `FakeWorkloadKube` is a `Kube` whose raw `call` (which every Kube method funnels through) is a tiny
  in-memory REST store: GET item / list (labelSelector; fieldSelector `spec.nodeName=`), POST create
  (`pods/<name>/eviction` deletes the pod), PATCH (merge; apply treated as merge; json-patch not
  supported), PUT, DELETE; 404 / 409 as `KubeError`. `GET /version` answers.
- What kubeadm and the kubelet would create is synthesised from the `FakeRuntime`'s node containers of that
  cluster once their bootstrap has run (the success sentinel file exists): a Ready Node named after the
  container (hostname) with `spec.providerID` `docker:////<container>`, the kubelet version from the node
  image tag, the control-plane role label; for control-plane nodes the static pods `kube-apiserver-`,
  `kube-controller-manager-`, `kube-scheduler-`, `etcd-<node>` (Running, Ready, `tier=control-plane`) and,
  with the first one, what `kubeadm init` uploads and installs in kube-system: the `kubeadm-config`
  ConfigMap, the `kube-proxy` DaemonSet and the `coredns` Deployment and ConfigMap (kubeadm's default images
  for the node's version; no controller acts on them). A Node of a container that is gone disappears; a
  Node deleted through the API is not brought back.
- `FakeWorkloadEtcd` is an `EtcdClients` (`Ctx.etcd`): one `FakeEtcd` per cluster whose members are the
  cluster's control-plane nodes (added as they appear; removed ones stay removed).
"""

from __future__ import annotations

import base64
import copy
import datetime as _dt
import itertools
import threading
import uuid
from collections import Counter
from collections.abc import Iterable
from typing import Any

from capd_py.api.gvk import SECRET
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE, NODE_ROLE_CONTROL_PLANE
from capd_py.api.versions import DEFAULT_VERSION, parse
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.etcd import EtcdClient
from capd_py.kube.etcd_fake import FakeEtcd
from capd_py.kube.workload import WorkloadClients
from capd_py.reconcile.cloudinit import BOOTSTRAP_SENTINEL
from capd_py.reconcile.dockercluster import ROLE_CONTROL_PLANE, ROLE_WORKER
from capd_py.reconcile.dockermachine import provider_id
from capd_py.reconcile.kcp.common import STATIC_PODS
from capd_py.runtime.fake import FakeRuntime

CONTROL_PLANE_ROLE_LABEL = NODE_ROLE_CONTROL_PLANE
KUBE_SYSTEM = "kube-system"
# The CoreDNS image tag `kubeadm config images list` gives per Kubernetes minor (others: the v1.34 one).
COREDNS_TAGS = {"v1.34": "v1.12.1", "v1.35": "v1.13.1"}


def _now() -> str:
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


def _label_match(labels: dict[str, str], selector: str) -> bool:
    """Equality-based selectors (`a=b`, `a==b`, `a!=b`) and existence (`a`, `!a`), comma-separated."""
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k.strip()) != v.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


def _field_match(obj: dict[str, Any], selector: str) -> bool:
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            continue
        k, _, v = term.replace("==", "=").partition("=")
        cur: Any = obj
        for part in k.split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if (cur or "") != v:
            return False
    return True


def _err(status: int, reason: str, message: str) -> KubeError:
    return KubeError(status, reason, message, {"kind": "Status", "status": "Failure", "reason": reason,
                                               "message": message, "code": status})


# What the fake serves, for API discovery (GET /api/v1, /apis/<group>/<version>): the kinds of a CNI
# manifest a ClusterResourceSet applies, and what the controllers read.
_DISCOVERY: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [("Namespace", "namespaces", False), ("Node", "nodes", False), ("Pod", "pods", True),
           ("ConfigMap", "configmaps", True), ("Secret", "secrets", True), ("Service", "services", True),
           ("ServiceAccount", "serviceaccounts", True)],
    "apps/v1": [("DaemonSet", "daemonsets", True), ("Deployment", "deployments", True)],
    "rbac.authorization.k8s.io/v1": [("ClusterRole", "clusterroles", False),
                                     ("ClusterRoleBinding", "clusterrolebindings", False),
                                     ("Role", "roles", True), ("RoleBinding", "rolebindings", True)],
}


def _discovery(path: str) -> dict[str, Any] | None:
    parts = [p for p in path.split("?")[0].split("/") if p]
    if parts == ["api", "v1"]:
        gv = "v1"
    elif len(parts) == 3 and parts[0] == "apis":
        gv = f"{parts[1]}/{parts[2]}"
    else:
        return None
    if gv not in _DISCOVERY:
        raise _err(404, "NotFound", f"the server could not find the requested resource ({path})")
    return {"kind": "APIResourceList", "groupVersion": gv,
            "resources": [{"kind": k, "name": n, "namespaced": nsd} for k, n, nsd in _DISCOVERY[gv]]}


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


def _kubelet_version(image: str) -> str:
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    try:
        parse(tag)
        return tag
    except Exception:  # noqa: BLE001 - not a version tag: the default version
        return DEFAULT_VERSION


class FakeWorkloadKube(Kube):
    """One workload cluster's API, in memory (Kube's async methods call `call` directly; thread-safe too)."""

    def __init__(self, runtime: FakeRuntime, namespace: str, cluster: str):
        super().__init__(None)  # type: ignore[arg-type]  # no HTTP client behind it
        self.runtime, self.namespace, self.cluster = runtime, namespace, cluster
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.etcd = FakeEtcd()
        self.requests: Counter[str] = Counter()   # calls by method (bounded memory at benchmark scale)
        self._lock = threading.RLock()
        self._rv = itertools.count(1)
        self._synthesised: set[str] = set()  # node names made from containers (never recreated once gone)
        self._etcd_seen: set[str] = set()
        self._scan_key: tuple[int, int] = (-1, -1)
        self._names: list[str] = []

    @property
    def host(self) -> str:
        return f"fake://{self.namespace}/{self.cluster}"

    def close(self) -> None:
        return None

    # -- objects ------------------------------------------------------------------------------------
    def _stamp(self, resource: str, ns: str | None, obj: dict[str, Any], new: bool) -> dict[str, Any]:
        md = obj.setdefault("metadata", {})
        if new:
            md.setdefault("uid", str(uuid.uuid4()))
            md.setdefault("creationTimestamp", _now())
        if ns is not None:
            md["namespace"] = ns
        md["resourceVersion"] = str(next(self._rv))
        self.objects[(resource, ns, md["name"])] = obj
        return obj

    def put_object(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object directly (tests)."""
        with self._lock:
            return copy.deepcopy(self._stamp(resource, obj["metadata"].get("namespace"), copy.deepcopy(obj), True))

    def object(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        with self._lock:
            self.sync()
            o = self.objects.get((resource, namespace, name))
            return copy.deepcopy(o) if o is not None else None

    # -- what kubeadm and the kubelets would create ---------------------------------------------------
    def sync(self) -> None:
        """Nodes, static pods, kubeadm-config and etcd members from the cluster's bootstrapped containers."""
        with self._lock:
            live: set[str] = set()
            cps: list[str] = []
            for c in self._candidates():
                info = c.info
                role = info.labels.get(CONTAINER_ROLE)
                if not info.running or BOOTSTRAP_SENTINEL not in c.files:
                    continue
                node = c.spec.hostname or info.name
                live.add(node)
                if role == ROLE_CONTROL_PLANE:
                    cps.append(node)
                if node in self._synthesised:
                    continue
                self._synthesised.add(node)
                self._add_node(node, info.name, role == ROLE_CONTROL_PLANE, _kubelet_version(info.image),
                               next(iter(info.ipv4.values()), ""))
            for key in list(self.objects):
                if key[0] == "nodes" and key[2] in self._synthesised and key[2] not in live:
                    del self.objects[key]  # the container is gone: so is the node (and its pods)
                    for pk, p in list(self.objects.items()):
                        if pk[0] == "pods" and (p.get("spec") or {}).get("nodeName") == key[2]:
                            del self.objects[pk]
            for node in cps:
                if node not in self._etcd_seen:
                    self._etcd_seen.add(node)
                    self.etcd.add(node)

    def _candidates(self) -> list[Any]:
        """This cluster's node containers; the runtime's containers are scanned again only after one was
        created or removed (a scan per request would cost O(all containers) at benchmark scale)."""
        rt = self.runtime
        key = (len(rt.created), len(rt.containers))
        if key != self._scan_key:
            self._scan_key = key
            labels = {CONTAINER_CLUSTER: self.cluster, CONTAINER_NAMESPACE: self.namespace}
            self._names = [i.name for i in rt.list_containers(labels)
                           if i.labels.get(CONTAINER_ROLE) in (ROLE_CONTROL_PLANE, ROLE_WORKER)]
        return [c for c in (rt.containers.get(n) for n in self._names) if c is not None]

    def _add_node(self, node: str, container: str, control_plane: bool, version: str, ip: str) -> None:
        labels = {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        if control_plane:
            labels[CONTROL_PLANE_ROLE_LABEL] = ""
        now = _now()
        addresses = [{"type": "Hostname", "address": node}]
        if ip:
            addresses.insert(0, {"type": "InternalIP", "address": ip})
        self._stamp("nodes", None, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node, "labels": labels},
            "spec": {"providerID": provider_id(container)},
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
        if not control_plane:
            return
        for comp in STATIC_PODS:
            self._stamp("pods", KUBE_SYSTEM, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": f"{comp}-{node}", "labels": {"component": comp, "tier": "control-plane"},
                             "annotations": {"kubernetes.io/config.source": "file"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                  "uid": self.objects[("nodes", None, node)]["metadata"]["uid"],
                                                  "controller": True}]},
                "spec": {"nodeName": node, "containers": [{"name": comp, "image": f"registry.k8s.io/{comp}"}]},
                "status": {"phase": "Running", "conditions": [
                    {"type": t, "status": "True", "lastTransitionTime": now}
                    for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]},
            }, True)
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
                return {"major": "1", "minor": "34", "gitVersion": DEFAULT_VERSION}
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
                    del self.objects[key]
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
                cur = self._get(key)
                del self.objects[key]
                if resource == "nodes":
                    for pk, p in list(self.objects.items()):
                        if pk[0] == "pods" and (p.get("spec") or {}).get("nodeName") == name:
                            del self.objects[pk]
                return copy.deepcopy(cur)
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
        items = [copy.deepcopy(o) for (r, n, _), o in sorted(self.objects.items(), key=lambda kv: kv[0][2])
                 if r == resource and (ns is None or n == ns)
                 and (not lsel or _label_match((o.get("metadata") or {}).get("labels") or {}, lsel))
                 and (not fsel or _field_match(o, fsel))]
        for it in items:
            it.pop("apiVersion", None)
            it.pop("kind", None)
        return {"kind": "List", "metadata": {"resourceVersion": str(next(self._rv))}, "items": items}


class FakeWorkloads(WorkloadClients):
    """`Ctx.workload`: one `FakeWorkloadKube` per cluster, reachable once its kubeconfig Secret exists."""

    def __init__(self, management: Kube, runtime: FakeRuntime, require_kubeconfig: bool = True):
        super().__init__(management)
        self.runtime = runtime
        self.require_kubeconfig = require_kubeconfig
        self.clusters: dict[tuple[str, str], FakeWorkloadKube] = {}
        self._lock = threading.Lock()

    def kube_for(self, namespace: str, cluster: str) -> FakeWorkloadKube:
        with self._lock:
            k = self.clusters.get((namespace, cluster))
            if k is None:
                k = self.clusters[(namespace, cluster)] = FakeWorkloadKube(self.runtime, namespace, cluster)
            return k

    async def get(self, namespace: str, cluster: str) -> Kube | None:
        if self.require_kubeconfig:
            sec = await self._mgmt.get(SECRET, namespace, f"{cluster}-kubeconfig")
            if not sec or "value" not in (sec.get("data") or {}):
                return None
        return self.kube_for(namespace, cluster)

    def forget(self, namespace: str, cluster: str) -> None:
        with self._lock:
            self.clusters.pop((namespace, cluster), None)


class FakeWorkloadEtcd:
    """`Ctx.etcd` for fake workload clusters: the `FakeEtcd` of the cluster the workload client is for."""

    def __init__(self, workloads: FakeWorkloads):
        self.workloads = workloads

    def for_node(self, workload: Kube, node: str) -> EtcdClient:
        if not isinstance(workload, FakeWorkloadKube):
            raise TypeError(f"not a fake workload cluster: {workload!r}")
        workload.sync()
        return workload.etcd.for_node(workload, node)


def kubeconfig_secret_value(text: str = "apiVersion: v1\nkind: Config\n") -> str:
    """A base64 `value` for a `<cluster>-kubeconfig` Secret in tests (the fake never parses it)."""
    return base64.b64encode(text.encode()).decode()
