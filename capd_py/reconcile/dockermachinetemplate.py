"""DockerMachineTemplate status (pure): `status.capacity`, the resources a machine made from the template will
have, for the cluster autoscaler's scale from zero (upstream CAPD's DockerMachineTemplate controller, the
opt-in-autoscaling-from-zero proposal). A Docker machine is a container on the docker host without resource
limits, so its capacity is the host's: `docker info` NCPU and MemTotal, as upstream writes them. With several docker
hosts (docs/multihost.md) that is the host of the cluster whose machines the template makes."""

from __future__ import annotations

from typing import Any

from capd_py.api.containers import HostCapacity
from capd_py.api.labels import CLUSTER_NAME

_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


def binary_quantity(n: int) -> str:
    """resource.NewQuantity(n, BinarySI).String(): the largest power of 1024 that divides n exactly
    (8589934592 -> "8Gi", 25165824000 -> "24000Mi"); below 1024 or not a multiple of it, the plain number."""
    if -1024 < n < 1024:
        return str(n)
    exponent = 0
    while n % 1024 == 0 and exponent < len(_BINARY_SUFFIXES) - 1:
        n //= 1024
        exponent += 1
    return f"{n}{_BINARY_SUFFIXES[exponent]}"


def capacity(host: HostCapacity) -> dict[str, str]:
    """status.capacity as upstream's fetchSystemResourceCapacity: cpu (DecimalSI) and memory (BinarySI)."""
    return {"cpu": str(host.cpus), "memory": binary_quantity(host.memory_bytes)}


def desired_status(template: dict[str, Any], host: HostCapacity) -> dict[str, Any]:
    """The template's status with `capacity` set to the host's (other status fields kept). Unchanged when the
    host is unchanged, so a stable template gets no writes; a capacity set by hand is replaced, as upstream's
    controller replaces it on every reconcile."""
    status = dict(template.get("status") or {})
    status["capacity"] = capacity(host)
    return status


def template_clusters(template: dict[str, Any]) -> set[str]:
    """The Clusters whose machines a template makes: its `cluster.x-k8s.io/cluster-name` label (topology's
    templates) and its Cluster owner references (which the MachineSet and KubeadmControlPlane controllers set, as
    upstream's). None for a ClusterClass's template or one not in use yet; several for a template shared by
    clusters (whose capacity is then the management host's, as upstream's single host)."""
    md = template.get("metadata") or {}
    out = {r["name"] for r in md.get("ownerReferences") or []
           if r.get("kind") == "Cluster" and str(r.get("apiVersion", "")).startswith("cluster.x-k8s.io/")}
    label = (md.get("labels") or {}).get(CLUSTER_NAME)
    if label:
        out.add(label)
    return out
