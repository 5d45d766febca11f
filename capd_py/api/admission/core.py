"""Upstream Cluster API v1.13's defaulting and validating webhooks for cluster.x-k8s.io and addons kinds, as pure
functions: `default_<kind>(obj, old)` returns the defaulted object (a copy), `validate_<kind>(old, new)` the field
errors with upstream's messages (internal/webhooks/*.go). clusterName (immutable, equal to the template's), the
bootstrap one-of and the ClusterResourceSet selector are checked here only, as upstream (a CEL rule in capd-py's CRD
answered first, with other causes than upstream's: the admission oracle); the rules capd-py's CRDs still enforce with
CEL (version range, selector subset, ...) are not repeated here; see docs/DEVELOPING.md "Validation"."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

from capd_py.api import features
from capd_py.api import labels as L
from capd_py.api.admission import checks
from capd_py.api.admission.fielderrors import FieldError, forbidden, invalid, required
from capd_py.api.selectors import selector_matches

NODE_DELETION_TIMEOUT_SECONDS = 10  # upstream defaultNodeDeletionTimeoutSeconds
NODE_STARTUP_TIMEOUT_SECONDS = 600  # upstream DefaultNodeStartupTimeoutSeconds
MIN_NODE_STARTUP_TIMEOUT_SECONDS = 30
SKIP_PREFLIGHT_CHECKS = "machineset.cluster.x-k8s.io/skip-preflight-checks"
PREFLIGHT_CHECKS = ("All", "ControlPlaneIsStable", "ControlPlaneVersionSkew", "KubeadmVersionSkew",
                    "KubernetesVersionSkew")
RANDOM = "{{ .random }}"
CONTROL_PLANE_TAINT = "node-role.kubernetes.io/control-plane"
UNINITIALIZED_TAINT = "node.cluster.x-k8s.io/uninitialized"
OUTDATED_REVISION_TAINT = "node.cluster.x-k8s.io/outdated-revision"
Gates = Mapping[str, bool]


def enabled(gates: Gates | None, gate: str) -> bool:
    """A feature gate's value (capd_py/api/features.py; upstream's defaults when `gates` leaves it out)."""
    return bool((gates or {}).get(gate, features.DEFAULTS.get(gate, False)))
AUTOSCALER_MIN_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
AUTOSCALER_MAX_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"


def _d(obj: dict[str, Any], *path: str) -> dict[str, Any]:
    """The dict at `path`, created (as Go's zero structs that Default fills)."""
    node = obj
    for p in path:
        if not isinstance(node.get(p), dict):
            node[p] = {}
        node = node[p]
    return node


def _get(obj: dict[str, Any] | None, *path: str) -> Any:
    node: Any = obj
    for p in path:
        if not isinstance(node, dict):
            return None
        node = node.get(p)
    return node


def _v_prefix(holder: dict[str, Any], key: str = "version") -> None:
    v = holder.get(key)
    if isinstance(v, str) and v and not v.startswith("v"):
        holder[key] = "v" + v


def _cluster_name_label(obj: dict[str, Any]) -> None:
    _d(obj, "metadata", "labels")[L.CLUSTER_NAME] = str(_get(obj, "spec", "clusterName") or "")


# -- defaulting ----------------------------------------------------------------------------------------------------

def machine_deletion(deletion: Mapping[str, Any] | None) -> dict[str, Any]:
    """A Machine's spec.deletion as upstream's Machine webhook leaves it (DefaultMachineNodeDeletionTimeoutSeconds):
    nodeDeletionTimeoutSeconds 10 when unset. The MachineSet and KCP controllers compare their templates' deletion
    through this, so the value the webhook wrote on a Machine is not written away on every pass."""
    out = dict(deletion or {})
    out.setdefault("nodeDeletionTimeoutSeconds", NODE_DELETION_TIMEOUT_SECONDS)
    return out


def default_machine(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The cluster-name label, the `v` prefix and spec.deletion.nodeDeletionTimeoutSeconds (upstream's)."""
    out = copy.deepcopy(obj)
    _cluster_name_label(out)
    spec = _d(out, "spec")
    _v_prefix(spec)
    spec["deletion"] = machine_deletion(spec.get("deletion") if isinstance(spec.get("deletion"), dict) else None)
    return out


class DefaultingError(ValueError):
    """A defaulting webhook's error: the request is refused with this message (controller-runtime's
    admission.Denied of the Default error, as upstream's)."""


def _parse_int32(value: str, kind: str, annotation: str) -> int:
    """strconv.ParseInt(value, 10, 32), failing with upstream's message."""
    why = "invalid syntax"
    if re.fullmatch(r"[+-]?[0-9]+", value):
        n = int(value)
        if -(2 ** 31) <= n < 2 ** 31:
            return n
        why = "value out of range"
    raise DefaultingError(f"failed to caculate {kind} replicas value: could not parse the value of the "
                          f'"{annotation}" annotation: strconv.ParseInt: parsing "{value}": {why}')


def autoscaler_range(obj: dict[str, Any], kind: str = "") -> tuple[int, int] | None:
    """The (min, max) of the autoscaler's node-group annotations when both are set, else None; an unparsable value
    raises DefaultingError with upstream's message (`kind` names the object in it)."""
    annotations = _get(obj, "metadata", "annotations") or {}
    lo, hi = annotations.get(AUTOSCALER_MIN_SIZE), annotations.get(AUTOSCALER_MAX_SIZE)
    if lo is None or hi is None:
        return None
    return (_parse_int32(str(lo), kind, AUTOSCALER_MIN_SIZE), _parse_int32(str(hi), kind, AUTOSCALER_MAX_SIZE))


def default_replicas(obj: dict[str, Any], old: dict[str, Any] | None, kind: str = "") -> int:
    """calculateMachine{Set,Deployment,Pool}Replicas: the replicas given; else, with both autoscaler annotations,
    the min size on create (and when the old object had none or fewer than min), the max size when the old one had
    more than max, the old value when within min..max; else 1. Unparsable annotations raise DefaultingError."""
    spec = obj.get("spec") or {}
    if spec.get("replicas") is not None:
        return int(spec["replicas"])
    bounds = autoscaler_range(obj, kind)
    if bounds is None:
        return 1
    min_size, max_size = bounds
    previous = _get(old, "spec", "replicas")
    if old is None or previous is None or previous < min_size:
        return min_size
    return max_size if previous > max_size else int(previous)


def _default_selector(out: dict[str, Any], name_label: str, name_value: str, cluster_too: bool) -> None:
    spec = _d(out, "spec")
    selector = _d(spec, "selector")
    match_labels = _d(selector, "matchLabels")
    template_labels = _d(spec, "template", "metadata", "labels")
    if not match_labels and not selector.get("matchExpressions"):
        match_labels[name_label] = name_value
        template_labels[name_label] = name_value
    if cluster_too:
        match_labels[L.CLUSTER_NAME] = str(spec.get("clusterName") or "")
        template_labels[L.CLUSTER_NAME] = str(spec.get("clusterName") or "")


def _template_spec(out: dict[str, Any]) -> None:
    """The `v` prefix of spec.template.spec.version. An empty or null spec.template.spec is left out, as upstream's
    webhook answers with the object re-encoded from Go (MachineSpec is `omitzero`): the API server then says
    `spec.template.spec: Required value`, as upstream's (the admission oracle's #535, #912, #1023)."""
    template = _get(out, "spec", "template")
    spec = template.get("spec") if isinstance(template, dict) else None
    if isinstance(spec, dict) and spec:
        _v_prefix(spec)
    elif isinstance(template, dict) and "spec" in template:
        del template["spec"]


def default_machineset(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    _cluster_name_label(out)
    _d(out, "spec")["replicas"] = default_replicas(out, old, "MachineSet")
    name = str(_get(out, "metadata", "name") or "")
    _default_selector(out, L.SET_NAME, format_value(name), cluster_too=False)
    _template_spec(out)
    return out


def default_machinedeployment(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    _cluster_name_label(out)
    _d(out, "spec")["replicas"] = default_replicas(out, old, "MachineDeployment")
    strategy = _d(out, "spec", "rollout", "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _d(strategy, "rollingUpdate")
        rolling.setdefault("maxSurge", 1)
        rolling.setdefault("maxUnavailable", 0)
    _default_selector(out, L.DEPLOYMENT_NAME, str(_get(out, "metadata", "name") or ""), cluster_too=True)
    _template_spec(out)
    return out


def default_machinepool(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    _cluster_name_label(out)
    _d(out, "spec")["replicas"] = default_replicas(out, old, "MachinePool")
    template_spec = _d(out, "spec", "template", "spec")
    template_spec["deletion"] = machine_deletion(_d(template_spec, "deletion"))
    _v_prefix(template_spec)
    return out


def default_machinehealthcheck(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    _cluster_name_label(out)
    _d(out, "spec", "checks").setdefault("nodeStartupTimeoutSeconds", NODE_STARTUP_TIMEOUT_SECONDS)
    return out


def default_cluster(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `v` prefix of spec.topology.version. The topology variables' defaults come from the ClusterClass (a read
    of another object): reconcile/topology/classchecks.py, called by the webhook server (docs/validation.md)."""
    out = copy.deepcopy(obj)
    topology = _get(out, "spec", "topology")
    if isinstance(topology, dict) and topology:
        _v_prefix(topology)
    return out


def default_clusterresourceset(obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, Any]:
    """upstream's ClusterResourceSet defaulting: strategy ApplyOnce when empty (the CRD defaults a missing one)."""
    out = copy.deepcopy(obj)
    spec = _d(out, "spec")
    if not spec.get("strategy"):
        spec["strategy"] = "ApplyOnce"
    return out


def validate_clusterresourceset(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """upstream's ClusterResourceSet webhook: the clusterSelector parses as a label selector and is not empty (an
    empty one selects nothing); clusterSelector and a set strategy are immutable."""
    def selector_of(obj: dict[str, Any]) -> dict[str, Any]:  # as Go decodes it: a null field is an unset one
        return {k: v for k, v in (_get(obj, "spec", "clusterSelector") or {}).items() if v is not None}

    spec = new.get("spec") or {}
    selector = selector_of(new)
    errs: list[FieldError] = []
    err = checks.selector_error(selector)
    if err is not None:
        errs.append(invalid("spec.clusterSelector", selector, err))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errs.append(invalid("spec.clusterSelector", selector, "selector must not be empty"))
    if old is not None:
        old_spec = old.get("spec") or {}
        if old_spec.get("strategy") and old_spec.get("strategy") != spec.get("strategy"):
            errs.append(invalid("spec.strategy", spec.get("strategy") or "", "field is immutable"))
        if selector_of(old) != selector:
            errs.append(invalid("spec.clusterSelector", selector, "field is immutable"))
    return errs


def format_value(value: str) -> str:
    """upstream util/labels/format.MustFormatValue: a name that is not a valid label value becomes
    `hash_<base64 fnv32a>_z`."""
    if not checks.label_value_errors(value):
        return value
    import base64
    h = 0x811C9DC5
    for b in value.encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return f"hash_{base64.urlsafe_b64encode(h.to_bytes(4, 'big')).decode().rstrip('=')}_z"


# -- validation ----------------------------------------------------------------------------------------------------

def _bootstrap(spec: dict[str, Any], path: str, prefix: str) -> list[FieldError]:
    bootstrap = spec.get("bootstrap") or {}
    if not bootstrap.get("configRef") and bootstrap.get("dataSecretName") is None:
        return [required(path, f"expected either {prefix}.dataSecretName or {prefix}.configRef to be populated")]
    return []


def _cluster_name_immutable(old: dict[str, Any] | None, new: dict[str, Any]) -> list[FieldError]:
    if old is not None and _get(old, "spec", "clusterName") != _get(new, "spec", "clusterName"):
        return [forbidden("spec.clusterName", "field is immutable")]
    return []


def _same_cluster_name(new: dict[str, Any]) -> list[FieldError]:
    name = _get(new, "spec", "clusterName")
    if name != _get(new, "spec", "template", "spec", "clusterName"):
        return [invalid("spec.clusterName", name or "",
                        "spec.clusterName and spec.template.spec.clusterName must be set to the same value")]
    return []


def _version(version: Any, path: str) -> list[FieldError]:
    if version and not checks.KUBE_SEMVER.match(str(version)):
        return [invalid(path, version, "must be a valid semantic version")]
    return []


def machine_taint_errors(taints: list[dict[str, Any]] | None, path: str, propagation: bool = False
                         ) -> list[FieldError]:
    """upstream internal/util/taints.ValidateMachineTaints: no taints while the MachineTaintPropagation gate is off;
    keys reserved for Cluster API, the node lifecycle, cloud providers and the deprecated master role refused;
    keys as label keys."""
    errs: list[FieldError] = []
    if not propagation and taints:
        errs.append(forbidden(path, "taints are not allowed to be set when the feature gate MachineTaintPropagation "
                                    "is disabled"))
    for i, t in enumerate(taints or []):
        key = str(t.get("key") or "")
        at = f"{path}[{i}].key"
        if key in (UNINITIALIZED_TAINT, OUTDATED_REVISION_TAINT):
            errs.append(invalid(at, key, "taint key is not allowed"))
        elif key.startswith("node.kubernetes.io/") and key != "node.kubernetes.io/out-of-service":
            errs.append(invalid(at, key, "taint key must not have the prefix node.kubernetes.io/, except for "
                                         "node.kubernetes.io/out-of-service"))
        elif key.startswith("node.cloudprovider.kubernetes.io/"):
            errs.append(invalid(at, key, "taint key must not have the prefix node.cloudprovider.kubernetes.io/"))
        elif key == "node-role.kubernetes.io/master":
            errs.append(invalid(at, key, "taint is deprecated since 1.24 and should not be used anymore"))
        errs += [invalid(at, key, m) for m in checks.qualified_name_errors(key)]
    return errs


def _worker_taints(taints: list[dict[str, Any]] | None, path: str, machine: dict[str, Any] | None = None,
                   propagation: bool = False) -> list[FieldError]:
    """validateMachineTaintsForWorkers (only with the MachineTaintPropagation gate on)."""
    if not propagation:
        return []
    if machine is not None and L.CONTROL_PLANE in (_get(machine, "metadata", "labels") or {}):
        return []
    return [invalid(f"{path}[{i}].key", t.get("key"), "taint is not allowed for worker Machines")
            for i, t in enumerate(taints or []) if t.get("key") == CONTROL_PLANE_TAINT]


def _selector_matches_template(new: dict[str, Any], as_forbidden: bool) -> list[FieldError]:
    selector = _get(new, "spec", "selector") or {}
    err = checks.selector_error(selector)
    if err is not None:
        return [invalid("spec.selector", selector, err)]
    template_labels = _get(new, "spec", "template", "metadata", "labels") or {}
    if selector_matches(selector, template_labels):
        return []
    detail = f"must match spec.selector {checks.selector_string(selector)!r}".replace("'", '"')
    if as_forbidden:
        return [forbidden("spec.template.metadata.labels", detail)]
    return [invalid("spec.template.metadata.labels", template_labels, detail)]


def _skipped_preflight_checks(new: dict[str, Any]) -> list[FieldError]:
    skip = (_get(new, "metadata", "annotations") or {}).get(SKIP_PREFLIGHT_CHECKS) or ""
    if not skip:
        return []
    bad = [s.strip() for s in skip.split(",") if s.strip() not in PREFLIGHT_CHECKS]
    if not bad:
        return []
    return [invalid(f"metadata.annotations.{SKIP_PREFLIGHT_CHECKS}", bad,
                    f"skipped preflight check(s) must be among: [{' '.join(PREFLIGHT_CHECKS)}]")]


def machine_naming_errors(naming: dict[str, Any] | None, path: str) -> list[FieldError]:
    """validate{MD,MS}MachineNaming / KCP validateNaming: the template contains `{{ .random }}`, and the name it
    generates (cluster `cluster`, owner `machineset`) is a DNS subdomain."""
    template = (naming or {}).get("template") or ""
    if not template:
        return []
    errs: list[FieldError] = []
    if RANDOM not in template:
        errs.append(invalid(f"{path}.template", template, "invalid template, {{ .random }} is missing"))
    rendered = _render_naming(template)
    if rendered is None:
        errs.append(invalid(f"{path}.template", template, "invalid template: template: template: unsupported "
                                                           "field or function"))
    else:
        errs += [invalid(f"{path}.template", template,
                         f"invalid template, generated names would not be valid Kubernetes object names: {m}")
                 for m in checks.dns1123_subdomain_errors(rendered)]
    return errs


def _render_naming(template: str) -> str | None:
    """The Go template's output for the fields upstream's name generators offer (None: another action)."""
    import re
    values = {".cluster.name": "cluster", ".machineSet.name": "machineset", ".kubeadmControlPlane.name": "machineset",
              ".random": "abcde"}

    def sub(m: re.Match[str]) -> str:
        key = m.group(1).strip()
        if key not in values:
            raise KeyError(key)
        return values[key]
    try:
        return re.sub(r"\{\{\s*([^}]*?)\s*\}\}", sub, template)
    except KeyError:
        return None


def validate_machine(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    spec = new.get("spec") or {}
    errs: list[FieldError] = []
    if L.MACHINE_POOL_NAME not in (_get(new, "metadata", "labels") or {}):
        errs += _bootstrap(spec, "spec.bootstrap", "spec.bootstrap")
    errs += _cluster_name_immutable(old, new)
    errs += _version(spec.get("version"), "spec.version")
    taints = enabled(gates, features.MACHINE_TAINT_PROPAGATION)
    errs += machine_taint_errors(spec.get("taints"), "spec.taints", taints)
    errs += _worker_taints(spec.get("taints"), "spec.taints", new, taints)
    return errs


def _name_as_label(new: dict[str, Any], sep: str) -> list[FieldError]:
    name = str(_get(new, "metadata", "name") or "")
    return [invalid("metadata.name", name, f"must be a valid label value{sep} {m}")
            for m in checks.label_value_errors(name)]


def validate_machineset(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    tspec = _get(new, "spec", "template", "spec") or {}
    errs = _bootstrap(tspec, "spec.template.spec.bootstrap", "spec.template.spec.bootstrap")
    errs += _selector_matches_template(new, as_forbidden=False)
    if enabled(gates, features.MACHINE_SET_PREFLIGHT_CHECKS):
        errs += _skipped_preflight_checks(new)
    errs += _cluster_name_immutable(old, new)
    errs += _same_cluster_name(new)
    errs += _version(tspec.get("version"), "spec.template.spec.version")
    taints = enabled(gates, features.MACHINE_TAINT_PROPAGATION)
    errs += machine_taint_errors(tspec.get("taints"), "spec.template.spec.taints", taints)
    errs += _worker_taints(tspec.get("taints"), "spec.template.spec.taints", propagation=taints)
    errs += machine_naming_errors(_get(new, "spec", "machineNaming"), "spec.machineNaming")
    errs += checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata")
    return errs


def validate_machinedeployment(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    tspec = _get(new, "spec", "template", "spec") or {}
    errs = _name_as_label(new, ":")
    errs += _bootstrap(tspec, "spec.template.spec.bootstrap", "spec.template.spec.bootstrap")
    errs += _selector_matches_template(new, as_forbidden=True)
    if enabled(gates, features.MACHINE_SET_PREFLIGHT_CHECKS):
        errs += _skipped_preflight_checks(new)
    errs += _cluster_name_immutable(old, new)
    errs += _same_cluster_name(new)
    rolling = _get(new, "spec", "rollout", "strategy", "rollingUpdate") or {}
    errs += rollout_errors("spec.rollout.strategy", rolling.get("maxUnavailable"), rolling.get("maxSurge"))
    in_flight = _get(new, "spec", "remediation", "maxInFlight")
    errs += _int_or_percent("spec.remediation.maxInFlight", in_flight)
    errs += _version(tspec.get("version"), "spec.template.spec.version")
    errs += machine_naming_errors(_get(new, "spec", "machineNaming"), "spec.machineNaming")
    taints = enabled(gates, features.MACHINE_TAINT_PROPAGATION)
    errs += machine_taint_errors(tspec.get("taints"), "spec.template.spec.taints", taints)
    errs += _worker_taints(tspec.get("taints"), "spec.template.spec.taints", propagation=taints)
    errs += checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata")
    return errs


def _int_or_percent(path: str, value: Any) -> list[FieldError]:
    err = checks.int_or_percent_error(value)
    return [] if err is None else [invalid(path, str(value), f"must be either an int or a percentage: {err}")]


def rollout_errors(path: str, max_unavailable: Any, max_surge: Any) -> list[FieldError]:
    errs = _int_or_percent(f"{path}.rollingUpdate.maxUnavailable", max_unavailable)
    errs += _int_or_percent(f"{path}.rollingUpdate.maxSurge", max_surge)
    if max_unavailable == 0 and max_surge == 0 and isinstance(max_surge, int) and isinstance(max_unavailable, int):
        errs.append(invalid(f"{path}.rollingUpdate", str(max_surge), "maxUnavailable and maxSurge cannot both be 0"))
    return errs


def validate_machinepool(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    if not enabled(gates, features.MACHINE_POOL):
        return [forbidden("spec", "can be set only if the MachinePool feature flag is enabled")]
    tspec = _get(new, "spec", "template", "spec") or {}
    errs = _bootstrap(tspec, "spec.template.spec.bootstrap", "spec.template.spec.bootstrap")
    errs += _cluster_name_immutable(old, new)
    errs += _same_cluster_name(new)
    errs += _version(tspec.get("version"), "spec.template.spec.version")
    if tspec.get("taints"):
        errs.append(forbidden("spec.taints", "taints feature for MachinePools is not yet implemented"))
        if not enabled(gates, features.MACHINE_TAINT_PROPAGATION):
            errs.append(forbidden("spec.taints", "taints are not allowed to be set when the feature gate "
                                                 "MachineTaintPropagation is disabled"))
    errs += checks.object_meta_errors(_get(new, "spec", "template", "metadata"), "spec.template.metadata")
    return errs


def validate_machinehealthcheck(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    spec = new.get("spec") or {}
    selector = spec.get("selector") or {}
    errs: list[FieldError] = []
    err = checks.selector_error(selector)
    if err is not None:
        errs.append(invalid("spec.selector", selector, err))
    elif not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errs.append(required("spec.selector", "selector must not be empty"))
    cluster_label = (selector.get("matchLabels") or {}).get(L.CLUSTER_NAME)
    if cluster_label is not None and cluster_label != spec.get("clusterName"):
        errs.append(invalid("spec.selector", selector,
                            "cannot specify a cluster selector other than the one specified by ClusterName"))
    errs += _cluster_name_immutable(old, new)
    startup = _get(spec, "checks", "nodeStartupTimeoutSeconds")
    if startup is not None and startup != 0 and startup < MIN_NODE_STARTUP_TIMEOUT_SECONDS:
        errs.append(invalid("spec.checks.nodeStartupTimeoutSeconds", startup, "must be at least 30s"))
    errs += _int_or_percent("spec.remediation.triggerIf.unhealthyLessThanOrEqualTo",
                            _get(spec, "remediation", "triggerIf", "unhealthyLessThanOrEqualTo"))
    return errs


def _topology_metadata(topology: Any) -> list[FieldError]:
    """validateTopologyMetadata: the labels and annotations of the control plane and of each worker topology."""
    if not isinstance(topology, dict):
        return []
    errs = checks.object_meta_errors(_get(topology, "controlPlane", "metadata"), "spec.topology.controlPlane.metadata")
    for kind in ("machineDeployments", "machinePools"):
        for w in _get(topology, "workers", kind) or []:
            if isinstance(w, dict):
                errs += checks.object_meta_errors(w.get("metadata"),
                                                  f"spec.topology.workers.{kind}[{w.get('name', '')}].metadata")
    return errs


def validate_cluster(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """The checks of upstream's Cluster webhook that need no other object. Those on the ClusterClass are
    reconcile/topology/classchecks.py's (the webhook server reads the class); version skew on updates is the
    topology controller's (a condition), see docs/validation.md."""
    spec = new.get("spec") or {}
    errs = _name_as_label(new, "")
    if old is not None:
        for ref in ("infrastructureRef", "controlPlaneRef"):
            if _get(old, "spec", ref) and not spec.get(ref):
                errs.append(forbidden(f"spec.{ref}", "cannot be removed"))
    if not spec.get("controlPlaneRef") and not spec.get("infrastructureRef") and not spec.get("topology"):
        errs.append(forbidden("spec", "one of spec.controlPlaneRef, spec.infrastructureRef or spec.topology must "
                                      "be set"))
    for part in ("pods", "services"):
        for i, cidr in enumerate(_get(spec, "clusterNetwork", part, "cidrBlocks") or []):
            err = checks.cidr_error(str(cidr))
            if err is not None:
                errs.append(invalid(f"spec.clusterNetwork.{part}.cidrBlocks[{i}]", cidr, err))
    if spec.get("topology"):
        errs += _version(_get(spec, "topology", "version"), "spec.topology.version")
        errs += _topology_metadata(spec["topology"])
        errs += _topology_taints(spec["topology"], enabled(gates, features.MACHINE_TAINT_PROPAGATION))
        if not _get(spec, "topology", "classRef", "name"):
            errs.append(required("spec.topology.classRef.name", "cannot be empty"))
    if old is not None and _get(old, "spec", "topology") and not spec.get("topology"):
        errs.append(forbidden("spec.topology", "cannot be removed from an existing Cluster"))
    return errs


def _topology_taints(topology: dict[str, Any], propagation: bool) -> list[FieldError]:
    """upstream validateTopologyTaints: the control plane's and every MachineDeployment's and MachinePool's taints
    (keyed by name) as ValidateMachineTaints checks a Machine's."""
    errs = machine_taint_errors(_get(topology, "controlPlane", "taints"), "spec.topology.controlPlane.taints",
                                propagation)
    for kind in ("machineDeployments", "machinePools"):
        for w in _get(topology, "workers", kind) or []:
            if isinstance(w, dict):
                errs += machine_taint_errors(w.get("taints"),
                                             f"spec.topology.workers.{kind}[{w.get('name', '')}].taints", propagation)
    return errs


def _patch_errors(p: dict[str, Any], path: str, gates: Gates | None) -> list[FieldError]:
    """upstream validatePatchDefinitions: exactly one of definitions/external; an external patch needs the
    RuntimeSDK gate and a generate or validate extension."""
    errs: list[FieldError] = []
    has_definitions, external = p.get("definitions") is not None, p.get("external")
    if not has_definitions and external is None:
        errs.append(required(path, "one of definitions or external must be defined"))
    if has_definitions and external is not None:
        errs.append(invalid(path, p, "only one of definitions or external can be defined"))
    if external is not None:
        if not enabled(gates, features.RUNTIME_SDK):
            errs.append(forbidden(f"{path}.external",
                                  "patch.external can be used only if the RuntimeSDK feature flag is enabled"))
        if not isinstance(external, dict) or not (external.get("validateTopologyExtension")
                                                  or external.get("generatePatchesExtension")):
            errs.append(invalid(f"{path}.external", external,
                                "one of validateTopologyExtension and generatePatchesExtension must be defined"))
    return errs


def _json_patch_value_errors(jp: dict[str, Any], path: str) -> list[FieldError]:
    """upstream validateJSONPatchValues' exactly-one-of: an add or replace needs a value (null is none: Go decodes it
    into a nil pointer) or a valueFrom, not both. (A schemaless `value` is beyond the CRD's CEL cost budget.)"""
    if jp.get("op") not in ("add", "replace"):
        return []
    has_value, has_from = jp.get("value") is not None, jp.get("valueFrom") is not None
    if not has_value and not has_from:
        return [invalid(path, json.dumps(jp, indent=2), "jsonPatch must define one of value or valueFrom")]
    if has_value and has_from:
        return [invalid(path, json.dumps(jp, indent=2), "jsonPatch can not define both value and valueFrom")]
    return []


def validate_clusterclass(
        old: dict[str, Any] | None, new: dict[str, Any], gates: Gates | None = None) -> list[FieldError]:
    """upstream's ClusterClass webhook, the rules on patches' kind (inline or external) and on a jsonPatch's value.
    The others (variables, selectors, templates, compatibility with the old class and its Clusters) are the CRD's CEL
    or the controllers' (docs/validation.md)."""
    errs: list[FieldError] = []
    for i, p in enumerate(_get(new, "spec", "patches") or []):
        if not isinstance(p, dict):
            continue
        errs += _patch_errors(p, f"spec.patches[{i}]", gates)
        for j, d in enumerate(p.get("definitions") or []):
            for k, jp in enumerate((d.get("jsonPatches") or []) if isinstance(d, dict) else []):
                if isinstance(jp, dict):
                    errs += _json_patch_value_errors(jp, f"spec.patches[{i}].definitions[{j}].jsonPatches[{k}]")
    return errs
