"""Where a cluster's creation time went, from the objects alone (as upstream's performance dashboard does):
each object's creationTimestamp and each True condition's lastTransitionTime, relative to the Cluster's
creationTimestamp. One-second resolution (the API server's timestamps). While the workload cluster answers,
its Nodes (registered, Ready) and kube-system Pods (created, Ready) are in the timeline too: the gap between a
Node's Ready and its Machine's NodeReady is the controllers' lag.

    .venv/bin/python bench/phases.py NAME [--namespace NS]     # a cluster of the management cluster
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import datetime as dt
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capd_py.api.gvk import (  # noqa: E402
    CLUSTER,
    CLUSTER_RESOURCE_SET_BINDING,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    GVK,
    KUBEADM_CONFIG,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_SET,
    NODE,
    POD,
    SECRET,
)
from capd_py.api.labels import CLUSTER_NAME  # noqa: E402
from capd_py.cli import management as mgmt  # noqa: E402
from capd_py.kube.client import Kube  # noqa: E402

KINDS: tuple[GVK, ...] = (CLUSTER_RESOURCE_SET_BINDING, DOCKER_CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE_DEPLOYMENT,
                          MACHINE_SET, MACHINE,
                          KUBEADM_CONFIG, DOCKER_MACHINE)
# The conditions that mark a step on the path to Available (others, e.g. Paused or UpToDate, say nothing
# about progress).
STEPS = {
    "Cluster": ("InfrastructureReady", "ControlPlaneInitialized", "ControlPlaneAvailable", "WorkersAvailable",
                "RemoteConnectionProbe", "Available"),
    "DockerCluster": ("LoadBalancerAvailable", "Ready"),
    "KubeadmControlPlane": ("Initialized", "Available", "MachinesReady"),
    "MachineDeployment": ("Available", "MachinesReady"),
    "MachineSet": ("MachinesReady",),
    "Machine": ("BootstrapConfigReady", "InfrastructureReady", "NodeHealthy", "NodeReady", "Ready", "Available"),
    "KubeadmConfig": ("DataSecretAvailable", "Ready"),
    "DockerMachine": ("ContainerProvisioned", "BootstrapExecSucceeded", "Ready"),
    "Node": ("Ready",),
    "Pod": ("Ready",),
}


def _ts(s: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None


def timeline(cluster: dict[str, Any], objs: list[dict[str, Any]]) -> list[tuple[float, str, str]]:
    """(seconds after the Cluster was created, object, event), in time order."""
    t0 = _ts(cluster["metadata"]["creationTimestamp"])
    assert t0 is not None
    out: list[tuple[float, str, str]] = []
    for o in [cluster, *objs]:
        ref = f"{o['kind']}/{o['metadata']['name']}"
        created = _ts(o["metadata"].get("creationTimestamp"))
        if created is not None:
            out.append(((created - t0).total_seconds(), ref, "created"))
        for b in (o.get("spec") or {}).get("bindings") or [] if o["kind"] == "ClusterResourceSetBinding" else []:
            for r in b.get("resources") or []:
                t = _ts(r.get("lastAppliedTime"))
                if t is not None and r.get("applied"):
                    out.append(((t - t0).total_seconds(), ref, f"applied {r.get('kind')}/{r.get('name')}"))
        for c in (o.get("status") or {}).get("conditions") or []:
            if c.get("status") == "True" and c.get("type") in STEPS.get(o["kind"], ()):
                t = _ts(c.get("lastTransitionTime"))
                if t is not None:
                    out.append(((t - t0).total_seconds(), ref, c["type"]))
    return sorted(out, key=lambda r: (r[0], r[1], r[2]))


async def gather(kube: Kube, namespace: str, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cluster = await kube.get(CLUSTER, namespace, name)
    if cluster is None:
        raise SystemExit(f"Cluster {namespace}/{name} not found")
    objs: list[dict[str, Any]] = []
    for g in KINDS:
        objs += [o for o in await kube.list(g, namespace)
                 if (o["metadata"].get("labels") or {}).get(CLUSTER_NAME) == name or o["metadata"]["name"] == name]
    return cluster, objs + await _workload_objects(kube, namespace, name)


async def _workload_objects(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    """The workload's Nodes and kube-system Pods; none when it does not answer (deleted, not up)."""
    sec = await kube.get(SECRET, namespace, f"{name}-kubeconfig")
    if not sec or "value" not in (sec.get("data") or {}):
        return []
    wl = Kube.from_kubeconfig_text(base64.b64decode(sec["data"]["value"]))
    try:
        async with asyncio.timeout(10):
            return [*await wl.list(NODE), *await wl.list(POD, "kube-system")]
    except Exception:  # noqa: BLE001 - an unreachable workload only leaves its part out
        return []
    finally:
        wl.close()


def render(rows: list[tuple[float, str, str]]) -> str:
    w = max((len(r[1]) for r in rows), default=10)
    return "\n".join(f"{t:6.0f} s  {ref.ljust(w)}  {ev}" for t, ref, ev in rows)


async def phases(kube: Kube, namespace: str, name: str) -> str:
    cluster, objs = await gather(kube, namespace, name)
    return render(timeline(cluster, objs))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name")
    p.add_argument("--namespace", default="default")
    p.add_argument("--kubeconfig", default=str(mgmt.kubeconfig_path()))
    a = p.parse_args(argv)
    kube = Kube.from_kubeconfig(a.kubeconfig)
    try:
        print(asyncio.run(phases(kube, a.namespace, a.name)))
    finally:
        kube.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
