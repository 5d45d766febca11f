"""What a controller is to the Manager: its kind, reconcile function and watches, and the mappers that turn
an event on a watched object into keys of the controller's kind (they read the Store, never do I/O)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import GVK
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.context import Ctx
from capd_py.controllers.queue import Result
from capd_py.kube.cache import Reader

ReconcileFn = Callable[[Ctx, str, str], Awaitable[Result | None]]
# A mapper turns an event on a watched object into (namespace, name) keys of the controller's kind.
Mapper = Callable[[dict[str, Any], Reader], Iterable[tuple[str, str]]]
# A node mapper does the same for a Node of a workload cluster: (namespace, cluster name, node, cache).
NodeMapper = Callable[[str, str, dict[str, Any], Reader], Iterable[tuple[str, str]]]


@dataclass
class Controller:
    gvk: GVK
    reconcile: ReconcileFn
    watches: list[tuple[GVK, Mapper]] = field(default_factory=list)
    # a second controller of the same kind (the topology controller of Clusters) needs its own queue keys
    name: str = ""
    # events on workload clusters' Nodes (kube/nodewatch.py) that concern this controller
    node_watches: list[NodeMapper] = field(default_factory=list)
    # maps events of any kind this controller's objects reference (a provider's kinds, found through the contract)
    # that `watches` does not list: the Manager adds (kind, ref_mapper) when a reconcile first resolves the kind
    ref_mapper: Mapper | None = None

    @property
    def key(self) -> str:
        """The first element of this controller's queue keys (its kind unless it has a name)."""
        return self.name or self.gvk.kind


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


def referrers_mapper(g: GVK, *paths: tuple[str, ...]) -> Mapper:
    """Events on any object reach the objects of kind `g` in its namespace whose reference at one of `paths`
    ({apiGroup, kind, name}) names it: a template or provider object before it carries an owner reference."""
    def m(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
        md = obj.get("metadata") or {}
        ns = md.get("namespace") or ""
        me = (str(obj.get("apiVersion") or "").rpartition("/")[0], obj.get("kind"), md.get("name"))
        out = []
        for o in cache.list(g, ns):
            for p in paths:
                r = contract.ref(o, *p)
                if r and (r["apiGroup"], r["kind"], r["name"]) == me:
                    out.append((ns, o["metadata"]["name"]))
                    break
        return out
    return m


def cluster_label_mapper(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    """Events on any object of a cluster reach the Cluster of that name."""
    name = (obj["metadata"].get("labels") or {}).get(CLUSTER_NAME)
    return [(obj["metadata"].get("namespace") or "", name)] if name else []
