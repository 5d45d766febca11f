"""Kubernetes Events for real failures only (waiting is not an error)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from capd_py.api.conditions import now_iso
from capd_py.api.gvk import EVENT
from capd_py.kube.client import Kube, KubeError

log = logging.getLogger("capd_py.events")


async def record(kube: Kube, obj: dict[str, Any], reason: str, message: str, type_: str = "Warning") -> None:
    md = obj["metadata"]
    ev = {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{md['name']}.{uuid.uuid4().hex[:10]}", "namespace": md.get("namespace") or "default"},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": md["name"],
                           "namespace": md.get("namespace"), "uid": md.get("uid")},
        "reason": reason, "message": message[:1000], "type": type_,
        "firstTimestamp": now_iso(), "lastTimestamp": now_iso(), "count": 1,
        "source": {"component": "capd-py"},
    }
    try:
        await kube.create(EVENT, ev)
    except KubeError as e:  # events are best effort
        log.debug("event not recorded: %s", e)
