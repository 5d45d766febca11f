"""Docker hosts as configuration (issue 32): which docker endpoints the Docker provider may place clusters on.

Stored in the ConfigMap `capd-py-system/capd-py-docker-hosts`, one data key per host (the host's name) whose value
is a small YAML/JSON document:

    endpoint: tcp://10.0.0.7:2376          # unix:///path, tcp://HOST:PORT, ssh://[USER@]HOST[:PORT]
    tlsSecretName: host-b-tls              # tcp:// only: Secret in capd-py-system with ca.pem, cert.pem, key.pem
    sshSecretName: host-c-ssh              # ssh:// only (optional): Secret in capd-py-system with ssh-privatekey,
                                           # known_hosts; without it the machine's own ssh configuration applies
    labels: {zone: a}                      # for placement selectors and spreading
    capacity: {clusters: 4}                # at most this many workload clusters (absent / 0: no limit)
    address: 10.0.0.7                      # where the management cluster reaches this host's published ports

A host with an `address` publishes each load balancer's API port on all its interfaces and the cluster's
`spec.controlPlaneEndpoint` is `address:port` (the management cluster cannot route to a remote host's docker
bridges); a host without one (a daemon on the management machine) keeps the load balancer's container address,
as a single-host capd-py does. ssh:// and tcp:// hosts default `address` to the endpoint's host name.

TLS and ssh material lives in a Secret (never in the ConfigMap). Without the ConfigMap there is exactly one host,
`local`: the docker endpoint of the controllers' own environment (DOCKER_HOST or /var/run/docker.sock), as before
hosts existed. The ConfigMap may define `local` itself (to give it labels or a capacity); otherwise `local` is always
added. Upstream's DockerCluster has no field naming a docker host, so the choice is an annotation
(`DOCKER_HOST_ANNOTATION`), which keeps upstream manifests valid unchanged.

Pure: parsing, validation and rendering only; the clients are made in capd_py.runtime.endpoints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import yaml

from capd_py.api import kubeyaml
from capd_py.api.admission import checks

NAMESPACE = "capd-py-system"
CONFIGMAP = "capd-py-docker-hosts"
LOCAL = "local"
# on a DockerCluster: the host its containers live on (set by the user, or by the scheduler once, then kept);
# its DockerMachines follow it
DOCKER_HOST_ANNOTATION = "capd-py.dev/docker-host"
# in a DockerCluster failure domain's `attributes` (upstream's FailureDomain has no host field): the docker host of the
# machines placed in that domain (capd_py.reconcile.placement.domains_on_host says which are accepted)
FAILURE_DOMAIN_HOST_ATTRIBUTE = DOCKER_HOST_ANNOTATION
# on a DockerCluster: only hosts whose labels match (`k=v,k2=v2`) are candidates for the scheduler
HOST_SELECTOR_ANNOTATION = "capd-py.dev/docker-host-selector"
# on a DockerCluster: spread clusters across the values of this host label (fewest clusters per value first)
SPREAD_ANNOTATION = "capd-py.dev/docker-host-spread"
SCHEMES = ("unix", "tcp", "ssh")
TLS_KEYS = ("ca.pem", "cert.pem", "key.pem")
# `ssh-privatekey` as Kubernetes' kubernetes.io/ssh-auth Secrets name it; `known_hosts` in OpenSSH's format
SSH_KEYS = ("ssh-privatekey", "known_hosts")
_FIELDS = {"endpoint", "tlsSecretName", "sshSecretName", "labels", "capacity", "insecure", "address"}


class HostConfigError(ValueError):
    """The hosts configuration is invalid; the message names the host and the field."""


@dataclass(frozen=True)
class DockerHost:
    name: str
    endpoint: str = ""            # "" only for the implicit `local` host: the environment's docker endpoint
    tls_secret: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    max_clusters: int = 0         # 0: no limit
    insecure: bool = False        # tcp:// without TLS, explicitly asked for
    address: str = ""             # where published ports are reached from the management cluster ("": bridges)
    ssh_secret: str = ""

    @property
    def scheme(self) -> str:
        return urlsplit(self.endpoint).scheme if self.endpoint else "unix"

    @property
    def secret(self) -> str:
        """The Secret (in NAMESPACE) holding this host's credentials: its TLS or its ssh material ("": none)."""
        return self.tls_secret or self.ssh_secret

    @property
    def secret_keys(self) -> tuple[str, ...]:
        return TLS_KEYS if self.tls_secret else SSH_KEYS if self.ssh_secret else ()

    def to_data(self) -> str:
        """The ConfigMap value for this host (inverse of `parse_host`)."""
        doc: dict[str, Any] = {"endpoint": self.endpoint}
        if self.tls_secret:
            doc["tlsSecretName"] = self.tls_secret
        if self.ssh_secret:
            doc["sshSecretName"] = self.ssh_secret
        if self.insecure:
            doc["insecure"] = True
        if self.labels:
            doc["labels"] = dict(sorted(self.labels.items()))
        if self.max_clusters:
            doc["capacity"] = {"clusters": self.max_clusters}
        if self.address and self.address != default_address(self.endpoint):
            doc["address"] = self.address
        return yaml.safe_dump(doc, sort_keys=False)


LOCAL_HOST = DockerHost(LOCAL)


def endpoint_errors(endpoint: str) -> list[str]:
    """What is wrong with an endpoint URL (empty: nothing)."""
    u = urlsplit(endpoint)
    if u.scheme not in SCHEMES:
        return [f"endpoint {endpoint!r}: scheme must be one of {', '.join(s + '://' for s in SCHEMES)}"]
    if u.scheme == "unix":
        return [] if u.path.startswith("/") and not u.netloc else [
            f"endpoint {endpoint!r}: a unix endpoint is unix:///absolute/path"]
    errs = []
    if not u.hostname:
        errs.append(f"endpoint {endpoint!r}: no host")
    try:
        port = u.port
    except ValueError:
        errs.append(f"endpoint {endpoint!r}: the port is not a number in 1-65535")
    else:
        if u.scheme == "tcp" and port is None:
            errs.append(f"endpoint {endpoint!r}: a tcp endpoint needs a port (2376 for TLS)")
    if u.path not in ("", "/"):
        errs.append(f"endpoint {endpoint!r}: no path expected")
    return errs


def parse_host(name: str, value: str) -> DockerHost:
    """One ConfigMap entry. HostConfigError names what is wrong."""
    where = f"docker host {name!r}"
    if not checks.is_dns1123_label(name):
        raise HostConfigError(f"{where}: the name must be a lowercase RFC 1123 label (a-z, 0-9, '-')")
    try:
        doc = kubeyaml.load(value)
    except yaml.YAMLError as e:
        raise HostConfigError(f"{where}: not YAML: {e}") from e
    if not isinstance(doc, dict):
        raise HostConfigError(f"{where}: expected a mapping with at least `endpoint`")
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        raise HostConfigError(f"{where}: unknown field(s) {', '.join(unknown)} (known: {', '.join(sorted(_FIELDS))})")
    endpoint = doc.get("endpoint")
    if not isinstance(endpoint, str) or not endpoint:
        raise HostConfigError(f"{where}: `endpoint` is required (unix://, tcp:// or ssh://)")
    errs = endpoint_errors(endpoint)
    if errs:
        raise HostConfigError(f"{where}: {'; '.join(errs)}")
    tls = doc.get("tlsSecretName") or ""
    ssh = doc.get("sshSecretName") or ""
    insecure = doc.get("insecure", False)
    if not isinstance(tls, str) or not isinstance(ssh, str) or not isinstance(insecure, bool):
        raise HostConfigError(f"{where}: `tlsSecretName` and `sshSecretName` are strings, `insecure` a boolean")
    scheme = urlsplit(endpoint).scheme
    if tls and scheme != "tcp":
        raise HostConfigError(f"{where}: `tlsSecretName` applies to tcp:// endpoints only")
    if ssh and scheme != "ssh":
        raise HostConfigError(f"{where}: `sshSecretName` applies to ssh:// endpoints only")
    if scheme == "tcp" and not tls and not insecure:
        raise HostConfigError(f"{where}: a tcp:// endpoint needs `tlsSecretName` (a Secret with "
                              f"{', '.join(TLS_KEYS)}), or `insecure: true` to use it unencrypted")
    labels = doc.get("labels") or {}
    if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise HostConfigError(f"{where}: `labels` maps strings to strings")
    cap = doc.get("capacity") or {}
    clusters = cap.get("clusters", 0) if isinstance(cap, dict) else None
    if not isinstance(clusters, int) or isinstance(clusters, bool) or clusters < 0 or set(cap) - {"clusters"}:
        raise HostConfigError(f"{where}: `capacity` is {{clusters: N}} with N >= 0 (0: no limit)")
    address = doc.get("address") or default_address(endpoint)
    if not isinstance(address, str) or "/" in address or " " in address:
        raise HostConfigError(f"{where}: `address` is a host name or IP address")
    return DockerHost(name, endpoint, tls, dict(labels), clusters, insecure, address, ssh)


def default_address(endpoint: str) -> str:
    """A remote endpoint's host name (ssh://, tcp://); "" for a unix socket (a daemon on this machine)."""
    u = urlsplit(endpoint)
    return (u.hostname or "") if u.scheme in ("ssh", "tcp") else ""


def parse_hosts(data: Mapping[str, str] | None) -> dict[str, DockerHost]:
    """Every host of the ConfigMap's data (None: no ConfigMap), `local` included. HostConfigError on the first
    invalid entry: a half-read configuration would place clusters on the wrong hosts."""
    hosts = {name: parse_host(name, value) for name, value in sorted((data or {}).items())}
    hosts.setdefault(LOCAL, LOCAL_HOST)
    return hosts


def parse_selector(text: str) -> dict[str, str]:
    """`k=v,k2=v2` -> {k: v, k2: v2}. HostConfigError when a term has no `=`."""
    out: dict[str, str] = {}
    for term in (t.strip() for t in text.split(",")):
        if not term:
            continue
        k, eq, v = term.partition("=")
        if not eq or not k.strip():
            raise HostConfigError(f"host selector {text!r}: each term is KEY=VALUE")
        out[k.strip()] = v.strip()
    return out


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def host_of(docker_cluster: Mapping[str, Any] | None) -> str:
    """The host a DockerCluster's containers are on ("" while not placed)."""
    return annotations_of(docker_cluster or {}).get(DOCKER_HOST_ANNOTATION, "")
