"""The admission.k8s.io/v1 AdmissionReview the webhook answers (pure: dict in, dict out): which kinds are defaulted
and validated (`WEBHOOKS`, one entry per upstream webhook), the JSON patch a defaulting answer carries, and the
Status a refusal carries."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from capd_py.api.admission import checks, core, dev, docker, kubeadm, runtime
from capd_py.api.admission.decode import decode_error, zero_null_items
from capd_py.api.admission.fielderrors import FieldError, denied_status, invalid_status

Defaulter = Callable[[dict[str, Any], dict[str, Any] | None], dict[str, Any]]
Validator = Callable[[dict[str, Any] | None, dict[str, Any], Mapping[str, bool] | None], list[FieldError]]

CORE = "cluster.x-k8s.io"
CONTROLPLANE = "controlplane.cluster.x-k8s.io"
BOOTSTRAP = "bootstrap.cluster.x-k8s.io"
INFRASTRUCTURE = "infrastructure.cluster.x-k8s.io"
RUNTIME = "runtime.cluster.x-k8s.io"
ADDONS = "addons.cluster.x-k8s.io"


@dataclass(frozen=True)
class Kind:
    group: str
    kind: str
    resource: str
    default: Defaulter | None = None
    validate: Validator | None = None
    scope: str = "Namespaced"  # the webhook rule's scope: "Cluster" for cluster-scoped kinds
    # upstream's defaulting webhook name when it is not default.<kind>.<group> (ExtensionConfig's says "addons")
    default_name: str = ""


KINDS: tuple[Kind, ...] = (
    Kind(CORE, "Cluster", "clusters", core.default_cluster, core.validate_cluster),
    Kind(CORE, "ClusterClass", "clusterclasses", None, core.validate_clusterclass),
    Kind(CORE, "Machine", "machines", core.default_machine, core.validate_machine),
    Kind(CORE, "MachineSet", "machinesets", core.default_machineset, core.validate_machineset),
    Kind(CORE, "MachineDeployment", "machinedeployments", core.default_machinedeployment,
         core.validate_machinedeployment),
    Kind(CORE, "MachinePool", "machinepools", core.default_machinepool, core.validate_machinepool),
    Kind(CORE, "MachineHealthCheck", "machinehealthchecks", core.default_machinehealthcheck,
         core.validate_machinehealthcheck),
    Kind(CONTROLPLANE, "KubeadmControlPlane", "kubeadmcontrolplanes", kubeadm.default_kubeadmcontrolplane,
         kubeadm.validate_kubeadmcontrolplane),
    Kind(CONTROLPLANE, "KubeadmControlPlaneTemplate", "kubeadmcontrolplanetemplates", None,
         kubeadm.validate_kubeadmcontrolplanetemplate),
    Kind(BOOTSTRAP, "KubeadmConfig", "kubeadmconfigs", None, kubeadm.validate_kubeadmconfig),
    Kind(BOOTSTRAP, "KubeadmConfigTemplate", "kubeadmconfigtemplates", kubeadm.default_kubeadmconfigtemplate,
         kubeadm.validate_kubeadmconfigtemplate),
    Kind(ADDONS, "ClusterResourceSet", "clusterresourcesets", core.default_clusterresourceset,
         core.validate_clusterresourceset),
    Kind(INFRASTRUCTURE, "DockerCluster", "dockerclusters", docker.default_dockercluster,
         docker.validate_dockercluster),
    Kind(INFRASTRUCTURE, "DockerClusterTemplate", "dockerclustertemplates", docker.default_dockerclustertemplate,
         docker.validate_dockerclustertemplate),
    Kind(INFRASTRUCTURE, "DevCluster", "devclusters", dev.default_devcluster, dev.validate_devcluster),
    Kind(INFRASTRUCTURE, "DevClusterTemplate", "devclustertemplates", dev.default_devclustertemplate,
         dev.validate_devclustertemplate),
    Kind(INFRASTRUCTURE, "DevMachine", "devmachines", dev.default_devmachine, dev.validate_devmachine),
    Kind(INFRASTRUCTURE, "DevMachineTemplate", "devmachinetemplates", dev.default_devmachinetemplate,
         dev.validate_devmachinetemplate),
    Kind(RUNTIME, "ExtensionConfig", "extensionconfigs", runtime.default_extensionconfig,
         runtime.validate_extensionconfig, scope="Cluster",
         default_name="default.extensionconfig.runtime.addons.cluster.x-k8s.io"),
)
_BY_RESOURCE = {(k.group, k.resource): k for k in KINDS}
VERSION = "v1beta2"
# The scale subresource of a KubeadmControlPlane: upstream's scale validator; answered from the KCP the request
# names (the caller reads it: `admit(..., read=...)`).
SCALE = (CONTROLPLANE, "kubeadmcontrolplanes", "scale")


def webhook_name(prefix: str, kind: Kind) -> str:
    """upstream's webhook names: default.machinedeployment.cluster.x-k8s.io, validation.kubeadmconfig.bootstrap..."""
    if prefix == "default" and kind.default_name:
        return kind.default_name
    return f"{prefix}.{kind.kind.lower()}.{kind.group}"


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """RFC 6902 operations taking `old` to `new` (objects key by key, anything else replaced whole)."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
            elif old[key] != value:
                ops += json_patch(old[key], value, f"{path}/{_escape(key)}")
        return ops
    return [] if old == new else [{"op": "replace", "path": path, "value": new}]


def _request_kind(request: dict[str, Any]) -> Kind | None:
    resource = request.get("resource") or {}
    return _BY_RESOURCE.get((resource.get("group", ""), resource.get("resource", "")))


# Rules the caller adds to a kind's own (those that read another object, e.g. a Cluster's ClusterClass, or that live
# above this layer, e.g. ClusterClass variable schemas): (object defaulted so far, old) -> (defaulted, problems) ...
ExtraDefaulting = Callable[[dict[str, Any], dict[str, Any] | None], tuple[dict[str, Any], list[FieldError]]]
# ... and (object, old) -> problems
ExtraValidation = Callable[[dict[str, Any], dict[str, Any] | None], list[FieldError]]


def admit(review: dict[str, Any], mutate: bool,
          read: Callable[[str, str], dict[str, Any] | None] | None = None,
          gates: Mapping[str, bool] | None = None, extra_defaulting: ExtraDefaulting | None = None,
          extra_validation: ExtraValidation | None = None, schema: Mapping[str, Any] | None = None
          ) -> dict[str, Any]:
    """The AdmissionReview answering `review`: with `mutate` the defaults as a JSON patch, else allowed or refused
    with upstream's messages. Kinds and operations without a rule are allowed unchanged. `read(namespace, name)`
    gives the KubeadmControlPlane a scale request names (a rule that needs another object, as upstream);
    `extra_defaulting` / `extra_validation`: the caller's rules (a Cluster's from its ClusterClass, the other read).
    `schema`: the kind's openAPIV3Schema: an object that does not decode into it is refused first (400), as
    upstream's decoder refuses it (decode.py).
    `gates`: the feature gates the rules depend on (capd_py/api/features.py; defaults where left out)."""
    request = review.get("request") or {}
    uid = request.get("uid", "")
    response: dict[str, Any] = {"uid": uid, "allowed": True}
    out = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return out
    resource = request.get("resource") or {}
    if (resource.get("group"), resource.get("resource"), request.get("subResource")) == SCALE:
        if not mutate and read is not None:
            replicas = int(((request.get("object") or {}).get("spec") or {}).get("replicas") or 0)
            denial = kubeadm.scale_denial(read(request.get("namespace", ""), request.get("name", "")), replicas)
            if denial is not None:
                response.update(allowed=False, status=denied_status(denial))
        return out
    kind = _request_kind(request)
    if kind is None or request.get("subResource"):
        return out
    obj = request.get("object") or {}
    old = request.get("oldObject") if operation == "UPDATE" else None
    undecodable = decode_error(obj, schema) if schema is not None else None
    if undecodable:
        response.update(allowed=False, status=denied_status(undecodable, code=400, reason="BadRequest"))
        return out
    # what the rules read: a null item of a list of structs as its zero value, as upstream's rules see it decoded (no
    # crash on it). Upstream's defaulting answers with the object re-encoded from Go, so the null comes back as `{}`
    # (the oracle: KubeadmControlPlane taints, MachineHealthCheck conditions; the schema then names the struct's
    # required fields); a defaulter that answers the object untouched (KubeadmConfigTemplate's, outside the topology
    # controller's dry runs) leaves the null for the schema to refuse
    raw = obj
    obj = zero_null_items(obj, schema) if schema is not None else obj
    if old is not None and schema is not None:
        old = zero_null_items(old, schema)
    if mutate:
        if kind.default is not None:
            try:
                defaulted = kind.default(obj, old)
            except core.DefaultingError as e:  # controller-runtime denies with the Default error's message
                response.update(allowed=False, status=denied_status(str(e)))
                return out
            # A name that is not a label value becomes a defaulted label value (MachineDeployment selector) that
            # the CRD schema refuses before the validating webhook runs, naming the labels only: refuse here with
            # what upstream's validation says (metadata.name first). Not for a name that is no object name at all:
            # the API server refuses that itself, as upstream's does (the admission oracle's #443).
            name = str((obj.get("metadata") or {}).get("name") or "")
            errors = kind.validate(old, defaulted, gates) if kind.validate is not None else []
            if not any(e.field == "metadata.name" for e in errors) or (name and checks.dns1123_subdomain_errors(name)):
                errors = []
                if extra_defaulting is not None:
                    defaulted, errors = extra_defaulting(defaulted, old)
            if errors:
                response.update(allowed=False, status=invalid_status(kind.kind, kind.group, name, errors))
                return out
            ops = json_patch(raw if defaulted is not obj else obj, defaulted)
            if ops:
                response["patchType"] = "JSONPatch"
                response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        return out
    if kind.validate is None:
        return out
    # an object being deleted only loses finalizers: never hold that up (upstream would, on rules added later)
    if old is not None and (obj.get("metadata") or {}).get("deletionTimestamp"):
        return out
    errors = kind.validate(old, obj, gates)
    if extra_validation is not None:
        errors += extra_validation(obj, old)
    if errors:
        name = str((obj.get("metadata") or {}).get("name") or request.get("name") or "")
        response.update(allowed=False, status=invalid_status(kind.kind, kind.group, name, errors))
    return out
