"""Contract accessors: how the core reads providers (and providers read the core) as unstructured
objects, the way upstream's internal/contract does. Only documented contract fields are touched."""

from __future__ import annotations

from typing import Any


def dig(obj: dict[str, Any] | None, *path: str, default: Any = None) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return default
        cur = cur[p]
    return cur


# --- infrastructure cluster / machine ---------------------------------------------------------

V1BETA1 = "v1beta1"


def _field(obj: dict[str, Any] | None, contract: str | None, v1beta2: tuple[str, ...],
           v1beta1: tuple[str, ...]) -> Any:
    """A contract field by the provider's contract version (its CRD's label, upstream reads one or the other):
    "v1beta1" reads the v1beta1 field, any other the v1beta2 one; None (capd-py's own kinds, whose version is
    not in question) the v1beta2 field, then the v1beta1 one."""
    if contract == V1BETA1:
        return dig(obj, *v1beta1)
    v = dig(obj, *v1beta2)
    if v is None and contract is None:
        v = dig(obj, *v1beta1)
    return v


def infra_provisioned(obj: dict[str, Any] | None, contract: str | None = None) -> bool:
    """status.initialization.provisioned (v1beta2 contract); `status.ready` (v1beta1 contract)."""
    return bool(_field(obj, contract, ("status", "initialization", "provisioned"), ("status", "ready")))


def control_plane_endpoint(obj: dict[str, Any] | None) -> dict[str, Any] | None:
    ep = dig(obj, "spec", "controlPlaneEndpoint")
    if isinstance(ep, dict) and ep.get("host") and ep.get("port"):
        return {"host": ep["host"], "port": int(ep["port"])}
    return None


def failure_domains(obj: dict[str, Any] | None, contract: str | None = None) -> list[dict[str, Any]]:
    """v1beta2: status.failureDomains is a list of {name, controlPlane, attributes}; v1beta1 a map by name."""
    fd = dig(obj, "status", "failureDomains")
    if contract == V1BETA1 and not isinstance(fd, dict) or contract not in (None, V1BETA1) and isinstance(fd, dict):
        return []
    if isinstance(fd, dict):  # v1beta1 map form
        return [{"name": k, **(v or {})} for k, v in sorted(fd.items())]
    return list(fd or [])


def provider_id(obj: dict[str, Any] | None) -> str | None:
    v = dig(obj, "spec", "providerID")
    return str(v) if v else None


def addresses(obj: dict[str, Any] | None) -> list[dict[str, Any]]:
    return list(dig(obj, "status", "addresses") or [])


def failure(obj: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """Terminal failures a provider reports (deprecated upstream but still honoured)."""
    return dig(obj, "status", "failureReason"), dig(obj, "status", "failureMessage")


# --- bootstrap config -------------------------------------------------------------------------

def bootstrap_data_secret_name(obj: dict[str, Any] | None) -> str | None:
    return dig(obj, "status", "dataSecretName")


def bootstrap_data_secret_created(obj: dict[str, Any] | None, contract: str | None = None) -> bool:
    v = _field(obj, contract, ("status", "initialization", "dataSecretCreated"), ("status", "ready"))
    return bool(v) and bool(bootstrap_data_secret_name(obj))


# --- control plane ----------------------------------------------------------------------------

def control_plane_initialized(obj: dict[str, Any] | None, contract: str | None = None) -> bool:
    """status.initialization.controlPlaneInitialized (v1beta2 contract); `status.initialized` (v1beta1)."""
    return bool(_field(obj, contract, ("status", "initialization", "controlPlaneInitialized"),
                       ("status", "initialized")))


def control_plane_replicas(obj: dict[str, Any] | None, contract: str | None = None) -> dict[str, int | None]:
    """The control plane's replica counters, read from the control plane object (upstream ControlPlane()
    Replicas/ReadyReplicas/AvailableReplicas/UpToDateReplicas): v1beta1-contract providers report upToDate under
    status.v1beta2 and no availableReplicas."""
    st = dig(obj, "status", default={}) or {}
    out = {k: st.get(k) for k in ("replicas", "readyReplicas", "availableReplicas", "upToDateReplicas")}
    if contract == V1BETA1:
        v2 = st.get("v1beta2") or {}
        out["readyReplicas"] = v2.get("readyReplicas", st.get("readyReplicas"))
        out["availableReplicas"] = v2.get("availableReplicas")
        out["upToDateReplicas"] = v2.get("upToDateReplicas")
    return out


def control_plane_version(obj: dict[str, Any] | None) -> str | None:
    return dig(obj, "status", "version") or dig(obj, "spec", "version")


# --- references -------------------------------------------------------------------------------

def ref(obj: dict[str, Any] | None, *path: str) -> dict[str, str] | None:
    """A v1beta2 ContractVersionedObjectReference {apiGroup, kind, name} found at `path`."""
    r = dig(obj, *path)
    if isinstance(r, dict) and r.get("kind") and r.get("name"):
        group = r.get("apiGroup") or r.get("apiVersion", "").rpartition("/")[0]
        return {"apiGroup": group, "kind": r["kind"], "name": r["name"]}
    return None


def owner_ref(owner: dict[str, Any], controller: bool = True) -> dict[str, Any]:
    md = owner["metadata"]
    o: dict[str, Any] = {"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                         "name": md["name"], "uid": md["uid"]}
    if controller:
        o["controller"] = True
        o["blockOwnerDeletion"] = True
    return o


def has_owner(obj: dict[str, Any], owner: dict[str, Any]) -> bool:
    uid = owner["metadata"]["uid"]
    return any(o.get("uid") == uid for o in obj.get("metadata", {}).get("ownerReferences") or [])


def core_owner_name(obj: dict[str, Any], kind: str) -> str:
    """The name of the Cluster API core object of `kind` (Cluster, Machine, ...) among `obj`'s owners, "" when none:
    upstream's GetOwnerCluster / GetOwnerMachine match the kind and the cluster.x-k8s.io group, any version."""
    for o in obj.get("metadata", {}).get("ownerReferences") or []:
        if o.get("kind") == kind and str(o.get("apiVersion", "")).startswith("cluster.x-k8s.io/"):
            return str(o.get("name") or "")
    return ""


def controller_owner(obj: dict[str, Any], kind: str | None = None) -> dict[str, Any] | None:
    for o in obj.get("metadata", {}).get("ownerReferences") or []:
        if o.get("controller") and (kind is None or o.get("kind") == kind):
            return dict(o)
    return None
