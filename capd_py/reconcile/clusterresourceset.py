"""ClusterResourceSet decisions (pure): which Clusters a ClusterResourceSet selects, what its ConfigMaps /
Secrets hold, which of them to apply to which Cluster given its ClusterResourceSetBinding, and the binding
and status to write.

Upstream (addons.cluster.x-k8s.io/v1beta2, core/reconcilers/clusterresourceset):
- spec.clusterSelector (an empty selector selects nothing), spec.resources [{kind: ConfigMap|Secret, name}],
  spec.strategy ApplyOnce (default) | Reconcile. A Secret must be of type
  `addons.cluster.x-k8s.io/resource-set`; each value of a ConfigMap's `data` / a Secret's (decoded) `data`
  is one or more YAML documents or a JSON list, applied to the workload cluster.
- The ClusterResourceSetBinding named after the Cluster records, per ClusterResourceSet
  (spec.bindings[].clusterResourceSetName), every resource applied: {kind, name, hash, lastAppliedTime,
  applied}. The hash is `sha256:` over the resource's data values in key order (Secret values decoded),
  as upstream computes it, so the two agree.
- ApplyOnce applies a resource once (creating objects; ones that already exist are left alone); Reconcile
  applies it again whenever its hash differs from the binding's.
- Condition `ResourcesApplied` (reasons Applied, NotApplied, WrongSecretType, InternalError).
- Deleting a ClusterResourceSet removes it from the bindings (an empty binding is deleted); the objects it
  applied stay in the workload clusters.

capd-py applies to a Cluster only once its control plane is initialized, and is stricter than upstream
about bad input: when a listed resource is missing, of the wrong Secret type or unparseable, nothing of
the ClusterResourceSet is applied anywhere and no binding entry is written until it is fixed.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import marshal
from dataclasses import dataclass, field
from typing import Any

import yaml

from capd_py.api import conditions as cond
from capd_py.api import contract, kubeyaml, selectors
from capd_py.api.gvk import CLUSTER_GROUP
from capd_py.api.labels import CLUSTER_NAME
from capd_py.api.runtime_hooks import OK_TO_DELETE_ANNOTATION
from capd_py.reconcile import coreutil

RESOURCES_APPLIED = "ResourcesApplied"
R_APPLIED = "Applied"
R_NOT_APPLIED = "NotApplied"
R_WRONG_SECRET_TYPE = "WrongSecretType"
R_INTERNAL_ERROR = "InternalError"


SECRET_TYPE = "addons.cluster.x-k8s.io/resource-set"
APPLY_ONCE = "ApplyOnce"
RECONCILE = "Reconcile"
KINDS = ("ConfigMap", "Secret")

# Creation order within one data value (upstream util/resource.SortForCreate); other kinds keep their order.
CREATE_ORDER = {
    "Namespace": -100, "CustomResourceDefinition": -99, "StorageClass": -98, "PersistentVolume": -97,
    "PersistentVolumeClaim": -96, "Secret": -95, "ConfigMap": -94, "ServiceAccount": -93, "LimitRange": -92,
    "Pod": -91, "ReplicaSet": -90, "Endpoint": -89,
}
# Server-populated metadata that must not be sent with a create (exported manifests often carry it).
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "selfLink")


def strategy(crs: dict[str, Any]) -> str:
    return str(contract.dig(crs, "spec", "strategy") or APPLY_ONCE)


def refs(crs: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of every listed resource, in order, without duplicates."""
    out: list[tuple[str, str]] = []
    for r in contract.dig(crs, "spec", "resources") or []:
        k = (str(r.get("kind") or ""), str(r.get("name") or ""))
        if k not in out:
            out.append(k)
    return out


# --- which clusters --------------------------------------------------------------------------------------

def selects(crs: dict[str, Any], cluster: dict[str, Any]) -> bool:
    """Same namespace and the selector matches; an empty selector selects nothing (as upstream)."""
    sel = contract.dig(crs, "spec", "clusterSelector")
    if selectors.selector_is_empty(sel):
        return False
    if (crs["metadata"].get("namespace") or "") != (cluster["metadata"].get("namespace") or ""):
        return False
    return selectors.selector_matches(sel, cluster["metadata"].get("labels"))


def matching_clusters(crs: dict[str, Any], clusters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Clusters the ClusterResourceSet applies to (not those being deleted), by name."""
    return sorted((c for c in clusters if selects(crs, c) and not coreutil.is_deleting(c)),
                  key=lambda c: c["metadata"]["name"])


def control_plane_initialized(cluster: dict[str, Any]) -> bool:
    return contract.control_plane_initialized(cluster) or cond.is_true(cluster, "ControlPlaneInitialized")


def uses(crs: dict[str, Any], kind: str, name: str) -> bool:
    return (kind, name) in refs(crs)


# --- what the resources hold -----------------------------------------------------------------------------

@dataclass
class Resource:
    kind: str
    name: str
    hash: str = ""
    objects: list[dict[str, Any]] = field(default_factory=list)
    problem: str | None = None   # why it cannot be applied (missing, wrong type, unparseable)
    reason: str = R_NOT_APPLIED  # the ResourcesApplied reason for that problem

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.name)


def compute_hash(values: list[bytes]) -> str:
    h = hashlib.sha256()
    for v in values:
        h.update(v)
    return f"sha256:{h.hexdigest()}"


def normalized_data(kind: str, obj: dict[str, Any]) -> list[bytes]:
    """The data values in key order, Secret values base64-decoded (upstream normalizeData)."""
    data = obj.get("data")
    if not isinstance(data, dict):
        raise ValueError("it has no data")
    out: list[bytes] = []
    for k in sorted(data):
        v = data[k]
        if not isinstance(v, str):
            raise ValueError(f"data[{k!r}] is not a string")
        if kind == "Secret":
            try:
                out.append(base64.b64decode(v, validate=True))
            except (binascii.Error, ValueError):
                raise ValueError(f"data[{k!r}] is not base64") from None
        else:
            out.append(v.encode())
    return out


def parse_objects(value: bytes) -> list[dict[str, Any]]:
    """One data value: a JSON list or YAML / JSON documents, each an object with apiVersion, kind and
    metadata.name; sorted for creation (stable)."""
    # every pass over every ClusterResourceSet parses its resources, and a CNI manifest is tens of KB of
    # YAML: parse each distinct value once, hand out copies (callers may change them)
    return marshal.loads(_parsed(value))  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=256)
def _parsed(value: bytes) -> bytes:
    return marshal.dumps(_parse_objects(value))


def _parse_objects(value: bytes) -> list[dict[str, Any]]:
    text = value.decode()
    docs = json.loads(text) if text.lstrip().startswith("[") else list(kubeyaml.load_all(text))
    objs: list[dict[str, Any]] = []
    for i, d in enumerate(docs, 1):
        if d is None:
            continue
        if not isinstance(d, dict):
            raise ValueError(f"document {i} is not an object")
        missing = [k for k in ("apiVersion", "kind") if not d.get(k)]
        if not isinstance(d.get("metadata"), dict) or not d["metadata"].get("name"):
            missing.append("metadata.name")
        if missing:
            raise ValueError(f"document {i} ({d.get('kind') or '?'}) lacks {', '.join(missing)}")
        objs.append(d)
    return sorted(objs, key=lambda o: CREATE_ORDER.get(str(o["kind"]), 0))


def load_resource(kind: str, name: str, obj: dict[str, Any] | None) -> Resource:
    """A listed resource as found in the management cluster (`obj` None: it does not exist)."""
    r = Resource(kind, name)
    if kind not in KINDS:
        r.problem = f"kind {kind!r} of resource {name!r} is not supported (ConfigMap or Secret)"
        return r
    if obj is None:
        r.problem = f"{kind} {name!r} does not exist"
        return r
    if kind == "Secret" and obj.get("type") != SECRET_TYPE:
        r.problem = (f"Secret {name!r} is of type {obj.get('type') or 'Opaque'!r}; a ClusterResourceSet "
                     f"takes only Secrets of type {SECRET_TYPE!r}")
        r.reason = R_WRONG_SECRET_TYPE
        return r
    try:
        values = normalized_data(kind, obj)
        r.hash = compute_hash(values)
        for v in values:
            r.objects.extend(parse_objects(v))
    except (ValueError, UnicodeDecodeError, yaml.YAMLError) as e:
        r.problem = f"{kind} {name!r} cannot be read: {one_line(str(e))}"
        r.objects = []
    return r


def one_line(s: str, limit: int = 300) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[:limit - 3] + "..."


def load_resources(crs: dict[str, Any], found: dict[tuple[str, str], dict[str, Any] | None]) -> list[Resource]:
    return [load_resource(k, n, found.get((k, n))) for k, n in refs(crs)]


def problems(resources: list[Resource]) -> list[Resource]:
    return [r for r in resources if r.problem]


# --- the objects to send ---------------------------------------------------------------------------------

def prepare(obj: dict[str, Any], namespaced: bool, default_namespace: str = "default") -> dict[str, Any]:
    """A copy fit to create / apply: namespaced objects without a namespace go to `default_namespace`
    (as kubectl does), cluster-scoped ones lose theirs, server-populated metadata is dropped."""
    out = json.loads(json.dumps(obj))
    md = out["metadata"]
    for k in _SERVER_FIELDS:
        md.pop(k, None)
    out.pop("status", None)
    if namespaced:
        md.setdefault("namespace", default_namespace)
        if not md["namespace"]:
            md["namespace"] = default_namespace
    else:
        md.pop("namespace", None)
    return out


def group_of(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def defined_kinds(objs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(group, kind) served by the CustomResourceDefinitions among `objs`."""
    out = set()
    for o in objs:
        if o.get("kind") == "CustomResourceDefinition":
            g, k = contract.dig(o, "spec", "group"), contract.dig(o, "spec", "names", "kind")
            if g and k:
                out.add((str(g), str(k)))
    return out


def created_namespaces(objs: list[dict[str, Any]]) -> set[str]:
    return {o["metadata"]["name"] for o in objs if o.get("kind") == "Namespace" and group_of(o["apiVersion"]) == ""}


def checkable(obj: dict[str, Any], batch: list[dict[str, Any]]) -> bool:
    """Whether `obj` can be validated (server dry run) before anything of `batch` is created: not when
    its kind or its namespace comes with the batch itself."""
    if (group_of(obj["apiVersion"]), obj["kind"]) in defined_kinds(batch):
        return False
    ns = (obj.get("metadata") or {}).get("namespace")
    return not (ns and ns in created_namespaces(batch))


# --- which resources to apply ----------------------------------------------------------------------------

def binding_entry(binding: dict[str, Any] | None, crs_name: str) -> dict[str, Any] | None:
    for b in contract.dig(binding, "spec", "bindings") or []:
        if b.get("clusterResourceSetName") == crs_name:
            return dict(b)
    return None


def resource_entry(entry: dict[str, Any] | None, kind: str, name: str) -> dict[str, Any] | None:
    for r in (entry or {}).get("resources") or []:
        if r.get("kind") == kind and r.get("name") == name:
            return dict(r)
    return None


def needs_apply(strat: str, entry: dict[str, Any] | None, res: Resource) -> bool:
    """ApplyOnce: until applied once. Reconcile: also whenever the hash changed."""
    got = resource_entry(entry, res.kind, res.name)
    if got is None or not got.get("applied"):
        return True
    return strat == RECONCILE and got.get("hash") != res.hash


def to_apply(crs: dict[str, Any], binding: dict[str, Any] | None, resources: list[Resource]) -> list[Resource]:
    """The resources to apply to the binding's Cluster now, in spec order (none while any is bad)."""
    if problems(resources):
        return []
    entry = binding_entry(binding, crs["metadata"]["name"])
    strat = strategy(crs)
    return [r for r in resources if needs_apply(strat, entry, r)]


@dataclass
class Applied:
    """The outcome of applying one resource to one Cluster."""
    kind: str
    name: str
    hash: str
    applied: bool
    time: str
    error: str = ""


def binding_after(binding: dict[str, Any] | None, crs: dict[str, Any], cluster: dict[str, Any],
                  results: list[Applied]) -> dict[str, Any]:
    """The binding's metadata (owner references to the Cluster and the ClusterResourceSet, the cluster-name
    label) and spec after recording `results` (upstream GetOrCreateBinding + SetBinding)."""
    crs_name = crs["metadata"]["name"]
    cname = cluster["metadata"]["name"]
    bindings = [dict(b) for b in contract.dig(binding, "spec", "bindings") or []]
    entry = next((b for b in bindings if b.get("clusterResourceSetName") == crs_name), None)
    if entry is None:
        entry = {"clusterResourceSetName": crs_name, "resources": []}
        bindings.append(entry)
    resources = [dict(r) for r in entry.get("resources") or []]
    for a in results:
        rb: dict[str, Any] = {"name": a.name, "kind": a.kind, "applied": a.applied, "lastAppliedTime": a.time}
        if a.hash:
            rb["hash"] = a.hash
        i = next((i for i, r in enumerate(resources) if r.get("kind") == a.kind and r.get("name") == a.name), None)
        if i is None:
            resources.append(rb)
        elif not a.applied and not resources[i].get("applied") and resources[i].get("hash") == rb.get("hash"):
            # the same failure again: the record already says so (retries must not rewrite it every time)
            continue
        else:
            resources[i] = rb
    entry["resources"] = resources
    md = (binding or {}).get("metadata") or {}
    # owned by its ClusterResourceSets only: the Cluster is named by spec.clusterName, and an owner reference to it
    # (capd-py's before 2026-12-06, upstream's before v1.4) is removed, as upstream's binding controller does
    # (upstream's e2e asserts exactly the ClusterResourceSet owners)
    owners = [dict(o) for o in md.get("ownerReferences") or []
              if not (o.get("kind") == "Cluster" and o.get("name") == cname
                      and str(o.get("apiVersion", "")).startswith(CLUSTER_GROUP + "/"))]
    owners = coreutil.ensured_owner_refs(owners, contract.owner_ref(crs, controller=False))
    return {
        "metadata": {"name": cname, "namespace": cluster["metadata"]["namespace"],
                     "labels": {**(md.get("labels") or {}), CLUSTER_NAME: cname}, "ownerReferences": owners},
        "spec": {"clusterName": cname, "bindings": bindings},
    }


def binding_changed(binding: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    if binding is None:
        return True
    md = binding.get("metadata") or {}
    return (contract.dig(binding, "spec", "bindings") != desired["spec"]["bindings"]
            or (md.get("labels") or {}) != desired["metadata"]["labels"]
            or (md.get("ownerReferences") or []) != desired["metadata"]["ownerReferences"])


def without_crs(binding: dict[str, Any], crs_name: str) -> dict[str, Any] | None:
    """The binding's bindings and owner references without the ClusterResourceSet `crs_name`; None when
    nothing is left (the binding is then deleted, as upstream)."""
    bindings = [b for b in contract.dig(binding, "spec", "bindings") or []
                if b.get("clusterResourceSetName") != crs_name]
    if not bindings:
        return None
    owners = [o for o in (binding.get("metadata") or {}).get("ownerReferences") or []
              if not (o.get("kind") == "ClusterResourceSet" and o.get("name") == crs_name)]
    return {"metadata": {"ownerReferences": owners}, "spec": {"bindings": bindings}}


def binding_obsolete(binding: dict[str, Any], cluster: dict[str, Any] | None, hooks_gate: bool = False) -> bool:
    """A binding whose Cluster is gone or being deleted is deleted (upstream's binding controller). With the
    RuntimeSDK and ClusterTopology gates (`hooks_gate`), a topology Cluster's binding stays until the Cluster
    carries the ok-to-delete annotation (its BeforeClusterDelete hooks let go), as upstream's."""
    if cluster is None:
        return True
    if not coreutil.is_deleting(cluster):
        return False
    hooks_hold = bool(hooks_gate and contract.dig(cluster, "spec", "topology"))
    return not hooks_hold or OK_TO_DELETE_ANNOTATION in (cluster["metadata"].get("annotations") or {})


# --- status ---------------------------------------------------------------------------------------------

@dataclass
class Outcome:
    resources: list[Resource] = field(default_factory=list)
    clusters: list[str] = field(default_factory=list)      # matching, by name
    waiting: list[str] = field(default_factory=list)       # control plane not initialized yet
    unreachable: dict[str, str] = field(default_factory=dict)  # cluster -> why its API server cannot be used
    failed: list[str] = field(default_factory=list)        # "<cluster>: <kind> <name>: <error>"


def resources_applied(out: Outcome) -> tuple[bool, str, str]:
    """(status, reason, message) of the ResourcesApplied condition."""
    bad = problems(out.resources)
    if bad:
        reason = next((r.reason for r in bad if r.reason == R_WRONG_SECRET_TYPE), R_NOT_APPLIED)
        msg = "; ".join(r.problem or "" for r in bad) + ". Nothing is applied until every resource can be read"
        return False, reason, msg
    parts: list[str] = []
    if out.failed:
        parts.append("Failed to apply to " + "; ".join(out.failed))
    if out.unreachable:
        parts.append("Cannot reach the API server of " + "; ".join(
            f"Cluster {c}: {why}" for c, why in sorted(out.unreachable.items())))
    if out.waiting:
        parts.append("Waiting for the control plane of Cluster(s) " + ", ".join(out.waiting) + " to be initialized")
    if parts:
        return False, R_NOT_APPLIED, one_line(". ".join(parts), 2000)
    if not out.clusters:
        return True, R_APPLIED, "No Cluster matches clusterSelector"
    return True, R_APPLIED, ""


def compute_status(crs: dict[str, Any], out: Outcome) -> dict[str, Any]:
    b = cond.StatusBuilder(crs)
    ok, reason, msg = resources_applied(out)
    b.set(RESOURCES_APPLIED, ok, reason, msg)
    return b.final()
