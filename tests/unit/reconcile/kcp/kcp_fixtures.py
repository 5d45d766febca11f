"""Plain data shared by the KubeadmControlPlane decision tests."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from capd_py.reconcile import kcp as rk
from capd_py.testing import builders

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
ALL_PODS = {p: True for p in rk.STATIC_PODS}

KCP: dict[str, Any] = {
    "apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlane",
    "metadata": {"name": "c1-cp", "namespace": "ns", "uid": "kcp-uid", "generation": 2},
    "spec": {"replicas": 3, "version": "v1.34.4",
             "machineTemplate": {"spec": {"infrastructureRef": {
                 "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerMachineTemplate", "name": "cp-v1"}}},
             "kubeadmConfigSpec": {"clusterConfiguration": {"apiServer": {"certSANs": ["localhost"]}},
                                   "initConfiguration": {"nodeRegistration": {"name": "x"}},
                                   "joinConfiguration": {"nodeRegistration": {"name": "y"}}}},
}
CLUSTER: dict[str, Any] = {"metadata": {"name": "c1", "namespace": "ns"}, "spec": {}, "status": {}}


def kcp(**spec: Any) -> dict[str, Any]:
    k = copy.deepcopy(KCP)
    k["spec"].update(spec)
    return k


def view(name: str, minutes: int = 0, fd: str = "", healthy: bool = True, outdated: bool = False,
         **kw: Any) -> rk.MachineView:
    # a healthy view has its Node (named after it, as status.nodeRef says) and a provider ID
    fields: dict[str, Any] = {"node_name": name if healthy else "", "node_ready": healthy,
                              "node_ref": name if healthy else "",
                              "provider_id": f"docker:////{name}" if healthy else "",
                              "infra_kind": "DockerMachine", "pods_ready": dict(ALL_PODS) if healthy else {}, **kw}
    return rk.MachineView(name=name, created=NOW + dt.timedelta(minutes=minutes), failure_domain=fd,
                          outdated_reasons=["Version v1.33.0, v1.34.4 required"] if outdated else [], **fields)


def machine(name: str, *, owner_uid: str = "kcp-uid", labels: dict[str, str] | None = None,
            deleting: bool = False, **status: Any) -> dict[str, Any]:
    m = builders.machine(name, cluster=None if labels is not None else "c1", control_plane=True, labels=labels,
                         created="2026-01-01T10:00:00Z",
                         owners=[{"kind": "KubeadmControlPlane", "name": "c1-cp", "uid": owner_uid}],
                         deleted_at="2026-01-01T11:00:00Z" if deleting else None, status=status)
    m["spec"] = {"clusterName": "c1", "version": "v1.34.4"}
    return m
