"""Wires controllers to kopf watch streams and the work queue.

kopf only delivers events here (`on.event` handlers, which keep no progress or diff-base state on the
objects); every event and every resync tick re-runs a full, level-triggered reconcile of each key it
maps to. Nothing kopf-specific is ever written to a watched object.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import kopf

from capd_py.api import contract
from capd_py.api.gvk import GVK
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.queue import Key, Result, WorkQueue
from capd_py.kube.cache import Reader, Store
from capd_py.kube.client import KubeError

log = logging.getLogger("capd_py.manager")

ReconcileFn = Callable[[Ctx, str, str], Awaitable[Result | None]]
# A mapper turns an event on a watched object into (namespace, name) keys of the controller's kind.
Mapper = Callable[[dict[str, Any], Reader], Iterable[tuple[str, str]]]


@dataclass
class Controller:
    gvk: GVK
    reconcile: ReconcileFn
    watches: list[tuple[GVK, Mapper]] = field(default_factory=list)


def self_mapper(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    md = obj.get("metadata") or {}
    return [(md.get("namespace") or "", md["name"])]


def owner_mapper(kind: str) -> Mapper:
    """Events on an owned object reach its controller owner of `kind`."""
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        o = contract.controller_owner(obj, kind)
        return [(obj["metadata"].get("namespace") or "", o["name"])] if o else []
    return m


def any_owner_mapper(kind: str) -> Mapper:
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        ns = obj["metadata"].get("namespace") or ""
        return [(ns, o["name"]) for o in obj["metadata"].get("ownerReferences") or [] if o.get("kind") == kind]
    return m


def cluster_label_mapper(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """Events on any object of a cluster reach the Cluster of that name."""
    name = (obj["metadata"].get("labels") or {}).get(CLUSTER_NAME)
    return [(obj["metadata"].get("namespace") or "", name)] if name else []


class Manager:
    def __init__(self, ctx: Ctx, controllers: list[Controller], store: Store | None = None):
        self.ctx = ctx
        self.store = store or Store()
        self.controllers = {c.gvk.kind: c for c in controllers}
        self.queue = WorkQueue(self._handle, workers=ctx.settings.workers)
        ctx.extra["enqueue"] = self.queue.add
        self._resync_task: asyncio.Task[None] | None = None

    async def _handle(self, key: Key) -> Result | None:
        kind, ns, name = key
        c = self.controllers[kind]
        try:
            return await c.reconcile(self.ctx, ns, name)
        except KubeError as e:
            if e.conflict:  # someone wrote in between: read again soon, quietly
                return Result(requeue_after=0.5)
            raise

    def enqueue(self, kind: str, ns: str, name: str, after: float = 0.0) -> None:
        self.queue.add((kind, ns, name), after)

    def dispatch(self, gvk: GVK, obj: dict[str, Any]) -> None:
        for c in self.controllers.values():
            for wgvk, mapper in [(c.gvk, self_mapper), *c.watches]:
                if wgvk.kind != gvk.kind or wgvk.group != gvk.group:
                    continue
                for ns, name in mapper(obj, self.store):
                    self.queue.add((c.gvk.kind, ns, name))

    def watched(self) -> set[GVK]:
        out = set()
        for c in self.controllers.values():
            out.add(c.gvk)
            out.update(g for g, _ in c.watches)
        return out

    def register(self, registry: kopf.OperatorRegistry) -> None:
        for gvk in self.watched():
            # async on purpose: kopf runs sync handlers in threads, and the queue lives on the loop
            async def handler(body: kopf.Body, _gvk: GVK = gvk, **_: Any) -> None:
                self.dispatch(_gvk, dict(body))
            kopf.on.event(gvk.group or "", gvk.version, gvk.plural, registry=registry,
                          id=f"dispatch-{gvk.kind}")(handler)

    async def resync_forever(self) -> None:
        """Level-triggered safety net: every key is reconciled at least once per resync period."""
        while True:
            await asyncio.sleep(self.ctx.settings.resync_seconds)
            await self.resync_once()

    async def resync_once(self) -> None:
        for c in self.controllers.values():
            try:
                for obj in await self.ctx.kube.list(c.gvk):
                    md = obj["metadata"]
                    self.queue.add((c.gvk.kind, md.get("namespace") or "", md["name"]))
            except KubeError as e:
                log.warning("resync list %s failed: %s", c.gvk.kind, e)

    def start(self) -> None:
        self.queue.start()
        self._resync_task = asyncio.create_task(self.resync_forever(), name="capd-py-resync")

    async def stop(self) -> None:
        if self._resync_task:
            self._resync_task.cancel()
        await self.queue.stop()
