"""DockerCluster decisions (pure): names, labels, the load balancer container, its backends, and the
status/conditions to write. The controller (capd_py/controllers/dockercluster.py) does the I/O.

Upstream DockerCluster (v1beta2) has spec.controlPlaneEndpoint {host, port}, spec.failureDomains,
spec.loadBalancer {imageRepository, imageTag, customHAProxyConfigTemplateRef}; status.conditions
(Ready, LoadBalancerAvailable, Paused), status.initialization.provisioned, status.failureDomains.
It has no network field (upstream puts every cluster on the shared `kind` network); capd-py gives each
cluster its own bridge network `capd-py-<namespace>-<cluster>` unless the DockerCluster carries the
NETWORK_ANNOTATION naming a (shared) network, which is then created if missing and never removed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api import dockerhosts as dh
from capd_py.api.containers import ContainerInfo, ContainerSpec, NetworkInfo, PortMapping
from capd_py.api.infrakinds import docker_spec
from capd_py.api.labels import (
    CONTAINER_CLUSTER,
    CONTAINER_MACHINE,
    CONTAINER_MANAGED,
    CONTAINER_NAMESPACE,
    CONTAINER_ROLE,
    LB_HOST_PORT_ANNOTATION,
    NETWORK_ANNOTATION,
)
from capd_py.reconcile import addresses, coreutil, haproxy, ipfamily, placement, subnets

LOAD_BALANCER_AVAILABLE = "LoadBalancerAvailable"
# True when the Cluster's pod/service CIDRs overlap the management cluster's network or a host route (capd-py's
# own; upstream CAPD puts every cluster on one `kind` network and checks nothing)
CLUSTER_NETWORK_OVERLAP = "ClusterNetworkOverlap"
ROLE_LB = "load-balancer"
ROLE_CONTROL_PLANE = "control-plane"
ROLE_WORKER = "worker"
ROLE_MANAGEMENT = "management"  # the management cluster's node container (cli/management.py labels it so)
API_PORT = 6443

# reasons
R_AVAILABLE, R_NOT_AVAILABLE, R_DELETING = "Available", "NotAvailable", "Deleting"
R_IMAGE_NOT_FOUND = "ImageNotFound"
R_NAME_CONFLICT = "ContainerNameConflict"
R_RUNTIME_ERROR = "ContainerRuntimeError"
R_HOST_UNREACHABLE = placement.R_HOST_UNREACHABLE  # its docker host's daemon does not answer (docs/multihost.md)
R_READY, R_NOT_READY = "Ready", "NotReady"
R_WAITING_MACHINES = "WaitingForMachineContainersDeletion"
R_ENDPOINT_CHANGED = "EndpointChanged"
R_NETWORK_OVERLAP = "NetworkOverlap"    # the cluster's docker network overlaps (or would) its own CIDRs
R_INVALID_IP_FAMILY = "InvalidIPFamily"  # the Cluster's CIDRs name no usable IP family (upstream CAPD's error)
R_OVERLAP, R_NO_OVERLAP = "Overlap", "NoOverlap"

__all__ = ["LB_HOST_PORT_ANNOTATION", "NETWORK_ANNOTATION"]


def network_name(namespace: str, cluster: str, dc: dict[str, Any] | None = None) -> str:
    ann = ((dc or {}).get("metadata") or {}).get("annotations") or {}
    return ann.get(NETWORK_ANNOTATION) or f"capd-py-{namespace}-{cluster}"


def network_to_record(dc: dict[str, Any], default_network: str) -> str | None:
    """The docker network to record on a DockerCluster that names none, when the controllers have a default one
    (upstream CAPD's DOCKER_NETWORK, clusterctl's CAPD_DOCKER_NETWORK: every cluster joins that network instead of
    one of its own). Recorded once, before the cluster has a load balancer: it then stays the cluster's network
    whatever the setting becomes (a cluster made before it keeps its own network). None: nothing to record."""
    md = dc.get("metadata") or {}
    ann = md.get("annotations") or {}
    if not default_network or ann.get(NETWORK_ANNOTATION) or LB_HOST_PORT_ANNOTATION in ann \
            or contract.infra_provisioned(dc):
        return None
    return default_network


def network_is_shared(dc: dict[str, Any] | None) -> bool:
    return bool((((dc or {}).get("metadata") or {}).get("annotations") or {}).get(NETWORK_ANNOTATION))


def network_avoid(cluster: dict[str, Any] | None, management_cidrs: Iterable[str]) -> list[subnets.Taken]:
    """What the cluster's docker network must not overlap besides other networks and host routes: the
    Cluster's own pod and service CIDRs (a node network inside them routes nodes' and the load balancer's
    addresses into pods) and the management cluster's."""
    return [*subnets.cluster_cidrs(cluster), *subnets.management_cidrs(management_cidrs)]


def network_clash(net: NetworkInfo, cluster: dict[str, Any] | None) -> str | None:
    """Why an existing network (named by the user, or made before capd-py chose subnets) cannot carry the
    cluster: it overlaps the Cluster's own CIDRs, or the cluster is IPv6 or dual-stack and the network has no
    IPv6 subnet. None when it can."""
    family = cluster_family(cluster)
    if ipfamily.wants_ipv6(family) and not net.subnet6:
        return (f"docker network {net.name} has no IPv6 subnet and the cluster is {family} (spec.clusterNetwork): "
                "remove the network (capd-py makes it with an IPv6 subnet) or name one with IPv6 enabled")
    mine = subnets.cluster_cidrs(cluster)
    hits = [(s, t) for s in (net.subnets or (net.subnet,)) if s for t in subnets.overlapping(s, mine)]
    if not hits:
        return None
    what = "; ".join(f"its subnet {s} overlaps {t}" for s, t in hits)
    return (f"docker network {net.name}: {what}: nodes and the load balancer would be routed into pods; "
            "change spec.clusterNetwork or remove the network")


def overlap_news(dc: dict[str, Any], overlap: subnets.Overlap) -> str | None:
    """The message of a Warning event when the overlap is new or changed (the condition says it for as long as
    it lasts; the event tells whoever watches events)."""
    prev = cond.get(dc, CLUSTER_NETWORK_OVERLAP) or {}
    if overlap.any and (prev.get("status") != cond.TRUE or prev.get("message") != overlap.message()):
        return overlap.message()
    return None


def lb_container_name(cluster: str) -> str:
    return f"{cluster}-lb"


def cluster_labels(namespace: str, cluster: str) -> dict[str, str]:
    """Labels on every container/volume/network capd-py makes for a cluster (docker filters)."""
    return {CONTAINER_MANAGED: "true", CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: namespace}


def lb_labels(namespace: str, cluster: str) -> dict[str, str]:
    return {**cluster_labels(namespace, cluster), CONTAINER_ROLE: ROLE_LB}


def ours(info: ContainerInfo | None, namespace: str, cluster: str) -> bool:
    """A container we may adopt: it carries our labels for this cluster."""
    if info is None:
        return False
    want = cluster_labels(namespace, cluster)
    return all(info.labels.get(k) == v for k, v in want.items())


# Upstream CAPD's load balancer image: `<imageRepository>/haproxy:<imageTag>`, each part defaulted on its own
# (test/infrastructure/docker/internal/loadbalancer). `make images` tags capd-py's haproxy image under the default
# name, as it tags the node image `kindest/node:<version>`, so upstream's manifests run unchanged.
LB_IMAGE_NAME = "haproxy"
LB_DEFAULT_REPOSITORY = "kindest"
LB_DEFAULT_TAG = "v20230606-42a2262b"
DEFAULT_LB_IMAGE = f"{LB_DEFAULT_REPOSITORY}/{LB_IMAGE_NAME}:{LB_DEFAULT_TAG}"


def lb_image(dc: dict[str, Any], default_image: str = DEFAULT_LB_IMAGE) -> str:
    """The load balancer's image as upstream CAPD names it; `default_image` (CAPD_PY_HAPROXY_IMAGE) only when the
    DockerCluster names neither part, so a spec that names one part means the same image as upstream."""
    lb = docker_spec(dc).get("loadBalancer") or {}
    repo, tag = lb.get("imageRepository"), lb.get("imageTag")
    if not repo and not tag:
        return default_image
    return f"{str(repo or LB_DEFAULT_REPOSITORY).rstrip('/')}/{LB_IMAGE_NAME}:{tag or LB_DEFAULT_TAG}"


def lb_spec(namespace: str, cluster: str, image: str, network: str, dc: dict[str, Any] | None = None,
            net: NetworkInfo | None = None, publish_ip: str = "127.0.0.1") -> ContainerSpec:
    """The load balancer container. Once the DockerCluster has an endpoint and a recorded host port, a
    re-created load balancer takes both again (kubeconfigs and certificates name them; an IPv6 endpoint is the
    pair of the static IPv4 address asked for). `publish_ip`: 0.0.0.0 on a remote docker host, whose published
    port is the cluster's endpoint (capd_py.api.dockerhosts)."""
    name = lb_container_name(cluster)
    host = str((((dc or {}).get("spec") or {}).get("controlPlaneEndpoint") or {}).get("host") or "")
    ipv4 = addresses.paired_ipv4(net, host) if ":" in host else host
    return ContainerSpec(name=name, image=image, hostname=name, network=network,
                         labels=lb_labels(namespace, cluster),
                         ports=(PortMapping(API_PORT, recorded_host_port(dc), publish_ip),),
                         node=False, restart_policy="unless-stopped", ipv4=ipv4)


def cluster_family(cluster: dict[str, Any] | None) -> str:
    """The Cluster's IP family; an unusable one (mismatched CIDRs) is IPv4 here: the DockerCluster reports it
    (family_error) and makes nothing, machines of such a cluster never get that far."""
    try:
        return ipfamily.cluster_ip_family(cluster)
    except ipfamily.IPFamilyError:
        return ipfamily.IPV4


def family_error(cluster: dict[str, Any] | None) -> str | None:
    """Why the Cluster's spec.clusterNetwork names no usable IP family (upstream CAPD refuses to make the load
    balancer then), None when it does."""
    try:
        ipfamily.cluster_ip_family(cluster)
    except ipfamily.IPFamilyError as e:
        return f"spec.clusterNetwork of the Cluster: {e}: pods and services must be IPv4, IPv6 or dual-stack alike"
    return None


def address_of(c: ContainerInfo, network: str, family: str = ipfamily.IPV4) -> str:
    """The address a container serves the cluster on: IPv6 for IPv6 clusters, else IPv4 (as upstream CAPD)."""
    if family == ipfamily.IPV6:
        return c.ipv6.get(network) or ""
    return c.ipv4.get(network) or c.ipv6.get(network) or ""


def recorded_host_port(dc: dict[str, Any] | None) -> int:
    """The host port the load balancer publishes the API on, chosen at its first creation (0: none yet)."""
    v = (((dc or {}).get("metadata") or {}).get("annotations") or {}).get(LB_HOST_PORT_ANNOTATION) or ""
    return int(v) if v.isdigit() else 0


def lb_drift(lb: ContainerInfo | None, network: str, dc: dict[str, Any], net: NetworkInfo | None,
             family: str = ipfamily.IPV4) -> str | None:
    """Why a running load balancer no longer serves what the DockerCluster recorded (its address is
    spec.controlPlaneEndpoint.host, its host port the annotation): e.g. it was started again with another
    address on a network without static addresses, or made by an older capd-py with a port docker picks
    anew at every start. An endpoint outside the network's subnet was given by the user (a name, a host
    address): the load balancer's address is not compared with it. None when it matches."""
    if lb is None or not lb.running:
        return None
    host = str((((dc.get("spec") or {}).get("controlPlaneEndpoint") or {}).get("host")) or "")
    cur = address_of(lb, network, family)
    if host and cur and cur != host and (addresses.in_subnet(net, host) or bool(addresses.paired_ipv4(net, host))):
        return f"load balancer {lb.name} has address {cur} on network {network}, the cluster's endpoint is {host}"
    want, got = recorded_host_port(dc), lb.ports.get(API_PORT)
    if want and got and got != want:
        return f"load balancer {lb.name} publishes the API on host port {got}, the cluster recorded {want}"
    return None


def backends(containers: list[ContainerInfo], network: str, deleting: set[str],
             family: str = ipfamily.IPV4) -> list[haproxy.Backend]:
    """One backend per control-plane container with an address on the cluster network; machines
    being deleted (by Machine name, the CONTAINER_MACHINE label) get weight 0."""
    out = []
    for c in containers:
        if c.labels.get(CONTAINER_ROLE) != ROLE_CONTROL_PLANE:
            continue
        addr = address_of(c, network, family)
        if not addr:
            continue
        weight = 0 if c.labels.get(CONTAINER_MACHINE) in deleting or c.name in deleting else haproxy.DEFAULT_WEIGHT
        out.append(haproxy.Backend(c.name, addr, weight))
    return out


def lb_repairable(net: NetworkInfo | None, dc: dict[str, Any]) -> bool:
    """A drifted load balancer can be re-created in place: its network takes static addresses and the
    endpoint's address (if any) is one of them. Elsewhere docker would hand the new container yet another
    address."""
    if not addresses.static_capable(net) or net is None:
        return False
    host = str((((dc.get("spec") or {}).get("controlPlaneEndpoint") or {}).get("host")) or "")
    return not host or addresses.in_static_range(net, addresses.paired_ipv4(net, host) if ":" in host else host)


def endpoint(lb: ContainerInfo | None, network: str, family: str = ipfamily.IPV4) -> dict[str, Any] | None:
    if lb is None or not lb.running:
        return None
    host = address_of(lb, network, family)
    return {"host": host, "port": API_PORT} if host else None


def published_endpoint(lb: ContainerInfo | None, address: str) -> dict[str, Any] | None:
    """The endpoint on a remote docker host: the host's address and the load balancer's published port."""
    if lb is None or not lb.running or not lb.ports.get(API_PORT):
        return None
    return {"host": address, "port": lb.ports[API_PORT]}


def endpoint_patch(dc: dict[str, Any], want: dict[str, Any] | None) -> dict[str, Any] | None:
    """spec.controlPlaneEndpoint is set once; only an empty one is filled (a valid endpoint is never
    rewritten: certificates and kubeconfigs were issued for it)."""
    if not want:
        return None
    cur = (dc.get("spec") or {}).get("controlPlaneEndpoint") or {}
    if cur.get("host") and cur.get("port"):
        return None
    return {"spec": {"controlPlaneEndpoint": want}}


def host_port_patch(dc: dict[str, Any], lb: ContainerInfo | None) -> dict[str, Any] | None:
    """Record the load balancer's host port once; a recorded port is never rewritten (users' kubeconfigs
    name it: a load balancer publishing another one is drift, repaired by re-creating it)."""
    if lb is None or API_PORT not in lb.ports or recorded_host_port(dc):
        return None
    return {"metadata": {"annotations": {LB_HOST_PORT_ANNOTATION: str(lb.ports[API_PORT])}}}


@dataclass(frozen=True)
class LBState:
    ok: bool
    reason: str
    message: str = ""


def status(dc: dict[str, Any], lb: LBState, has_endpoint: bool,
           overlap: subnets.Overlap | None = None) -> dict[str, Any]:
    """The whole status to write (the `Paused` condition is the reconcile skeleton's). provisioned never flips
    back once true (contract). `overlap` None: the ClusterNetworkOverlap condition is left as it is (not looked at
    in this pass)."""
    st = dict(dc.get("status") or {})
    gen = (dc.get("metadata") or {}).get("generation")
    conds = st.get("conditions")
    if overlap is not None:
        conds = cond.set_condition(conds, CLUSTER_NETWORK_OVERLAP, overlap.any,
                                   R_OVERLAP if overlap.any else R_NO_OVERLAP, overlap.message(),
                                   observed_generation=gen)
    conds = cond.set_condition(conds, LOAD_BALANCER_AVAILABLE, lb.ok, lb.reason, lb.message, observed_generation=gen)
    ready = lb.ok and has_endpoint
    msg = "" if ready else (lb.message or ("waiting for the load balancer endpoint" if lb.ok else lb.reason))
    conds = cond.set_condition(conds, cond.READY, ready, R_READY if ready else R_NOT_READY, msg,
                               observed_generation=gen)
    st["conditions"] = conds
    if ready or ((st.get("initialization") or {}).get("provisioned")):
        st["initialization"] = {**(st.get("initialization") or {}), "provisioned": True}
    # only the failure domains on the cluster's own docker host are offered (capd_py/reconcile/placement.py)
    domains = placement.domains_on_host(docker_spec(dc).get("failureDomains"), dh.host_of(dc) or dh.LOCAL)
    if domains.named or cond.get({"status": st}, placement.FAILURE_DOMAIN_HOSTS) is not None:
        st["conditions"] = cond.set_condition(
            st["conditions"], placement.FAILURE_DOMAIN_HOSTS, not domains.refused,
            placement.R_FD_OTHER_HOST if domains.refused else placement.R_FD_ON_CLUSTER_HOST, domains.message(),
            observed_generation=gen)
    if domains.usable:
        st["failureDomains"] = list(domains.usable)
    else:
        st.pop("failureDomains", None)
    return st


def deleting_status(dc: dict[str, Any], message: str) -> dict[str, Any]:
    st = dict(dc.get("status") or {})
    gen = (dc.get("metadata") or {}).get("generation")
    conds = cond.set_condition(st.get("conditions"), LOAD_BALANCER_AVAILABLE, False, R_DELETING, message,
                               observed_generation=gen)
    st["conditions"] = cond.set_condition(conds, cond.READY, False, R_DELETING, message, observed_generation=gen)
    return st


def deleting_machines(machines: Iterable[dict[str, Any]], docker_machines: Iterable[dict[str, Any]]) -> set[str]:
    """Names of the Machines on their way out, given a cluster's (control-plane) Machines and its
    DockerMachines: a deleting Machine, or a Machine whose DockerMachine is deleting. Their load
    balancer backends get weight 0."""
    out = {m["metadata"]["name"] for m in machines if coreutil.is_deleting(m)}
    for dm in docker_machines:
        owner = contract.controller_owner(dm, "Machine")
        if owner and coreutil.is_deleting(dm):
            out.add(owner["name"])
    return out
