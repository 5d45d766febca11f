"""Wires controllers to kopf watch streams and the work queue.

kopf only delivers events here (`on.event` handlers, which keep no progress or diff-base state on the
objects); every event and every resync tick re-runs a full, level-triggered reconcile of each key it
maps to. Nothing kopf-specific is ever written to a watched object.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kopf

from capd_py.api import crdcontract
from capd_py.api.gvk import CRD, GVK
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller, Mapper, self_mapper
from capd_py.controllers.queue import Key, Result, WorkQueue
from capd_py.kube.cache import Store
from capd_py.kube.client import Kube, KubeError, WriteCounter
from capd_py.kube.informer import Informer

log = logging.getLogger("capd_py.manager")

# A file the controllers process keeps `Manager.activity()` in (JSON, rewritten when it changed): how a test
# outside the process (the e2e tier's management plane) sees its writes and reconciles.
ACTIVITY_FILE_ENV = "CAPD_PY_ACTIVITY_FILE"

# Kinds whose status summarises many other objects (replica counts, aggregated conditions).
AGGREGATING = frozenset({"Cluster", "MachineDeployment", "MachineSet", "MachinePool", "KubeadmControlPlane"})


class Manager:
    """Routes watch events into the Store and, through each controller's mappers, into the work queue."""

    def __init__(self, ctx: Ctx, controllers: list[Controller], store: Store | None = None,
                 cached: Iterable[GVK] = ()):
        self.ctx = ctx
        self.controllers = {c.key: c for c in controllers}
        self.cached = set(cached)  # watched only to serve reads
        kube_store = getattr(ctx.kube, "store", None)
        self.store: Store = store or (kube_store if isinstance(kube_store, Store) else Store())
        for g in self.watched():
            self.store.serve(g)
        self.queue = WorkQueue(self._handle, workers=ctx.settings.workers)
        ctx.extra["enqueue"] = self.queue.add
        ctx.extra["watch_kind"] = self.watch_kind
        # kinds found through references at run time: per controller key, (kind, mapper) beside its `watches`
        self.dynamic: dict[str, list[tuple[GVK, Mapper]]] = {}
        self.informers: dict[tuple[str, str], Informer] = {}
        self._started = False
        self._heard: set[tuple[str, str, str]] = set()  # (controller key, group, kind) watch_kind was told
        if any(c.node_watches for c in controllers):
            ctx.workload.watch_nodes(self.dispatch_node)
        self._resync_task: asyncio.Task[None] | None = None
        self._resyncs = 0
        # resync passes (activity()'s "resyncs_started" / "resyncs" / "relists"): pass n is complete once every key
        # it enqueued was reconciled by a reconcile that began after the pass enqueued it; "resyncs" is the newest
        # pass n such that passes 1..n are all complete. A test waits on them for "every object reconciled again
        # and nothing written" (capd_py/testing/quiet.py) instead of sleeping through resync periods.
        self.resyncs_started = 0
        self.resyncs_done = 0
        self.relists_done = 0
        self._passes: deque[tuple[int, set[Key]]] = deque()  # (pass number, keys still to reconcile), oldest first
        # what the controllers did: API writes through ctx.kube (Kube.counter) and reconciles (`reconciles`);
        # tests wait on it for quiet (capd_py/testing/quiet.py), bench/scale_fake.py reports it
        self.writes = WriteCounter()
        if isinstance(ctx.kube, Kube):
            ctx.kube.counter = self.writes
        self.activity_file: Path | None = Path(p) if (p := os.environ.get(ACTIVITY_FILE_ENV)) else None
        self._report_task: asyncio.Task[None] | None = None

    @property
    def reconciles(self) -> int:
        return self.queue.processed

    def activity(self) -> dict[str, Any]:
        """Writes and reconciles so far, the newest writes (method and path), and the resync passes: started,
        complete (every key of it reconciled since; in order) and relists (passes that listed from the API
        server first). Taken at one moment: a pass counted as started here began after every write counted."""
        return {"writes": self.writes.total, "reconciles": self.reconciles, "recent": list(self.writes.recent),
                "by_namespace": dict(self.writes.by_namespace), "resyncs_started": self.resyncs_started,
                "resyncs": self.resyncs_done, "relists": self.relists_done}

    async def report_forever(self, path: Path, every: float = 1.0) -> None:
        """Keep `activity()` in `path` (replaced atomically whenever it changed)."""
        last: dict[str, Any] | None = None
        while True:
            now = self.activity()
            if now != last:
                tmp = path.with_name(path.name + ".tmp")
                tmp.write_text(json.dumps(now))
                tmp.replace(path)
                last = now
            await asyncio.sleep(every)

    async def _handle(self, key: Key) -> Result | None:
        kind, ns, name = key
        c = self.controllers[kind]
        began = self.resyncs_started  # the passes this reconcile serves: those that enqueued `key` before it began
        try:
            return await c.reconcile(self.ctx, ns, name)
        except KubeError as e:
            if e.conflict:  # someone wrote in between: read again soon, quietly
                return Result(requeue_after=0.5)
            raise
        finally:  # a failed reconcile counts too: it ran on the state after the pass (and retries with backoff)
            self._reconciled(key, began)

    def _reconciled(self, key: Key, began: int) -> None:
        """`key` was reconciled by a reconcile that began once passes 1..`began` had enqueued their keys."""
        for n, pending in self._passes:
            if n > began:
                break
            pending.discard(key)
        self._complete()

    def _complete(self) -> None:
        while self._passes and not self._passes[0][1]:
            self.resyncs_done = self._passes.popleft()[0]

    def enqueue(self, kind: str, ns: str, name: str, after: float = 0.0) -> None:
        self.queue.add((kind, ns, name), after)

    def dispatch(self, gvk: GVK, obj: dict[str, Any], deleted: bool = False) -> None:
        """One watch event: record it, then enqueue every key a controller maps it to. Every event is
        dispatched, our own writes' included: other controllers watching the kind must hear of them."""
        self.store.observe(gvk, obj, deleted=deleted)
        for c in self.controllers.values():
            # A summary over many objects hears of every one of them: a short delay lets a burst of their
            # events (ten Machines turning Running) end in one reconcile and one status write, not ten.
            after = (self.ctx.settings.aggregate_seconds
                     if c.key in AGGREGATING and c.gvk.kind != gvk.kind else 0.0)
            for wgvk, mapper in [(c.gvk, self_mapper), *c.watches, *self.dynamic.get(c.key, ())]:
                if wgvk.kind != gvk.kind or wgvk.group != gvk.group:
                    continue
                for ns, name in mapper(obj, self.store):
                    self.queue.add((c.key, ns, name), after)

    def dispatch_crd(self, crd: dict[str, Any], deleted: bool = False) -> None:
        """A CustomResourceDefinition changed: contract discovery (ctx.contracts) sees it at once. When what the core
        reads of it changed (a provider installed, removed or relabelled; not a caBundle refresh), every object of
        the controllers that follow references is reconciled again: a reference waiting for that CRD resolves now."""
        if not self.ctx.contracts.observe(crd, deleted=deleted) or not self._started:
            return
        self._rewatch(crdcontract.crd_info(crd))
        for c in self.controllers.values():
            if c.ref_mapper is None:
                continue
            for obj in self.store.list(c.gvk):
                md = obj["metadata"]
                self.queue.add((c.key, md.get("namespace") or "", md["name"]), self.ctx.settings.aggregate_seconds)

    def watch_kind(self, key: str, g: GVK) -> None:
        """Controller `key` references objects of kind `g`: from now on their events reach it through its
        `ref_mapper`, and unless a static watch covers the kind, a watch of it starts (on first sight)."""
        gk = (g.group, g.kind)
        if (key, *gk) in self._heard:
            return
        self._heard.add((key, *gk))
        c = self.controllers.get(key)
        if c is None or c.ref_mapper is None:
            return
        mine = self.dynamic.setdefault(key, [])
        if any((w.group, w.kind) == gk for w, _ in [*c.watches, *mine]):
            return
        mine.append((g, c.ref_mapper))
        if gk in {(w.group, w.kind) for w in self.watched()} or gk in self.informers:
            return
        log.info("watching %s (%s), referenced by %s", g.kind, g.api_version, key)
        self.store.serve(g)
        inf = Informer(getattr(self.ctx.kube, "live", self.ctx.kube), g,
                       on_list=self._listed, on_event=self.dispatch)
        self.informers[gk] = inf
        if self._started:
            inf.start()

    def _rewatch(self, info: crdcontract.CRDInfo) -> None:
        """A dynamically watched kind whose CRD now names another version for the contract: watch that one."""
        inf = self.informers.get((info.group, info.kind))
        if inf is None:
            return
        try:
            version = crdcontract.choose(info).version
        except crdcontract.ContractError:
            return  # gone or unlabelled: the old watch retries until the CRD is back
        if version == inf.gvk.version:
            return
        g = GVK(info.group, version, info.kind, info.plural, info.namespaced)
        log.info("watching %s at %s now (its CRD's contract label changed)", g.kind, g.api_version)
        inf.stop()
        new = Informer(inf.kube, g, on_list=self._listed, on_event=self.dispatch)
        self.informers[(info.group, info.kind)] = new
        new.start()

    def _listed(self, g: GVK, items: list[dict[str, Any]], rv: str | None) -> None:
        """A dynamic watch's listing: into the Store, and every object through the mappers (its first sight)."""
        self.store.replace(g, items, rv)
        for obj in self.store.list(g):
            self.dispatch(g, obj)

    def dispatch_node(self, namespace: str, cluster: str, node: dict[str, Any], deleted: bool) -> None:
        """A workload cluster's Node changed (or went): enqueue the keys the controllers map it to."""
        for c in self.controllers.values():
            after = self.ctx.settings.aggregate_seconds if c.key in AGGREGATING else 0.0
            for mapper in c.node_watches:
                for ns, name in mapper(namespace, cluster, node, self.store):
                    self.queue.add((c.key, ns, name), after)

    def watched(self) -> set[GVK]:
        out = set(self.cached)
        for c in self.controllers.values():
            out.add(c.gvk)
            out.update(g for g, _ in c.watches)
        return out

    async def prime(self) -> None:
        """List every watched kind once (paged) before any reconcile runs, so reads never see a half-filled
        cache; the watch streams then keep it current."""
        live = getattr(self.ctx.kube, "live", self.ctx.kube)
        await asyncio.gather(self._list_crds(live),
                             *(self._relist(live, g) for g in sorted(self.watched(), key=lambda g: g.kind)))

    async def _list_crds(self, live: Any) -> None:
        self.ctx.contracts.replace(await live.list(CRD))

    async def _relist(self, live: Any, g: GVK) -> None:
        items, rv = await live.list_with_version(g)
        self.store.replace(g, items, rv)

    def register(self, registry: kopf.OperatorRegistry) -> None:
        for gvk in self.watched():
            # async on purpose: kopf runs sync handlers in threads, and the queue lives on the loop
            async def handler(body: kopf.Body, type: str | None = None, _gvk: GVK = gvk, **_: Any) -> None:
                self.dispatch(_gvk, dict(body), deleted=type == "DELETED")
            kopf.on.event(gvk.group or "", gvk.version, gvk.plural, registry=registry,
                          id=f"dispatch-{gvk.kind}")(handler)

        async def crd_handler(body: kopf.Body, type: str | None = None, **_: Any) -> None:
            self.dispatch_crd(dict(body), deleted=type == "DELETED")
        kopf.on.event(CRD.group, CRD.version, CRD.plural, registry=registry, id="contracts-crds")(crd_handler)

    async def resync_forever(self) -> None:
        """Level-triggered safety net: every key is reconciled at least once per resync period."""
        while True:
            await asyncio.sleep(self.ctx.settings.resync_seconds)
            await self.resync_once()

    async def resync_once(self) -> None:
        """Every object of every controller's kind, from the Store. Every `relist_every`-th pass lists from
        the API server first, dropping a copy whose DELETED event a watch gap swallowed. The pass counts as
        started once its keys are queued, and as complete once each was reconciled since (`activity()`)."""
        self._resyncs += 1
        relisted = False
        if self._resyncs % self.ctx.settings.relist_every == 0:
            live = getattr(self.ctx.kube, "live", self.ctx.kube)
            relisted = True
            for g in self.watched():
                try:
                    await self._relist(live, g)
                except KubeError as e:
                    relisted = False
                    log.warning("relist %s failed: %s", g.kind, e)
        keys: set[Key] = set()
        for c in self.controllers.values():
            for obj in self.store.list(c.gvk):
                md = obj["metadata"]
                key = (c.key, md.get("namespace") or "", md["name"])
                keys.add(key)
                self.queue.add(key)
        self.resyncs_started += 1
        self.relists_done += relisted
        self._passes.append((self.resyncs_started, keys))
        self._complete()  # a pass without keys is complete at once (once those before it are)

    def start(self) -> None:
        self._started = True
        for inf in self.informers.values():
            inf.start()
        self.queue.start()
        self._resync_task = asyncio.create_task(self.resync_forever(), name="capd-py-resync")
        if self.activity_file is not None:
            self._report_task = asyncio.create_task(self.report_forever(self.activity_file), name="capd-py-activity")

    async def stop(self) -> None:
        for t in (self._resync_task, self._report_task):
            if t is not None:
                t.cancel()
        await self.ctx.workload.close()
        for inf in self.informers.values():
            inf.stop()
        await self.queue.stop()
