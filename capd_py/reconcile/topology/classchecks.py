"""What upstream's Cluster webhook decides from the Cluster's ClusterClass (internal/webhooks/cluster.go): once the
class is reconciled, its defaulting webhook defaults the topology's variables (the Cluster's and the control
plane / MachineDeployment / MachinePool overrides) and refuses values its variable schemas refuse, in one step so
that both read the same class. The webhook server reads the class (kube/admission_webhook.py); this decides."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions, versions
from capd_py.api.admission.core import AUTOSCALER_MAX_SIZE, AUTOSCALER_MIN_SIZE
from capd_py.api.admission.fielderrors import FieldError, forbidden, internal, invalid, required
from capd_py.api.runtime_hooks import AFTER_CLUSTER_UPGRADE, PENDING_HOOKS_ANNOTATION
from capd_py.api.selectors import selector_matches
from capd_py.reconcile.clusterclass import VARIABLES_READY
from capd_py.reconcile.topology import variables as V
from capd_py.reconcile.topology.desired import class_variables

Obj = dict[str, Any]


def reconciled(cc: Obj) -> bool:
    """clusterClassIsReconciled: the controller saw this generation and its variables are ready."""
    status = cc.get("status") or {}
    if status.get("observedGeneration") != (cc.get("metadata") or {}).get("generation"):
        return False
    c = conditions.get(cc, VARIABLES_READY)
    return c is not None and c.get("status") != conditions.FALSE


def _topology(obj: Obj | None) -> Obj:
    t = ((obj or {}).get("spec") or {}).get("topology")
    return t if isinstance(t, dict) else {}


def _overrides(holder: Any) -> list[Any]:
    if not isinstance(holder, dict):
        return []
    vs = (holder.get("variables") or {}) if isinstance(holder.get("variables"), dict) else {}
    return list(vs.get("overrides") or [])


def _workers(topo: Obj, kind: str) -> list[Obj]:
    ws = topo.get("workers") if isinstance(topo.get("workers"), dict) else {}
    return [w for w in (ws or {}).get(kind) or [] if isinstance(w, dict)]


def default_and_validate_variables(cluster: Obj, old: Obj | None, cc: Obj) -> tuple[Obj, list[FieldError]]:
    """DefaultAndValidateVariables: the Cluster with its variables defaulted, and what is wrong with them (values
    checked after defaulting; transition rules against the old Cluster's values)."""
    out = copy.deepcopy(cluster)
    topo = _topology(out)
    old_topo = _topology(old)
    defs, _ = class_variables(cc)
    names = {d.get("name") for d in defs if isinstance(d, dict)}

    def defaults(values: list[Any], top_level_missing: bool = True) -> list[Any]:
        """DefaultClusterVariables: a list naming a variable the class does not define (or a name twice) is not
        defaulted at all, as upstream's defaulting fails for it; validation then sees it as given."""
        given = [v.get("name") for v in values if isinstance(v, dict)]
        if any(n not in names for n in given) or len(given) != len(set(given)):
            return values
        return V.default_values(defs, values, top_level_missing=top_level_missing)

    defaulted = defaults(list(topo.get("variables") or []))
    if defaulted or "variables" in topo:
        topo["variables"] = defaulted
    cp: Obj = topo["controlPlane"] if isinstance(topo.get("controlPlane"), dict) else {}
    if _overrides(cp):
        cp["variables"]["overrides"] = defaults(_overrides(cp), top_level_missing=False)
    for kind in ("machineDeployments", "machinePools"):
        for w in _workers(topo, kind):
            if _overrides(w):
                w["variables"]["overrides"] = defaults(_overrides(w), top_level_missing=False)
    errs = V.value_errors(defs, list(topo.get("variables") or []), "spec.topology.variables",
                          old_values=list(old_topo.get("variables") or []) if old is not None else None)
    if _overrides(cp):
        errs += V.value_errors(defs, _overrides(cp), "spec.topology.controlPlane.variables.overrides", overrides=True,
                               old_values=_overrides(old_topo.get("controlPlane")) if old is not None else None)
    for kind in ("machineDeployments", "machinePools"):
        olds = {w.get("name"): _overrides(w) for w in _workers(old_topo, kind)}
        for w in _workers(topo, kind):
            if _overrides(w):
                errs += V.value_errors(defs, _overrides(w),
                                       f"spec.topology.workers.{kind}[{w.get('name')}].variables.overrides",
                                       overrides=True,
                                       old_values=olds.get(w.get("name")) if old is not None else None)
    return out, errs


def _defined(health_check: Any) -> bool:
    """A healthCheck's IsDefined: checks or remediation say something."""
    return isinstance(health_check, dict) and bool(health_check.get("checks") or health_check.get("remediation"))


def _worker_classes(cc: Obj, kind: str) -> dict[str, Obj]:
    ws = (cc.get("spec") or {}).get("workers") or {}
    return {str(c.get("class")): c for c in ws.get(kind) or [] if isinstance(c, dict)}


def _workers_defined(topo: Obj, cc: Obj, kind: str, what: str) -> list[FieldError]:
    """Machine{Deployment,Pool}TopologiesAreValidAndDefinedInClusterClass."""
    classes = _worker_classes(cc, kind)
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, w in enumerate(_workers(topo, kind)):
        at = f"spec.topology.workers.{kind}[{i}]"
        if str(w.get("class", "")) not in classes:
            errs.append(invalid(f"{at}.class", w.get("class", ""), f"{what}Class with name "
                                f"{json.dumps(str(w.get('class', '')))} does not exist in ClusterClass "
                                f"{json.dumps(cc['metadata']['name'])}"))
        name = str(w.get("name") or "")
        if not name:
            errs.append(required(f"{at}.name", "name must not be empty"))
            continue
        if name in names:
            errs.append(invalid(f"{at}.name", name, f"name must be unique. {what} with name {json.dumps(name)} is "
                                                    f"defined more than once"))
        names.add(name)
    return errs


def _health_checks(topo: Obj, cc: Obj) -> list[FieldError]:
    """validateMachineHealthChecks' parts that read the class."""
    errs: list[FieldError] = []
    cp: Obj = topo["controlPlane"] if isinstance(topo.get("controlPlane"), dict) else {}
    hc = cp.get("healthCheck")
    cc_cp = (cc.get("spec") or {}).get("controlPlane") or {}
    path = "spec.topology.controlPlane.healthCheck"
    if _defined(hc) and not ((cc_cp.get("machineInfrastructure") or {}).get("templateRef") or {}).get("name"):
        errs.append(forbidden(path, "can be only set if spec.controlPlane.machineInfrastructure is set in "
                                    "ClusterClass"))
    if isinstance(hc, dict) and hc.get("enabled") is True and not _defined(hc) and \
            not _defined(cc_cp.get("healthCheck")):
        errs.append(forbidden(f"{path}.enable", "cannot be set to true as healthCheck definition is not available in "
                                                "the Cluster topology or the ClusterClass"))
    classes = _worker_classes(cc, "machineDeployments")
    for md in _workers(topo, "machineDeployments"):
        md_hc = md.get("healthCheck")
        mdc = classes.get(str(md.get("class", "")))
        if mdc is not None and isinstance(md_hc, dict) and md_hc.get("enabled") is True and not _defined(md_hc) \
                and not _defined(mdc.get("healthCheck")):
            errs.append(forbidden(f"spec.topology.workers.machineDeployments[{md.get('name', '')}].healthCheck"
                                  f".enable", "cannot be set to true as healthCheck definition is not available in "
                                              "the Cluster topology or the ClusterClass"))
    return errs


def _autoscaler_in_class(cluster: Obj, topo: Obj, cc: Obj) -> list[FieldError]:
    """validateAutoscalerAnnotationsForCluster's half that reads the class (the other is the CRD's rule)."""
    errs: list[FieldError] = []
    classes = _worker_classes(cc, "machineDeployments")
    md_meta = cluster.get("metadata") or {}
    for md in _workers(topo, "machineDeployments"):
        if md.get("replicas") is None:
            continue
        mdc = classes.get(str(md.get("class", "")))
        annotations = ((mdc or {}).get("metadata") or {}).get("annotations") or {}
        if AUTOSCALER_MIN_SIZE in annotations or AUTOSCALER_MAX_SIZE in annotations:
            errs.append(invalid(f"spec.topology.workers.machineDeployments[{md.get('name', '')}].replicas",
                                md.get("replicas"),
                                f"cannot be set for cluster {json.dumps(md_meta.get('name', ''))} in namespace "
                                f"{json.dumps(md_meta.get('namespace', ''))} if the source class "
                                f"{json.dumps(str(md.get('class', '')))} of this MachineDeploymentTopology has "
                                f"autoscaler annotations"))
    return errs


def validate_cluster_for_class(cluster: Obj, old: Obj | None, cc: Obj | None,
                               state: UpgradeState | None = None) -> list[FieldError]:
    """The Cluster validating webhook's checks against the class (ValidateClusterForClusterClass, the autoscaler
    annotations of the class) and, on an update, of the version (version_update_errors, with `state`): `cc` is the
    class however far it is reconciled, None when it does not exist (an update then fails as upstream's does: the
    class must exist)."""
    topo = _topology(cluster)
    if cc is None:
        if old is not None and _topology(old):
            ref = topo.get("classRef") or {}
            ns = ref.get("namespace") or (cluster.get("metadata") or {}).get("namespace", "")
            return [internal("spec.topology.class", f"ClusterClass {ns}/{ref.get('name', '')} not found")]
        return []
    errs: list[FieldError] = []
    versions = (cc.get("spec") or {}).get("kubernetesVersions") or []
    if versions and topo.get("version") not in versions:
        errs.append(invalid("spec.topology.version", topo.get("version"),
                            "version must match one of the versions defined in the ClusterClass"))
    errs += _workers_defined(topo, cc, "machineDeployments", "MachineDeployment")
    errs += _workers_defined(topo, cc, "machinePools", "MachinePool")
    errs += _health_checks(topo, cc)
    errs += _autoscaler_in_class(cluster, topo, cc)
    if old is not None and _topology(old):
        errs += version_update_errors(cluster, old, cc, state)
    return errs


# upstream's ClusterTopologyUnsafeUpdateVersionAnnotation: skips the version update checks below
UNSAFE_UPDATE_VERSION = "unsafe.topology.cluster.x-k8s.io/disable-update-version-check"


@dataclass(frozen=True)
class UpgradeState:
    """What upstream's validateTopologyVersionUpdate reads besides the Cluster (the webhook server reads it): the
    control plane, the MachineDeployments and MachinePools the topology owns, and the Machines of the namespace
    that belong to those MachineDeployments. `unread`: why a read failed (upstream names it in the refusal)."""
    control_plane: Obj | None = None
    machine_deployments: tuple[Obj, ...] = ()
    machines: tuple[Obj, ...] = ()
    machine_pools: tuple[Obj, ...] = ()
    unread: str = ""


def _semver(text: Any) -> versions.Version | None:
    """semver.ParseTolerant (a missing `v` is fine)."""
    t = str(text or "").strip()
    try:
        return versions.parse(t if t.startswith("v") else f"v{t}")
    except ValueError:
        return None


def _go(v: versions.Version) -> str:
    """semver.Version.String(): no `v`."""
    return str(v)[1:]


def version_update_checked(cluster: Obj, old: Obj | None) -> bool:
    """Whether the update of `cluster` from `old` changes its topology's version in a way the checks below look at
    (and the webhook server has to read the objects they need): the version changed, the unsafe annotation unset."""
    return bool(old is not None and _topology(old)
                and _topology(old).get("version") != _topology(cluster).get("version")
                and UNSAFE_UPDATE_VERSION not in ((cluster.get("metadata") or {}).get("annotations") or {}))


def version_update_errors(cluster: Obj, old: Obj, cc: Obj, state: UpgradeState | None) -> list[FieldError]:
    """upstream validateTopologyVersionUpdate (the update of a topology Cluster's version): never decreased; at most
    one minor up unless the class lists its Kubernetes versions or names a generateUpgradePlan extension; not while
    the previous upgrade's AfterClusterUpgrade hook is pending; not while the control plane is not at the old version,
    provisioning or upgrading, nor while a MachineDeployment or MachinePool is not at it or is still rolling out.
    The first that applies, as upstream's. `state` None: the objects were not read (only the first three apply).
    Skipped with the unsafe annotation (upstream logs a warning)."""
    path = "spec.topology.version"
    new_text = str(_topology(cluster).get("version") or "")
    if not version_update_checked(cluster, old):
        return []
    new_v, old_v = _semver(new_text), _semver(_topology(old).get("version"))
    if new_v is None or old_v is None or str(new_v) == str(old_v):
        return []
    if (new_v.major, new_v.minor, new_v.patch) < (old_v.major, old_v.minor, old_v.patch):
        return [invalid(path, new_text, f'version cannot be decreased from "{_go(old_v)}" to "{_go(new_v)}"')]
    spec = cc.get("spec") or {}
    generate_plan = (((spec.get("upgrade") or {}).get("external") or {}).get("generateUpgradePlanExtension"))
    if not spec.get("kubernetesVersions") and not generate_plan \
            and (new_v.major, new_v.minor, new_v.patch) >= (old_v.major, old_v.minor + 2, 0):
        return [invalid(path, new_text, f'version cannot be increased from "{_go(old_v)}" to "{_go(new_v)}"')]
    pending = ((cluster.get("metadata") or {}).get("annotations") or {}).get(PENDING_HOOKS_ANNOTATION) or ""
    if AFTER_CLUSTER_UPGRADE.name in pending.split(","):
        return [invalid(path, new_text,
                        f'version cannot be changed when the "{AFTER_CLUSTER_UPGRADE.name}" hook is still blocking')]
    if state is None:
        return []
    reasons = [r for r in (_control_plane_not_ready(state, old_v), *_workers_not_ready(state, old_v)) if r]
    if not reasons:
        return []
    # kerrors.NewAggregate: one error as is, several in brackets
    joined = reasons[0] if len(reasons) == 1 else "[" + ", ".join(reasons) + "]"
    return [invalid(path, new_text, f"version cannot be changed: {joined}")]


def _control_plane_not_ready(state: UpgradeState, old_v: versions.Version) -> str:
    cp = state.control_plane
    if cp is None:
        return state.unread or "failed to check if control plane is upgrading: failed to get control plane object"
    spec_v = _semver((cp.get("spec") or {}).get("version"))
    if spec_v is None or str(spec_v) != str(old_v):
        shown = _go(spec_v) if spec_v is not None else str((cp.get("spec") or {}).get("version") or "")
        return (f"Cluster.spec.topology.version {_go(old_v)} was not propagated to control plane yet (control plane "
                f"version {shown})")
    status_version = (cp.get("status") or {}).get("version")
    if not status_version:
        return "control plane is currently provisioning"
    status_v = _semver(status_version)
    if status_v is not None and (spec_v > status_v or (spec_v == status_v and spec_v.build != status_v.build)):
        return "control plane is still completing a previous upgrade"
    return ""


def _workers_not_ready(state: UpgradeState, old_v: versions.Version) -> list[str]:
    out = []
    for kind, objs in (("MachineDeployments", state.machine_deployments), ("MachinePools", state.machine_pools)):
        names = []
        for o in objs:
            version = str(((((o.get("spec") or {}).get("template") or {}).get("spec") or {}).get("version")) or "")
            v = _semver(version)
            if v is None or str(v) != str(old_v) \
                    or (kind == "MachineDeployments" and _md_rolling(o, version, state.machines)):
                names.append(str((o.get("metadata") or {}).get("name") or ""))
        if names:
            out.append(f"there are still {kind} completing a previous upgrade: [{', '.join(names)}]")
    return out


def _md_rolling(md: Obj, version: str, machines: tuple[Obj, ...]) -> bool:
    """upstream IsMachineDeploymentUpgrading: a Machine its selector's labels (LabelSelectorAsMap) match is at
    another version."""
    selector = {"matchLabels": (((md.get("spec") or {}).get("selector") or {}).get("matchLabels")) or {}}
    ns = (md.get("metadata") or {}).get("namespace")
    return any((m.get("metadata") or {}).get("namespace") == ns
               and selector_matches(selector, (m.get("metadata") or {}).get("labels"))
               and (m.get("spec") or {}).get("version") != version for m in machines)


def validate_clusterclass(cc: Obj, old: Obj | None) -> list[FieldError]:
    """The ClusterClass webhook's variable rules (ValidateClusterClassVariables): names, schemas, defaults and
    examples against their own schema."""
    defs = (cc.get("spec") or {}).get("variables")
    return V.class_variable_errors(defs if defs is not None else [], "spec.variables")
