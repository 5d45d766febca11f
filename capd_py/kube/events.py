"""Kubernetes Events for real failures only (waiting is not an error).

A repeated failure is one Event whose `count` grows, as client-go's event correlator does: the Event's name is
derived from the object, the reason and the message, so the second report finds the first (AlreadyExists) and bumps
its count and lastTimestamp instead of adding an object per retry."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from capd_py.api.conditions import now_iso
from capd_py.api.gvk import EVENT
from capd_py.kube.client import Kube, KubeError

log = logging.getLogger("capd_py.events")

MESSAGE_LIMIT = 1000


def event_name(obj: dict[str, Any], reason: str, message: str, type_: str) -> str:
    """`<object name>.<16 hex>`: one name per (object, type, reason, message)."""
    md = obj["metadata"]
    key = "\x00".join((str(md.get("uid") or ""), obj.get("kind") or "", md["name"], type_, reason, message))
    return f"{md['name']}.{hashlib.sha256(key.encode()).hexdigest()[:16]}"


async def record(kube: Kube, obj: dict[str, Any], reason: str, message: str, type_: str = "Warning") -> None:
    md = obj["metadata"]
    message = message[:MESSAGE_LIMIT]
    namespace = md.get("namespace") or "default"
    name = event_name(obj, reason, message, type_)
    now = now_iso()
    ev = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": md["name"],
                           "namespace": md.get("namespace"), "uid": md.get("uid")},
        "reason": reason, "message": message, "type": type_,
        "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        "source": {"component": "capd-py"},
    }
    try:
        try:
            await kube.create(EVENT, ev)
        except KubeError as e:
            if e.status != 409:
                raise
            seen = await kube.get(EVENT, namespace, name)
            count = int((seen or {}).get("count") or 1) + 1
            await kube.merge_patch(EVENT, namespace, name, {"count": count, "lastTimestamp": now})
    except KubeError as e:  # events are best effort
        log.debug("event not recorded: %s", e)
