"""A list+watch of one kind of the management cluster, started while the controllers run: the kinds their
objects reference that no static watch covers (a provider's MinimalCluster, MinimalMachine, ...), as upstream's
external.ObjectTracker starts a watch on first sight of a kind.

The listing goes to `on_list` (the Store's `replace`, which marks the kind served from the cache), every
event after it to `on_event`; a stream that ends continues from its last resourceVersion, a failure (410 Gone,
the API server away) lists again after a pause.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from capd_py.api.gvk import GVK
from capd_py.kube.client import Kube

log = logging.getLogger("capd_py.informer")

OnList = Callable[[GVK, list[dict[str, Any]], str | None], None]
OnEvent = Callable[[GVK, dict[str, Any], bool], None]

RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 10.0
WATCH_SECONDS = 300


class Informer:
    def __init__(self, kube: Kube, gvk: GVK, on_list: OnList, on_event: OnEvent):
        self.kube, self.gvk = kube, gvk
        self._on_list, self._on_event = on_list, on_event
        self._task: asyncio.Task[None] | None = None
        self.synced = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"capd-py-watch-{self.gvk.kind}")

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        pause = RETRY_SECONDS
        while True:
            try:
                items, rv = await self.kube.list_with_version(self.gvk)
                self._on_list(self.gvk, items, rv)
                self.synced.set()
                pause = RETRY_SECONDS
                while True:
                    began = time.monotonic()
                    rv, events = await self._watch(rv or "")
                    if not events and time.monotonic() - began < 1.0:
                        await asyncio.sleep(1.0)  # a stream that ends at once: no busy loop
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - gone (410), CRD removed, API server away: list again
                log.info("watch of %s ended: %s", self.gvk.kind, e)
                await asyncio.sleep(pause)
                pause = min(pause * 2, MAX_RETRY_SECONDS)

    async def _watch(self, rv: str) -> tuple[str, int]:
        events = 0
        async for kind, obj in self.kube.watch(self.gvk, None, rv, WATCH_SECONDS):
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            if kind == "BOOKMARK":
                continue
            events += 1
            obj.setdefault("apiVersion", self.gvk.api_version)
            obj.setdefault("kind", self.gvk.kind)
            try:
                self._on_event(self.gvk, obj, kind == "DELETED")
            except Exception:  # a listener's bug must not end the watch
                log.exception("event of %s %s not handled", self.gvk.kind, (obj.get("metadata") or {}).get("name"))
        return rv, events
