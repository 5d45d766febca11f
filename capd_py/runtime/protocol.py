"""What the Docker provider needs from a container runtime. Calls are blocking; async callers run
them with asyncio.to_thread. Names are docker container/network names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


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


@dataclass(frozen=True)
class ExecResult:
    exit_code: int
    output: str


class RuntimeError_(Exception):
    """A runtime call failed for a reason worth reporting (not 'not found')."""


class ContainerRuntime(Protocol):
    """`labels` arguments select by label: every key must be present with that value, and a value of ""
    matches any value (the key is present), like `docker ps --filter label=KEY`."""

    def ping(self) -> None: ...
    def image_exists(self, ref: str) -> bool: ...
    def list_containers(self, labels: dict[str, str] | None = None) -> list[ContainerInfo]: ...
    def get_container(self, name: str) -> ContainerInfo | None: ...
    def run_container(self, spec: ContainerSpec) -> ContainerInfo: ...
    def start_container(self, name: str) -> None: ...
    def remove_container(self, name: str) -> None: ...          # force, with its anonymous volumes; no-op if absent
    def kill(self, name: str, signal: str = "SIGHUP") -> None: ...
    def exec(self, name: str, cmd: list[str], stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult: ...
    def write_file(self, name: str, path: str, content: bytes, mode: int = 0o644) -> None: ...
    def read_file(self, name: str, path: str) -> bytes | None: ...
    def logs(self, name: str, tail: int = 200) -> str: ...
    def ensure_network(self, name: str, labels: dict[str, str]) -> NetworkInfo: ...
    def get_network(self, name: str) -> NetworkInfo | None: ...
    def remove_network(self, name: str) -> None: ...            # no-op if absent
    def list_networks(self, labels: dict[str, str] | None = None) -> list[NetworkInfo]: ...
    def list_volumes(self, labels: dict[str, str] | None = None) -> list[str]: ...
    def remove_volume(self, name: str) -> None: ...             # force; no-op if absent
    def list_images(self, repository: str) -> list[str]: ...    # local "repo:tag" references of `repository`
    def build_image(self, context_dir: str, tag: str, build_args: dict[str, str] | None = None) -> None: ...
    def save_image(self, ref: str) -> bytes: ...                # `docker save` tarball
