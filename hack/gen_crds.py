#!/usr/bin/env python3
"""Generate crds/*.yaml: the apiextensions.k8s.io/v1 CRDs capd-py serves (Cluster API v1beta2 shapes).

Run `python hack/gen_crds.py` after changing a schema (or capd_py/api/versions.py); commit the output.
`python hack/gen_crds.py --check` exits 1 if the committed YAML is stale.

Validation lives here as OpenAPI constraints and CEL (x-kubernetes-validations); what a schema cannot say is
checked by capd-py's admission webhooks (capd_py/kube/admission_webhook.py, docs/validation.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capd_py.api import gvk, versions  # noqa: E402

OUT = ROOT / "crds"
S = dict[str, Any]

# --- schema building blocks -------------------------------------------------------------------------------

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"
KIND_PATTERN = r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$"
_PREFIX = r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"  # DNS subdomain, unanchored
CONDITION_TYPE = rf"^{_PREFIX}/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
LABEL_KEY = rf"^{_PREFIX}\/)?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
QUANTITY = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)"
            r"|(\.[0-9]+))))?$")


def rule(r: str, msg: str, **kw: Any) -> S:
    return {"rule": r, "message": msg, **kw}


def cel(schema: S, *rules: S) -> S:
    schema.setdefault("x-kubernetes-validations", []).extend(rules)
    return schema


def string(desc: str = "", min_len: int | None = None, max_len: int | None = None, pattern: str | None = None,
           enum: list[str] | None = None, fmt: str | None = None, default: str | None = None) -> S:
    s: S = {"type": "string"}
    if desc:
        s["description"] = desc
    if fmt:
        s["format"] = fmt
    if min_len is not None:
        s["minLength"] = min_len
    if max_len is not None:
        s["maxLength"] = max_len
    if pattern:
        s["pattern"] = pattern
    if enum:
        s["enum"] = enum
    if default is not None:
        s["default"] = default
    return s


def integer(desc: str = "", fmt: str = "int32", minimum: int | None = None, maximum: int | None = None,
            default: int | None = None) -> S:
    s: S = {"type": "integer", "format": fmt}
    if desc:
        s["description"] = desc
    if minimum is not None:
        s["minimum"] = minimum
    if maximum is not None:
        s["maximum"] = maximum
    if default is not None:
        s["default"] = default
    return s


def boolean(desc: str = "") -> S:
    return {"type": "boolean", **({"description": desc} if desc else {})}


def date_time(desc: str = "") -> S:
    return string(desc, fmt="date-time")


def int_or_string(desc: str = "") -> S:
    return {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}],
            **({"description": desc} if desc else {})}


def obj(props: dict[str, S], required: list[str] | None = None, desc: str = "", min_props: int | None = None) -> S:
    s: S = {"type": "object"}
    if desc:
        s["description"] = desc
    if min_props is not None:
        s["minProperties"] = min_props
    s["properties"] = dict(sorted(props.items()))
    if required:
        s["required"] = sorted(required)
    return s


def open_obj(desc: str = "") -> S:
    """An object whose content we accept as is (kept, not pruned, not validated beyond being an object)."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, **({"description": desc} if desc else {})}


def str_map(desc: str = "") -> S:
    return {"type": "object", "additionalProperties": {"type": "string"}, **({"description": desc} if desc else {})}


def arr(items: S, desc: str = "", max_items: int | None = None, min_items: int | None = None,
        list_type: str | None = "atomic", map_keys: list[str] | None = None) -> S:
    s: S = {"type": "array", "items": items}
    if desc:
        s["description"] = desc
    if min_items is not None:
        s["minItems"] = min_items
    if max_items is not None:
        s["maxItems"] = max_items
    if map_keys:
        s["x-kubernetes-list-type"] = "map"
        s["x-kubernetes-list-map-keys"] = map_keys
    elif list_type:
        s["x-kubernetes-list-type"] = list_type
    return s


def immutable(schema: S, what: str) -> S:
    return cel(schema, rule("self == oldSelf", f"{what} is immutable"))


def version_field(desc: str = "The Kubernetes version, e.g. v1.34.4.", supported_range: bool = True) -> S:
    """A version string: semver, and with `supported_range` within capd-py's range. Machines and a Cluster's topology
    take any version, as upstream's webhooks do (the admission oracle's #1344, #1488): a version no node image was
    built for is the DockerMachine's ImageNotFound condition, naming the `make images` that builds it."""
    s = string(desc, min_len=1, max_len=256)
    rules = versions.cel_rules()
    return cel(s, *(rules if supported_range else rules[:1]))


def kcp_version_field() -> S:
    """KubeadmControlPlane spec.version: upstream's KCP webhook (validateVersion) forbids an update to a version
    at or above `from.major.(from.minor+2).0`, pre-releases ignored (skipping a minor); it allows any
    downgrade. Versions outside the supported range are left to the range rule (so the ints here are small)."""
    sup = versions.supported_pattern()
    if "'" in sup:
        raise AssertionError("supported_pattern() must not contain a single quote")
    guard = f"self == oldSelf || !self.matches(r'{sup}') || !oldSelf.matches(r'{sup}')"
    # the supported range has one major, so the minor decides: `to` below from.minor + 2
    return cel(version_field(), rule(
        f"{guard} || int(self.split('.')[1]) < int(oldSelf.split('.')[1]) + 2",
        "cannot update Kubernetes version by more than one minor version (a minor cannot be skipped)",
        messageExpression="'cannot update Kubernetes version from ' + oldSelf + ' to ' + self"
                          " + ': upgrade one minor version at a time'",
        reason="FieldValueForbidden"))


def percent_or_int(desc: str, field: str, max_len: int | None = None) -> S:
    s = int_or_string(desc)
    if max_len is not None:  # bounds the CEL cost where the field repeats (lists of topologies)
        s["maxLength"] = max_len
    return cel(s, rule(
        "type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",
        f"{field} must be either a non-negative int or a percentage (e.g. 40%)"))


def contract_ref(desc: str) -> S:
    """v1beta2 ContractVersionedObjectReference: {apiGroup, kind, name}, same namespace."""
    return obj({
        "apiGroup": string("API group of the referenced object, e.g. infrastructure.cluster.x-k8s.io.",
                           1, 253, DNS1123_SUBDOMAIN),
        "kind": string("Kind of the referenced object.", 1, 63, KIND_PATTERN),
        "name": string("Name of the referenced object (same namespace).", 1, 253, DNS1123_SUBDOMAIN),
    }, ["apiGroup", "kind", "name"], desc)


CONDITION = obj({
    "type": string("Type of condition in CamelCase.", 1, 316, CONDITION_TYPE),
    "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
    "observedGeneration": integer(fmt="int64", minimum=0),
    "lastTransitionTime": date_time("When the condition last changed status."),
    "reason": string("Machine-readable CamelCase reason.", 1, 1024,
                     r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
    "message": string("Human-readable details.", max_len=32768),
}, ["lastTransitionTime", "message", "reason", "status", "type"], "A metav1.Condition.")


def conditions() -> S:
    return arr(CONDITION, "Current observed state as metav1.Conditions.", max_items=32, map_keys=["type"])


def deprecated() -> S:
    return obj({"v1beta1": open_obj("v1beta1 status fields kept for compatibility (ready, failureReason, ...).")},
               desc="Deprecated status fields, to be removed with v1beta1 support.")


def object_meta(desc: str = "Labels and annotations applied to generated objects.") -> S:
    """A template's metadata (upstream's ObjectMeta: at least one of labels/annotations when present)."""
    labels = {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}}  # label value limit
    return obj({"labels": labels, "annotations": str_map()}, desc=desc, min_props=1)


def label_selector(desc: str) -> S:
    # nullable: upstream templates write `matchLabels:` (null); a create drops it, but server-side apply
    # would reject a null for a non-nullable field, so accept null here to keep SSA of such manifests working
    return obj({
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63},
                        "maxProperties": 64, "nullable": True},
        "matchExpressions": arr(obj({
            "key": string(),
            "operator": string(enum=["In", "NotIn", "Exists", "DoesNotExist"]),
            "values": arr(string()),
        }, ["key", "operator"])),
    }, desc=desc)


def api_endpoint(desc: str) -> S:
    return obj({"host": string("Hostname or IP.", 1, 512), "port": integer("Port.", minimum=1, maximum=65535)},
               desc=desc, min_props=1)


def failure_domains(desc: str) -> S:
    return arr(obj({
        "name": string("Name of the failure domain.", 1, 256),
        "controlPlane": boolean("Whether control plane machines may be placed in it."),
        "attributes": str_map(),
    }, ["name"]), desc, max_items=100, min_items=1, map_keys=["name"])


def addresses() -> S:
    return arr(obj({
        "type": string(enum=["Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"]),
        "address": string(min_len=1, max_len=256),
    }, ["address", "type"]), "Addresses of the machine.", max_items=256)


def replica_summary() -> dict[str, S]:
    return {k: integer() for k in ("replicas", "readyReplicas", "availableReplicas", "upToDateReplicas")}


def version_counts() -> S:
    return arr(obj({"version": string(min_len=1, max_len=256), "replicas": integer(minimum=1)}, ["version"]),
               max_items=100, min_items=1, map_keys=["version"])


def deletion_timeouts() -> S:
    return obj({k: integer(f"{k} (0 means wait forever).", minimum=0) for k in
                ("nodeDrainTimeoutSeconds", "nodeVolumeDetachTimeoutSeconds", "nodeDeletionTimeoutSeconds")},
               min_props=1)


def readiness_gates() -> S:
    return arr(obj({"conditionType": string(min_len=1, max_len=316, pattern=CONDITION_TYPE),
                    "polarity": string(enum=["Positive", "Negative"])}, ["conditionType"]),
               max_items=32, min_items=1, map_keys=["conditionType"])


def machine_taints() -> S:
    return arr(obj({
        "key": string(min_len=1, max_len=317, pattern=LABEL_KEY),
        "value": string(min_len=1, max_len=63, pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"),
        "effect": string(enum=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
        "propagation": string(enum=["Always", "OnInitialization"]),
    }, ["effect", "key", "propagation"]), max_items=64, min_items=1, map_keys=["key", "effect"])


def cluster_name() -> S:
    # immutable, and equal to the template's, by the webhooks as upstream's (capd_py/api/admission/core.py): a CEL
    # rule here would answer before them, with other causes than upstream's (the admission oracle, docs/conformance.md)
    return string("Name of the Cluster this object belongs to.", 1, 63)


def bootstrap() -> S:
    # one of configRef / dataSecretName: the Machine/MachineSet/MachineDeployment/MachinePool webhooks, as upstream's
    return obj({
        "configRef": contract_ref("Reference to the bootstrap config (e.g. a KubeadmConfig)."),
        "dataSecretName": string("Name of a Secret holding bootstrap data (skips the bootstrap provider).",
                                 0, 253),
    }, desc="How the machine gets its bootstrap data.")


def machine_spec(for_machine: bool) -> S:
    # upstream's Machine webhook lets infrastructureRef / bootstrap.configRef change (no immutability rule)
    infra = contract_ref("Reference to the infrastructure machine (e.g. a DockerMachine).")
    boot = bootstrap()
    return obj({
        "clusterName": cluster_name(),
        "bootstrap": boot,
        "infrastructureRef": infra,
        "version": version_field(supported_range=False),
        "providerID": string("Provider ID of the node, set by the infrastructure provider.", 1, 512),
        "failureDomain": string("Failure domain to place the machine in.", 1, 256),
        "minReadySeconds": integer(minimum=0),
        "readinessGates": readiness_gates(),
        "deletion": deletion_timeouts(),
        "taints": machine_taints(),
    }, ["bootstrap", "clusterName", "infrastructureRef"])


def machine_template() -> S:
    return obj({"metadata": object_meta(), "spec": machine_spec(False)}, ["spec"],
               "Template for the Machines to create.")


# --- kubeadm ---------------------------------------------------------------------------------------------

def extra_args(what: str = "extraArgs") -> S:
    return cel(arr(obj({"name": string(min_len=1, max_len=256), "value": string(min_len=0, max_len=1024)},
                       ["name", "value"]), f"{what} as a list of name/value pairs.",
                   max_items=100, min_items=1, map_keys=["name", "value"]),
               rule("self.all(x, self.exists_one(y, x.name == y.name))", f"{what} names must be unique"))


def control_plane_component() -> S:
    return obj({"extraArgs": extra_args(), "extraEnvs": arr(open_obj(), max_items=100, min_items=1),
                "extraVolumes": arr(open_obj(), max_items=100, min_items=1)}, min_props=1)


def cluster_configuration(kcp: bool) -> S:
    apiserver = control_plane_component()
    apiserver["properties"]["certSANs"] = arr(string(min_len=1, max_len=253), max_items=100, min_items=1)
    apiserver["properties"] = dict(sorted(apiserver["properties"].items()))
    etcd_local = obj({
        "dataDir": string(min_len=1, max_len=512),
        "extraArgs": extra_args(),
        "extraEnvs": arr(open_obj(), max_items=100, min_items=1),
        "imageRepository": string(min_len=1, max_len=512),
        "imageTag": string(min_len=1, max_len=256),
        "peerCertSANs": arr(string(min_len=1, max_len=253), max_items=100, min_items=1),
        "serverCertSANs": arr(string(min_len=1, max_len=253), max_items=100, min_items=1),
    }, min_props=1)
    etcd_external = obj({
        "endpoints": arr(string(min_len=1, max_len=512), max_items=50, min_items=1),
        "caFile": string(min_len=1, max_len=512),
        "certFile": string(min_len=1, max_len=512),
        "keyFile": string(min_len=1, max_len=512),
    }, ["caFile", "certFile", "endpoints", "keyFile"])
    s = obj({
        "apiServer": apiserver,
        "controllerManager": control_plane_component(),
        "scheduler": control_plane_component(),
        "etcd": obj({"local": etcd_local, "external": etcd_external}, min_props=1),
        "dns": obj({"imageRepository": string(min_len=1, max_len=512), "imageTag": string(min_len=1, max_len=256)},
                   min_props=1),
        "certificatesDir": string(min_len=1, max_len=512),
        "controlPlaneEndpoint": string("host[:port] of the control plane (usually derived from the Cluster).",
                                       1, 512),
        "imageRepository": string(min_len=1, max_len=512),
        "featureGates": {"type": "object", "additionalProperties": {"type": "boolean"}},
        "caCertificateValidityPeriodDays": integer(minimum=1, maximum=36500),
        "certificateValidityPeriodDays": integer(minimum=1, maximum=1095),
        "encryptionAlgorithm": string(enum=["ECDSA-P256", "ECDSA-P384", "RSA-2048", "RSA-3072", "RSA-4096"]),
    }, desc="kubeadm ClusterConfiguration.", min_props=1)
    if kcp:  # KCP: only the fields upstream lets change may change (webhook allow-list upstream)
        for f in ("certificatesDir", "controlPlaneEndpoint", "caCertificateValidityPeriodDays"):
            cel(s, rule(f"has(self.{f}) == has(oldSelf.{f}) && (!has(self.{f}) || self.{f} == oldSelf.{f})",
                        f"kubeadmConfigSpec.clusterConfiguration.{f} cannot be modified",
                        fieldPath=f".{f}"))
    return s


def node_registration() -> S:
    return obj({
        "name": string(min_len=1, max_len=253),
        "criSocket": string(min_len=1, max_len=512),
        "taints": arr(obj({"key": string(), "value": string(), "effect": string(), "timeAdded": date_time()},
                          ["effect", "key"]), max_items=100, min_items=0, list_type=None),
        "kubeletExtraArgs": extra_args("kubeletExtraArgs"),
        "ignorePreflightErrors": arr(string(min_len=1, max_len=512), max_items=50, min_items=1),
        "imagePullPolicy": string(enum=["Always", "IfNotPresent", "Never"]),
        "imagePullSerial": boolean(),
    }, min_props=1)


def local_api_endpoint() -> S:
    return obj({"advertiseAddress": string(min_len=1, max_len=39), "bindPort": integer(minimum=1)}, min_props=1)


def init_configuration() -> S:
    return obj({
        "bootstrapTokens": arr(open_obj(), max_items=100, min_items=1),
        "localAPIEndpoint": local_api_endpoint(),
        "nodeRegistration": node_registration(),
        "patches": open_obj(),
        "skipPhases": arr(string(min_len=1, max_len=256), max_items=50, min_items=1),
        "timeouts": open_obj(),
    }, desc="kubeadm InitConfiguration.", min_props=1)


def join_configuration() -> S:
    return obj({
        "caCertPath": string(min_len=1, max_len=512),
        "controlPlane": obj({"localAPIEndpoint": local_api_endpoint()}),
        "discovery": obj({
            "bootstrapToken": obj({
                "apiServerEndpoint": string(min_len=1, max_len=512),
                "caCertHashes": arr(string(min_len=1, max_len=512), max_items=100, min_items=1),
                "token": string(min_len=1, max_len=512),
                "unsafeSkipCAVerification": boolean(),
            }, min_props=1),
            "file": open_obj(),
            "tlsBootstrapToken": string(min_len=1, max_len=512),
        }, min_props=1),
        "nodeRegistration": node_registration(),
        "patches": open_obj(),
        "skipPhases": arr(string(min_len=1, max_len=256), max_items=50, min_items=1),
        "timeouts": open_obj(),
    }, desc="kubeadm JoinConfiguration.", min_props=1)


def kubeadm_config_spec(kcp: bool = False) -> S:
    cmds = arr(string(min_len=1, max_len=10240), max_items=1000, min_items=1)
    return obj({
        "clusterConfiguration": cluster_configuration(kcp),
        "initConfiguration": init_configuration(),
        "joinConfiguration": join_configuration(),
        "files": arr(obj({
            "path": string(min_len=1, max_len=512),
            "owner": string(min_len=1, max_len=256),
            "permissions": string(min_len=1, max_len=16),
            "encoding": string(enum=["base64", "gzip", "gzip+base64"]),
            "append": boolean(),
            "content": string(min_len=1, max_len=10240),
            "contentFormat": string(enum=["Raw", "Template"]),
            "contentFrom": obj({"secret": obj({"name": string(min_len=1, max_len=253),
                                               "key": string(min_len=1, max_len=256)}, ["key", "name"])},
                               ["secret"]),
        }, ["path"]), "Files to write on the node.", max_items=200, min_items=1),
        "diskSetup": open_obj(),
        "mounts": arr(arr(string(min_len=1, max_len=512), max_items=100, min_items=1, list_type=None),
                      max_items=100, min_items=1),
        "bootCommands": cmds,
        "preKubeadmCommands": cmds,
        "postKubeadmCommands": cmds,
        "users": arr({**obj({"name": string("User name.", 1, 256)}, ["name"]),
                      "x-kubernetes-preserve-unknown-fields": True}, "Users to create on the node.",
                     max_items=100, min_items=1),
        "ntp": obj({"enabled": boolean(), "servers": arr(string(min_len=1, max_len=512), max_items=100)},
                   min_props=1),
        "format": string(enum=["cloud-config", "ignition"]),
        "ignition": open_obj(),
        "verbosity": integer(),
    }, desc="kubeadm bootstrap configuration.", min_props=1)


# --- ClusterClass and Cluster.spec.topology (managed topology) --------------------------------------------
# Upstream release-1.13's v1beta2 shapes. Upstream's CRDs carry no CEL here; its ClusterClass and Cluster
# webhooks do the checking. The checks CEL can express (within the apiserver's cost budget) are rules here;
# the ones it cannot (a patch's variable or selector must exist in the class, variable schemas must be
# structural, Go templates must parse, anything needing another object) are the topology controller's,
# reported in conditions. docs/DEVELOPING.md "Validation" lists both.

API_VERSION = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/[a-z]([-a-z0-9]*[a-z0-9])?$"
# patches[].definitions[].jsonPatches[] bounds (upstream: 1000, 100, 100). With upstream's, the apiserver
# estimates every jsonPatch rule at over its per-rule CEL cost budget (1000 x 100 x 100 evaluations); with the
# innermost list unbounded it estimates from the request size instead, and the rules fit.
PATCHES, PATCH_DEFINITIONS, PATCH_JSON_PATCHES = 1000, 100, None
# int-or-percent strings of class/topology lists: bounded so the CEL rule's cost fits the apiserver's budget
# (a longer one is not a valid int32 percentage; upstream's webhook rejects it too, short of zero padding)
PERCENT_MAX_LEN = 32
AUTOSCALER_MIN = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALER_MAX = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
# upstream's patch webhook: a valueFrom.variable under builtin. must be one of these
BUILTIN_VARIABLES = (
    "builtin", "builtin.cluster", "builtin.cluster.name", "builtin.cluster.namespace", "builtin.cluster.uid",
    "builtin.cluster.metadata.labels", "builtin.cluster.metadata.annotations",
    "builtin.cluster.topology", "builtin.cluster.topology.classRef.name", "builtin.cluster.topology.classRef.namespace",
    "builtin.cluster.topology.class", "builtin.cluster.topology.classNamespace", "builtin.cluster.topology.version",
    "builtin.cluster.network", "builtin.cluster.network.serviceDomain", "builtin.cluster.network.services",
    "builtin.cluster.network.pods",
    "builtin.controlPlane", "builtin.controlPlane.name", "builtin.controlPlane.replicas",
    "builtin.controlPlane.version", "builtin.controlPlane.metadata.labels",
    "builtin.controlPlane.metadata.annotations", "builtin.controlPlane.machineTemplate.infrastructureRef.name",
    "builtin.machineDeployment", "builtin.machineDeployment.class", "builtin.machineDeployment.name",
    "builtin.machineDeployment.replicas", "builtin.machineDeployment.topologyName",
    "builtin.machineDeployment.version", "builtin.machineDeployment.metadata.labels",
    "builtin.machineDeployment.metadata.annotations", "builtin.machineDeployment.bootstrap.configRef.name",
    "builtin.machineDeployment.infrastructureRef.name",
    "builtin.machinePool", "builtin.machinePool.class", "builtin.machinePool.name", "builtin.machinePool.replicas",
    "builtin.machinePool.topologyName", "builtin.machinePool.version", "builtin.machinePool.metadata.labels",
    "builtin.machinePool.metadata.annotations", "builtin.machinePool.bootstrap.configRef.name",
    "builtin.machinePool.infrastructureRef.name",
)


def any_value(desc: str = "") -> S:
    """Any JSON value (object, list, string, number, bool), kept as is."""
    return {"x-kubernetes-preserve-unknown-fields": True, **({"description": desc} if desc else {})}


def template_ref(desc: str, compatible: bool = False) -> S:
    """ClusterClassTemplateReference {apiVersion, kind, name}. Upstream's ClusterClass webhook: the kind is a
    `<name>Template`; with `compatible`, an update keeps the group and kind (only the name/version may change)."""
    s = obj({
        "apiVersion": string("apiVersion of the template (group/version).", 1, 317, API_VERSION),
        "kind": string("Kind of the template.", 1, 63, KIND_PATTERN),
        "name": string("Name of the template (same namespace as the ClusterClass).", 1, 253, DNS1123_SUBDOMAIN),
    }, ["apiVersion", "kind", "name"], desc)
    cel(s, rule("self.kind.endsWith('Template') && size(self.kind) > 8",
                'template kind must be of form "<name>Template"', fieldPath=".kind"))
    if compatible:
        cel(s,
            rule("self.kind == oldSelf.kind", "kind cannot be changed, to prevent incompatible changes in the "
                 "Clusters", fieldPath=".kind"),
            rule("self.apiVersion.split('/')[0] == oldSelf.apiVersion.split('/')[0]",
                 "group of apiVersion cannot be changed, to prevent incompatible changes in the Clusters",
                 fieldPath=".apiVersion"))
    return s


def template_of(desc: str, compatible: bool = False) -> S:
    return obj({"templateRef": template_ref(desc, compatible)}, ["templateRef"])


def topology_metadata(desc: str = "Labels and annotations for the generated objects.") -> S:
    return object_meta(desc)


def naming() -> S:
    return obj({"template": string("Go template for the generated object's name ({{ .cluster.name }}, "
                                   "{{ .random }}, ...).", 1, 1024)},
               desc="How the generated objects are named.", min_props=1)


def mhc_checks() -> S:
    return obj({
        "nodeStartupTimeoutSeconds": cel(integer("How long a Machine may take to get a Node (0 disables).",
                                                 minimum=0),
                                         rule("self == 0 || self >= 30",
                                              "nodeStartupTimeoutSeconds must be 0 or at least 30 seconds")),
        "unhealthyNodeConditions": arr(obj({"type": string(min_len=1), "status": string(min_len=1),
                                            "timeoutSeconds": integer(minimum=0)},
                                           ["status", "timeoutSeconds", "type"]), max_items=100, min_items=1),
        "unhealthyMachineConditions": arr(obj({
            "type": cel(string(min_len=1, max_len=316, pattern=CONDITION_TYPE), rule(
                "!(self in ['Ready','Available','HealthCheckSucceeded','OwnerRemediated','ExternallyRemediated'])",
                "type must not be one of: Ready, Available, HealthCheckSucceeded, OwnerRemediated, "
                "ExternallyRemediated")),
            "status": string(enum=["True", "False", "Unknown"]),
            "timeoutSeconds": integer(minimum=0)}, ["status", "timeoutSeconds", "type"]),
            max_items=100, min_items=1),
    }, min_props=1)


def mhc_trigger_if(max_len: int | None = None) -> S:
    return obj({
        "unhealthyLessThanOrEqualTo": percent_or_int(
            "Remediate only while at most this many (or this percentage of) targets are unhealthy "
            "(the v1beta1 maxUnhealthy).",
            "unhealthyLessThanOrEqualTo", max_len),
        "unhealthyInRange": string("Remediate only while the unhealthy count is in [min-max].", 1, 32,
                                   r"^\[[0-9]+-[0-9]+\]$"),
    }, min_props=1)


def health_check(max_in_flight: bool, enabled: bool) -> S:
    """The MachineHealthCheck a ClusterClass (or a Cluster topology, with `enabled`) asks for."""
    remediation: S = {
        "triggerIf": mhc_trigger_if(PERCENT_MAX_LEN),
        "templateRef": obj({
            "apiVersion": string(min_len=1, max_len=317, pattern=API_VERSION),
            "kind": string(min_len=1, max_len=63, pattern=KIND_PATTERN),
            "name": string(min_len=1, max_len=253, pattern=DNS1123_SUBDOMAIN),
        }, ["apiVersion", "kind", "name"], "External remediation template."),
    }
    if max_in_flight:
        remediation["maxInFlight"] = percent_or_int("Max machines remediated at once.", "maxInFlight",
                                                    PERCENT_MAX_LEN)
    props: S = {"checks": mhc_checks(), "remediation": obj(remediation, min_props=1)}
    if enabled:
        props["enabled"] = boolean("Create the MachineHealthCheck (default: when a definition exists).")
    return obj(props, desc="MachineHealthCheck for the generated Machines.", min_props=1)


def md_deletion() -> S:
    s = deletion_timeouts()
    s["properties"]["order"] = string("Which Machines are deleted first on scale down.",
                                      enum=["Random", "Newest", "Oldest"])
    s["properties"] = dict(sorted(s["properties"].items()))
    return s


def md_rollout(after: bool) -> S:
    """MachineDeployment rollout of a class or topology. Upstream's webhook: maxSurge/maxUnavailable are
    int-or-percent and not both 0."""
    rolling = cel(obj({
        "maxSurge": percent_or_int("Max machines above desired during rollout.", "maxSurge", PERCENT_MAX_LEN),
        "maxUnavailable": percent_or_int("Max unavailable machines during rollout.", "maxUnavailable",
                                         PERCENT_MAX_LEN),
    }, min_props=1), rule(
        "!(has(self.maxSurge) && has(self.maxUnavailable) && type(self.maxSurge) == int && "
        "type(self.maxUnavailable) == int && self.maxSurge == 0 && self.maxUnavailable == 0)",
        "maxUnavailable and maxSurge cannot both be 0"))
    props: S = {"strategy": obj({"type": string(enum=["RollingUpdate", "OnDelete"]), "rollingUpdate": rolling},
                                ["type"], min_props=1)}
    if after:
        props["after"] = date_time("Roll out all machines created before this time.")
    return obj(props, min_props=1)


def class_name() -> S:
    return string("Name of the class, referenced by Cluster topologies.", 1, 256)


def machine_deployment_class() -> S:
    return obj({
        "class": class_name(),
        "metadata": topology_metadata(),
        "bootstrap": template_of("Bootstrap config template (e.g. a KubeadmConfigTemplate)."),
        "infrastructure": template_of("Infrastructure machine template (e.g. a DockerMachineTemplate).", True),
        "healthCheck": health_check(max_in_flight=True, enabled=False),
        "failureDomain": string("Failure domain for the Machines.", 1, 256),
        "naming": naming(),
        "deletion": md_deletion(),
        "minReadySeconds": integer(minimum=0),
        "readinessGates": readiness_gates(),
        "rollout": md_rollout(after=False),
        "taints": machine_taints(),
    }, ["bootstrap", "class", "infrastructure"], "A class of MachineDeployments.")


def machine_pool_class() -> S:
    return obj({
        "class": class_name(),
        "metadata": topology_metadata(),
        "bootstrap": template_of("Bootstrap config template (e.g. a KubeadmConfigTemplate)."),
        "infrastructure": template_of("Infrastructure machine pool template (e.g. a DockerMachinePoolTemplate).",
                                      True),
        "failureDomains": arr(string(min_len=1, max_len=256), "Failure domains for the pool.", max_items=100),
        "naming": naming(),
        "deletion": deletion_timeouts(),
        "minReadySeconds": integer(minimum=0),
        "taints": machine_taints(),
    }, ["bootstrap", "class", "infrastructure"], "A class of MachinePools.")


def variable_metadata(desc: str) -> S:
    return obj({"labels": str_map(), "annotations": str_map()}, desc=desc, min_props=1)


def json_schema_props() -> S:
    """A ClusterClass variable's schema (upstream's JSONSchemaProps): the recursive parts are kept as given."""
    num = {k: integer(fmt="int64") for k in ("maxItems", "maxLength", "maxProperties", "maximum", "minItems",
                                             "minLength", "minProperties", "minimum")}
    validation = obj({
        "rule": string(min_len=1, max_len=4096),
        "message": string(min_len=1, max_len=512),
        "messageExpression": string(min_len=1, max_len=1024),
        "reason": string(enum=["FieldValueInvalid", "FieldValueForbidden", "FieldValueRequired",
                               "FieldValueDuplicate"], default="FieldValueInvalid"),
        "fieldPath": string(min_len=1, max_len=512),
    }, ["rule"])
    return obj({
        **num,
        **{k: any_value() for k in ("additionalProperties", "allOf", "anyOf", "default", "example", "items", "not",
                                    "oneOf", "properties")},
        "description": string(min_len=1, max_len=4096),
        "enum": arr(any_value(), max_items=100),
        "exclusiveMaximum": boolean(), "exclusiveMinimum": boolean(),
        "format": string(min_len=1, max_len=32),
        "pattern": string(min_len=1, max_len=512),
        "required": arr(string(min_len=1, max_len=256), max_items=1000, min_items=1),
        "type": string(enum=["object", "array", "string", "integer", "number", "boolean"]),
        "uniqueItems": boolean(),
        "x-kubernetes-int-or-string": boolean(),
        "x-kubernetes-preserve-unknown-fields": boolean(),
        "x-kubernetes-validations": arr(validation, max_items=100, min_items=1, map_keys=["rule"]),
        "x-metadata": variable_metadata("Labels and annotations for the variable's field."),
    }, desc="OpenAPI v3 schema of the variable's value (a subset of JSONSchemaProps).", min_props=1)


def variable_definition(status: bool) -> S:
    props: S = {
        "required": boolean("Whether the variable must be set in every Cluster topology."),
        "deprecatedV1Beta1Metadata": variable_metadata("v1beta1 metadata of the variable (deprecated)."),
        "schema": obj({"openAPIV3Schema": json_schema_props()}, ["openAPIV3Schema"]),
    }
    if status:
        props["from"] = string("Where the definition comes from: inline or a patch name.", 1, 256)
        return obj(props, ["from", "required", "schema"])
    props["name"] = cel(string("Name of the variable (not builtin, no dots).", 1, 256),
                        rule("self != 'builtin'", '"builtin" is a reserved variable name'),
                        rule("!self.contains('.')", 'variable name cannot contain "."'))
    return obj(props, ["name", "required", "schema"], "A variable Cluster topologies set and patches read.")


def match_resources() -> S:
    names = arr(string(min_len=1, max_len=256), "Class names; a single \"*\" at the start or end matches "
                "several.", max_items=100)
    return cel(obj({
        "controlPlane": boolean("Match the control plane template and its machine infrastructure template."),
        "infrastructureCluster": boolean("Match the infrastructure cluster template."),
        "machineDeploymentClass": obj({"names": names}),
        "machinePoolClass": obj({"names": names}),
    }, min_props=1), rule(
        "(has(self.controlPlane) && self.controlPlane) || "
        "(has(self.infrastructureCluster) && self.infrastructureCluster) || "
        "(has(self.machineDeploymentClass) && has(self.machineDeploymentClass.names) && "
        "size(self.machineDeploymentClass.names) > 0) || "
        "(has(self.machinePoolClass) && has(self.machinePoolClass.names) && size(self.machinePoolClass.names) > 0)",
        "no selector enabled: set controlPlane or infrastructureCluster to true, or list class names"))


def json_patch() -> S:
    """One JSON patch operation. Upstream's webhook checks these only for add/replace (remove takes no
    value); the rules here say the same."""
    set_op = "(self.op == 'add' || self.op == 'replace')"
    return cel(obj({
        "op": string("add, replace or remove.", enum=["add", "replace", "remove"]),
        "path": string("JSON pointer into the template, starting with /spec.", 1, 512),
        "value": any_value("The value to set (any JSON value)."),
        "valueFrom": obj({
            "variable": string("Variable (or builtin.*) whose value is set.", 1, 256),
            "template": string("Go template rendering the value.", 1, 10240),
        }, desc="Where the value comes from."),
    }, ["op", "path"]),
        rule("self.path.startsWith('/spec')", 'jsonPatch path must start with "/spec"', fieldPath=".path"),
        rule(f"!{set_op} || !has(self.valueFrom) || has(self.valueFrom.variable) || has(self.valueFrom.template)",
             "valueFrom must set either template or variable", fieldPath=".valueFrom"),
        rule(f"!{set_op} || !has(self.valueFrom) || !has(self.valueFrom.variable) || "
             "!has(self.valueFrom.template)",
             "valueFrom can not set both template and variable", fieldPath=".valueFrom"),
        *builtin_variable_rules(f"!{set_op} || !has(self.valueFrom) || !has(self.valueFrom.variable)"))


def builtin_variable_rules(guard: str) -> list[S]:
    """valueFrom.variable under builtin. must be one of BUILTIN_VARIABLES; one rule per group keeps each
    rule's cost within the apiserver's per-rule budget."""
    v = "self.valueFrom.variable"
    groups = ("builtin.cluster", "builtin.controlPlane", "builtin.machineDeployment", "builtin.machinePool")
    msg = "not a defined builtin variable"
    out = [rule(f"{guard} || !{v}.startsWith('builtin.') || "
                + " || ".join(f"{v}.startsWith('{g}')" for g in groups), msg, fieldPath=".valueFrom.variable")]
    for g in groups:
        names = [n for n in BUILTIN_VARIABLES if n == g or n.startswith(g + ".")]
        out.append(rule(f"{guard} || !{v}.startsWith('{g}') || {v} in [" + ", ".join(f"'{n}'" for n in names) + "]",
                        msg, fieldPath=".valueFrom.variable"))
    return out


def patch() -> S:
    definition = obj({
        "selector": obj({
            "apiVersion": string("apiVersion of the templates to patch.", 1, 317, API_VERSION),
            "kind": string("Kind of the templates to patch.", 1, 63, KIND_PATTERN),
            "matchResources": match_resources(),
        }, ["apiVersion", "kind", "matchResources"], "Which templates to patch."),
        "jsonPatches": arr(json_patch(), "The operations.", max_items=PATCH_JSON_PATCHES, min_items=1),
    }, ["jsonPatches", "selector"])
    external = cel(obj({
        "generatePatchesExtension": string(min_len=1, max_len=512),
        "validateTopologyExtension": string(min_len=1, max_len=512),
        "discoverVariablesExtension": string(min_len=1, max_len=512),
        "settings": str_map(),
    }, desc="Runtime extensions generating the patches."), rule(
        "has(self.validateTopologyExtension) || has(self.generatePatchesExtension)",
        "one of validateTopologyExtension and generatePatchesExtension must be defined"))
    return cel(obj({
        "name": cel(string("Name of the patch.", 1, 256),
                    rule("self != 'inline'", '"inline" can not be used as the name of a patch')),
        "description": string(min_len=1, max_len=1024),
        "enabledIf": string("Go template; the patch applies only if it renders to true.", 1, 256),
        "definitions": arr(definition, "Inline patches.", max_items=PATCH_DEFINITIONS),
        "external": external,
    }, ["name"], "A patch applied to the templates."),
        rule("has(self.definitions) || has(self.external)", "one of definitions or external must be defined"),
        rule("!has(self.definitions) || !has(self.external)", "only one of definitions or external can be defined"))


def cluster_class_schema() -> tuple[S, S]:
    control_plane = cel(obj({
        "templateRef": template_ref("Control plane template (e.g. a KubeadmControlPlaneTemplate).", True),
        "machineInfrastructure": template_of("Infrastructure machine template of the control plane Machines.",
                                             True),
        "metadata": topology_metadata(),
        "healthCheck": health_check(max_in_flight=False, enabled=False),
        "naming": naming(),
        "deletion": deletion_timeouts(),
        "readinessGates": readiness_gates(),
        "taints": machine_taints(),
    }, ["templateRef"], "The control plane of the Clusters."),
        rule("!has(self.healthCheck) || has(self.machineInfrastructure)",
             "healthCheck can be only set if spec.controlPlane.machineInfrastructure is set",
             fieldPath=".healthCheck"),
        rule("has(self.machineInfrastructure) == has(oldSelf.machineInfrastructure)",
             "machineInfrastructure cannot be added or removed, to prevent incompatible changes in the Clusters",
             fieldPath=".machineInfrastructure"))
    spec = obj({
        "availabilityGates": arr(obj({"conditionType": string(min_len=1, max_len=316, pattern=CONDITION_TYPE),
                                      "polarity": string(enum=["Positive", "Negative"])}, ["conditionType"]),
                                 max_items=32, min_items=1, map_keys=["conditionType"]),
        "infrastructure": obj({
            "templateRef": template_ref("Infrastructure cluster template (e.g. a DockerClusterTemplate).", True),
            "naming": naming(),
        }, ["templateRef"], "The infrastructure cluster of the Clusters."),
        "controlPlane": control_plane,
        "workers": obj({
            "machineDeployments": arr(machine_deployment_class(), "MachineDeployment classes (unique class names).",
                                      max_items=100, min_items=1, map_keys=["class"]),
            "machinePools": arr(machine_pool_class(), "MachinePool classes (unique class names).",
                                max_items=100, min_items=1, map_keys=["class"]),
        }, desc="Worker classes.", min_props=1),
        "variables": arr(variable_definition(False), "Variables Cluster topologies set.", max_items=1000,
                         min_items=1),
        "patches": arr(patch(), "Patches applied to the templates, in order.", max_items=PATCHES, min_items=1),
        "kubernetesVersions": arr(string(min_len=1, max_len=256), "Kubernetes versions Clusters of this class "
                                  "may use (ascending), e.g. for chained upgrades.", max_items=100, min_items=1),
        "upgrade": obj({"external": obj({"generateUpgradePlanExtension": string(min_len=1, max_len=512)},
                                        min_props=1)}, desc="How upgrades are planned.", min_props=1),
    }, ["controlPlane", "infrastructure"], "Desired state of the ClusterClass.")
    status = obj({
        "conditions": conditions(),
        "variables": arr(obj({
            "name": string(min_len=1, max_len=256),
            "definitionsConflict": boolean(),
            "definitions": arr(variable_definition(True), max_items=100, min_items=1),
        }, ["definitions", "name"]), "Variables of the class (inline and from external patches).",
            max_items=1000),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return spec, status


def topology_variables() -> S:
    return arr(obj({"name": string("Name of the variable.", 1, 256), "value": any_value("Its value.")},
                   ["name", "value"]), "Variable values.", max_items=1000, min_items=1, map_keys=["name"])


def autoscaler_rule() -> S:
    return rule(f"!has(self.replicas) || !has(self.metadata) || !has(self.metadata.annotations) || "
                f"!('{AUTOSCALER_MIN}' in self.metadata.annotations || "
                f"'{AUTOSCALER_MAX}' in self.metadata.annotations)",
                "replicas cannot be set if the MachineDeploymentTopology has autoscaler annotations",
                fieldPath=".replicas")


def topology_name() -> S:
    return string("Name of the topology (unique; part of the generated object's name).", 1, 63, DNS1123_SUBDOMAIN)


def topology_schema() -> S:
    overrides = obj({"overrides": topology_variables()}, desc="Variable values for this topology only.",
                    min_props=1)
    control_plane = obj({
        "metadata": topology_metadata(),
        "replicas": integer("Desired control plane machines (default: the control plane's)."),
        "rollout": obj({"after": date_time("Roll out all machines created before this time.")}, min_props=1),
        "healthCheck": health_check(max_in_flight=False, enabled=True),
        "deletion": deletion_timeouts(),
        "readinessGates": readiness_gates(),
        "taints": machine_taints(),
        "variables": overrides,
    }, desc="The control plane.", min_props=1)
    md = cel(obj({
        "metadata": topology_metadata(),
        "class": string("MachineDeployment class of the ClusterClass.", 1, 256),
        "name": topology_name(),
        "failureDomain": string("Failure domain for the Machines.", 1, 256),
        "replicas": integer("Desired machines (unset: left to an autoscaler or the default)."),
        "healthCheck": health_check(max_in_flight=True, enabled=True),
        "deletion": md_deletion(),
        "minReadySeconds": integer(minimum=0),
        "readinessGates": readiness_gates(),
        "rollout": md_rollout(after=True),
        "taints": machine_taints(),
        "variables": overrides,
    }, ["class", "name"], "A MachineDeployment of the topology."), autoscaler_rule())
    mp = obj({
        "metadata": topology_metadata(),
        "class": string("MachinePool class of the ClusterClass.", 1, 256),
        "name": topology_name(),
        "failureDomains": arr(string(min_len=1, max_len=256), "Failure domains for the pool.", max_items=100,
                              min_items=1),
        "replicas": integer("Desired machines."),
        "deletion": deletion_timeouts(),
        "minReadySeconds": integer(minimum=0),
        "taints": machine_taints(),
        "variables": overrides,
    }, ["class", "name"], "A MachinePool of the topology.")
    return obj({
        "classRef": obj({
            "name": string("Name of the ClusterClass.", 1, 253, DNS1123_SUBDOMAIN),
            "namespace": string("Namespace of the ClusterClass (default: the Cluster's).", 1, 63,
                                r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
        }, ["name"], "The ClusterClass."),
        "version": version_field("Kubernetes version of the Cluster, e.g. v1.34.4.", supported_range=False),
        "controlPlane": control_plane,
        "workers": obj({
            "machineDeployments": arr(md, "MachineDeployments (unique names).", max_items=2000, min_items=1,
                                      map_keys=["name"]),
            "machinePools": arr(mp, "MachinePools (unique names).", max_items=2000, min_items=1, map_keys=["name"]),
        }, desc="Workers.", min_props=1),
        "variables": topology_variables(),
    }, ["classRef", "version"], "Managed topology: the Cluster's objects generated from a ClusterClass.")


# --- kinds -----------------------------------------------------------------------------------------------

def cluster_schema() -> tuple[S, S]:
    spec = obj({
        "paused": boolean("Pause reconciliation of this cluster and its objects."),
        "clusterNetwork": obj({
            "apiServerPort": integer(minimum=1, maximum=65535),
            "pods": obj({"cidrBlocks": arr(string(min_len=1, max_len=43), max_items=100, min_items=1)},
                        ["cidrBlocks"]),
            "services": obj({"cidrBlocks": arr(string(min_len=1, max_len=43), max_items=100, min_items=1)},
                            ["cidrBlocks"]),
            "serviceDomain": string(min_len=1, max_len=253),
        }, desc="Cluster network configuration.", min_props=1),
        "controlPlaneEndpoint": api_endpoint("Endpoint of the control plane (set by the infrastructure provider)."),
        "controlPlaneRef": contract_ref("Reference to the control plane object (e.g. a KubeadmControlPlane)."),
        "infrastructureRef": contract_ref("Reference to the infrastructure cluster (e.g. a DockerCluster)."),
        "topology": topology_schema(),
        "availabilityGates": arr(obj({"conditionType": string(min_len=1, max_len=316, pattern=CONDITION_TYPE),
                                      "polarity": string(enum=["Positive", "Negative"])}, ["conditionType"]),
                                 max_items=32, min_items=1, map_keys=["conditionType"]),
    }, desc="Desired state of the Cluster.", min_props=1)
    cel(spec,
        rule("has(self.controlPlaneRef) || has(self.infrastructureRef) || has(self.topology)",
             "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must be set"),
        # named at the removed field, as upstream's webhook names them
        rule("!has(oldSelf.infrastructureRef) || has(self.infrastructureRef)",
             "spec.infrastructureRef cannot be removed", fieldPath=".infrastructureRef"),
        rule("!has(oldSelf.controlPlaneRef) || has(self.controlPlaneRef)", "spec.controlPlaneRef cannot be removed",
             fieldPath=".controlPlaneRef"),
        rule("!has(oldSelf.topology) || has(self.topology)",
             "spec.topology cannot be removed from an existing Cluster", fieldPath=".topology"))
    workers_or_cp = obj({**{k: integer() for k in ("desiredReplicas", "replicas", "readyReplicas",
                                                   "availableReplicas", "upToDateReplicas")},
                         "versions": arr(obj({"version": string(min_len=1, max_len=256),
                                              "replicas": integer(minimum=1)}, ["version"]),
                                         max_items=32, min_items=1),
                         "upgradePlan": arr(obj({"version": string(min_len=1, max_len=256)}, ["version"]),
                                            max_items=32, min_items=1)})
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"infrastructureProvisioned": boolean(), "controlPlaneInitialized": boolean()},
                              min_props=1),
        "controlPlane": workers_or_cp,
        "workers": workers_or_cp,
        "failureDomains": failure_domains("Failure domains reported by the infrastructure provider."),
        "phase": string(enum=["Pending", "Provisioning", "Provisioned", "Deleting", "Failed", "Unknown"]),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return spec, status


def machine_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"infrastructureProvisioned": boolean(), "bootstrapDataSecretCreated": boolean()},
                              min_props=1),
        "nodeRef": obj({"name": string(min_len=1, max_len=253, pattern=DNS1123_SUBDOMAIN)}, ["name"]),
        "nodeInfo": open_obj("NodeSystemInfo of the node."),
        "addresses": addresses(),
        "failureDomain": string(min_len=1, max_len=256),
        "phase": string(enum=["Pending", "Provisioning", "Provisioned", "Running", "Updating", "Deleting",
                              "Deleted", "Failed", "Unknown"]),
        "lastUpdated": date_time(),
        "certificatesExpiryDate": date_time(),
        "deletion": obj({k: date_time() for k in ("nodeDrainStartTime", "waitForNodeVolumeDetachStartTime",
                                                  "waitForPreDrainHookStartTime",
                                                  "waitForPreTerminateHookStartTime")}),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return machine_spec(True), status


def _replicas(minimum: int, default: int | None, what: str) -> S:
    """`default` None: no schema default, as upstream's MachineSet/MachineDeployment/MachinePool CRDs, whose
    defaulting webhook sets replicas from the autoscaler annotations (a schema default would apply first and win)."""
    s = integer(f"Desired number of {what}." if default is not None else
                f"Desired number of {what} (unset: defaulted by the webhook, from the autoscaler's node-group "
                "min/max annotations when set, else 1).", default=default)
    return cel(s, rule(f"self >= {minimum}", f"replicas must be greater than or equal to {minimum}"
                       + (" (a control plane cannot be scaled to 0)" if minimum == 1 else "")))


def _scaled_status(extra: dict[str, S] | None = None) -> S:
    return obj({
        **replica_summary(),
        "selector": string("Label selector for the scale subresource.", 1, 4096),
        "conditions": conditions(),
        "versions": version_counts(),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
        **(extra or {}),
    }, min_props=1)


def _selector_matches_template() -> S:
    """matchLabels must be a subset of the template labels (matchExpressions are left to the controller)."""
    return rule(
        "!has(self.selector.matchLabels) || "
        "self.selector.matchLabels.all(k, has(self.template.metadata) && has(self.template.metadata.labels) && "
        "k in self.template.metadata.labels && self.template.metadata.labels[k] == self.selector.matchLabels[k])",
        "spec.template.metadata.labels must match spec.selector.matchLabels", fieldPath=".selector")


def machine_set_schema() -> tuple[S, S]:
    spec = cel(obj({
        "clusterName": cluster_name(),
        "replicas": _replicas(0, None, "machines"),
        "selector": label_selector("Label selector for the Machines of this set (must match the template labels)."),
        "template": machine_template(),
        "deletion": obj({"order": string(enum=["Random", "Newest", "Oldest"])}, min_props=1),
        "machineNaming": obj({"template": string(min_len=1, max_len=256)}, min_props=1),
    }, ["clusterName", "selector", "template"]), _selector_matches_template())
    return spec, _scaled_status()


def machine_deployment_schema() -> tuple[S, S]:
    spec = cel(obj({
        "clusterName": cluster_name(),
        "replicas": _replicas(0, None, "machines"),
        "selector": label_selector("Label selector for the Machines (must match the template labels)."),
        "template": machine_template(),
        "paused": boolean(),
        "rollout": obj({
            "after": date_time("Roll out all machines created before this time."),
            "strategy": obj({
                "type": string(enum=["RollingUpdate", "OnDelete"]),
                "rollingUpdate": obj({
                    "maxSurge": percent_or_int("Max machines above desired during rollout.", "maxSurge"),
                    "maxUnavailable": percent_or_int("Max unavailable machines during rollout.", "maxUnavailable"),
                }, min_props=1),
            }, ["type"], min_props=1),
        }, min_props=1),
        "remediation": obj({"maxInFlight": percent_or_int("Max machines remediated at once.", "maxInFlight")},
                           min_props=1),
        "deletion": obj({"order": string(enum=["Random", "Newest", "Oldest"])}, min_props=1),
        "machineNaming": obj({"template": string(min_len=1, max_len=256)}, min_props=1),
    }, ["clusterName", "selector", "template"]), _selector_matches_template())
    status = _scaled_status({"phase": string(enum=["ScalingUp", "ScalingDown", "Running", "Failed", "Unknown"])})
    return spec, status


def mhc_schema() -> tuple[S, S]:
    spec = obj({
        "clusterName": cluster_name(),
        "selector": label_selector("Selects the Machines to check."),
        "checks": mhc_checks(),
        "remediation": obj({
            "triggerIf": mhc_trigger_if(),
            "templateRef": obj({
                "apiVersion": string(min_len=1, max_len=317, pattern=API_VERSION),
                "kind": string(min_len=1, max_len=63, pattern=KIND_PATTERN),
                "name": string(min_len=1, max_len=253, pattern=DNS1123_SUBDOMAIN),
            }, ["apiVersion", "kind", "name"]),
        }, min_props=1),
    }, ["clusterName", "selector"])
    status = obj({
        "expectedMachines": integer(minimum=0), "currentHealthy": integer(minimum=0),
        "remediationsAllowed": integer(minimum=0),
        "targets": arr(string(min_len=1, max_len=253), max_items=10000),
        "conditions": conditions(),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return spec, status


def kubeadm_config_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"dataSecretCreated": boolean()}, min_props=1),
        "dataSecretName": string(min_len=1, max_len=253),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return kubeadm_config_spec(), status


def template_spec(inner: S, desc: str, immutable_msg: str | None = None, spec_required: bool = False) -> S:
    """spec.template of a *Template kind: `spec_required` as upstream's infrastructure templates. The kubeadm
    templates' minProperties 1 (upstream's) is not set: capd-py's v1beta1 conversion gives `template: {}` for a
    template whose spec is empty once converted (upstream's v1.10 development ClusterClass), which it would refuse
    (test_upstream_admission.py LAXER_THAN_UPSTREAM_CRDS)."""
    spec = obj({"metadata": object_meta(), "spec": inner}, ["spec"] if spec_required else None, desc=desc)
    if immutable_msg:
        cel(spec["properties"]["spec"], rule("self == oldSelf", immutable_msg))
    return obj({"template": spec}, ["template"])


def kcp_machine_template() -> S:
    return obj({
        "metadata": object_meta(),
        "spec": obj({
            "infrastructureRef": contract_ref("Reference to the infrastructure machine template "
                                              "(e.g. a DockerMachineTemplate)."),
            "readinessGates": readiness_gates(),
            "deletion": deletion_timeouts(),
            "taints": machine_taints(),
        }, ["infrastructureRef"]),
    }, ["spec"], "What the control plane Machines look like.")


def kcp_rollout() -> S:
    return obj({
        "after": date_time(),
        "before": obj({"certificatesExpiryDays": integer(minimum=7)}, min_props=1),
        "strategy": obj({"type": string(enum=["RollingUpdate"]),
                         "rollingUpdate": obj({"maxSurge": percent_or_int("Max machines above desired.",
                                                                          "maxSurge")}, min_props=1)},
                        ["type"], min_props=1),
    }, min_props=1)


def kcp_remediation() -> S:
    return obj({"maxRetry": integer(), "minHealthyPeriodSeconds": integer(minimum=0),
                "retryPeriodSeconds": integer(minimum=0)}, min_props=1)


def kcp_schema() -> tuple[S, S]:
    spec = obj({
        "replicas": _replicas(1, 1, "control plane machines"),
        "version": kcp_version_field(),
        "machineTemplate": kcp_machine_template(),
        "kubeadmConfigSpec": kubeadm_config_spec(kcp=True),
        "rollout": kcp_rollout(),
        "remediation": kcp_remediation(),
        "machineNaming": obj({"template": string(min_len=1, max_len=256)}, min_props=1),
    }, ["machineTemplate", "version"])
    status = _scaled_status({
        "initialization": obj({"controlPlaneInitialized": boolean()}, min_props=1),
        "version": string(min_len=1, max_len=256),
        "lastRemediation": obj({"machine": string(min_len=1, max_len=253), "time": date_time(),
                                "retryCount": integer(minimum=0)}, ["machine", "retryCount", "time"]),
    })
    return spec, status


def kcp_template_schema() -> S:
    inner = obj({
        "kubeadmConfigSpec": kubeadm_config_spec(),
        "machineTemplate": obj({"metadata": object_meta(), "spec": obj({
            "readinessGates": readiness_gates(), "deletion": deletion_timeouts(), "taints": machine_taints(),
        })}),
        "rollout": kcp_rollout(),
        "remediation": kcp_remediation(),
        "machineNaming": obj({"template": string(min_len=1, max_len=256)}, min_props=1),
    })
    return template_spec(inner, "KubeadmControlPlane template (for ClusterClass).")


def docker_load_balancer() -> S:
    return obj({
        "imageRepository": string("Image repository for the load balancer (haproxy) image."),
        "imageTag": string("Image tag for the load balancer image."),
        "customHAProxyConfigTemplateRef": obj({"name": string(default="")},
                                              desc="ConfigMap holding a custom haproxy config template."),
    })


def docker_cluster_spec() -> S:
    return obj({
        "controlPlaneEndpoint": api_endpoint("Load balancer endpoint for the control plane (set by the provider)."),
        "failureDomains": failure_domains("Failure domains to offer the Cluster."),
        "loadBalancer": docker_load_balancer(),
    })


def docker_cluster_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"provisioned": boolean()}, min_props=1),
        "failureDomains": failure_domains("Failure domains available."),
        "deprecated": deprecated(),
    })
    return docker_cluster_spec(), status


DOCKER_MACHINE_FIELDS = ("customImage",)  # upstream's DockerMachine webhook forbids changing only customImage


def extra_mounts(desc: str) -> S:
    return arr(obj({"containerPath": string(), "hostPath": string(), "readOnly": boolean()}), desc)


def docker_machine_spec(for_machine: bool) -> S:
    s = obj({
        "customImage": string("Node image to use instead of the default for the version."),
        "preLoadImages": arr(string(), "Images to load into the node."),
        "extraMounts": extra_mounts("Extra host mounts for the node container."),
        "bootstrapped": boolean("Set by the provider once bootstrap has run (deprecated upstream)."),
        "bootstrapTimeout": string("How long to wait for bootstrap, a duration (e.g. 3m)."),
        "providerID": string("docker:////<container name>, set by the provider.", 1, 512),
    })
    if for_machine:  # as upstream's webhook: customImage cannot be modified (the other fields may change)
        for f in DOCKER_MACHINE_FIELDS:
            cel(s, rule(f"has(self.{f}) == has(oldSelf.{f}) && (!has(self.{f}) || self.{f} == oldSelf.{f})",
                        f"spec.{f} cannot be modified", fieldPath=f".{f}"))
    return s


def docker_machine_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"provisioned": boolean()}, min_props=1),
        "addresses": addresses(),
        "failureDomain": string(min_len=1, max_len=256),
        "loadBalancerConfigured": boolean(),
        "deprecated": deprecated(),
    })
    return docker_machine_spec(True), status


# --- MachinePool / DockerMachinePool ---------------------------------------------------------------------

def machine_pool_schema() -> tuple[S, S]:
    """Upstream's MachinePool: its webhook keeps clusterName immutable and equal to the template's, and forbids
    template taints (not implemented for MachinePools). replicas has no schema default (the webhook's, as
    upstream: the autoscaler's min size or 1); `>= 0` as for MachineSets."""
    spec = cel(obj({
        "clusterName": cluster_name(),
        "replicas": _replicas(0, None, "machines"),
        "template": machine_template(),
        "providerIDList": arr(string(min_len=1, max_len=512), "Provider IDs of the pool's instances, copied from "
                              "the infrastructure machine pool.", max_items=10000),
        "failureDomains": arr(string(min_len=1, max_len=256), "Failure domains the pool's instances may use.",
                              max_items=100),
    }, ["clusterName", "template"]),
        rule("!has(self.template.spec.taints)", "taints feature for MachinePools is not yet implemented",
             fieldPath=".template.spec.taints"))
    node_ref = {**obj({k: string() for k in ("apiVersion", "kind", "name", "namespace", "uid", "resourceVersion",
                                              "fieldPath")}, desc="Reference to a workload cluster Node."),
                "x-kubernetes-map-type": "atomic"}
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"infrastructureProvisioned": boolean(), "bootstrapDataSecretCreated": boolean()},
                              min_props=1),
        "nodeRefs": arr(node_ref, "The pool's workload cluster Nodes.", max_items=10000),
        **replica_summary(),
        "phase": string(enum=["Pending", "Provisioning", "Provisioned", "Running", "ScalingUp", "ScalingDown",
                              "Scaling", "Deleting", "Failed", "Unknown"]),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return spec, status


def docker_machine_pool_spec() -> S:
    return obj({
        "template": obj({
            "customImage": string("Node image to use instead of the default for the version."),
            "preLoadImages": arr(string(), "Images to load into the nodes."),
            "extraMounts": arr(obj({"containerPath": string(), "hostPath": string(), "readOnly": boolean()}),
                               "Extra host mounts for the node containers."),
        }, desc="What each instance (a DockerMachine) of the pool is made from."),
        "providerID": string("Provider ID of the pool, set by the provider."),
        "providerIDList": arr(string(), "Provider IDs of the pool's instances, set by the provider."),
    })


def docker_machine_pool_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "ready": boolean("Whether the pool's instances are all provisioned (v1beta2 contract: "
                         "initialization.provisioned)."),
        "initialization": obj({"provisioned": boolean()}, min_props=1),
        "replicas": integer("Most recently observed number of instances."),
        "observedGeneration": integer(fmt="int64"),
        "instances": arr(obj({
            "addresses": addresses(),
            "instanceName": string(),
            "providerID": string(),
            "version": string(),
            "ready": boolean(),
            "bootstrapped": boolean(),
        }), "One entry per instance of the pool."),
        "infrastructureMachineKind": string("Kind of the infrastructure machines behind the pool's Machines."),
        "deprecated": deprecated(),
    })
    return docker_machine_pool_spec(), status


def docker_machine_pool_template_spec() -> S:
    return obj({"template": obj({"metadata": object_meta(), "spec": docker_machine_pool_spec()}, ["spec"],
                                "DockerMachinePool template.")}, ["template"])


# --- Dev* (upstream v1.14: test/infrastructure/docker/api/v1beta2/dev*_types.go) -------------------------------
# One kind per role whose `spec.backend` says how it is made: `docker` (the Docker* kinds' fields, moved under
# spec.backend.docker; the same implementation serves both) or `inMemory` (no containers: fake Nodes, etcd
# members and control-plane Pods). Defaults and the failure-domain / customImage rules are the admission webhook's
# (capd_py/api/admission/dev.py), as upstream's; the templates' immutability is CEL here as for the Docker*
# templates (upstream's webhooks compare old and new).

def dev_cluster_spec() -> S:
    return obj({
        "controlPlaneEndpoint": api_endpoint("Endpoint of the control plane (set by the provider)."),
        "backend": obj({
            "docker": obj({
                "failureDomains": failure_domains("Failure domains to offer the Cluster."),
                "loadBalancer": docker_load_balancer(),
            }, desc="A backend using docker containers (what a DockerCluster does)."),
            "inMemory": obj({}, desc="A backend that runs in memory: no containers, no network."),
        }, desc="How the cluster is made: docker or inMemory (the admission webhook defaults docker)."),
    }, ["backend"])


def dev_cluster_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"provisioned": boolean()}, min_props=1),
        "failureDomains": failure_domains("Failure domains available."),
        "deprecated": deprecated(),
    })
    return dev_cluster_spec(), status


def provisioning(what: str) -> S:
    return obj({
        "startupDuration": string(f"How long the {what} takes to provision, a duration (e.g. 2s)."),
        "startupJitter": string("Extra random share of startupDuration, a decimal string (e.g. \"0.2\")."),
    }, ["startupDuration"])


def dev_machine_spec() -> S:
    in_memory = obj({
        part: obj({"provisioning": provisioning(what)}, desc=f"The behaviour of the {what}.")
        for part, what in (("vm", "VM"), ("node", "Node (the kubelet)"), ("apiServer", "API server"),
                           ("etcd", "etcd member"))
    }, desc="A backend that runs in memory: a fake Node, etcd member and API server, no container.")
    return obj({
        "providerID": string("Links the machine with its Node, set by the provider.", 1, 512),
        "backend": obj({
            "docker": obj({
                "customImage": string("Node image to use instead of the default for the version."),
                "preLoadImages": arr(string(), "Images to load into the node."),
                "extraMounts": extra_mounts("Extra host mounts for the node container."),
                "bootstrapTimeout": string("How long to wait for bootstrap, a duration (e.g. 3m)."),
            }, desc="A backend using docker containers (what a DockerMachine does)."),
            "inMemory": in_memory,
        }, desc="How the machine is made: docker or inMemory (the admission webhook defaults docker)."),
    }, ["backend"])


def dev_machine_schema() -> tuple[S, S]:
    status = obj({
        "conditions": conditions(),
        "initialization": obj({"provisioned": boolean()}, min_props=1),
        "addresses": addresses(),
        "failureDomain": string(min_len=1, max_len=256),
        "deprecated": deprecated(),
    })
    return dev_machine_spec(), status


def dev_machine_pool_spec() -> S:
    return obj({
        "providerID": string("Provider ID of the pool, set by the provider."),
        "providerIDList": arr(string(), "Provider IDs of the pool's instances, set by the provider."),
        "backend": obj({
            "docker": obj({
                "customImage": string("Node image to use instead of the default for the version."),
                "preLoadImages": arr(string(), "Images to load into the nodes."),
                "extraMounts": extra_mounts("Extra host mounts for the node containers."),
            }, desc="What each instance (a DevMachine with the docker backend) of the pool is made from."),
        }, desc="How the pool's instances are made (docker only, as upstream v1.14)."),
    })


def dev_machine_pool_schema() -> tuple[S, S]:
    """Upstream's fields, and those the shared Docker machine pool implementation also writes (as capd-py's
    DockerMachinePool CRD has them): initialization.provisioned (the v1beta2 contract), instances[].bootstrapped."""
    _, status = docker_machine_pool_schema()
    return dev_machine_pool_spec(), status


# --- addons.cluster.x-k8s.io ----------------------------------------------------------------------------

def resource_ref() -> dict[str, S]:
    return {"name": string("Name of the Secret or ConfigMap, in the namespace of the ClusterResourceSet.", 1, 253),
            "kind": string("Secret or ConfigMap.", enum=["Secret", "ConfigMap"])}


def crs_schema() -> tuple[S, S]:
    """As upstream's CRD: the selector's shape only. Upstream's ClusterResourceSet webhook (capd-py's:
    capd_py/api/admission/core.validate_clusterresourceset) parses the selector, refuses an empty one and keeps
    clusterSelector and strategy immutable."""
    selector = obj({
        "matchLabels": {**str_map(), "nullable": True},   # `matchLabels:` (null) of upstream's templates, see above
        "matchExpressions": arr(obj({"key": string(), "operator": string(), "values": arr(string())},
                                    ["key", "operator"])),
    }, desc="Selects the Clusters (same namespace) to apply the resources to. Must not be empty. Immutable.")
    selector["x-kubernetes-map-type"] = "atomic"
    spec = obj({
        "clusterSelector": selector,
        "resources": arr(obj(resource_ref(), ["kind", "name"]),
                         "Secrets (of type addons.cluster.x-k8s.io/resource-set) and ConfigMaps whose data values "
                         "hold the objects to apply.", max_items=100, min_items=1),
        "strategy": string("ApplyOnce (default) or Reconcile (apply again when the data changes). Immutable.",
                           enum=["ApplyOnce", "Reconcile"], default="ApplyOnce"),
    }, ["clusterSelector", "resources"])
    status = obj({
        "conditions": conditions(),
        "observedGeneration": integer(fmt="int64", minimum=1),
        "deprecated": deprecated(),
    }, min_props=1)
    return spec, status


def crs_binding_spec() -> S:
    resource = obj({
        **resource_ref(),
        "hash": string("Hash of the resource's data when it was last applied.", 1, 256),
        "lastAppliedTime": date_time("When the resource was last applied."),
        "applied": boolean("Whether the resource was applied to the Cluster."),
    }, ["applied", "kind", "name"])
    return obj({
        "bindings": arr(obj({
            "clusterResourceSetName": string("Name of the ClusterResourceSet applied to the Cluster.", 1, 253),
            "resources": arr(resource, "The ClusterResourceSet's resources and whether they were applied.",
                             max_items=100),
        }, ["clusterResourceSetName"]), "ClusterResourceSets applied to the Cluster.", max_items=100),
        "clusterName": immutable(string("Name of the Cluster this binding is for.", 1, 63), "clusterName"),
    }, ["clusterName"])


# --- MachineDrainRule ------------------------------------------------------------------------------------

def drain_selector(what: str) -> S:
    """A label selector as upstream's MachineDrainRule writes it (atomic map, no bounds of its own) with upstream's
    webhook check (metav1.LabelSelectorAsSelector) as CEL: In/NotIn need values, Exists/DoesNotExist take none."""
    expression = cel(obj({
        "key": string("The label key the requirement applies to."),
        "operator": string("In, NotIn, Exists or DoesNotExist.", enum=["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": {**arr(string(), "Values for In and NotIn; empty for Exists and DoesNotExist."),
                   "x-kubernetes-list-type": "atomic"},
    }, ["key", "operator"], "A requirement on one label."),
        rule("(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
             "values: for 'In', 'NotIn' operators, values set can't be empty; for 'Exists', 'DoesNotExist' "
             "operators, values set must be empty"))
    sel = obj({
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63},
                        "description": "Labels that must all be present with these values."},
        "matchExpressions": {**arr(expression, "Requirements that must all hold."), "x-kubernetes-list-type": "atomic"},
    }, desc=f"Selects {what} by their labels; empty or absent selects all.")
    sel["x-kubernetes-map-type"] = "atomic"
    return sel


def machine_drain_rule_spec() -> S:
    """Upstream v1beta2 MachineDrainRule: spec.drain {behavior, order}, spec.machines[] {selector,
    clusterSelector}, spec.pods[] {selector, namespaceSelector}; upstream's webhook (order only with Drain,
    valid selectors) as CEL."""
    drain = cel(obj({
        "behavior": string("Drain (evict, grouped by order), Skip (never evict) or WaitCompleted (never evict, "
                           "wait until the Pods complete).", enum=["Drain", "Skip", "WaitCompleted"]),
        "order": integer("Pods of a lower order are drained first; the next order starts once every Pod of the "
                         "previous one is gone. Only with behavior Drain; default 0."),
    }, ["behavior"], "If and how the selected Pods are drained."),
        rule("!has(self.order) || self.behavior == 'Drain'",
             'order must not be set if drain behavior is "Skip" or "WaitCompleted"', fieldPath=".order"))

    def selectors(field: str, props: dict[str, S], desc: str) -> S:
        item = obj(props, desc=desc, min_props=1)
        return cel({**arr(item, desc, max_items=32, min_items=1), "x-kubernetes-list-type": "atomic"},
                   rule("self.all(x, self.exists_one(y, x == y))", f"entries in {field} must be unique"))

    return obj({
        "drain": drain,
        "machines": selectors("machines", {
            "selector": drain_selector("Machines"),
            "clusterSelector": drain_selector("Machines by the labels of their Cluster (ANDed with selector)"),
        }, "Machines the rule applies to (ORed); absent: every Machine of the namespace."),
        "pods": selectors("pods", {
            "selector": drain_selector("Pods"),
            "namespaceSelector": drain_selector("Pods by the labels of their Namespace (ANDed with selector)"),
        }, "Pods the rule applies to (ORed); absent: every Pod."),
    }, ["drain"], "Which Pods of which Machines are drained how.")


# --- ExtensionConfig (runtime.cluster.x-k8s.io, the Runtime SDK) -------------------------------------------

def extension_config_schema() -> tuple[S, S]:
    """Upstream v1beta2 ExtensionConfig: spec.clientConfig {url | service {namespace, name, path, port}, caBundle},
    spec.namespaceSelector, spec.settings; status.handlers (what discovery found) and conditions. Upstream's
    webhook rules (url xor service, https only, port 443 by default, the RuntimeSDK gate) are the admission webhook's
    (capd_py/api/admission/runtime.py); the schema keeps upstream's bounds."""
    service = obj({
        "namespace": string("The namespace of the Service.", 1, 63),
        "name": string("The name of the Service.", 1, 63),
        "path": string("A URL path prefixed to every hook's path.", 1, 512),
        "port": integer("The Service port of the extension server (1-65535); default 443."),
    }, ["name", "namespace"], "The Kubernetes Service of the extension server (exactly one of url and service).")
    client = obj({
        "url": string("https://host:port/path of the extension server (exactly one of url and service); a path "
                      "is a prefix of every hook's path.", 1, 512),
        "service": service,
        "caBundle": string("PEM CA bundle (base64 in JSON) that verifies the extension server's certificate.", 1,
                           51200, fmt="byte"),
    }, desc="How to reach the extension server.", min_props=1)
    # upstream's metav1.LabelSelector as controller-gen writes it (no bounds of label_selector's: not stricter than
    # upstream's CRD; the webhook checks that it parses)
    selector = obj({
        "matchLabels": str_map(),
        "matchExpressions": arr(obj({"key": string(), "operator": string(), "values": arr(string())},
                                    ["key", "operator"])),
    }, desc="Which namespaces' objects the extension's hooks are called for; empty: all.")
    selector["x-kubernetes-map-type"] = "atomic"
    spec = obj({
        "clientConfig": client,
        "namespaceSelector": selector,
        "settings": str_map("Key value pairs passed in every call to the extension's handlers."),
    }, ["clientConfig"], "The extension server and which namespaces it serves.")
    handler = obj({
        "name": string("The registered name of the handler: <handler>.<ExtensionConfig name>.", 1, 512),
        "requestHook": obj({
            "apiVersion": string("Group and version of the hook.", 1, 512),
            "hook": string("The hook's name.", 1, 256),
        }, ["apiVersion", "hook"], "The hook the handler serves."),
        "timeoutSeconds": integer("Timeout of a call to the handler; 10 when unset.", minimum=1),
        "failurePolicy": string("Ignore or Fail (default): whether an error reaching the handler fails the call.",
                                enum=["Ignore", "Fail"]),
    }, ["name", "requestHook"], "One handler the extension server announced in discovery.")
    status = obj({
        "conditions": conditions(),
        "handlers": arr(handler, "The handlers discovered.", max_items=512, map_keys=["name"]),
        "deprecated": deprecated(),
    }, min_props=1)
    return spec, status


# --- CRD assembly ----------------------------------------------------------------------------------------

def col(name: str, jsonpath: str, typ: str = "string", priority: int = 0, desc: str = "") -> S:
    c: S = {"name": name, "type": typ, "jsonPath": jsonpath}
    if desc:
        c["description"] = desc
    if priority:
        c["priority"] = priority
    return c


AGE = col("Age", ".metadata.creationTimestamp", "date")
PAUSED = col("Paused", '.status.conditions[?(@.type=="Paused")].status', priority=10)
CLUSTER_LABEL = col("Cluster", ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']")
SCALE = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
         "labelSelectorPath": ".status.selector"}


def replica_cols() -> list[S]:
    return [col("Desired", ".spec.replicas", "integer"), col("Current", ".status.replicas", "integer"),
            col("Ready", ".status.readyReplicas", "integer"), col("Available", ".status.availableReplicas", "integer"),
            col("Up-to-date", ".status.upToDateReplicas", "integer")]


def cond(t: str) -> str:
    return f'.status.conditions[?(@.type=="{t}")].status'


def crd(g: gvk.GVK, spec: S, status: S | None, columns: list[S], short: list[str] | None = None,
        scale: bool | S = False, root_rules: list[S] | None = None, spec_required: bool = True,
        contract_label: bool = True) -> S:
    props: S = {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                "spec": spec}
    if status is not None:
        props["status"] = status
    root: S = {"type": "object", "description": f"{g.kind} ({g.api_version}), served by capd-py.",
               "properties": props}
    if spec_required:
        root["required"] = ["spec"]
    if root_rules:
        root["x-kubernetes-validations"] = root_rules
    version: S = {"name": g.version, "served": True, "storage": True, "schema": {"openAPIV3Schema": root},
                  "additionalPrinterColumns": columns}
    sub: S = {}
    if status is not None:
        sub["status"] = {}
    if scale:
        sub["scale"] = dict(SCALE) if scale is True else dict(scale)
    if sub:
        version["subresources"] = sub
    names: S = {"kind": g.kind, "listKind": f"{g.kind}List", "plural": g.plural, "singular": g.kind.lower(),
                "categories": ["cluster-api"]}
    if short:
        names["shortNames"] = short
    labels: S = {"cluster.x-k8s.io/provider": _provider(g.group), "app.kubernetes.io/part-of": "capd-py"}
    if contract_label:
        labels[f"cluster.x-k8s.io/{g.version}"] = g.version
    # what upstream clusterctl puts on every provider component; its `move` finds the kinds to move by this label
    # (docs/clusterctl.md)
    labels["clusterctl.cluster.x-k8s.io"] = ""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{g.plural}.{g.group}", "labels": labels},
        "spec": {"group": g.group, "names": names, "scope": "Namespaced" if g.namespaced else "Cluster",
                 "versions": [version]},
    }


def _provider(group: str) -> str:
    return {gvk.CLUSTER_GROUP: "cluster-api", gvk.BOOTSTRAP_GROUP: "bootstrap-kubeadm",
            gvk.CONTROLPLANE_GROUP: "control-plane-kubeadm", gvk.INFRA_GROUP: "infrastructure-docker",
            gvk.ADDONS_GROUP: "cluster-api", gvk.RUNTIME_GROUP: "cluster-api"}[group]


# upstream's Cluster webhook: the name is used as a label value (validation.IsValidLabelValue), so at most 63
# characters; metadata.name is already a DNS subdomain, so dots are allowed as upstream allows them
CLUSTER_NAME_RULE = rule(
    "size(self.metadata.name) <= 63 && self.metadata.name.matches('" + LABEL_VALUE + "')",
    "metadata.name: Cluster name must be a valid label value: at most 63 characters, alphanumeric, '-', '_' or '.', "
    "starting and ending with an alphanumeric character")
# upstream's MachineDeployment webhook: the name is the default selector's label value, so the same limit (the
# webhook names metadata.name; this rule keeps the check when the webhook is not installed)
MACHINE_DEPLOYMENT_NAME_RULE = rule(
    "size(self.metadata.name) <= 63 && self.metadata.name.matches('" + LABEL_VALUE + "')",
    "metadata.name: MachineDeployment name must be a valid label value: at most 63 characters, alphanumeric, '-', '_' or '.', "
    "starting and ending with an alphanumeric character")


def all_crds() -> list[S]:
    out: list[S] = []
    spec, status = cluster_schema()
    out.append(crd(gvk.CLUSTER, spec, status, [
        col("ClusterClass", ".spec.topology.classRef.name"), col("Available", cond("Available")),
        col("CP Desired", ".status.controlPlane.desiredReplicas", "integer"),
        col("CP Current", ".status.controlPlane.replicas", "integer", 10),
        col("CP Ready", ".status.controlPlane.readyReplicas", "integer", 10),
        col("CP Available", ".status.controlPlane.availableReplicas", "integer"),
        col("CP Up-to-date", ".status.controlPlane.upToDateReplicas", "integer"),
        col("W Desired", ".status.workers.desiredReplicas", "integer"),
        col("W Current", ".status.workers.replicas", "integer", 10),
        col("W Ready", ".status.workers.readyReplicas", "integer", 10),
        col("W Available", ".status.workers.availableReplicas", "integer"),
        col("W Up-to-date", ".status.workers.upToDateReplicas", "integer"),
        PAUSED, col("Phase", ".status.phase"), AGE, col("Version", ".spec.topology.version"),
    ], ["cl"], root_rules=[CLUSTER_NAME_RULE]))
    spec, status = cluster_class_schema()
    out.append(crd(gvk.CLUSTER_CLASS, spec, status, [
        PAUSED, col("Variables Ready", cond("VariablesReady"), desc="Variables ready"),
        col("Age", ".metadata.creationTimestamp", "date", desc="Time duration since creation of ClusterClass"),
    ], ["cc"]))
    spec, status = machine_schema()
    out.append(crd(gvk.MACHINE, spec, status, [
        col("Cluster", ".spec.clusterName"), col("Node Name", ".status.nodeRef.name"),
        col("Provider ID", ".spec.providerID", priority=10), col("Failure domain", ".status.failureDomain"),
        col("Ready", cond("Ready")), col("Available", cond("Available")), col("Up-to-date", cond("UpToDate")),
        col("Internal-IP", '.status.addresses[?(@.type=="InternalIP")].address', priority=10),
        col("External-IP", '.status.addresses[?(@.type=="ExternalIP")].address', priority=10),
        col("OS-Image", ".status.nodeInfo.osImage", priority=10),
        PAUSED, col("Phase", ".status.phase"), AGE, col("Version", ".spec.version"),
    ], ["ma"]))
    spec, status = machine_set_schema()
    out.append(crd(gvk.MACHINE_SET, spec, status, [
        col("Cluster", ".spec.clusterName"), *replica_cols(), PAUSED, AGE,
        col("Version", ".spec.template.spec.version"),
    ], ["ms"], scale=True))
    spec, status = machine_deployment_schema()
    out.append(crd(gvk.MACHINE_DEPLOYMENT, spec, status, [
        col("Cluster", ".spec.clusterName"), col("Available", cond("Available")), *replica_cols(), PAUSED,
        col("Phase", ".status.phase"), AGE, col("Version", ".spec.template.spec.version"),
    ], ["md"], scale=True, root_rules=[MACHINE_DEPLOYMENT_NAME_RULE]))
    spec, status = mhc_schema()
    out.append(crd(gvk.MACHINE_HEALTH_CHECK, spec, status, [
        col("Cluster", ".spec.clusterName"), col("Replicas", ".status.expectedMachines", "integer"),
        col("Healthy", ".status.currentHealthy", "integer"), PAUSED, AGE,
    ], ["mhc", "mhcs"]))
    spec, status = kubeadm_config_schema()
    out.append(crd(gvk.KUBEADM_CONFIG, spec, status, [
        CLUSTER_LABEL, PAUSED, col("Data secret created", ".status.initialization.dataSecretCreated"), AGE,
    ], spec_required=False))
    owner_cols = [col("ClusterClass", '.metadata.ownerReferences[?(@.kind=="ClusterClass")].name'),
                  col("Cluster", '.metadata.ownerReferences[?(@.kind=="Cluster")].name'), AGE]
    out.append(crd(gvk.KUBEADM_CONFIG_TEMPLATE,
                   template_spec(kubeadm_config_spec(), "KubeadmConfig template for MachineDeployments/Sets."),
                   None, owner_cols, spec_required=False))
    spec, status = kcp_schema()
    out.append(crd(gvk.KUBEADM_CONTROL_PLANE, spec, status, [
        CLUSTER_LABEL, col("Available", cond("Available")), *replica_cols(), PAUSED,
        col("Initialized", ".status.initialization.controlPlaneInitialized", "boolean"), AGE,
        col("Version", ".spec.version"),
    ], ["kcp"], scale=True))
    out.append(crd(gvk.KUBEADM_CONTROL_PLANE_TEMPLATE, kcp_template_schema(), None,
                   [owner_cols[0], AGE], spec_required=False))
    spec, status = docker_cluster_schema()
    out.append(crd(gvk.DOCKER_CLUSTER, spec, status, [CLUSTER_LABEL, AGE], spec_required=False))
    out.append(crd(gvk.DOCKER_CLUSTER_TEMPLATE, template_spec(
        docker_cluster_spec(), "DockerCluster template.",
        "DockerClusterTemplate spec.template.spec is immutable; create a new template instead",
        spec_required=True), None, [AGE],
        spec_required=False))
    spec, status = docker_machine_schema()
    out.append(crd(gvk.DOCKER_MACHINE, spec, status, [
        CLUSTER_LABEL, col("Provider ID", ".spec.providerID", priority=10),
        col("Failure domain", ".status.failureDomain"),
        col("IP", '.status.addresses[?(@.type=="InternalIP")].address', priority=10), PAUSED,
        col("Provisioned", ".status.initialization.provisioned"), AGE,
    ], spec_required=False))
    out.append(crd(gvk.DOCKER_MACHINE_TEMPLATE, template_spec(
        docker_machine_spec(False), "DockerMachine template.",
        "DockerMachineTemplate spec.template.spec is immutable; create a new template instead",
        spec_required=True),
        obj({"capacity": {"type": "object", "additionalProperties": {
            **int_or_string(), "pattern": QUANTITY}}}, desc="Capacity of machines made from this template."),
        [AGE], spec_required=False))
    spec, status = machine_pool_schema()
    out.append(crd(gvk.MACHINE_POOL, spec, status, [
        col("Cluster", ".spec.clusterName"), *replica_cols(), PAUSED, col("Phase", ".status.phase"), AGE,
        col("Version", ".spec.template.spec.version"),
    ], ["mp"], scale={"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}))
    spec, status = docker_machine_pool_schema()
    out.append(crd(gvk.DOCKER_MACHINE_POOL, spec, status, [AGE], spec_required=False))
    out.append(crd(gvk.DOCKER_MACHINE_POOL_TEMPLATE, docker_machine_pool_template_spec(), None, [AGE],
                   spec_required=False))
    spec, status = dev_cluster_schema()
    out.append(crd(gvk.DEV_CLUSTER, spec, status, [CLUSTER_LABEL, col(
        "Age", ".metadata.creationTimestamp", "date", desc="Time duration since creation of the DevCluster")],
        spec_required=False))
    out.append(crd(gvk.DEV_CLUSTER_TEMPLATE, template_spec(
        dev_cluster_spec(), "DevCluster template.",
        "DevClusterTemplate spec.template.spec is immutable; create a new template instead",
        spec_required=True), None, [col(
            "Age", ".metadata.creationTimestamp", "date",
            desc="Time duration since creation of the DevClusterTemplate")], spec_required=False))
    spec, status = dev_machine_schema()
    out.append(crd(gvk.DEV_MACHINE, spec, status, [
        col("Cluster", ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']", desc="Cluster"),
        col("Provider ID", ".spec.providerID", priority=10, desc="Provider ID"),
        col("Failure domain", ".status.failureDomain",
            desc="The failure domain where the VSphereMachine has been scheduled"),
        col("IP", '.status.addresses[?(@.type=="InternalIP")].address', priority=10, desc="IP of the Machine"),
        col("Paused", cond("Paused"), priority=10, desc="Reconciliation paused"),
        col("Provisioned", ".status.initialization.provisioned", desc="DevMachine is provisioned"),
        col("Age", ".metadata.creationTimestamp", "date", desc="Time duration since creation of the DevMachine"),
    ], spec_required=False))
    out.append(crd(gvk.DEV_MACHINE_TEMPLATE, template_spec(
        dev_machine_spec(), "DevMachine template.",
        "DevMachineTemplate spec.template.spec is immutable; create a new template instead",
        spec_required=True),
        obj({"capacity": {"type": "object", "additionalProperties": {
            **int_or_string(), "pattern": QUANTITY}}}, desc="Capacity of machines made from this template."),
        [col("Age", ".metadata.creationTimestamp", "date",
             desc="Time duration since creation of the DevMachineTemplate")], spec_required=False))
    spec, status = dev_machine_pool_schema()
    out.append(crd(gvk.DEV_MACHINE_POOL, spec, status, [col(
        "Age", ".metadata.creationTimestamp", "date", desc="Time duration since creation of DevMachinePool")],
        spec_required=False))
    out.append(crd(gvk.DEV_MACHINE_POOL_TEMPLATE, obj({"template": obj(
        {"metadata": object_meta(), "spec": dev_machine_pool_spec()}, ["spec"], "DevMachinePool template.")},
        ["template"]), None, [col("Age", ".metadata.creationTimestamp", "date",
                                  desc="Time duration since creation of DevMachinePoolTemplate")],
        spec_required=False))
    spec, status = crs_schema()
    out.append(crd(gvk.CLUSTER_RESOURCE_SET, spec, status, [
        col("Applied", cond("ResourcesApplied"), desc="Resource applied"), PAUSED, AGE]))
    out.append(crd(gvk.MACHINE_DRAIN_RULE, machine_drain_rule_spec(), None, [
        col("Behavior", ".spec.drain.behavior", desc="Drain behavior"),
        col("Order", ".spec.drain.order", desc="Drain order"),
        col("Age", ".metadata.creationTimestamp", "date", desc="Time duration since creation of the MachineDrainRule"),
    ], root_rules=None))
    out.append(crd(gvk.CLUSTER_RESOURCE_SET_BINDING, crs_binding_spec(), None, [
        col("Cluster", ".spec.clusterName", desc="Cluster"), AGE]))
    spec, status = extension_config_schema()
    # no contract label: upstream's ExtensionConfig CRD carries none (no contract references it; the core's own
    # CRDs carry the label only for capd-py's contract discovery of its own kinds)
    out.append(crd(gvk.EXTENSION_CONFIG, spec, status, [
        col("Paused", cond("Paused"), priority=10, desc="Reconciliation paused"),
        col("Discovered", cond("Discovered"), desc="ExtensionConfig discovered"),
        col("Age", ".metadata.creationTimestamp", "date", desc="Time duration since creation of ExtensionConfig"),
    ], ["ext"], contract_label=False))
    return out


def file_name(c: S) -> str:
    return f"{c['spec']['group']}_{c['spec']['names']['plural']}.yaml"


HEADER = "# Generated by hack/gen_crds.py from capd_py/api (versions.py for version rules). Do not edit.\n"


def render(c: S) -> str:
    return HEADER + "---\n" + yaml.safe_dump(c, sort_keys=False, width=120)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--check", action="store_true", help="fail if crds/ is out of date")
    args = ap.parse_args()
    crds = all_crds()
    want = {file_name(c): render(c) for c in crds}
    if args.check:
        stale = [n for n, t in want.items() if not (OUT / n).exists() or (OUT / n).read_text() != t]
        extra = [p.name for p in OUT.glob("*.yaml") if p.name not in want]
        if stale or extra:
            print(f"crds/ is stale: {sorted(stale + extra)}; run python hack/gen_crds.py", file=sys.stderr)
            return 1
        return 0
    OUT.mkdir(exist_ok=True)
    for p in OUT.glob("*.yaml"):
        if p.name not in want:
            p.unlink()
    for n, t in want.items():
        (OUT / n).write_text(t)
    print(f"wrote {len(want)} CRDs to {OUT.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
