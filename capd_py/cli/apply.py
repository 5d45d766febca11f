"""`capd-py apply -f FILE`: server-side apply of multi-document YAML, any kind the server serves.

Kinds are resolved through API discovery (plural, namespaced); objects are applied in a safe order
(Namespaces and CRDs first) with the `capd-py` field manager. Every rejected object is reported, and
the command fails if any was.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tenacity import AsyncRetrying, retry_if_exception, stop_after_delay, wait_fixed

from capd_py.api.gvk import GVK, by_group_kind, group_of
from capd_py.kube.client import Kube, KubeError

# how long a write waits for capd-py's admission webhook to listen (controllers just started or restarting)
WEBHOOK_WAIT_SECONDS = 60.0

_ORDER = {"Namespace": 0, "CustomResourceDefinition": 1, "ServiceAccount": 2, "ClusterRole": 3, "Role": 3,
          "ClusterRoleBinding": 4, "RoleBinding": 4, "Secret": 5, "ConfigMap": 5}


class ApplyError(Exception):
    pass


@dataclass
class Outcome:
    ref: str            # Kind/namespace/name
    ok: bool
    detail: str         # "created"/"configured"/"unchanged" or the server's message


class Discovery:
    def __init__(self, kube: Kube):
        self.kube = kube
        self._cache: dict[str, dict[str, tuple[str, bool]]] = {}

    async def resolve(self, api_version: str, kind: str) -> GVK:
        g = by_group_kind(group_of(api_version), kind)
        if g and g.api_version == api_version:
            return g
        if api_version not in self._cache:
            path = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
            try:
                res = await self.kube.acall("GET", path)
            except KubeError as e:
                if e.not_found:
                    raise ApplyError(f"the server does not serve apiVersion {api_version!r} "
                                     "(are the CRDs installed? `capd-py init` installs them)") from None
                raise
            self._cache[api_version] = {r["kind"]: (r["name"], bool(r.get("namespaced")))
                                        for r in res.get("resources") or [] if "/" not in r["name"]}
        hit = self._cache[api_version].get(kind)
        if not hit:
            raise ApplyError(f"the server does not serve kind {kind!r} in {api_version!r}")
        group, _, version = api_version.rpartition("/")
        return GVK(group, version, kind, hit[0], hit[1])


def webhook_unreachable(e: BaseException) -> bool:
    """The API server could not reach an admission or conversion webhook (not a refusal by it): the controllers,
    which serve it, are starting or restarting. Worth a retry; a refusal is not."""
    if not isinstance(e, KubeError) or e.status != 500:
        return False
    msg = e.message or ""
    return "failed calling webhook" in msg and any(
        t in msg for t in ("connection refused", "no route to host", "i/o timeout", "context deadline exceeded",
                           "EOF", "connection reset"))


def check_objects(docs: list[dict[str, Any]]) -> None:
    errs = []
    for i, d in enumerate(docs, 1):
        missing = [k for k in ("apiVersion", "kind") if not d.get(k)]
        if not (d.get("metadata") or {}).get("name"):
            missing.append("metadata.name")
        if missing:
            errs.append(f"document {i} ({d.get('kind') or '?'}) lacks {', '.join(missing)}")
    if errs:
        raise ApplyError("; ".join(errs))


async def apply_objects(kube: Kube, docs: list[dict[str, Any]], default_namespace: str = "default",
                        dry_run: bool = False) -> list[Outcome]:
    check_objects(docs)
    disc = Discovery(kube)
    out: list[Outcome] = []
    ordered = sorted(enumerate(docs), key=lambda t: (_ORDER.get(t[1]["kind"], 10), t[0]))
    for _, d in ordered:
        md = d.setdefault("metadata", {})
        try:
            gvk = await disc.resolve(d["apiVersion"], d["kind"])
        except ApplyError as e:
            out.append(Outcome(f"{d['kind']}/{md['name']}", False, str(e)))
            continue
        if gvk.namespaced:
            md.setdefault("namespace", default_namespace)
        else:
            md.pop("namespace", None)
        ref = f"{d['kind']}/{md['name']}" if not gvk.namespaced else f"{d['kind']}/{md['namespace']}/{md['name']}"
        try:
            before = await kube.get(gvk, md.get("namespace"), md["name"])
            q = [("fieldManager", "capd-py"), ("force", "true")]
            if dry_run:
                q.append(("dryRun", "All"))
            async for attempt in AsyncRetrying(retry=retry_if_exception(webhook_unreachable), reraise=True,
                                               stop=stop_after_delay(WEBHOOK_WAIT_SECONDS), wait=wait_fixed(1)):
                with attempt:
                    after = await kube.acall("PATCH", gvk.path(md.get("namespace"), md["name"]), body=d, query=q,
                                             content_type="application/apply-patch+yaml")
        except KubeError as e:
            out.append(Outcome(ref, False, f"rejected ({e.status} {e.reason}): {e.message}"))
            continue
        if before is None:
            detail = "created"
        elif (before.get("metadata") or {}).get("resourceVersion") == (after.get("metadata") or {}).get(
                "resourceVersion"):
            detail = "unchanged"
        else:
            detail = "configured"
        out.append(Outcome(ref, True, detail + (" (dry run)" if dry_run else "")))
    return out
