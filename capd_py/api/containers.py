"""The shapes of containers, networks and exec results: what the Docker provider's decisions produce and
what a container runtime reports back. Plain data; the runtime Protocol (capd_py/runtime/protocol.py) does
the I/O."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Mount:
    source: str          # host path, or "" for an anonymous volume
    target: str
    read_only: bool = False
    kind: str = "bind"   # bind | volume | tmpfs


@dataclass(frozen=True)
class PortMapping:
    container_port: int
    host_port: int = 0   # 0 = let the engine choose
    host_ip: str = "127.0.0.1"
    protocol: str = "tcp"


@dataclass(frozen=True)
class ContainerSpec:
    name: str
    image: str
    hostname: str = ""
    network: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    mounts: tuple[Mount, ...] = ()
    ports: tuple[PortMapping, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    privileged_mode: str = "privileged"   # privileged | restricted (this sandbox: cap-add ALL minus SYS_RESOURCE)
    node: bool = True                      # systemd node: tmpfs /run,/tmp, /var volume, cgroup mounts
    restart_policy: str = ""               # "" | unless-stopped | always
    entrypoint: tuple[str, ...] = ()       # overrides the image entrypoint when set
    ipv4: str = ""                         # static address on `network` ("" = the engine assigns one per start)
    ipv6: str = ""                         # static IPv6 address on `network` (its IPv6 subnet), likewise
    # namespaced kernel parameters of the container (IPv6 clusters' nodes: IPv6 on, forwarding on)
    sysctls: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ContainerInfo:
    id: str
    name: str
    image: str
    status: str                            # created | running | exited | paused | restarting | dead
    labels: dict[str, str]
    ipv4: dict[str, str]                   # network name -> address
    ipv6: dict[str, str]
    ports: dict[int, int]                  # container tcp port -> host port
    created: str = ""
    # network name -> the address the container was created with (kept while stopped; absent when the
    # engine picks a new one at every start)
    static_ipv4: dict[str, str] = field(default_factory=dict)

    @property
    def running(self) -> bool:
        return self.status == "running"


@dataclass(frozen=True)
class NetworkInfo:
    name: str
    id: str
    subnet: str
    gateway: str
    labels: dict[str, str]
    # the sub-range the engine assigns dynamic addresses from; set only on networks made for static
    # addresses (the rest of the subnet is handed out by capd-py, see capd_py/reconcile/addresses.py)
    ip_range: str = ""
    # every subnet of the network, IPv6 ones included (`subnet` is the IPv4 one, if any)
    subnets: tuple[str, ...] = ()

    @property
    def subnet6(self) -> str:
        """The network's IPv6 subnet ("" when it has none: IPv6 is off on it)."""
        return next((s for s in self.subnets if ":" in s), "")


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str


@dataclass(frozen=True)
class HostCapacity:
    """What the container host offers a machine: `docker info`'s NCPU and MemTotal (bytes)."""
    cpus: int
    memory_bytes: int


# The "restricted" privilege mode (hosts that refuse --privileged: no CAP_SYS_RESOURCE to hand out): every
# capability but SYS_RESOURCE, no seccomp/apparmor profile, no masked or read-only /proc and /sys paths, every
# device allowed in the device cgroup. One definition for capd-py's runtime, the test helpers' `docker run` flags
# and the Docker API shim that lets upstream CAPD's hard-coded --privileged containers start here.
RESTRICTED_CAP_ADD = ("ALL",)
RESTRICTED_CAP_DROP = ("SYS_RESOURCE",)
RESTRICTED_SECURITY_OPT = ("seccomp=unconfined", "apparmor=unconfined")
RESTRICTED_DEVICE_CGROUP_RULES = ("a *:* rwm",)
# the host cgroup tree, bound read-write: what the node entrypoint needs to give each node its own cgroup root on
# cgroup v1 (with --privileged docker mounts it read-write itself)
CGROUP_MOUNT = "/sys/fs/cgroup"


def restricted_flags() -> list[str]:
    """The restricted mode as `docker run` flags."""
    out: list[str] = []
    for c in RESTRICTED_CAP_ADD:
        out += ["--cap-add", c]
    for c in RESTRICTED_CAP_DROP:
        out += ["--cap-drop", c]
    for o in (*RESTRICTED_SECURITY_OPT, "systempaths=unconfined"):
        out += ["--security-opt", o]
    for r in RESTRICTED_DEVICE_CGROUP_RULES:
        out += ["--device-cgroup-rule", r]
    return out


def restricted_host_config(host_config: dict[str, Any], cgroup_v1: bool = True) -> dict[str, Any]:
    """A Docker Engine API HostConfig asking for `Privileged: true`, turned into the restricted mode (anything else
    unchanged). On a cgroup v1 host the node gets capd-py's cgroup layout: the host's cgroup namespace and the host
    cgroup tree bound read-write (unless the config mounts something there already), from which the node entrypoint
    gives the node its own root; a private cgroup namespace (kind's and CAPD's choice for privileged nodes) would
    leave the restricted node read-only cgroup mounts."""
    if not host_config.get("Privileged"):
        return host_config
    hc = dict(host_config)
    if cgroup_v1 and hc.get("CgroupnsMode") == "private":
        hc["CgroupnsMode"] = "host"
    hc["Privileged"] = False
    hc["CapAdd"] = list(RESTRICTED_CAP_ADD)
    hc["CapDrop"] = list(RESTRICTED_CAP_DROP)
    kept = [o for o in hc.get("SecurityOpt") or [] if isinstance(o, str)
            and not o.startswith(("seccomp=", "apparmor=", "seccomp:", "apparmor:"))]
    hc["SecurityOpt"] = [*kept, *RESTRICTED_SECURITY_OPT]
    hc["DeviceCgroupRules"] = list(RESTRICTED_DEVICE_CGROUP_RULES)
    hc["MaskedPaths"] = []
    hc["ReadonlyPaths"] = []
    mounts = [m for m in hc.get("Mounts") or [] if isinstance(m, dict)]
    binds = [b for b in hc.get("Binds") or [] if isinstance(b, str)]
    if cgroup_v1 and not any(m.get("Target") == CGROUP_MOUNT for m in mounts) and not any(
            b.split(":")[1:2] == [CGROUP_MOUNT] for b in binds):
        hc["Mounts"] = [*mounts, {"Type": "bind", "Source": CGROUP_MOUNT, "Target": CGROUP_MOUNT}]
    return hc
