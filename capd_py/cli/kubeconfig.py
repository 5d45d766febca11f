"""Workload cluster kubeconfigs: read the `<cluster>-kubeconfig` secret, point it at the load balancer's
port published on the host (the secret's server is the load balancer's address on the docker network,
which only containers can reach)."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from capd_py.api import contract, infrakinds, kubeyaml
from capd_py.api.gvk import CLUSTER, DEV_CLUSTER, DOCKER_CLUSTER, SECRET
from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE, LB_HOST_PORT_ANNOTATION
from capd_py.kube.client import Kube
from capd_py.runtime.protocol import ContainerInfo, ContainerRuntime

API_PORT = 6443


class KubeconfigError(Exception):
    pass


def rewrite_server(text: str | bytes, server: str, context_name: str | None = None) -> str:
    """Set every cluster entry's server to `server`; keep credentials and CA untouched. A cluster whose server was
    an IPv6 address (an IPv6 cluster's endpoint: its API server certificate names that address, not 127.0.0.1)
    keeps it as `tls-server-name`, so the certificate is checked against the name it carries."""
    try:
        cfg: Any = kubeyaml.load(text)
    except yaml.YAMLError as e:
        raise KubeconfigError(f"kubeconfig is not valid YAML: {e}") from None
    if not isinstance(cfg, dict) or not cfg.get("clusters"):
        raise KubeconfigError("kubeconfig has no clusters")
    for c in cfg["clusters"]:
        entry = c.setdefault("cluster", {})
        old_host = urlsplit(str(entry.get("server") or "")).hostname or ""
        if ":" in old_host and urlsplit(server).hostname != old_host:
            entry.setdefault("tls-server-name", old_host)
        entry["server"] = server
    if context_name and len(cfg.get("contexts") or []) == 1:
        old = cfg["contexts"][0]["name"]
        cfg["contexts"][0]["name"] = context_name
        if cfg.get("current-context") == old:
            cfg["current-context"] = context_name
    return str(yaml.safe_dump(cfg, default_flow_style=False, sort_keys=False))


def server_of(text: str | bytes) -> str:
    cfg = kubeyaml.load(text)
    return str(cfg["clusters"][0]["cluster"]["server"])


def find_load_balancer(runtime: ContainerRuntime, namespace: str, cluster: str) -> ContainerInfo | None:
    """The cluster's load balancer container: by its upstream-style name, else by labels."""
    c = runtime.get_container(f"{cluster}-lb")
    if c and c.labels.get(CONTAINER_CLUSTER, cluster) == cluster \
            and c.labels.get(CONTAINER_NAMESPACE, namespace) == namespace:
        return c
    cands = [x for x in runtime.list_containers(labels={CONTAINER_CLUSTER: cluster})
             if x.labels.get(CONTAINER_NAMESPACE, namespace) == namespace]
    for x in cands:
        role = x.labels.get(CONTAINER_ROLE, "")
        if "load" in role or role == "lb" or x.name.endswith("-lb"):
            return x
    return None


def lb_host_port(runtime: ContainerRuntime, namespace: str, cluster: str) -> int:
    lb = find_load_balancer(runtime, namespace, cluster)
    if lb is None:
        raise KubeconfigError(f"no load balancer container for cluster {namespace}/{cluster} "
                              "(is the DockerCluster provisioned?)")
    port = lb.ports.get(API_PORT)
    if not port:
        raise KubeconfigError(f"load balancer {lb.name} does not publish port {API_PORT} on the host")
    return int(port)


async def secret_kubeconfig(kube: Kube, namespace: str, cluster: str) -> str | None:
    sec = await kube.get(SECRET, namespace, f"{cluster}-kubeconfig")
    if not sec or "value" not in (sec.get("data") or {}):
        return None
    return base64.b64decode(sec["data"]["value"]).decode()


async def _docker_cluster(kube: Kube, namespace: str, cluster: str) -> dict[str, Any] | None:
    """The cluster's DockerCluster, or its docker-backed DevCluster (the same code records the LB's port on both)."""
    c = await kube.get(CLUSTER, namespace, cluster)
    ref = contract.ref(c, "spec", "infrastructureRef")
    g = {DOCKER_CLUSTER.kind: DOCKER_CLUSTER, DEV_CLUSTER.kind: DEV_CLUSTER}.get(ref["kind"]) if ref else None
    if not ref or g is None:
        return None
    return await kube.get(g, namespace, ref["name"])


def _recorded_port(dc: dict[str, Any] | None) -> int | None:
    v = ((dc or {}).get("metadata") or {}).get("annotations", {}).get(LB_HOST_PORT_ANNOTATION)
    return int(v) if v and str(v).isdigit() else None


async def recorded_host_port(kube: Kube, namespace: str, cluster: str) -> int | None:
    """The LB host port the Docker provider records on the cluster's DockerCluster (an annotation)."""
    return _recorded_port(await _docker_cluster(kube, namespace, cluster))


def published_endpoint(dc: dict[str, Any] | None) -> bool:
    """Whether the cluster's endpoint already is its load balancer's published port (a docker host with an
    `address`, docs/multihost.md): then the kubeconfig works from anywhere as it is."""
    ep = contract.control_plane_endpoint(dc) if dc else None
    port = _recorded_port(dc)
    return bool(ep and port and int(ep.get("port") or 0) == port)


async def workload_kubeconfig(kube: Kube, runtime: ContainerRuntime | Callable[[], ContainerRuntime],
                              namespace: str, cluster: str) -> str:
    """The workload kubeconfig for use from this host: https://127.0.0.1:<LB host port>. The port comes
    from the DockerCluster's annotation, else from docker (the LB container's published 6443)."""
    text = await secret_kubeconfig(kube, namespace, cluster)
    if text is None:
        raise KubeconfigError(f"secret {namespace}/{cluster}-kubeconfig does not exist yet "
                              "(the control plane is not initialized)")
    dc = await _docker_cluster(kube, namespace, cluster)
    if published_endpoint(dc) or (dc is not None and infrakinds.backend(dc) == infrakinds.BACKEND_IN_MEMORY):
        # an in-memory cluster's endpoint is its listener in the controllers process (docs/in-memory.md): no load
        # balancer, nothing to rewrite
        return text
    port = _recorded_port(dc)
    if port is None:
        rt = runtime() if callable(runtime) else runtime
        port = await asyncio.to_thread(lb_host_port, rt, namespace, cluster)
    return rewrite_server(text, f"https://127.0.0.1:{port}")


def cluster_ca(text: str | bytes | None) -> str | None:
    """The first cluster entry's certificate-authority-data: which cluster a kubeconfig is for, whatever its
    server (ours point at the host port, the secret's at the load balancer's network address)."""
    if not text:
        return None
    try:
        cfg: Any = kubeyaml.load(text)
        ca = cfg["clusters"][0]["cluster"].get("certificate-authority-data")
    except (yaml.YAMLError, KeyError, IndexError, TypeError, AttributeError):
        return None
    return str(ca) if ca else None


def remove_if_for(path: Path, secret_text: str | None) -> bool:
    """Remove the kubeconfig at `path` when it is for the cluster whose kubeconfig Secret held `secret_text` (same
    CA): `delete cluster` removes what `quickstart` wrote, as kind removes its context, and never a file that only
    shares the name (a management cluster's kubeconfig, a cluster of the same name in another namespace)."""
    want = cluster_ca(secret_text)
    try:
        have = cluster_ca(path.read_text())
    except OSError:
        return False
    if want is None or have != want:
        return False
    path.unlink(missing_ok=True)
    return True


def write_private(path: str | Path, text: str) -> Path:
    """Write a kubeconfig readable by its owner only."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, p)
    return p
