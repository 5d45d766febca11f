"""Fake workload clusters for benchmarks and tests, as upstream's in-memory backend: no API server, no
kubelet, just what the controllers read from and write to a workload cluster, kept in memory.

- `FakeWorkloads` is a `WorkloadClients`: `get(namespace, cluster)` answers (once the `<cluster>-kubeconfig`
  Secret exists, like the real one) with one `FakeWorkloadKube` per cluster.
- `FakeWorkloadKube` is an in-memory workload API (`capd_py.kube.inmemory_api.InMemoryAPI`, the store the DevCluster
  `inMemory` backend serves users with).
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
import threading
from typing import Any

from capd_py.api.gvk import SECRET
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE
from capd_py.api.versions import DEFAULT_VERSION, parse
from capd_py.kube.client import Kube
from capd_py.kube.etcd import EtcdClient
from capd_py.kube.inmemory_api import InMemoryAPI
from capd_py.kube.workload import WorkloadClients
from capd_py.reconcile.cloudinit import BOOTSTRAP_SENTINEL
from capd_py.reconcile.dockercluster import ROLE_CONTROL_PLANE, ROLE_WORKER
from capd_py.reconcile.dockermachine import provider_id
from capd_py.reconcile.kcp.common import STATIC_PODS
from capd_py.testing.fake_runtime import FakeRuntime


def _kubelet_version(image: str) -> str:
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    try:
        parse(tag)
        return tag
    except Exception:  # noqa: BLE001 - not a version tag: the default version
        return DEFAULT_VERSION


class FakeWorkloadKube(InMemoryAPI):
    """One workload cluster's API, in memory (`InMemoryAPI`), whose Nodes, static pods and etcd members come from
    the `FakeRuntime`'s bootstrapped node containers of that cluster."""

    def __init__(self, runtime: FakeRuntime, namespace: str, cluster: str):
        super().__init__(namespace, cluster)
        self.runtime = runtime
        self._synthesised: set[str] = set()  # node names made from containers (never recreated once gone)
        self._etcd_seen: set[str] = set()
        self._scan_key: tuple[int, int] = (-1, -1)
        self._names: list[str] = []

    @property
    def host(self) -> str:
        return f"fake://{self.namespace}/{self.cluster}"

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
        """What the kubelet and (for a control-plane node) kubeadm would make once the container bootstrapped."""
        self.add_node(node, provider_id(container), control_plane, version, ip)
        if control_plane:
            self.add_static_pods(node, STATIC_PODS)
            self.add_kubeadm_objects(version)


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
        if self.in_memory.get(namespace, cluster) is not None:  # a DevCluster inMemory backend's: as for users
            return await super().get(namespace, cluster)
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
        if not isinstance(workload, InMemoryAPI):  # a fake cluster, or a DevCluster inMemory backend's
            raise TypeError(f"not a fake workload cluster: {workload!r}")
        workload.sync()
        return workload.etcd.for_node(workload, node)


def kubeconfig_secret_value(text: str = "apiVersion: v1\nkind: Config\n") -> str:
    """A base64 `value` for a `<cluster>-kubeconfig` Secret in tests (the fake never parses it)."""
    return base64.b64encode(text.encode()).decode()
