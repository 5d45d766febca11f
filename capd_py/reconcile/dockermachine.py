"""DockerMachine decisions (pure): container name/image/labels/spec, provider ID, addresses, and the
status/conditions for each provisioning phase. The controller (capd_py/controllers/dockermachine.py)
does the I/O around these.

Upstream DockerMachine (v1beta2): spec.providerID (`docker:////<container name>`), spec.customImage,
spec.preLoadImages (loaded before the bootstrap: capd_py/reconcile/imageload.py), spec.extraMounts
[{containerPath, hostPath, readOnly}], spec.bootstrapTimeout
(default 5m); status.conditions, status.initialization.provisioned, status.addresses,
status.failureDomain. The container is named `<cluster>-<machine>` unless the Machine name already
starts with the cluster name (then the Machine name).
"""

from __future__ import annotations

import datetime as _dt
import enum
import re
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api.containers import ContainerInfo, ContainerSpec, Mount
from capd_py.api.infrakinds import docker_spec
from capd_py.api.labels import CONTAINER_MACHINE, CONTAINER_ROLE
from capd_py.reconcile import coreutil, ipfamily
from capd_py.reconcile.dockercluster import ROLE_CONTROL_PLANE, ROLE_WORKER, cluster_labels

CONTAINER_PROVISIONED = "ContainerProvisioned"
BOOTSTRAP_EXEC_SUCCEEDED = "BootstrapExecSucceeded"

DEFAULT_BOOTSTRAP_TIMEOUT = 300.0  # upstream default 5m


class Phase(enum.Enum):
    WAITING_CLUSTER_INFRA = "WaitingForClusterInfrastructureReady"
    WAITING_BOOTSTRAP_DATA = "WaitingForBootstrapData"
    WAITING_CONTROL_PLANE = "WaitingForControlPlaneInitialized"
    IMAGE_NOT_FOUND = "ImageNotFound"
    CONTAINER_ERROR = "ContainerError"
    HOST_UNREACHABLE = "DockerHostUnreachable"  # its docker host's daemon does not answer (docs/multihost.md)
    FAILURE_DOMAIN_HOST = "FailureDomainOnOtherDockerHost"  # its failure domain names another docker host
    NAME_CONFLICT = "ContainerNameConflict"
    CONTAINER_DELETED = "ContainerDeleted"      # provisioned once, container gone: not recreated
    WAITING_SYSTEMD = "WaitingForSystemd"
    PRELOADING_IMAGES = "PreLoadingImages"          # spec.preLoadImages + recorded images going into containerd
    PRELOAD_IMAGES_FAILED = "PreLoadImagesFailed"   # one is not in the local docker daemon, or its import failed
    INVALID_BOOTSTRAP_DATA = "InvalidBootstrapData"
    BOOTSTRAPPING = "Bootstrapping"
    BOOTSTRAP_TIMEOUT = "BootstrapTimeout"
    BOOTSTRAP_FAILED = "BootstrapFailed"
    PROVISIONED = "Provisioned"
    ADDRESS_CHANGED = "ContainerAddressChanged"  # provisioned, then came back with another address
    DELETING = "Deleting"


_WAITING_FOR_DATA = {Phase.WAITING_BOOTSTRAP_DATA, Phase.WAITING_CONTROL_PLANE}
_BEFORE_CONTAINER = {Phase.WAITING_CLUSTER_INFRA, Phase.WAITING_BOOTSTRAP_DATA, Phase.WAITING_CONTROL_PLANE,
                     Phase.IMAGE_NOT_FOUND, Phase.CONTAINER_ERROR, Phase.NAME_CONFLICT, Phase.CONTAINER_DELETED,
                     Phase.FAILURE_DOMAIN_HOST, Phase.HOST_UNREACHABLE}


def container_name(cluster: str, machine: str) -> str:
    return machine if machine.startswith(cluster) else f"{cluster}-{machine}"


def provider_id(name: str) -> str:
    return f"docker:////{name}"


# kubelet's taint on a Node of an external cloud provider (`--cloud-provider=external`, e.g. upstream's dual-stack
# flavors) until the cloud provider initialized it; CAPD plays that cloud provider, as upstream CAPD does
CLOUD_PROVIDER_TAINT = "node.cloudprovider.kubernetes.io/uninitialized"


def cloud_provider_uninitialized(node: dict[str, Any] | None) -> bool:
    return any(t.get("key") == CLOUD_PROVIDER_TAINT for t in contract.dig(node, "spec", "taints", default=[]) or [])


@dataclass(frozen=True)
class NodePatch:
    spec: dict[str, Any] | None = None     # merge patch of the Node
    status: dict[str, Any] | None = None   # merge patch of its status subresource


def node_patch(node: dict[str, Any], pid: str, machine_addresses: list[dict[str, str]]) -> NodePatch:
    """What CAPD does to its machines' Nodes as their cloud provider: spec.providerID (kubelet in a container sets
    none); on a Node still carrying the uninitialized taint, the machine's InternalIP addresses appended to the
    Node's (order kept: kubelet gives host-network pods the first of each family) and the taint removed."""
    spec: dict[str, Any] = {}
    status: dict[str, Any] | None = None
    if not contract.provider_id(node):
        spec["providerID"] = pid
    if cloud_provider_uninitialized(node):
        have = list(contract.dig(node, "status", "addresses", default=[]) or [])
        pairs = {(a.get("type"), a.get("address")) for a in have}
        new = [{"type": "InternalIP", "address": a["address"]} for a in machine_addresses
               if a.get("type") == "InternalIP" and ("InternalIP", a.get("address")) not in pairs]
        if new:
            status = {"addresses": have + new}
        spec["taints"] = [t for t in contract.dig(node, "spec", "taints", default=[]) or []
                          if t.get("key") != CLOUD_PROVIDER_TAINT] or None
    return NodePatch(spec or None, status)


def machines_awaiting_provider_id(cluster: str, machines: list[dict[str, Any]], node: dict[str, Any]) -> list[str]:
    """Names of the Machines whose node container registered `node` and which still have to set its
    spec.providerID (kubelet in a container sets none) or initialize it as its cloud provider: the node is named
    after the container."""
    if contract.provider_id(node) and not cloud_provider_uninitialized(node):
        return []
    name = contract.dig(node, "metadata", "name")
    return [m["metadata"]["name"] for m in machines if container_name(cluster, m["metadata"]["name"]) == name]


def is_control_plane(machine: dict[str, Any] | None) -> bool:
    labels = ((machine or {}).get("metadata") or {}).get("labels") or {}
    return "cluster.x-k8s.io/control-plane" in labels


def machine_labels(namespace: str, cluster: str, machine: str, control_plane: bool) -> dict[str, str]:
    return {**cluster_labels(namespace, cluster), CONTAINER_MACHINE: machine,
            CONTAINER_ROLE: ROLE_CONTROL_PLANE if control_plane else ROLE_WORKER}


_SEMVER = re.compile(r"^v?\d+\.\d+\.\d+")


def node_image(dm: dict[str, Any], machine: dict[str, Any] | None, repository: str) -> str | None:
    """spec.customImage, else `<repository>:<Machine spec.version>` (v-prefixed); None without a version."""
    custom = docker_spec(dm).get("customImage")
    if custom:
        return str(custom)
    version = ((machine or {}).get("spec") or {}).get("version")
    if not version:
        return None
    v = str(version)
    if _SEMVER.match(v) and not v.startswith("v"):
        v = "v" + v
    return f"{repository}:{v.replace('+', '_')}"


IMAGE_RECHECK_SECONDS = 15.0  # how often a DockerMachine waiting for its node image looks again


@dataclass(frozen=True)
class ImageDecision:
    """Whether the node container can be created now. `image` None or `present` False: no container, the
    DockerMachine reports ContainerProvisioned=False / ImageNotFound with `message`, and (for a missing
    image) looks again after `requeue_after`, so building the image later lets the machine proceed."""
    image: str | None
    present: bool
    message: str = ""
    requeue_after: float | None = None

    @property
    def ok(self) -> bool:
        return self.image is not None and self.present


def image_decision(dm: dict[str, Any], machine: dict[str, Any] | None, image: str | None,
                   present: bool) -> ImageDecision:
    """The decision for the image `node_image` chose and whether the runtime has it locally (capd-py never
    pulls). A Machine's version is any semver, as upstream admits it; a version nobody built a node image for is
    this condition, naming the `make images K8S_VERSION=<version>` that builds it."""
    if image is None:
        return ImageDecision(None, False, "the Machine has no spec.version and the DockerMachine no "
                                          "spec.customImage: cannot choose a node image")
    if present:
        return ImageDecision(image, True)
    if docker_spec(dm).get("customImage"):
        msg = (f"node image {image} (spec.customImage) is not present locally and capd-py never pulls images: "
               "load it into the docker daemon (docker pull / docker load); the machine proceeds once it exists")
    else:
        version = str(((machine or {}).get("spec") or {}).get("version"))
        msg = (f"no node image for Kubernetes {version}: {image} is not present locally and capd-py never pulls "
               f"images; build it with `make images K8S_VERSION={version}`, the machine proceeds once it exists")
    return ImageDecision(image, False, msg, IMAGE_RECHECK_SECONDS)


def extra_mounts(dm: dict[str, Any]) -> tuple[Mount, ...]:
    out = []
    for m in docker_spec(dm).get("extraMounts") or []:
        if m.get("containerPath") and m.get("hostPath"):
            out.append(Mount(source=m["hostPath"], target=m["containerPath"], read_only=bool(m.get("readOnly"))))
    return tuple(out)


# Inside an IPv6 or dual-stack cluster's node: IPv6 on (docker turns it off in containers by default) and
# forwarded (kubeadm's preflight checks it; pods' traffic is routed through the node), as kind and upstream CAPD.
IPV6_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "0", "net.ipv6.conf.all.forwarding": "1"}


def node_spec(namespace: str, cluster: str, machine_name: str, dm: dict[str, Any], image: str, network: str,
              control_plane: bool, privileged_mode: str, family: str = ipfamily.IPV4) -> ContainerSpec:
    name = container_name(cluster, machine_name)
    return ContainerSpec(name=name, image=image, hostname=name, network=network,
                         labels=machine_labels(namespace, cluster, machine_name, control_plane),
                         mounts=extra_mounts(dm), privileged_mode=privileged_mode, node=True,
                         restart_policy="unless-stopped",
                         sysctls=dict(IPV6_SYSCTLS) if ipfamily.wants_ipv6(family) else {})


def bootstrap_timeout(dm: dict[str, Any]) -> float:
    """spec.bootstrapTimeout is a metav1.Duration string like "5m", "90s", "1h30m"."""
    v = docker_spec(dm).get("bootstrapTimeout")
    if not v:
        return DEFAULT_BOOTSTRAP_TIMEOUT
    total, ok = 0.0, False
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)(h|ms|m|s)", str(v)):
        ok = True
        total += float(num) * {"h": 3600, "m": 60, "s": 1, "ms": 0.001}[unit]
    return total if ok else DEFAULT_BOOTSTRAP_TIMEOUT


def addresses(info: ContainerInfo | None, network: str, family: str = ipfamily.IPV4) -> list[dict[str, str]]:
    """Hostname, then InternalIP and ExternalIP of each address of the cluster's family (IPv6 only for IPv6
    clusters, IPv4 then IPv6 for dual-stack ones), as upstream CAPD."""
    if info is None:
        return []
    out = [{"type": "Hostname", "address": info.name}]
    for fam in (info.ipv6,) if family == ipfamily.IPV6 else (info.ipv4, info.ipv6):
        ip = fam.get(network)
        if ip:
            out += [{"type": "InternalIP", "address": ip}, {"type": "ExternalIP", "address": ip}]
    return out


def address_change(dm: dict[str, Any], info: ContainerInfo | None, network: str, control_plane: bool,
                   family: str = ipfamily.IPV4) -> str | None:
    """A provisioned node container running with another address than the one recorded in status.addresses
    (started again on a network without static addresses): its kubelet, certificates and, for a control
    plane, its etcd member still name the old one, so it cannot serve; None when it kept its address."""
    old = next((a.get("address") for a in (dm.get("status") or {}).get("addresses") or []
                if a.get("type") == "InternalIP"), None)
    cur = ((info.ipv6.get(network) if family == ipfamily.IPV6 else info.ipv4.get(network) or info.ipv6.get(network))
           if info is not None and info.running else None)
    if not old or not cur or old == cur or info is None:
        return None
    what = "certificates and etcd member" if control_plane else "kubelet and certificates"
    return (f"container {info.name} came back with address {cur} on network {network}, it was provisioned with "
            f"{old}: its {what} name the old one; delete the Machine to replace it (a MachineHealthCheck does)")


def last_lines(text: str, n: int = 10, limit: int = 2000) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = "\n".join(lines[-n:])
    return out[-limit:]


@dataclass
class Observed:
    phase: Phase
    message: str = ""
    container: ContainerInfo | None = None
    network: str = ""
    failure_domain: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    family: str = ipfamily.IPV4


def status(dm: dict[str, Any], obs: Observed) -> dict[str, Any]:
    """The whole status for a phase (the `Paused` condition is the reconcile skeleton's). provisioned and addresses,
    once set, survive transient phases."""
    st = dict(dm.get("status") or {})
    gen = (dm.get("metadata") or {}).get("generation")
    p = obs.phase
    conds = st.get("conditions")
    # waiting for bootstrap data with the node container already booting counts as a provisioned container
    early = p in _WAITING_FOR_DATA and obs.container is not None
    if p == Phase.DELETING:
        c_ok, c_reason = False, "Deleting"
    elif p == Phase.ADDRESS_CHANGED or (p in _BEFORE_CONTAINER and not early):
        c_ok, c_reason = False, p.value
    else:
        c_ok, c_reason = True, "Provisioned"
    conds = cond.set_condition(conds, CONTAINER_PROVISIONED, c_ok, c_reason, "" if c_ok else obs.message,
                               observed_generation=gen)
    if p in (Phase.PROVISIONED, Phase.ADDRESS_CHANGED):
        b_ok, b_reason, b_msg = True, "BootstrapSucceeded", ""
    elif p == Phase.DELETING:
        b_ok, b_reason, b_msg = False, "Deleting", obs.message
    elif p in _BEFORE_CONTAINER and not early:
        b_ok, b_reason, b_msg = False, "WaitingForContainer", "waiting for the node container"
    else:
        b_ok, b_reason, b_msg = False, p.value, obs.message
    conds = cond.set_condition(conds, BOOTSTRAP_EXEC_SUCCEEDED, b_ok, b_reason, b_msg, observed_generation=gen)
    ready = c_ok and b_ok
    conds = cond.set_condition(conds, cond.READY, ready, "Ready" if ready else "NotReady",
                               "" if ready else (obs.message or p.value), observed_generation=gen)
    st["conditions"] = conds
    if p == Phase.PROVISIONED:
        st["initialization"] = {**(st.get("initialization") or {}), "provisioned": True}
    if obs.container is not None and obs.network and p != Phase.ADDRESS_CHANGED:  # keep the address it had
        addrs = addresses(obs.container, obs.network, obs.family)
        if addrs and any(a["type"] == "InternalIP" for a in addrs):
            st["addresses"] = addrs
    if obs.failure_domain:
        st["failureDomain"] = obs.failure_domain
    return st


# A worker's "control plane initialized, bootstrap data not here yet" lasts about a second: its bootstrap
# config is generated as soon as the control plane is. Written at once it costs a DockerMachine write, the
# Machine's mirror of it and its owners' summaries, per worker. Reported only when it lasts.
BOOTSTRAP_DATA_GRACE_SECONDS = 10.0


def bootstrap_data_wait(dm: dict[str, Any], cluster: dict[str, Any], now: _dt.datetime,
                        grace: float = BOOTSTRAP_DATA_GRACE_SECONDS) -> float | None:
    """Seconds to wait quietly before reporting WaitingForBootstrapData, or None to report it now: only while
    the DockerMachine still says WaitingForControlPlaneInitialized and the control plane has been
    initialized for less than `grace` seconds (its ControlPlaneInitialized lastTransitionTime)."""
    c = cond.get(dm, BOOTSTRAP_EXEC_SUCCEEDED)
    initialized = cond.get(cluster, "ControlPlaneInitialized")
    since = coreutil.parse_time(initialized.get("lastTransitionTime")) \
        if initialized is not None and initialized.get("status") == cond.TRUE else None
    if c is None or c.get("reason") != Phase.WAITING_CONTROL_PLANE.value or since is None:
        return None
    left = grace - (now - since).total_seconds()
    return left if left > 0 else None


def probe_message(step: str) -> str:
    """No elapsed time here: status must not change on every poll."""
    return f"bootstrap running: step {step}" if step else "bootstrap running"
