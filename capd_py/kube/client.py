"""A small async facade over the API server's REST interface for unstructured objects.

Calls go over aiohttp on the calling loop (`transport.py`); the `kubernetes` package only provides the
configuration (kubeconfig, in-cluster). Every call names its GVK so the same code serves CRDs, core kinds and
workload clusters. Writes are explicit and minimal: callers compare before they write, so a no-op reconcile
leaves resourceVersions alone.
"""

from __future__ import annotations

import builtins
import json
import os
import tempfile
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterable
from typing import Any

import kubernetes.client
import kubernetes.config
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from capd_py.api import kubeyaml, statuspatch
from capd_py.api.gvk import GVK
from capd_py.api.labels import FIELD_MANAGER
from capd_py.kube.transport import AioTransport, StreamError, Unreachable

LIST_PAGE = 500  # objects per LIST page, as client-go's pager
# a status write whose conditions met a newer copy re-reads and retries this often before the reconcile requeues
CONFLICT_RETRIES = 5


class KubeError(Exception):
    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None):
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message, self.body = status, reason, message, body or {}

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def invalid(self) -> bool:
        return self.status == 422


# what talking to a workload cluster's API server can raise: it did not answer, or it answered with an error.
# Controllers catch these where "the workload cluster is not reachable (yet)" is a state to report, never Exception.
WorkloadError = (Unreachable, KubeError)

__all__ = ["LIST_PAGE", "Kube", "KubeError", "Unreachable", "WorkloadError"]


def _error(status: int, reason: str, data: bytes) -> KubeError:
    body: dict[str, Any] = {}
    try:
        body = json.loads(data or b"{}")
    except ValueError:
        pass
    if not isinstance(body, dict):
        body = {}
    message = body.get("message") or data.decode("utf-8", "replace")[:500] or reason
    return KubeError(status, body.get("reason") or reason, message, body)


class WriteCounter:
    """Counts the writes (every request but a GET) a Kube sends, each once its answer is in: set `Kube.counter`.
    The Manager counts its controllers' writes so (`Manager.writes`); tests wait on it for quiet
    (capd_py/testing/quiet.py), bench/scale_fake.py reports it."""

    def __init__(self, keep: int = 20):
        self.total = 0
        self.last = 0.0  # time.monotonic() of the newest
        # "PATCH /apis/.../status {"status": ...", newest last: the body's start names a write a test did not expect
        self.recent: deque[str] = deque(maxlen=keep)
        # (namespace: "" for cluster-scoped objects, method, resource: the plural of the kind)
        self.by_namespace_resource: Counter[tuple[str, str, str]] = Counter()

    def record(self, method: str, path: str, body: Any = None) -> None:
        self.total += 1
        self.last = time.monotonic()
        shown = "" if body is None else " " + _excerpt(body)
        self.recent.append(f"{method} {path}{shown}")
        ns, resource = namespace_and_resource(path)
        self.by_namespace_resource[(ns, method, resource)] += 1

    @property
    def by_resource(self) -> Counter[tuple[str, str]]:
        """(method, resource) -> writes, every namespace's."""
        got: Counter[tuple[str, str]] = Counter()
        for (_, method, resource), n in self.by_namespace_resource.items():
            got[(method, resource)] += n
        return got

    @property
    def by_namespace(self) -> Counter[str]:
        got: Counter[str] = Counter()
        for (ns, _, _), n in self.by_namespace_resource.items():
            got[ns] += n
        return got


RECENT_BODY_CHARS = 300


def _excerpt(body: Any) -> str:
    try:
        text = json.dumps(body, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(body)
    return text if len(text) <= RECENT_BODY_CHARS else text[:RECENT_BODY_CHARS] + "..."


def namespace_and_resource(path: str) -> tuple[str, str]:
    """(namespace or "", resource plural) a REST path names: /apis/G/V/namespaces/NS/machines/M/status ->
    (NS, machines); /api/v1/namespaces/NS -> (NS, namespaces): a Namespace counts as its own."""
    parts = path.split("?")[0].strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 2 and rest[0] == "namespaces":
        return rest[1], rest[2] if len(rest) >= 3 else rest[0]
    return "", rest[0] if rest else path


class Kube:
    """Unstructured CRUD against one API server."""

    counter: WriteCounter | None = None  # set: every write is counted there (acall)

    def __init__(self, api: kubernetes.client.ApiClient, transport: AioTransport | None = None):
        self.api = api
        # fakes subclass Kube without an ApiClient: they never reach the transport
        self._transport = transport or (AioTransport(api.configuration) if api is not None else None)

    # -- construction ---------------------------------------------------------------------------
    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> Kube:
        cfg = kubernetes.client.Configuration()
        kubernetes.config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
        return cls._from_cfg(cfg)

    @classmethod
    def for_management(cls, kubeconfig: str | None = None) -> Kube:
        """From `kubeconfig` ($KUBECONFIG / ~/.kube/config when None); inside a pod without one, from its service
        account (the in-cluster controllers, the packaged test extension)."""
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            cfg = kubernetes.client.Configuration()
            kubernetes.config.load_incluster_config(client_configuration=cfg)
            return cls._from_cfg(cfg)
        return cls.from_kubeconfig(kubeconfig)

    @classmethod
    def from_kubeconfig_text(cls, text: str | bytes) -> Kube:
        data = kubeyaml.load(text)
        cfg = kubernetes.client.Configuration()
        loader = kubernetes.config.kube_config.KubeConfigLoader(
            config_dict=data, temp_file_path=tempfile.gettempdir())
        loader.load_and_set(cfg)
        return cls._from_cfg(cfg)

    @classmethod
    def _from_cfg(cls, cfg: kubernetes.client.Configuration) -> Kube:
        return cls(kubernetes.client.ApiClient(configuration=cfg))

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    def close(self) -> None:
        try:
            if self._transport is not None:
                self._transport.close()
            self.api.close()
        except Exception:  # noqa: BLE001 - closing a pool must never mask the real error
            pass

    # -- raw ------------------------------------------------------------------------------------
    def call(self, method: str, path: str, body: Any = None, query: Iterable[tuple[str, Any]] = (),
             content_type: str | None = None, timeout: float = 30) -> Any:
        """The API of an in-memory fake (a Kube built without an ApiClient overrides this)."""
        raise NotImplementedError("a Kube without an API server behind it must override call()")

    async def acall(self, method: str, path: str, body: Any = None, query: Iterable[tuple[str, Any]] = (),
                    content_type: str | None = None, timeout: float = 30) -> Any:
        if self.counter is not None and method != "GET":
            try:
                return await self._acall(method, path, body, query, content_type, timeout)
            finally:  # once answered (or failed): what a reader sees next includes it
                self.counter.record(method, path, body)
        return await self._acall(method, path, body, query, content_type, timeout)

    async def _acall(self, method: str, path: str, body: Any, query: Iterable[tuple[str, Any]],
                     content_type: str | None, timeout: float) -> Any:
        if self._transport is None:  # an in-memory fake: its synchronous `call` is the API
            return self.call(method, path, body, list(query), content_type, timeout)
        status, reason, data = await self._transport.request(method, path, body, query, content_type, timeout)
        if not 200 <= status <= 299:
            raise _error(status, reason, data)
        return json.loads(data) if data else {}

    async def watch(self, gvk: GVK, namespace: str | None, resource_version: str,
                    timeout_seconds: int = 300) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(type, object) of each event after `resource_version` until the API server ends the stream
        (after about `timeout_seconds`); an ERROR event (410 Gone: the version is too old) raises KubeError."""
        if self._transport is None:
            raise NotImplementedError("an in-memory fake cannot stream a watch")
        query = [("watch", "1"), ("resourceVersion", resource_version), ("allowWatchBookmarks", "true"),
                 ("timeoutSeconds", timeout_seconds)]
        try:
            async for line in self._transport.lines(gvk.path(namespace), query, timeout=timeout_seconds + 30):
                ev = json.loads(line)
                obj = ev.get("object") or {}
                if ev.get("type") == "ERROR":
                    raise KubeError(int(obj.get("code") or 500), str(obj.get("reason") or "Error"),
                                    str(obj.get("message") or "watch error"), obj)
                yield str(ev.get("type")), obj
        except StreamError as e:
            raise _error(e.status, e.reason, e.data) from None

    # -- typed helpers --------------------------------------------------------------------------
    async def get(self, gvk: GVK, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            obj = await self.acall("GET", gvk.path(namespace, name))
        except KubeError as e:
            if e.not_found:
                return None
            raise
        return dict(obj)

    async def list(self, gvk: GVK, namespace: str | None = None, labels: dict[str, str] | None = None,
                   selector: str | None = None) -> builtins.list[dict[str, Any]]:
        items, _ = await self.list_with_version(gvk, namespace, labels, selector)
        return items

    async def list_with_version(self, gvk: GVK, namespace: str | None = None, labels: dict[str, str] | None = None,
                                selector: str | None = None,
                                page: int = LIST_PAGE) -> tuple[builtins.list[dict[str, Any]], str | None]:
        """Every matching object, fetched in pages of `page` (the API server's `limit`/`continue`), and the
        listing's resourceVersion (the point a watch would continue from)."""
        base: list[tuple[str, Any]] = [("limit", page)]
        sel = selector or ",".join(f"{k}={v}" for k, v in (labels or {}).items())
        if sel:
            base.append(("labelSelector", sel))
        items: builtins.list[dict[str, Any]] = []
        cont: str | None = None
        while True:
            res = await self.acall("GET", gvk.path(namespace), query=[*base, *([("continue", cont)] if cont else [])])
            items.extend(res.get("items") or [])
            meta = res.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                break
        for it in items:  # list items lack apiVersion/kind; put them back so objects are self-describing
            it.setdefault("apiVersion", gvk.api_version)
            it.setdefault("kind", gvk.kind)
        return items, meta.get("resourceVersion")

    async def create(self, gvk: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        ns = obj.get("metadata", {}).get("namespace")
        return dict(await self.acall("POST", gvk.path(ns), body=obj))

    async def apply(self, gvk: GVK, obj: dict[str, Any], subresource: str | None = None,
                    force: bool = True, manager: str = FIELD_MANAGER) -> dict[str, Any]:
        """Server-side apply as `manager`; fields this manager applied before and `obj` leaves out are
        removed by the API server (that is why the topology controller applies under its own name)."""
        md = obj["metadata"]
        q = [("fieldManager", manager), ("force", "true" if force else "false")]
        return dict(await self.acall("PATCH", gvk.path(md.get("namespace"), md["name"], subresource),
                                     body=obj, query=q, content_type="application/apply-patch+yaml"))

    async def merge_patch(self, gvk: GVK, namespace: str | None, name: str, patch: dict[str, Any],
                          subresource: str | None = None) -> dict[str, Any]:
        return dict(await self.acall("PATCH", gvk.path(namespace, name, subresource), body=patch,
                                     query=[("fieldManager", FIELD_MANAGER)],
                                     content_type="application/merge-patch+json"))

    async def json_patch(self, gvk: GVK, namespace: str | None, name: str, ops: builtins.list[dict[str, Any]],
                         subresource: str | None = None) -> dict[str, Any]:
        return dict(await self.acall("PATCH", gvk.path(namespace, name, subresource), body=ops,
                                     query=[("fieldManager", FIELD_MANAGER)],
                                     content_type="application/json-patch+json"))

    async def replace(self, gvk: GVK, obj: dict[str, Any], subresource: str | None = None) -> dict[str, Any]:
        md = obj["metadata"]
        return dict(await self.acall("PUT", gvk.path(md.get("namespace"), md["name"], subresource), body=obj,
                                     query=[("fieldManager", FIELD_MANAGER)]))

    async def patch_status(self, gvk: GVK, obj: dict[str, Any], status: dict[str, Any],
                           owned_conditions: Iterable[str] | None = None) -> dict[str, Any] | None:
        """Take `obj`'s status to `status` with one merge patch of what differs (capd_py/api/statuspatch.py);
        None when nothing does. Fields go without a resourceVersion (a field this write does not change is not
        in it); changed conditions are applied onto the newest list, re-read after a conflict, so writers
        owning different conditions of one object never undo each other."""
        sp = statuspatch.status_patch(obj.get("status"), status, owned_conditions)
        if not sp:
            return None
        md = obj["metadata"]
        ns, name = (md.get("namespace") if gvk.namespaced else None), md["name"]
        current, rv = (obj.get("status") or {}).get(statuspatch.CONDITIONS), md.get("resourceVersion")
        async for attempt in AsyncRetrying(retry=retry_if_exception(lambda e: isinstance(e, KubeError) and e.conflict),
                                           stop=stop_after_attempt(CONFLICT_RETRIES), reraise=True):
            with attempt:
                if attempt.retry_state.attempt_number > 1:  # someone else wrote: apply ours onto theirs
                    latest = await Kube.get(self, gvk, ns, name)  # from the API server, not a cache
                    if latest is None:
                        raise KubeError(404, "NotFound", f"{gvk.kind} {name} is gone")
                    current = (latest.get("status") or {}).get(statuspatch.CONDITIONS)
                    rv = latest["metadata"].get("resourceVersion")
                body: dict[str, Any] = {"status": sp.body(current)}
                if sp.conditions:  # a list: optimistic, so a condition written meanwhile is not lost
                    body["metadata"] = {"resourceVersion": rv}
                return await self.merge_patch(gvk, ns, name, body, subresource="status")
        raise AssertionError("unreachable: tenacity reraises the last conflict")

    async def delete(self, gvk: GVK, namespace: str | None, name: str,
                     propagation: str = "Background", uid: str | None = None) -> bool:
        return await self.delete_returning(gvk, namespace, name, propagation, uid) is not None

    async def delete_returning(self, gvk: GVK, namespace: str | None, name: str, propagation: str = "Background",
                               uid: str | None = None) -> dict[str, Any] | None:
        """DELETE; returns the API server's answer (the object, now carrying deletionTimestamp, while
        finalizers hold it; a Status once it is gone), or None when there was nothing (left) to delete."""
        body: dict[str, Any] = {"propagationPolicy": propagation}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            return dict(await self.acall("DELETE", gvk.path(namespace, name), body=body))
        except KubeError as e:
            if e.not_found or (e.conflict and uid):
                return None
            raise
