"""The Docker infrastructure service: everything the DockerCluster and DockerMachine controllers do to
the container runtime, and the process-local state that goes with it.

The controllers stay thin: they read the API objects, ask capd_py.reconcile.dockercluster /
dockermachine what to do, and apply it here. This module sees only the runtime Protocol and the pure
reconcile helpers (never the Kubernetes API), and holds:
- the in-flight creations: a container is created at most once per name even if the reconcile that
  asked for it is cancelled midway (the call runs in a task of its own that deletion waits for);
- one lock per cluster serialising its load balancer configuration updates.

One instance lives on the controller context (`Ctx.infra`). A fresh instance is what a restarted
controller process has: no in-flight calls, no locks.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from capd_py.api.labels import CONTAINER_ROLE
from capd_py.reconcile import addresses, haproxy, ipfamily, subnets
from capd_py.reconcile import dockercluster as dcr
from capd_py.reconcile.imageload import Outcome
from capd_py.runtime import images, networks
from capd_py.runtime.protocol import (
    ContainerInfo,
    ContainerRuntime,
    ContainerSpec,
    DaemonUnreachable,
    ExecResult,
    HostCapacity,
    NetworkInfo,
    RuntimeError_,
)

log = logging.getLogger("capd_py.docker_infra")
_Created = tuple[ContainerInfo | None, Exception | None]  # an in-flight creation's outcome
T = TypeVar("T")

# docker reserves a name before the container can be inspected: how long to look for a container
# another process is creating under the same name
ADOPT_WAIT_SECONDS = 10.0


class DockerInfra:
    def __init__(self, runtime: ContainerRuntime, controllers_container: str = "",
                 network_pool: Sequence[subnets.PoolRange] = networks.DEFAULT_POOL) -> None:
        self.runtime = runtime
        self.network_pool = tuple(network_pool)
        # the container these controllers run in (in-cluster: the management node; "" on the host, which
        # reaches every docker network anyway)
        self.controllers_container = controllers_container
        self._inflight: dict[str, asyncio.Future[_Created]] = {}
        self._lb_locks: dict[tuple[str, str], asyncio.Lock] = {}
        # the configuration this process last had each load balancer reload: one on disk may never have been
        # loaded (a controller killed between the write and the SIGHUP)
        self._lb_loaded: dict[tuple[str, str], bytes] = {}
        # static addresses handed out to creations still in flight, per network (docker only knows them once
        # the container exists); allocation is serialised per network
        self._reserved: dict[str, set[str]] = {}
        self._net_locks: dict[str, asyncio.Lock] = {}
        # one network creation at a time: two clusters made at once would choose the same subnet
        self._network_create = asyncio.Lock()

    # --- plain runtime calls, off the event loop ---------------------------------------------------
    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except OSError as e:
            # the daemon does not answer (a docker host gone, its socket removed: requests' connection errors are
            # OSErrors): a runtime failure the controllers report in conditions, not a crash of the reconcile
            raise DaemonUnreachable(f"docker daemon not reachable: {e}") from e

    async def get_container(self, name: str) -> ContainerInfo | None:
        return await self.call(self.runtime.get_container, name)

    async def list_containers(self, labels: dict[str, str]) -> list[ContainerInfo]:
        return await self.call(self.runtime.list_containers, labels)

    async def start_container(self, name: str) -> ContainerInfo | None:
        await self.call(self.runtime.start_container, name)
        return await self.get_container(name)

    async def host_capacity(self) -> HostCapacity:
        return await self.call(self.runtime.host_capacity)

    async def image_exists(self, ref: str) -> bool:
        return await self.call(self.runtime.image_exists, ref)

    async def exec(self, name: str, cmd: list[str]) -> ExecResult:
        return await self.call(self.runtime.exec, name, cmd)

    async def write_file(self, name: str, path: str, content: bytes, mode: int = 0o644) -> None:
        await self.call(self.runtime.write_file, name, path, content, mode)

    async def local_image_ids(self, refs: list[str]) -> dict[str, str | None]:
        """The docker daemon's image ID per reference (None: not present; nothing is pulled)."""
        return await self.call(images.local_ids, self.runtime, refs)

    async def load_images(self, node: str, ids: dict[str, str]) -> list[Outcome]:
        """Import local images ({reference: ID}) into a node's containerd, skipping those it has already."""
        return await self.call(images.load_images, self.runtime, [node], ids)

    async def ensure_network(self, name: str, labels: dict[str, str], avoid: Sequence[subnets.Taken] = (),
                             ipv6: bool = False, routes_image: str = "") -> NetworkInfo:
        """The network `name`, made when missing with a subnet of the pool (an IPv6 one too with `ipv6`) that
        overlaps neither `avoid` nor any docker network or host route (networks.NoFreeSubnet when none is left;
        `routes_image` reads the host's routes where this process cannot: ContainerRuntime.host_routes), looked
        for from the name's place in the pool (networks.ensure_network start_at_name: a workload cluster's)."""
        got = await self.call(self.runtime.get_network, name)
        if got is not None:
            return got
        async with self._network_create:
            return await self.call(functools.partial(networks.ensure_network, start_at_name=True), self.runtime,
                                   name, labels, self.network_pool, avoid, ipv6, routes_image)

    async def outside_ranges(self, management_network: str, routes_image: str = "") -> list[subnets.Taken]:
        """What a cluster's pods must be able to reach outside it: the management cluster's network and the
        host's routes that are not docker networks (networks.outside_ranges)."""
        return await self.call(networks.outside_ranges, self.runtime, management_network, routes_image)

    async def remove_network_if_ours(self, name: str, labels: dict[str, str]) -> None:
        """Remove network `name` when it carries `labels` (a network someone else made is left alone); the
        controllers' own container leaves it first (docker refuses to remove a network with endpoints), and so
        does any other management node on it: one whose in-cluster controllers managed the cluster before
        `capd-py move` handed it over joined it too."""
        net = await self.call(self.runtime.get_network, name)
        if net is not None and all(net.labels.get(k) == v for k, v in labels.items()):
            nodes = await self.call(self.runtime.list_containers, {CONTAINER_ROLE: dcr.ROLE_MANAGEMENT}, name)
            for c in dict.fromkeys([*([self.controllers_container] if self.controllers_container else []),
                                    *(c.name for c in nodes)]):
                await self.call(self.runtime.disconnect_network, name, c)
            await self.call(self.runtime.remove_network, name)

    async def connect_controllers(self, network: str) -> None:
        """Join the controllers' container to a workload cluster's network. In the management cluster the
        controllers run in its node container, on the management network; docker isolates bridge networks
        from each other, so without this they could not reach the cluster's load balancer (the server of
        its kubeconfig) or its nodes. A host process needs nothing: the host is on every bridge."""
        if self.controllers_container:
            await self.call(self.runtime.connect_network, network, self.controllers_container)

    # --- containers --------------------------------------------------------------------------------
    async def create_container(self, spec: ContainerSpec) -> ContainerInfo:
        """Create+start `spec` once per name, or adopt the container of that name if it carries the
        spec's labels (another controller instance made it). Survives cancellation of the caller.
        On a network made for static addresses the container gets one (spec.ipv4 when it is a free static
        address of the network, else the lowest free one), so it keeps its address across restarts."""
        fut = self._inflight.get(spec.name)
        if fut is None:
            fut = self._inflight[spec.name] = asyncio.ensure_future(self._create_outcome(spec))
            name = spec.name
            fut.add_done_callback(lambda f: self._inflight.pop(name, None) if self._inflight.get(name) is f else None)
        info, error = await asyncio.shield(fut)
        if info is None:
            raise error or RuntimeError_(f"creating container {spec.name}: no outcome")
        return info

    async def _create_outcome(self, spec: ContainerSpec) -> _Created:
        """The creation as a task that never ends in an exception: kopf re-raises, when the operator stops, every
        task that did, and the controllers exited with a container create's error."""
        try:
            return await self._create(spec), None
        except Exception as e:  # noqa: BLE001 - handed to the awaiter, who raises it
            return None, e

    async def _create(self, spec: ContainerSpec) -> ContainerInfo:
        spec = await self._with_address(spec)
        try:
            return await self.call(create_or_adopt, self.runtime, spec)
        finally:
            if spec.ipv4:
                self._reserved.get(spec.network, set()).discard(spec.ipv4)

    async def _with_address(self, spec: ContainerSpec) -> ContainerSpec:
        if not spec.network:
            return spec
        async with self._net_locks.setdefault(spec.network, asyncio.Lock()):
            net = await self.call(self.runtime.get_network, spec.network)
            if net is None or not addresses.static_capable(net):
                return replace(spec, ipv4="", ipv6="")  # a network someone else made: docker assigns addresses
            if await self.get_container(spec.name) is not None:
                return spec  # adopted, not created: its address is what it has
            reserved = self._reserved.setdefault(spec.network, set())
            # read before listing: a creation that ends while docker lists may be missing from the list and
            # already have dropped its reservation (two nodes were given one address that way)
            pending = set(reserved)
            on_net = await self.call(self.runtime.list_containers, None, spec.network)
            taken = addresses.taken_addresses(on_net, spec.network) | pending | reserved
            if spec.ipv4 and addresses.in_static_range(net, spec.ipv4) and spec.ipv4 not in taken:
                ip: str | None = spec.ipv4
            else:
                ip = addresses.pick_static(net, taken)
            if ip is None:
                log.warning("no static address left on network %s; %s gets a dynamic one", spec.network, spec.name)
                return replace(spec, ipv4="", ipv6="")
            reserved.add(ip)
            return replace(spec, ipv4=ip, ipv6=addresses.paired_ipv6(net, ip))

    def creating(self, name: str) -> bool:
        return name in self._inflight

    async def settle(self, name: str) -> None:
        """Wait for an in-flight creation of `name` (started by a cancelled reconcile) to finish."""
        fut = self._inflight.get(name)
        if fut is not None:
            await asyncio.shield(fut)  # its outcome (a failure too) is the creator's business; we only wait

    async def settle_all(self) -> None:
        for name in list(self._inflight):
            await self.settle(name)

    async def remove_volumes(self, labels: dict[str, str]) -> int:
        """Remove the volumes carrying `labels` that no container uses any more: the /var of a node container
        someone removed with `docker rm -f` (which leaves anonymous volumes behind). Returns how many."""
        removed = 0
        for v in await self.call(self.runtime.list_volumes, labels):
            try:
                await self.call(self.runtime.remove_volume, v)
                removed += 1
            except RuntimeError_ as e:  # still mounted by a container: its removal takes it along
                log.debug("volume %s not removed: %s", v, e)
        return removed

    async def remove_container(self, name: str) -> bool:
        """Remove `name` (after any in-flight creation of it). Returns whether it is gone."""
        await self.settle(name)
        await self.call(self.runtime.remove_container, name)
        return await self.get_container(name) is None

    # --- load balancer -----------------------------------------------------------------------------
    async def sync_lb(self, namespace: str, cluster: str, network: str, deleting: Iterable[str],
                      family: str = ipfamily.IPV4) -> dcr.LBState:
        """Regenerate the haproxy backends from the cluster's control-plane containers (machines named in
        `deleting` get weight 0); write, read back, SIGHUP. Serialised per cluster inside this process;
        an identical configuration is not rewritten."""
        async with self._lb_locks.setdefault((namespace, cluster), asyncio.Lock()):
            name = dcr.lb_container_name(cluster)
            lb = await self.get_container(name)
            if lb is None or not lb.running:
                return dcr.LBState(False, dcr.R_NOT_AVAILABLE, f"load balancer container {name} is not running")
            cps = await self.list_containers({**dcr.cluster_labels(namespace, cluster),
                                              CONTAINER_ROLE: dcr.ROLE_CONTROL_PLANE})
            cfg = haproxy.render(dcr.backends(cps, network, set(deleting), family),
                                 ipv6=family == ipfamily.IPV6).encode()
            try:
                cur = await self.call(self.runtime.read_file, name, haproxy.CONFIG_PATH)
                if cur != cfg:
                    await self.write_file(name, haproxy.CONFIG_PATH, cfg, 0o644)
                    back = await self.call(self.runtime.read_file, name, haproxy.CONFIG_PATH)
                    if back != cfg:
                        return dcr.LBState(False, dcr.R_NOT_AVAILABLE, "load balancer configuration did not stick")
                if cur != cfg or self._lb_loaded.get((namespace, cluster)) != cfg:
                    master = await self.call(self.runtime.read_file, name, haproxy.MASTER_STATUS_PATH)
                    if not haproxy.reloads_on_sighup(master):
                        # the file is written; the next pass (the caller requeues) sends the reload
                        return dcr.LBState(False, dcr.R_NOT_AVAILABLE,
                                           f"load balancer {name} is starting: haproxy does not take reloads yet")
                    await self.call(self.runtime.kill, name, "SIGHUP")
                    self._lb_loaded[(namespace, cluster)] = cfg
                    log.info("%s/%s: load balancer reloaded with %d backend(s)", namespace, cluster,
                             cfg.count(b"\n  server "))
            except RuntimeError_ as e:
                return dcr.LBState(False, dcr.R_RUNTIME_ERROR, f"updating load balancer configuration: {e}")
            return dcr.LBState(True, dcr.R_AVAILABLE)

    def forget_cluster(self, namespace: str, cluster: str) -> None:
        """The cluster's infrastructure is gone: drop its lock."""
        self._lb_locks.pop((namespace, cluster), None)
        self._lb_loaded.pop((namespace, cluster), None)


def create_or_adopt(runtime: ContainerRuntime, spec: ContainerSpec) -> ContainerInfo:
    """Blocking: run `spec`; when the name is taken by a container carrying the spec's labels (created by
    a previous controller instance), adopt it and make sure it runs."""
    try:
        return runtime.run_container(spec)
    except RuntimeError_ as e:
        # the name is taken ("...is already in use by container <id>"), not an address or a port
        conflict = "in use by container" in str(e) or "Conflict" in str(e)
        got = _find(runtime, spec.name, ADOPT_WAIT_SECONDS if conflict else 0)
        if got is not None and all(got.labels.get(k) == v for k, v in spec.labels.items()):
            if not got.running:
                runtime.start_container(spec.name)
                got = runtime.get_container(spec.name) or got
            return got
        raise


def _find(runtime: ContainerRuntime, name: str, wait: float) -> ContainerInfo | None:
    """The container `name`, looked for up to `wait` seconds."""
    look = Retrying(retry=retry_if_result(lambda got: got is None), stop=stop_after_delay(wait),
                    wait=wait_fixed(0.1), retry_error_callback=lambda _state: None)
    return look(runtime.get_container, name)
