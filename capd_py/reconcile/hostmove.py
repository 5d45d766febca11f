"""What `capd-py move` takes of the docker hosts configuration (issue 32). Pure: the hosts the moved DockerClusters
are placed on and both management clusters' ConfigMap data in; the entries to add at the target (and their TLS or ssh
Secrets), or why the move must not start.

A moved DockerCluster keeps its `capd-py.dev/docker-host` annotation (it is part of the object), so the target's
controllers look that host up in *their* `capd-py-system/capd-py-docker-hosts`. Without the entry there they could
not reach the cluster's containers (`UnknownDockerHost`, deletion waiting): so the entries travel with the clusters.
- `local` is never copied: it is each management cluster's own docker endpoint (as before hosts existed).
- An entry the target already has with the same content: nothing to do. With other content (another endpoint
  under the same name): refused, nothing changed — which of the two is right is the user's call.
- A cluster placed on a host the source does not configure (removed with `host remove --force`): refused; its
  containers cannot be found from either side.
- The target's ConfigMap is invalid: refused (writing next to an entry the controllers cannot read would not help).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import dockerhosts as dh


@dataclass(frozen=True)
class HostCopy:
    add: dict[str, str] = field(default_factory=dict)          # host name -> ConfigMap value, for the target
    secrets: tuple[str, ...] = ()                             # their TLS/ssh Secrets (in capd-py-system)
    problems: tuple[str, ...] = ()                            # why the move must not start ([]: it may)

    def lines(self) -> list[str]:
        return [f"docker host {n} ({dh.parse_host(n, v).endpoint}) is added to the target's "
                f"{dh.NAMESPACE}/{dh.CONFIGMAP}" for n, v in sorted(self.add.items())]


def placed_hosts(objects: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Host name -> the moved DockerClusters (`ns/name`) placed on it, `local` and unplaced ones left out."""
    out: dict[str, list[str]] = {}
    for o in objects:
        host = dh.host_of(o)
        if host and host != dh.LOCAL:
            md = o.get("metadata") or {}
            out.setdefault(host, []).append(f"{md.get('namespace')}/{md.get('name')}")
    return out


def plan(placed: Mapping[str, list[str]], source: Mapping[str, str] | None,
         target: Mapping[str, str] | None) -> HostCopy:
    """`placed`: placed_hosts of the moved objects; `source` / `target`: each side's ConfigMap data (None: none)."""
    problems: list[str] = []
    try:
        dh.parse_hosts(target)
    except dh.HostConfigError as e:
        return HostCopy(problems=(f"the target's {dh.NAMESPACE}/{dh.CONFIGMAP} is invalid: {e}",))
    src, tgt = dict(source or {}), dict(target or {})
    add: dict[str, str] = {}
    secrets: list[str] = []
    for name, clusters in sorted(placed.items()):
        who = ", ".join(sorted(clusters))
        if name not in src:
            problems.append(f"{who} placed on docker host {name!r}, which the source does not configure "
                            f"(`capd-py host add {name} ...` at the source first)")
            continue
        try:
            want = dh.parse_host(name, src[name])
        except dh.HostConfigError as e:
            problems.append(f"the source's {e}")
            continue
        if name in tgt:
            if dh.parse_host(name, tgt[name]) != want:
                problems.append(f"docker host {name!r} ({who}) is configured differently at the target "
                                f"(source: {want.endpoint}; target: {dh.parse_host(name, tgt[name]).endpoint}, "
                                "or other fields): make them agree first")
            continue
        add[name] = src[name]
        if want.secret:  # its TLS or ssh credentials
            secrets.append(want.secret)
    if problems:
        return HostCopy(problems=tuple(problems))
    return HostCopy(add, tuple(sorted(set(secrets))))
