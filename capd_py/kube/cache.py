"""An informer-style store of the objects the controllers watch, fed by those watch streams.

Objects are kept per kind with two indexes upstream's controllers also lean on: by owner UID and by the
`cluster.x-k8s.io/cluster-name` label. Every copy carries a resourceVersion; a copy older than the one held
is dropped, so a write's response (recorded at once by `CachedKube`) is never overwritten by an event
that was already on its way. Readers get the stored dicts and must not mutate them (`CachedKube` hands
out copies).
"""

from __future__ import annotations

import builtins
import logging
import marshal
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Protocol

from capd_py.api.gvk import GVK
from capd_py.api.labels import CLUSTER_NAME
from capd_py.api.selectors import matches

log = logging.getLogger("capd_py.cache")

Key = tuple[str, str]  # (namespace, name)
GK = tuple[str, str]   # (group, kind)


def gk(g: GVK) -> GK:
    return (g.group, g.kind)


def rv_newer(new: str | None, old: str | None) -> bool:
    """Whether `new` is at least as new as `old`. resourceVersions are opaque to clients, but every
    API server backed by etcd hands out increasing integers; anything else is taken as newer."""
    if not old or not new:
        return True
    try:
        return int(new) >= int(old)
    except ValueError:
        return True


class Reader(Protocol):
    """What watch mappers and controllers may read synchronously."""

    def get(self, g: GVK, namespace: str | None, name: str) -> dict[str, Any] | None: ...

    def list(self, g: GVK, namespace: str | None = None, labels: dict[str, str] | None = None,
             selector: str | None = None) -> list[dict[str, Any]]: ...

    def owned_by(self, g: GVK, owner_uid: str) -> builtins.list[dict[str, Any]]: ...


TOMBSTONES = 4096  # recently deleted keys remembered per kind


class _Kind:
    def __init__(self) -> None:
        self.objects: dict[Key, dict[str, Any]] = {}
        # key -> resourceVersion of its deletion: a write's response that arrives after the DELETED event
        # (the response and the watch race) must not bring the object back.
        self.tombstones: dict[Key, str] = {}
        self.by_owner: dict[str, set[Key]] = defaultdict(set)
        self.by_cluster: dict[tuple[str, str], set[Key]] = defaultdict(set)
        # key -> the stored copy marshalled, made on the first copy handed out: a stored object never changes
        # (a new version replaces it), so each copy after the first costs only marshal.loads (half the price)
        self.blobs: dict[Key, bytes] = {}
        self.synced = False

    def _index(self, key: Key, obj: dict[str, Any], add: bool) -> None:
        md = obj.get("metadata") or {}
        owners = [o.get("uid") for o in md.get("ownerReferences") or [] if o.get("uid")]
        cluster = (md.get("labels") or {}).get(CLUSTER_NAME)
        for uid in owners:
            s = self.by_owner[uid]
            s.add(key) if add else s.discard(key)
            if not s:
                del self.by_owner[uid]
        if cluster:
            ck = (key[0], cluster)
            s = self.by_cluster[ck]
            s.add(key) if add else s.discard(key)
            if not s:
                del self.by_cluster[ck]

    def put(self, obj: dict[str, Any]) -> bool:
        md = obj["metadata"]
        if "managedFields" in md:
            # nothing reads them and they are the bulk of every object: copying them on each cache read
            # was a fifth of the controllers' CPU (controller-runtime users strip them with a transform too)
            md = {k: v for k, v in md.items() if k != "managedFields"}
            obj = {**obj, "metadata": md}
        key = (md.get("namespace") or "", md["name"])
        rv = md.get("resourceVersion")
        gone = self.tombstones.get(key)
        if gone is not None:
            if rv_newer(gone, rv):
                return False
            del self.tombstones[key]  # created again since
        old = self.objects.get(key)
        if old is not None:
            if not rv_newer(rv, old["metadata"].get("resourceVersion")):
                return False
            self._index(key, old, add=False)
        self.objects[key] = obj
        self.blobs.pop(key, None)
        self._index(key, obj, add=True)
        return True

    def copy(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        """A deep copy of `obj`, one of the stored objects, from its marshalled form; None when marshal
        refuses it (the caller copies another way)."""
        md = obj["metadata"]
        key = (md.get("namespace") or "", md["name"])
        if self.objects.get(key) is not obj:
            return None
        blob = self.blobs.get(key)
        if blob is None:
            try:
                blob = self.blobs[key] = marshal.dumps(obj)
            except ValueError:
                return None
        out: dict[str, Any] = marshal.loads(blob)
        return out

    def remove(self, namespace: str, name: str, rv: str | None = None) -> None:
        key = (namespace or "", name)
        old = self.objects.get(key)
        if rv is not None:
            if old is not None and not rv_newer(rv, old["metadata"].get("resourceVersion")):
                return
            self.tombstones[key] = rv
            if len(self.tombstones) > TOMBSTONES:
                del self.tombstones[next(iter(self.tombstones))]
        if old is None:
            return
        self._index(key, old, add=False)
        del self.objects[key]
        self.blobs.pop(key, None)


class Store:
    """Objects of the kinds registered with `serve`, as the watch streams last reported them."""

    def __init__(self) -> None:
        self._kinds: dict[GK, _Kind] = {}

    # -- feeding ------------------------------------------------------------------------------------
    def serve(self, g: GVK) -> None:
        self._kinds.setdefault(gk(g), _Kind())

    def serves(self, g: GVK) -> bool:
        k = self._kinds.get(gk(g))
        return k is not None and k.synced

    def kinds(self) -> builtins.list[GK]:
        return list(self._kinds)

    def replace(self, g: GVK, objects: Iterable[dict[str, Any]], list_rv: str | None = None) -> None:
        """A full listing of the kind: keep the newer of each pair, drop what the listing no longer has
        (unless we hold a copy newer than the listing, i.e. created after it), and mark the kind synced."""
        k = self._kinds.setdefault(gk(g), _Kind())
        seen: set[Key] = set()
        for obj in objects:
            obj.setdefault("apiVersion", g.api_version)
            obj.setdefault("kind", g.kind)
            k.put(obj)
            md = obj["metadata"]
            seen.add((md.get("namespace") or "", md["name"]))
        for key in [key for key in k.objects if key not in seen]:
            held = k.objects[key]["metadata"].get("resourceVersion")
            if list_rv is None or not rv_newer(held, list_rv) or held == list_rv:
                k.remove(*key)
        k.synced = True

    def observe(self, g: GVK, obj: dict[str, Any], deleted: bool = False) -> bool:
        """One event (or a write's response). Returns whether the store changed."""
        k = self._kinds.get(gk(g))
        if k is None:
            return False
        md = obj.get("metadata") or {}
        if deleted:
            before = len(k.objects)
            k.remove(md.get("namespace") or "", md["name"], md.get("resourceVersion"))
            return len(k.objects) != before
        obj.setdefault("apiVersion", g.api_version)
        obj.setdefault("kind", g.kind)
        return k.put(obj)

    def forget(self, g: GVK, namespace: str | None, name: str) -> None:
        k = self._kinds.get(gk(g))
        if k is not None:
            k.remove(namespace or "", name)

    # -- reading ------------------------------------------------------------------------------------
    def get(self, g: GVK, namespace: str | None, name: str) -> dict[str, Any] | None:
        k = self._kinds.get(gk(g))
        return k.objects.get((namespace or "", name)) if k else None

    def list(self, g: GVK, namespace: str | None = None, labels: dict[str, str] | None = None,
             selector: str | None = None) -> list[dict[str, Any]]:
        k = self._kinds.get(gk(g))
        if k is None:
            return []
        labels = dict(labels or {})
        if namespace is not None and labels.get(CLUSTER_NAME):
            keys: Iterable[Key] = sorted(k.by_cluster.get((namespace or "", labels[CLUSTER_NAME]), ()))
        else:
            keys = sorted(key for key in k.objects if namespace is None or key[0] == (namespace or ""))
        out = []
        for key in keys:
            obj = k.objects[key]
            have = (obj.get("metadata") or {}).get("labels") or {}
            if all(have.get(lk) == lv for lk, lv in labels.items()) and (not selector or matches(selector, have)):
                out.append(obj)
        return out

    def copy(self, g: GVK, obj: dict[str, Any]) -> dict[str, Any] | None:
        """A deep copy of `obj`, an object this Store handed out for `g` (see `_Kind.copy`)."""
        k = self._kinds.get(gk(g))
        return k.copy(obj) if k is not None else None

    def owned_by(self, g: GVK, owner_uid: str) -> builtins.list[dict[str, Any]]:
        k = self._kinds.get(gk(g))
        if k is None:
            return []
        return [k.objects[key] for key in sorted(k.by_owner.get(owner_uid, ()))]

    def count(self) -> int:
        return sum(len(k.objects) for k in self._kinds.values())
