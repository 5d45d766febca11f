"""What the Docker provider needs from a container runtime. Calls are blocking; async callers run
them with asyncio.to_thread. Names are docker container/network names."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from capd_py.api.containers import (
    ContainerInfo,
    ContainerSpec,
    ExecResult,
    HostCapacity,
    Mount,
    NetworkInfo,
    PortMapping,
)

__all__ = ["ContainerInfo", "ContainerRuntime", "ContainerSpec", "ExecResult", "HostCapacity", "Mount", "NetworkInfo",
           "NetworkGone", "PortMapping", "RuntimeError_", "SubnetTaken"]


class RuntimeError_(Exception):
    """A runtime call failed for a reason worth reporting (not 'not found')."""


class DaemonUnreachable(RuntimeError_):
    """The docker daemon does not answer (a docker host gone, its socket removed, its address refused): a state the
    controllers report in their conditions (reason DockerHostUnreachable), retried, never a crash."""


class SubnetTaken(RuntimeError_):
    """A network could not be made with the subnet asked for: another network holds an overlapping one."""


class NetworkGone(RuntimeError_):
    """A container could not be created or started because its network no longer exists: another process removed it
    between the caller's check and the container's start (a shared network, such as the management clusters', goes
    when its last user is deleted). Nothing of the container is left; the caller makes the network again and retries."""


class ContainerRuntime(Protocol):
    """`labels` arguments select by label: every key must be present with that value, and a value of ""
    matches any value (the key is present), like `docker ps --filter label=KEY`."""

    def ping(self) -> None: ...
    def host_capacity(self) -> HostCapacity: ...               # the docker host's CPUs and memory (docker info)
    def image_exists(self, ref: str) -> bool: ...
    # `network`: only containers attached to that network, stopped ones included
    def list_containers(self, labels: dict[str, str] | None = None,
                        network: str | None = None) -> list[ContainerInfo]: ...
    def get_container(self, name: str) -> ContainerInfo | None: ...
    def run_container(self, spec: ContainerSpec) -> ContainerInfo: ...
    # created but not started (status "created"), every host port as given (0 is not pinned here): snapshot
    # restores fill its storage before its first start
    def create_container(self, spec: ContainerSpec) -> ContainerInfo: ...
    # the spec that makes this container again as it is now (its image reference, pinned host ports, static
    # addresses, privilege mode, extra mounts), None when absent; env/command/entrypoint are the image's
    def container_spec(self, name: str) -> ContainerSpec | None: ...
    def start_container(self, name: str) -> None: ...
    # `docker stop`: the image's stop signal (SIGRTMIN+3 for nodes: systemd shuts down), SIGKILL after `timeout`;
    # no-op when already stopped
    def stop_container(self, name: str, timeout: float = 10.0) -> None: ...
    # `docker pause` / `unpause`: the cgroup freezer; no-op when already in that state
    def pause_container(self, name: str) -> None: ...
    def unpause_container(self, name: str) -> None: ...
    # where a container's writable storage lives on this host: {"/": its writable layer, "<mount point>": the
    # volume's data} (snapshots copy them while it is stopped). RuntimeError_ when the daemon's files are not
    # reachable from here (a remote daemon, a storage driver other than overlay2).
    def storage_paths(self, name: str) -> dict[str, str]: ...
    def remove_container(self, name: str) -> None: ...          # force, with its anonymous volumes; no-op if absent
    def kill(self, name: str, signal: str = "SIGHUP") -> None: ...
    def exec(self, name: str, cmd: list[str], stdin: bytes | None = None,
             timeout: float | None = None) -> ExecResult: ...
    def write_file(self, name: str, path: str, content: bytes, mode: int = 0o644) -> None: ...
    def read_file(self, name: str, path: str) -> bytes | None: ...
    def logs(self, name: str, tail: int = 200) -> str: ...
    # created (when missing) with `subnet`, whose lower half takes static container addresses; a network of
    # that name is returned as it is. SubnetTaken: another network overlaps `subnet` (choose again).
    # capd_py.runtime.networks.ensure_network chooses the subnet. `subnet6` (IPv6 and dual-stack clusters) adds an
    # IPv6 subnet, split the same way, and turns IPv6 on.
    def create_network(self, name: str, labels: dict[str, str], subnet: str, subnet6: str = "") -> NetworkInfo: ...
    # the CIDRs routed on the runtime's host (main table, default routes left out); `image` (one on that host)
    # may run a helper container to read them when this process cannot; [] when not readable. Without
    # `docker_bridges`, the routes of docker's bridge devices are left out (hostroutes.is_docker_bridge).
    def host_routes(self, image: str = "", docker_bridges: bool = True) -> list[str]: ...
    def get_network(self, name: str) -> NetworkInfo | None: ...
    def remove_network(self, name: str) -> None: ...            # no-op if absent
    def list_networks(self, labels: dict[str, str] | None = None) -> list[NetworkInfo]: ...
    # `container` joins / leaves `network` (the in-cluster controllers' node container joins each workload
    # cluster's network: docker isolates bridge networks from each other). Idempotent; no-op if absent.
    def connect_network(self, network: str, container: str) -> None: ...
    def disconnect_network(self, network: str, container: str) -> None: ...
    def list_volumes(self, labels: dict[str, str] | None = None) -> list[str]: ...
    def remove_volume(self, name: str) -> None: ...             # force; no-op if absent
    def list_images(self, repository: str) -> list[str]: ...    # local "repo:tag" references of `repository`
    def build_image(self, context_dir: str, tag: str, build_args: dict[str, str] | None = None) -> None: ...
    def save_image(self, ref: str) -> bytes: ...                # `docker save` tarball
    # the same tarball in chunks, for copying an image to another docker host without holding it in memory
    def save_image_chunks(self, ref: str) -> Iterator[bytes]: ...
    def load_image(self, chunks: Iterable[bytes]) -> None: ...   # `docker load` of a `docker save` tarball
    # the local image's ID (`docker image inspect -f {{.Id}}`: the digest of its config), None when absent
    def image_id(self, ref: str) -> str | None: ...
    # `docker inspect` of a container as docker returns it (for bug reports), None when absent
    def inspect_container(self, name: str) -> dict[str, Any] | None: ...
