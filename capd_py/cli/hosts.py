"""`capd-py host add|list|remove` (issue 32): the docker hosts ConfigMap `capd-py-system/capd-py-docker-hosts`
(format and rules: capd_py/api/dockerhosts.py), and the runtime of a host or of a cluster's host for the other
commands (`load image --host`). Every entry written is parsed back first, so the CLI never writes an entry the
controllers would refuse."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from capd_py.api import dockerhosts as dh
from capd_py.api.gvk import CLUSTER, CONFIG_MAP, DOCKER_CLUSTER, NAMESPACE, SECRET
from capd_py.kube import hostsecrets
from capd_py.runtime import endpoints
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_


class HostError(Exception):
    """Nothing was changed: say why (exit 1)."""


def tls_secret_name(host: str) -> str:
    return f"{host}-docker-tls"


def ssh_secret_name(host: str) -> str:
    return f"{host}-docker-ssh"


async def read(kube: Any) -> tuple[dict[str, Any] | None, dict[str, dh.DockerHost]]:
    cm = await kube.get(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP)
    try:
        return cm, dh.parse_hosts((cm or {}).get("data"))
    except dh.HostConfigError as e:
        raise HostError(f"{dh.NAMESPACE}/{dh.CONFIGMAP} is invalid: {e}") from e


async def _ensure_namespace(kube: Any) -> None:
    if await kube.get(NAMESPACE, None, dh.NAMESPACE) is None:
        await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": dh.NAMESPACE}})


async def add(kube: Any, host: dh.DockerHost, material: Mapping[str, bytes] | None = None) -> bool:
    """Add or replace `host` (and its Secret: TLS files, or the ssh key and known_hosts). Returns whether it
    replaced an entry."""
    value = host.to_data()
    dh.parse_host(host.name, value)  # what the controllers will read; raises HostConfigError
    await _ensure_namespace(kube)
    if material:
        # kubernetes.io/ssh-auth: the API server checks `ssh-privatekey` is there
        kind = "kubernetes.io/ssh-auth" if host.ssh_secret else "Opaque"
        secret = {"apiVersion": "v1", "kind": "Secret", "type": kind,
                  "metadata": {"namespace": dh.NAMESPACE, "name": host.secret},
                  "data": {k: base64.b64encode(material[k]).decode() for k in host.secret_keys}}
        if await kube.get(SECRET, dh.NAMESPACE, host.secret) is None:
            await kube.create(SECRET, secret)
        else:
            await kube.merge_patch(SECRET, dh.NAMESPACE, host.secret, {"data": secret["data"]})
    cm, hosts = await read(kube)
    replaced = cm is not None and host.name in (cm.get("data") or {})
    if cm is None:
        await kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"namespace": dh.NAMESPACE, "name": dh.CONFIGMAP},
                                       "data": {host.name: value}})
    else:
        await kube.merge_patch(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP, {"data": {host.name: value}})
    return replaced


async def placed_clusters(kube: Any) -> dict[str, list[str]]:
    """Host name -> the DockerClusters (`ns/name`) placed on it (unplaced ones count for `local`)."""
    out: dict[str, list[str]] = {}
    for dc in await kube.list(DOCKER_CLUSTER):
        md = dc["metadata"]
        out.setdefault(dh.host_of(dc) or dh.LOCAL, []).append(f"{md.get('namespace')}/{md['name']}")
    return out


async def remove(kube: Any, name: str, force: bool = False) -> None:
    """Remove `name` from the configuration (and its Secret when capd-py made it). Refused while clusters are
    placed on it, unless `force`: their controllers can then no longer reach their containers."""
    cm, hosts = await read(kube)
    if cm is None or name not in (cm.get("data") or {}):
        raise HostError(f"docker host {name!r} is not in {dh.NAMESPACE}/{dh.CONFIGMAP} "
                        f"(configured: {', '.join(sorted(set(hosts) - {dh.LOCAL})) or 'none'})")
    on = (await placed_clusters(kube)).get(name, [])
    if on and not force:
        raise HostError(f"docker host {name!r} still holds cluster(s) {', '.join(sorted(on))}: delete them first "
                        "(or --force: their containers are then left unmanaged on that host)")
    await kube.merge_patch(CONFIG_MAP, dh.NAMESPACE, dh.CONFIGMAP, {"data": {name: None}})
    secret = hosts[name].secret
    if secret in (tls_secret_name(name), ssh_secret_name(name)) and \
            await kube.get(SECRET, dh.NAMESPACE, secret) is not None:
        await kube.delete(SECRET, dh.NAMESPACE, secret)


@dataclass(frozen=True)
class Row:
    host: dh.DockerHost
    clusters: list[str]


async def listing(kube: Any) -> list[Row]:
    _cm, hosts = await read(kube)
    placed = await placed_clusters(kube)
    return [Row(h, sorted(placed.get(n, []))) for n, h in sorted(hosts.items())]


async def runtime_of(kube: Any, name: str) -> ContainerRuntime:
    """The runtime of configured host `name` (HostError when unknown or its TLS Secret is missing)."""
    _cm, hosts = await read(kube)
    if name not in hosts:
        raise HostError(f"docker host {name!r} is not configured (known: {', '.join(sorted(hosts))})")
    host = hosts[name]
    try:
        material = await hostsecrets.material(kube, host)
    except hostsecrets.MissingSecret as e:
        raise HostError(str(e)) from e
    return endpoints.runtime_for(host, material)


async def cluster_host(kube: Any, namespace: str, cluster: str) -> str:
    """The docker host a workload cluster is placed on (its DockerCluster's annotation; `local` when none)."""
    c = await kube.get(CLUSTER, namespace, cluster)
    ref = ((c or {}).get("spec") or {}).get("infrastructureRef") or {}
    if ref.get("kind") != DOCKER_CLUSTER.kind:
        return dh.LOCAL
    return dh.host_of(await kube.get(DOCKER_CLUSTER, namespace, ref["name"])) or dh.LOCAL


async def cluster_runtime(kube: Any, namespace: str, cluster: str) -> tuple[str, ContainerRuntime]:
    """(host name, runtime) of the docker host a workload cluster is placed on: what `stop|start cluster`,
    `export logs` and `get nodes` talk to (a cluster on another host has no container on the local daemon)."""
    host = await cluster_host(kube, namespace, cluster)
    try:
        return host, await runtime_of(kube, host)
    except RuntimeError_ as e:  # the SDK asks the daemon its API version: a host that is down says so here
        raise HostError(f"cluster {namespace}/{cluster} is on docker host {host}: {e}") from e
