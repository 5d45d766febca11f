"""What an in-memory workload cluster's API server answers (pure: no I/O), as upstream v1.14's in-memory API server
(test/infrastructure/inmemory/pkg/server/api: handler.go's routes, const.go's discovery, watch.go's events). The
HTTPS adapter (capd_py/kube/inmemory_api_server.py) parses nothing itself: `route` says what a request is, the store
(capd_py/kube/inmemory_api.py `InMemoryAPI.call`) does it, and the functions here shape the answer.

The requests answered are upstream's: `/` (health), discovery (`/api`, `/api/v1`, `/apis`, `/apis/<g>/<v>`) of the
resources in `RESOURCES` only, and get / list / watch / create / update / patch / delete of those resources, cluster
scoped or in a namespace. Beyond upstream, so that `kubectl` shows what a real cluster shows: `/version` (upstream
has no route; `kubectl version` needs it), `/healthz` `/livez` `/readyz`, server-side tables (`kubectl get`'s Accept
header: NAME STATUS ROLES AGE VERSION for Nodes, NAME READY STATUS RESTARTS AGE for Pods, as kube-apiserver's
printers), and 404 with a Status for what is not served (upstream answers 500). Not served (upstream serves them):
pods/portforward (the etcd calls KCP makes; capd-py's controllers reach an in-memory cluster's etcd in process).
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from capd_py.api import selectors

# upstream's in-memory listeners take ports from this range (server/mux.go DefaultMinPort / DefaultMaxPort)
DEFAULT_PORTS = range(20000, 30001)

# group/version -> (resource, Kind, namespaced, short names): upstream's const.go, exactly
RESOURCES: dict[str, tuple[tuple[str, str, bool, tuple[str, ...]], ...]] = {
    "v1": (("configmaps", "ConfigMap", True, ("cm",)), ("endpoints", "Endpoints", True, ("ep",)),
           ("nodes", "Node", False, ("no",)), ("pods", "Pod", True, ("po",)), ("secrets", "Secret", True, ()),
           ("services", "Service", True, ("svc",)), ("namespaces", "Namespace", False, ("ns",)),
           ("serviceaccounts", "ServiceAccount", True, ("sa",))),
    "rbac.authorization.k8s.io/v1": (
        ("clusterrolebindings", "ClusterRoleBinding", False, ()), ("clusterroles", "ClusterRole", False, ()),
        ("rolebindings", "RoleBinding", True, ()), ("roles", "Role", True, ())),
    "apps/v1": (("daemonsets", "DaemonSet", True, ("ds",)), ("deployments", "Deployment", True, ("deploy",))),
    "storage.k8s.io/v1": (("volumeattachments", "VolumeAttachment", False, ()),
                          ("csidrivers", "CSIDriver", False, ())),
    "apiextensions.k8s.io/v1": (("customresourcedefinitions", "CustomResourceDefinition", False, ("crd", "crds")),),
    "policy/v1": (("poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",)),),
}
# the verbs discovery lists (upstream: Nodes get/list/watch only, Namespaces no deletecollection, the rest all
# eight); as upstream's routes, every verb is served whatever discovery says (the Machine controller patches Nodes)
_ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
_VERBS = {"nodes": ("get", "list", "watch"),
          "namespaces": ("create", "delete", "get", "list", "patch", "update", "watch")}

JSON = "application/json"


@dataclass(frozen=True)
class Answer:
    """A complete answer: status code and JSON body."""
    status: int
    body: Any


@dataclass(frozen=True)
class Request:
    """A resource request the store carries out: `verb` is get, list, watch, create, update, patch or delete."""
    verb: str
    path: str              # the store's path (what InMemoryAPI.call takes)
    group_version: str
    resource: str
    kind: str
    namespace: str | None
    name: str | None
    subresource: str | None = None


def status(code: int, reason: str, message: str) -> Answer:
    """An error as kube-apiserver writes it (a `Status`), which kubectl prints as `Error from server (Reason)`."""
    return Answer(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                         "message": message, "reason": reason, "code": code})


def not_found(path: str) -> Answer:
    return status(404, "NotFound", f"the server could not find the requested resource ({path})")


def _resource(gv: str, resource: str) -> tuple[str, str, bool, tuple[str, ...]] | None:
    return next((r for r in RESOURCES.get(gv, ()) if r[0] == resource), None)


def discovery(path: str) -> Answer | None:
    """The discovery documents (None: `path` is not a discovery path)."""
    parts = [p for p in path.split("/") if p]
    if parts == ["api"]:
        return Answer(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
    if parts == ["apis"]:
        groups = []
        for gv in RESOURCES:
            if "/" in gv:
                group, version = gv.split("/")
                v = {"groupVersion": gv, "version": version}
                groups.append({"name": group, "versions": [v], "preferredVersion": v})
        return Answer(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    if parts == ["api", "v1"]:
        gv = "v1"
    elif len(parts) == 3 and parts[0] == "apis":
        gv = f"{parts[1]}/{parts[2]}"
    else:
        return None
    if gv not in RESOURCES:
        return not_found(path)
    return Answer(200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": [
        {"name": n, "singularName": k.lower(), "namespaced": nsd, "kind": k, "verbs": list(_VERBS.get(n, _ALL_VERBS)),
         **({"shortNames": list(short)} if short else {})} for n, k, nsd, short in RESOURCES[gv]]})


def version_info(version: str) -> dict[str, Any]:
    """`/version` for a cluster of Kubernetes `version` (`v1.34.4`)."""
    major, minor = (version.lstrip("v").split(".") + ["0", "0"])[:2]
    return {"major": major, "minor": minor, "gitVersion": version, "gitCommit": "", "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z", "goVersion": "", "compiler": "gc", "platform": "linux/amd64"}


def route(method: str, path: str, query: Mapping[str, str], version: str) -> Answer | Request:
    """What `method path?query` asks: an Answer made here (health, version, discovery, not served) or a Request for
    the store."""
    path = "/" + path.strip("/")
    if method == "GET":
        if path in ("/", "/healthz", "/livez", "/readyz"):
            return Answer(200, "ok")
        if path == "/version":
            return Answer(200, version_info(version))
        found = discovery(path)
        if found is not None:
            return found
    parts = [p for p in path.split("/") if p]
    if parts[:2] == ["api", "v1"]:
        gv, rest = "v1", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    else:
        return not_found(path)
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return not_found(path)
    found_resource = _resource(gv, rest[0])
    if found_resource is None or (namespace is not None and not found_resource[2]):
        return not_found(path)
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub is not None and not (sub == "status" and method in ("GET", "PUT", "PATCH")):
        return status(405, "MethodNotAllowed", f"{rest[0]}/{sub} is not served by the in-memory API server")
    verb = {"GET": "get" if name else ("watch" if query.get("watch") in ("true", "1") else "list"),
            "POST": "create" if name is None else "", "PUT": "update" if name else "",
            "PATCH": "patch" if name else "", "DELETE": "delete" if name else ""}.get(method, "")
    if not verb:
        return status(405, "MethodNotAllowed", f"{method} {path} is not served by the in-memory API server")
    return Request(verb, path, gv, rest[0], found_resource[1], namespace, name, sub)


# request bodies the server reads: JSON (and YAML for server-side apply). Not protobuf (kubectl sends built-in kinds
# as protobuf first): 415 makes client-go send the request again as JSON, as kube-apiserver's 415 would.
_READABLE = ("application/json", "application/merge-patch+json", "application/strategic-merge-patch+json",
             "application/json-patch+json", "application/apply-patch+yaml", "application/yaml")


def unreadable(content_type: str) -> Answer | None:
    """415 for a request body in a media type the server cannot read, else None."""
    media = content_type.split(";")[0].strip().lower()
    if not media or media in _READABLE:
        return None
    return status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format ({media}): "
                                               f"accepted media types: {', '.join(_READABLE)}")


def typed(req: Request, body: Any) -> Any:
    """The store's answer as kube-apiserver writes it: objects with apiVersion and kind, lists as `<Kind>List`."""
    if not isinstance(body, dict):
        return body
    if body.get("kind") == "List" and req.verb == "list":
        return {**body, "apiVersion": req.group_version, "kind": f"{req.kind}List",
                "items": [_with_kind(req, it) for it in body.get("items") or []]}
    if body.get("kind") == "Status":
        return body
    return _with_kind(req, body)


def _with_kind(req: Request, obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": req.group_version, "kind": req.kind, **obj}


# -- kubectl's server-side tables -------------------------------------------------------------------------------------

def wants_table(accept: str) -> bool:
    """kubectl get asks for `application/json;as=Table;v=v1;g=meta.k8s.io` (first choice) before plain JSON."""
    first = accept.split(",")[0].replace(" ", "")
    return "as=Table" in first and "g=meta.k8s.io" in first


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery's duration.HumanDuration (what the AGE column shows)."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 8:
        return f"{d}d{h % 24}h" if h % 24 else f"{d}d"
    return f"{d}d" if d < 365 * 2 else f"{d // 365}y"


def _age(obj: dict[str, Any], now: _dt.datetime) -> str:
    ts = (obj.get("metadata") or {}).get("creationTimestamp")
    if not ts:
        return "<unknown>"
    created = _dt.datetime.strptime(str(ts), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.UTC)
    return human_duration((now - created).total_seconds())


def _node_cells(node: dict[str, Any], now: _dt.datetime) -> list[Any]:
    st = node.get("status") or {}
    ready = next((c.get("status") for c in st.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = {"True": "Ready", "False": "NotReady"}.get(str(ready), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        state += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix):] for k in ((node.get("metadata") or {}).get("labels") or {}) if k.startswith(prefix))
    return [node["metadata"]["name"], state, ",".join(roles) or "<none>", _age(node, now),
            (st.get("nodeInfo") or {}).get("kubeletVersion", "")]


def _pod_cells(pod: dict[str, Any], now: _dt.datetime) -> list[Any]:
    st = pod.get("status") or {}
    containers = (pod.get("spec") or {}).get("containers") or []
    statuses = st.get("containerStatuses")
    if statuses is None:  # the in-memory pods carry conditions only: Ready means every container is
        ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
        ready = len(containers) if ready_cond else 0
        restarts = 0
    else:
        ready = sum(1 for c in statuses if c.get("ready"))
        restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    return [pod["metadata"]["name"], f"{ready}/{len(containers)}", st.get("phase", "Pending"), restarts,
            _age(pod, now)]


_COLUMNS: dict[str, list[tuple[str, str, str]]] = {   # (name, type, format) as kube-apiserver's printers
    "nodes": [("Name", "string", "name"), ("Status", "string", ""), ("Roles", "string", ""), ("Age", "string", ""),
              ("Version", "string", "")],
    "pods": [("Name", "string", "name"), ("Ready", "string", ""), ("Status", "string", ""),
             ("Restarts", "string", ""), ("Age", "string", "")],
}
_GENERIC = [("Name", "string", "name"), ("Age", "string", "")]


def table(req: Request, body: Any, now: _dt.datetime) -> dict[str, Any]:
    """A meta.k8s.io/v1 Table of the store's answer to a get or list (rows carry the object's metadata, as with
    kubectl's default `includeObject=Metadata`)."""
    items: Iterable[dict[str, Any]] = body.get("items") or [] if req.verb == "list" else [body]
    cells = {"nodes": _node_cells, "pods": _pod_cells}.get(req.resource, lambda o, t: [o["metadata"]["name"],
                                                                                        _age(o, t)])
    rows = [{"cells": cells(it, now), "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                                 "metadata": it.get("metadata") or {}}} for it in items]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"resourceVersion": str((body.get("metadata") or {}).get("resourceVersion", ""))},
            "columnDefinitions": [{"name": n, "type": t, "format": f, "description": "", "priority": 0}
                                  for n, t, f in _COLUMNS.get(req.resource, _GENERIC)],
            "rows": rows}


# -- watches ----------------------------------------------------------------------------------------------------------

def _rv(obj: dict[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def initial_events(req: Request, listed: dict[str, Any], since: str) -> list[dict[str, Any]]:
    """A watch's first events (upstream's watchForResource): every listed object newer than `since` (all of them
    when no resourceVersion is given, as ADDED), then a BOOKMARK at the list's resourceVersion."""
    after = int(since) if since.isdigit() else 0
    events = [{"type": "ADDED" if not since or since == "0" else "MODIFIED", "object": _with_kind(req, it)}
              for it in listed.get("items") or [] if not after or _rv(it) > after]
    events.append({"type": "BOOKMARK", "object": {
        "apiVersion": req.group_version, "kind": req.kind, "metadata": {
            "resourceVersion": str((listed.get("metadata") or {}).get("resourceVersion", "0")),
            "annotations": {"k8s.io/initial-events-end": "true"}}}})
    return events


def watch_event(req: Request, query: Mapping[str, str], resource: str, kind: str, obj: dict[str, Any],
                after: int) -> dict[str, Any] | None:
    """The event a watch sends for a store change (`kind` ADDED / MODIFIED / DELETED of `obj` in `resource`), None
    when the watch does not see it: another resource, namespace, name, selectors, or not newer than `after`."""
    md = obj.get("metadata") or {}
    if resource != req.resource or (req.namespace is not None and md.get("namespace") != req.namespace):
        return None
    if _rv(obj) <= after:
        return None
    lsel, fsel = query.get("labelSelector", ""), query.get("fieldSelector", "")
    # a malformed selector was refused by the list that opened the watch
    if lsel and not selectors.matches(lsel, md.get("labels") or {}):
        return None
    if fsel and not field_match(obj, fsel):
        return None
    return {"type": kind, "object": _with_kind(req, obj)}


def field_match(obj: Mapping[str, Any], selector: str) -> bool:
    """Field selectors `a.b=v`, `a.b==v`, `a.b!=v`, comma-separated (a missing field reads "")."""
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            continue
        if "!=" in term:
            k, v = term.split("!=", 1)
            negate = True
        else:
            k, _, v = term.replace("==", "=").partition("=")
            negate = False
        cur: Any = obj
        for part in k.strip().split("."):
            cur = cur.get(part) if isinstance(cur, Mapping) else None
        if ((cur or "") == v.strip()) == negate:
            return False
    return True


# -- listeners ------------------------------------------------------------------------------------------------------

def parse_port_range(text: str) -> range:
    """`MIN-MAX` (CAPD_PY_IN_MEMORY_PORTS) as a range; ValueError naming the problem otherwise."""
    lo, sep, hi = text.strip().partition("-")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise ValueError(f"in-memory port range {text!r}: want MIN-MAX, e.g. 20000-30000")
    a, b = int(lo), int(hi)
    if not 1 <= a <= b <= 65535:
        raise ValueError(f"in-memory port range {text!r}: want 1 <= MIN <= MAX <= 65535")
    return range(a, b + 1)


def next_port(ports: range, taken: Iterable[int], start: int) -> int | None:
    """The first port of `ports` from `start` on (then wrapping round) that is not taken (upstream hands out ports in
    order from the range's start; a port freed by a deleted cluster comes round again after the rest)."""
    used = set(taken)
    if not ports:
        return None
    first = start if start in ports else ports.start
    for p in list(range(first, ports.stop)) + list(range(ports.start, first)):
        if p not in used:
            return p
    return None


def serving_hosts(host: str) -> list[str]:
    """The API server certificate's names (upstream apiServerCertificateConfig): localhost, 127.0.0.1, ::1 and the
    listener's host (an address or a name)."""
    hosts = ["localhost", "127.0.0.1", "::1"]
    try:
        addr = str(ipaddress.ip_address(host))
    except ValueError:
        addr = host
    if addr not in hosts:
        hosts.insert(0, addr)
    return hosts

