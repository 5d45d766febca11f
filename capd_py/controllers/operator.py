"""The controllers process: every controller, fed by kopf watch streams, reading through one watch-fed cache.

kopf only delivers events (`on.event`) into the Manager, which records them in the Store and queues the
keys they map to; reconciles read through `CachedKube` and write to the API server. Nothing
kopf-specific is written to objects: posting of info-level k8s events is off, no handler uses
persistence (event handlers keep no progress or diff-base), and peering is standalone.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import signal
from collections.abc import Callable
from typing import Any

import kopf

from capd_py.api import features
from capd_py.controllers import extensionconfig
from capd_py.controllers.context import Ctx, Settings
from capd_py.controllers.manager import Manager
from capd_py.controllers.registry import CACHED_KINDS, all_controllers
from capd_py.controllers.services.runtime_sdk import RuntimeSDKService
from capd_py.kube import conversion_webhook, leader
from capd_py.kube.cache import Store
from capd_py.kube.cached import CachedKube
from capd_py.kube.client import Kube
from capd_py.kube.workload import WorkloadClients

log = logging.getLogger("capd_py.operator")


def connection_info(kube: Kube) -> kopf.ConnectionInfo:
    """The same credentials our own client uses, for kopf's watch streams."""
    cfg = kube.api.configuration
    token = None
    scheme = None
    auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    if auth:
        scheme, _, token = auth.partition(" ") if " " in auth else ("Bearer", "", auth)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert or None,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file or None,
        private_key_path=cfg.key_file or None,
        scheme=scheme, token=token,
        username=cfg.username or None, password=cfg.password or None,
        default_namespace="default",
    )


def build_registry(manager: Manager, kube: Kube) -> kopf.OperatorRegistry:
    registry = kopf.OperatorRegistry()
    manager.register(registry)

    @kopf.on.login(registry=registry)
    def _login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(kube)

    tasks: list[asyncio.Task[None]] = []

    @kopf.on.startup(registry=registry)
    async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings)
        # Watch handlers only run after startup: the listing here is older than any event they bring.
        await manager.prime()
        manager.start()
        if isinstance(manager.ctx.runtime_sdk, RuntimeSDKService) and "ExtensionConfig" in manager.controllers:
            # upstream's warm-up runnable: every ExtensionConfig discovered before hook calls are answered
            tasks.append(asyncio.create_task(extensionconfig.warm_up(manager.ctx), name="capd-py-runtime-warmup"))
        log.info("capd-py controllers started: %s", ", ".join(sorted(manager.controllers)))

    @kopf.on.cleanup(registry=registry)
    async def _cleanup(**_: Any) -> None:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await manager.stop()
        if isinstance(manager.ctx.runtime_sdk, RuntimeSDKService):
            await manager.ctx.runtime_sdk.close()

    return registry


def configure(settings: kopf.OperatorSettings) -> None:
    settings.posting.level = logging.WARNING       # no k8s Events for info-level kopf logs
    settings.peering.standalone = True
    settings.peering.mandatory = False
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    # on.event handlers never store progress or diff-bases, yet kopf builds a diff-base (a deep copy of the
    # body) for every event: a sixth of the controllers' CPU at scale. Nothing here reads it.
    settings.persistence.diffbase_storage = NoDiffBase()


class NoDiffBase(kopf.DiffBaseStorage):
    """A diff-base storage for event-only operators: no essence is built, fetched or stored."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> Any:
        return None

    def fetch(self, *, body: kopf.Body) -> None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        return None


def make_ctx(kube: Kube, runtime: Any = None, settings: Settings | None = None,
             workload: WorkloadClients | None = None) -> Ctx:
    """Reads through a watch-fed cache (the Manager fills its Store), writes to `kube`."""
    if runtime is None:
        from capd_py.runtime.docker_runtime import DockerRuntime
        runtime = DockerRuntime()
    cached = CachedKube(kube, Store())
    ctx = Ctx(kube=cached, runtime=runtime, settings=settings or Settings(),
              workload=workload if workload is not None else WorkloadClients(cached))
    if ctx.settings.enabled(features.RUNTIME_SDK):
        # the registry the ExtensionConfig controller fills; Namespaces read from the same cache
        ctx.runtime_sdk = RuntimeSDKService(cached)
    return ctx


class LeadershipLost(Exception):
    """This replica stopped renewing its Lease in time: another may be leading now, so it stopped."""


async def run(kubeconfig: str | None, runtime: Any = None, threads: int = 64,
              stop: asyncio.Event | None = None, workload: WorkloadClients | None = None,
              on_manager: Callable[[Manager], object] | None = None,
              leader_election: leader.Config | None = None, webhook: bool = True,
              webhook_bind: str | None = None, webhook_refresh_seconds: float = 60.0) -> None:
    """Run until `stop` is set (or SIGINT/SIGTERM). `runtime`/`workload` replace the real ones (benchmarks);
    `on_manager` sees the Manager before it starts (metrics).

    With `webhook`, the conversion webhook the CRDs point at is served from the start, by every replica, leader or
    not (kube/conversion_webhook.run_webhook; nothing while the CRDs serve v1beta2 only).

    With `leader_election`, nothing is watched or reconciled until this process holds the Lease; losing it
    stops every reconcile at once and raises LeadershipLost (the Deployment restarts the container, as
    controller-runtime's managers exit). A clean stop releases the Lease."""
    loop = asyncio.get_running_loop()
    # Docker calls are blocking and run via asyncio.to_thread (Kube calls are async over aiohttp): give them room.
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=threads,
                                                                    thread_name_prefix="capd-py-io"))
    kube = Kube.for_management(kubeconfig)
    ctx = make_ctx(kube, runtime, workload=workload)
    manager = Manager(ctx, all_controllers(ctx.settings.feature_gates, ctx.settings.controllers), cached=CACHED_KINDS)
    if on_manager:
        on_manager(manager)
    registry = build_registry(manager, kube)
    settings = kopf.OperatorSettings()
    configure(settings)
    stop_flag: asyncio.Event = stop or asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop_flag.set)
        except (NotImplementedError, RuntimeError):
            pass
    # created before kopf starts: kopf cancels only the tasks it finds made after it started
    serving = asyncio.create_task(conversion_webhook.run_webhook(kube, webhook_bind, webhook_refresh_seconds),
                                  name="capd-py-conversion-webhook") if webhook else None
    try:
        await _run_operator(kube, manager, registry, settings, stop_flag, leader_election)
    finally:
        if serving is not None:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
        kube.close()


async def _run_operator(kube: Kube, manager: Manager, registry: kopf.OperatorRegistry,
                        settings: kopf.OperatorSettings, stop_flag: asyncio.Event,
                        leader_election: leader.Config | None) -> None:
    elector = leader.LeaderElector(kube, leader_election) if leader_election else None
    watchdog: asyncio.Task[None] | None = None
    if elector is not None:
        if not await _campaign(elector, stop_flag):
            return

        async def stop_when_lost() -> None:
            await elector.renew_until_lost()
            await manager.stop()  # no reconcile may run past the lease: another replica may lead now
            stop_flag.set()
        # created before kopf starts: kopf cancels only the tasks it finds made after it started
        watchdog = asyncio.create_task(stop_when_lost(), name="capd-py-leader-renew")
    try:
        await kopf.operator(registry=registry, settings=settings, standalone=True, clusterwide=True,
                            stop_flag=stop_flag)
    finally:
        await manager.stop()
        if watchdog is not None and elector is not None:
            watchdog.cancel()
            await asyncio.gather(watchdog, return_exceptions=True)
            if not elector.lost.is_set():
                await elector.release()
    if elector is not None and elector.lost.is_set():
        raise LeadershipLost(f"lost lease {elector.cfg.namespace}/{elector.cfg.name}")


async def _campaign(elector: leader.LeaderElector, stop_flag: asyncio.Event) -> bool:
    """Wait for the Lease (True) or for `stop_flag` (False)."""
    acquire = asyncio.create_task(elector.acquire(), name="capd-py-leader-acquire")
    stopped = asyncio.create_task(stop_flag.wait(), name="capd-py-stop")
    await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
    for t in (acquire, stopped):
        t.cancel()
    await asyncio.gather(acquire, stopped, return_exceptions=True)
    if elector.leading.is_set() and not stop_flag.is_set():
        return True
    await elector.release()
    return False
