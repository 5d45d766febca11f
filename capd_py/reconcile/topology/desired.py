"""The desired state of a Cluster with `spec.topology`: which objects it should have, with which specs,
and in which order a version change rolls through them.

Upstream's topology controller computes the same thing in `exp/topology/desiredstate`; the shape here:
- the InfrastructureCluster and the ControlPlane are objects cloned from the ClusterClass templates, named
  `<cluster>-<random>` once and kept; their spec is patched in place (server-side apply, field manager
  `capi-topology`);
- machine templates (control plane infrastructure, MachineDeployment bootstrap + infrastructure) are copies
  of the class templates named `<cluster>[-<md>]-<random>`; a change of their desired spec creates a new copy
  and moves the reference (template rotation), which is what makes the owners roll their Machines; copies no
  longer referenced are deleted;
- MachineDeployments / MachinePools: one per `spec.topology.workers` entry, found again by the
  `topology.cluster.x-k8s.io/deployment-name` / `pool-name` label, deleted when their entry goes;
- MachineHealthChecks from the class's (or topology's) `healthCheck`;
- version: the control plane moves to `spec.topology.version` first; workers follow one at a time
  (`topology.cluster.x-k8s.io/upgrade-concurrency`) once the control plane runs that version everywhere.

Everything here is pure: templates and current objects in, a `Plan` out. The random suffix comes from the
caller, so tests are deterministic. External patches (Runtime Extensions) are calls the caller makes:
`compute_steps` yields them (patches.ExternalCall) and is sent the responses; `compute` is the same with no
extension to call.

Variables are defined by the ClusterClass's `status.variables` (inline definitions and those its external patches'
DiscoverVariables returned; the ClusterClass controller writes them), or by `spec.variables` before it has any.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract
from capd_py.api import gvk as G
from capd_py.api.labels import (
    CLONED_FROM_GROUP_KIND,
    CLONED_FROM_NAME,
    CLUSTER_NAME,
    CONTROL_PLANE,
    TOPOLOGY_DEFER_UPGRADE,
    TOPOLOGY_DEPLOYMENT_NAME,
    TOPOLOGY_HOLD_UPGRADE_SEQUENCE,
    TOPOLOGY_OWNED,
    TOPOLOGY_POOL_NAME,
    TOPOLOGY_UPGRADE_CONCURRENCY,
)
from capd_py.reconcile import coreutil
from capd_py.reconcile.topology import gotemplate
from capd_py.reconcile.topology import patches as P
from capd_py.reconcile.topology import variables as V

FIELD_MANAGER = "capi-topology"
# On every object the topology writes: the hash of what it last wanted there, so a change of the desired
# state (including a field it no longer sets) is seen without asking the API server.
DESIRED_HASH = "topology.cluster.x-k8s.io/capd-py-desired-hash"

# TopologyReconciled reasons (upstream's)
R_SUCCEEDED = "ReconcileSucceeded"
R_FAILED = "ReconcileFailed"
R_CLASS_NOT_RECONCILED = "ClusterClassNotReconciled"
R_CP_UPGRADE_PENDING = "ControlPlaneUpgradePending"
R_MD_CREATE_PENDING = "MachineDeploymentsCreatePending"
R_MD_UPGRADE_PENDING = "MachineDeploymentsUpgradePending"
R_MD_UPGRADE_DEFERRED = "MachineDeploymentsUpgradeDeferred"
R_MP_CREATE_PENDING = "MachinePoolsCreatePending"
R_MP_UPGRADE_PENDING = "MachinePoolsUpgradePending"
R_CLUSTER_UPGRADING = "ClusterUpgrading"
R_PAUSED = "TopologyReconcilePaused"
R_DELETING = "Deleting"


class TopologyError(ValueError):
    """The topology cannot be computed (missing class, template, variable...); the message says why."""


# --- inputs --------------------------------------------------------------------------------------------

@dataclass
class WorkerClass:
    spec: dict[str, Any]  # the ClusterClass workers.machineDeployments[] / machinePools[] entry
    bootstrap_template: dict[str, Any]
    infra_template: dict[str, Any]


@dataclass
class Blueprint:
    """The ClusterClass with its templates, read by the caller."""

    clusterclass: dict[str, Any]
    infra_cluster_template: dict[str, Any]
    cp_template: dict[str, Any]
    cp_machine_infra_template: dict[str, Any] | None
    md_classes: dict[str, WorkerClass] = field(default_factory=dict)
    mp_classes: dict[str, WorkerClass] = field(default_factory=dict)


@dataclass
class CurrentMD:
    md: dict[str, Any]
    bootstrap_template: dict[str, Any] | None
    infra_template: dict[str, Any] | None


@dataclass
class CurrentMP:
    mp: dict[str, Any]
    bootstrap_config: dict[str, Any] | None
    infra_pool: dict[str, Any] | None


@dataclass
class Current:
    infra_cluster: dict[str, Any] | None = None
    control_plane: dict[str, Any] | None = None
    cp_machine_infra_template: dict[str, Any] | None = None
    machine_deployments: dict[str, CurrentMD] = field(default_factory=dict)  # by topology name
    machine_pools: dict[str, CurrentMP] = field(default_factory=dict)
    mhcs: dict[str, dict[str, Any]] = field(default_factory=dict)  # by name
    # every topology-owned template copy of the cluster (for garbage collection) and the refs still in use
    templates: list[dict[str, Any]] = field(default_factory=list)
    referenced_templates: set[tuple[str, str]] = field(default_factory=set)  # (kind, name) used by MS/KCP


# --- outputs -------------------------------------------------------------------------------------------

@dataclass
class Write:
    obj: dict[str, Any]
    create: bool  # create (new name) rather than apply


@dataclass
class Plan:
    writes: list[Write] = field(default_factory=list)  # in order: templates before their holders
    cluster_refs: dict[str, Any] | None = None  # merge patch for Cluster.spec refs, when they change
    deletes: list[dict[str, Any]] = field(default_factory=list)  # objects to delete (apiVersion/kind/metadata)
    reason: str = R_SUCCEEDED
    message: str = ""

    @property
    def reconciled(self) -> bool:
        return self.reason == R_SUCCEEDED


# --- helpers -------------------------------------------------------------------------------------------

def group_of(api_version: str) -> str:
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def ref_to(obj: dict[str, Any]) -> dict[str, str]:
    """A v1beta2 contract reference {apiGroup, kind, name}."""
    return {"apiGroup": group_of(obj["apiVersion"]), "kind": obj["kind"], "name": obj["metadata"]["name"]}


def subset(want: Any, have: Any) -> bool:
    """True when every field of `want` is in `have` with the same value (the API server may have added
    defaults to `have`); lists must have the same length, element-wise subsets."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and subset(v, have[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and \
            all(subset(a, b) for a, b in zip(want, have, strict=True))
    if isinstance(want, bool) or isinstance(have, bool):
        return want is have
    if isinstance(want, (int, float)) and isinstance(have, (int, float)):
        return want == have
    return bool(want == have)


def _with_hash(obj: dict[str, Any]) -> dict[str, Any]:
    h = coreutil.stable_hash({k: v for k, v in obj.items() if k != "status"})
    obj["metadata"].setdefault("annotations", {})[DESIRED_HASH] = h
    return obj


def needs_write(desired: dict[str, Any], current: dict[str, Any] | None) -> bool:
    """Apply when the object is missing, its desired state changed since we last applied it, or someone
    changed a field we own."""
    if current is None:
        return True
    want_hash = (desired["metadata"].get("annotations") or {}).get(DESIRED_HASH)
    have_hash = (current["metadata"].get("annotations") or {}).get(DESIRED_HASH)
    if want_hash != have_hash:
        return True
    return not subset(desired.get("spec") or {}, current.get("spec") or {}) or \
        not subset(desired["metadata"].get("labels") or {}, current["metadata"].get("labels") or {}) or \
        not _has_owner_refs(current, desired["metadata"].get("ownerReferences") or [])


def _has_owner_refs(current: dict[str, Any], want: list[dict[str, Any]]) -> bool:
    """Every owner reference the topology sets is there, at its version (a removed one comes back, as upstream's
    apply restores it; another controller may add the controller flag to it)."""
    have = current["metadata"].get("ownerReferences") or []
    return all(any(h.get("uid") == w.get("uid") and h.get("apiVersion") == w.get("apiVersion") for h in have)
               for w in want)


def _merge_maps(*maps: dict[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in maps:
        out.update(m or {})
    return out


def _object_kind(template_kind: str) -> str:
    return template_kind[: -len("Template")] if template_kind.endswith("Template") else template_kind


def _truncate(base: str, rand: str) -> str:
    return f"{base[:58]}{rand}"


def _clone_template(tpl: dict[str, Any], cluster: dict[str, Any], name: str,
                    labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A per-cluster copy of a ClusterClass template (upstream's templateToTemplate)."""
    md = tpl["metadata"]
    ann = {k: v for k, v in (md.get("annotations") or {}).items()
           if k != "kubectl.kubernetes.io/last-applied-configuration"}
    ann[CLONED_FROM_NAME] = md["name"]
    ann[CLONED_FROM_GROUP_KIND] = f"{tpl['kind']}.{group_of(tpl['apiVersion'])}"
    return {
        "apiVersion": tpl["apiVersion"], "kind": tpl["kind"],
        "metadata": {"name": name, "namespace": cluster["metadata"].get("namespace") or "default",
                     "labels": _merge_maps(md.get("labels"), labels,
                                           {CLUSTER_NAME: cluster["metadata"]["name"], TOPOLOGY_OWNED: ""}),
                     "annotations": ann},
        "spec": copy.deepcopy(tpl.get("spec") or {}),
    }


def _object_from_template(tpl: dict[str, Any], cluster: dict[str, Any], name: str,
                          labels: dict[str, str], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """An object from a template's spec.template (upstream's templateToObject)."""
    inner = (tpl.get("spec") or {}).get("template") or {}
    imd = inner.get("metadata") or {}
    ann = _merge_maps(imd.get("annotations"), annotations)
    ann[CLONED_FROM_NAME] = tpl["metadata"]["name"]
    ann[CLONED_FROM_GROUP_KIND] = f"{tpl['kind']}.{group_of(tpl['apiVersion'])}"
    return {
        "apiVersion": tpl["apiVersion"], "kind": _object_kind(tpl["kind"]),
        "metadata": {"name": name, "namespace": cluster["metadata"].get("namespace") or "default",
                     "labels": _merge_maps(imd.get("labels"), labels,
                                           {CLUSTER_NAME: cluster["metadata"]["name"], TOPOLOGY_OWNED: ""}),
                     "annotations": ann},
        "spec": copy.deepcopy(inner.get("spec") or {}),
    }


def _name_from(template: str | None, default: str, data: dict[str, Any]) -> str:
    text = template or default
    try:
        # as upstream's name generator: plain text/template (no sprig), a missing key is an error
        name = gotemplate.render(text, data, sprig=False, missing_key="error")
    except gotemplate.TemplateError as e:
        raise TopologyError(f"naming template {text!r}: {e}") from e
    if len(name) > 63:
        name = name[:58] + str(data.get("random", ""))
    return name


def _owned_by_cluster(obj: dict[str, Any], cluster: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"]["ownerReferences"] = [contract.owner_ref(cluster, controller=False)]
    return obj


# --- version ordering ----------------------------------------------------------------------------------

def cp_stable_at(cp: dict[str, Any] | None, version: str) -> bool:
    """The control plane runs `version` on every machine and is not rolling."""
    if cp is None:
        return False
    spec_v = contract.dig(cp, "spec", "version")
    st = cp.get("status") or {}
    if spec_v != version or st.get("version") != version:
        return False
    want = coreutil.replicas_of(cp)
    return int(st.get("upToDateReplicas") or 0) >= want and int(st.get("replicas") or 0) == want


def md_rolling(md: dict[str, Any]) -> bool:
    """A MachineDeployment has Machines not yet at its current template (still rolling out)."""
    st = md.get("status") or {}
    want = coreutil.replicas_of(md)
    return int(st.get("upToDateReplicas") or 0) < want or int(st.get("replicas") or 0) != want


def _concurrency(cluster: dict[str, Any]) -> int:
    v = (cluster["metadata"].get("annotations") or {}).get(TOPOLOGY_UPGRADE_CONCURRENCY)
    try:
        return max(1, int(v)) if v else 1
    except ValueError:
        return 1


# --- the computation -----------------------------------------------------------------------------------

def topology_of(cluster: dict[str, Any]) -> dict[str, Any]:
    return contract.dig(cluster, "spec", "topology") or {}


def class_ref(cluster: dict[str, Any]) -> tuple[str, str]:
    """(namespace, name) of the ClusterClass; the Cluster's namespace when classRef has none."""
    ref = topology_of(cluster).get("classRef") or {}
    return (ref.get("namespace") or cluster["metadata"].get("namespace") or "default", ref.get("name", ""))


def _names_unique(items: list[dict[str, Any]], what: str) -> None:
    seen: set[str] = set()
    for it in items:
        n = it.get("name", "")
        if n in seen:
            raise TopologyError(f"spec.topology.workers.{what}: name {n!r} is used twice")
        seen.add(n)


def _ref_version(obj: dict[str, Any], *path: str) -> str | None:
    """The apiVersion a ClusterClass templateRef names: the template is patched in it (see patches.py)."""
    v = contract.dig(obj, *path, "apiVersion")
    return v if isinstance(v, str) and v else None


def class_variables(cc: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[str, set[str]]]:
    """The variable definitions a Cluster of this class is checked and defaulted against, and for each variable
    where its definitions come from (`inline`, or an external patch's name). From `status.variables` (upstream
    reads them there: they include the discovered ones), or `spec.variables` until the class has a status. A
    variable whose definitions conflict holds the topology earlier (VariablesReady False); its first is used."""
    status_vars = contract.dig(cc, "status", "variables")
    if not isinstance(status_vars, list):
        spec_vars = list(contract.dig(cc, "spec", "variables") or [])
        return spec_vars, {str(d.get("name")): {P.INLINE} for d in spec_vars if isinstance(d, dict)}
    defs: list[dict[str, Any]] = []
    sources: dict[str, set[str]] = {}
    for v in status_vars:
        ds = [d for d in (v.get("definitions") or []) if isinstance(d, dict)] if isinstance(v, dict) else []
        if not ds:
            continue
        d = {"name": v.get("name", ""), "required": bool(ds[0].get("required", False)),
             "schema": ds[0].get("schema") or {}}
        if ds[0].get("deprecatedV1Beta1Metadata"):
            d["deprecatedV1Beta1Metadata"] = ds[0]["deprecatedV1Beta1Metadata"]
        defs.append(d)
        sources[str(d["name"])] = {str(x.get("from", "")) for x in ds}
    return defs, sources


ComputeSteps = Generator[P.ExternalCall, Mapping[str, Any], Plan]


def compute(cluster: dict[str, Any], bp: Blueprint, cur: Current, rand: Callable[[], str],
            hold_control_plane: bool = False, hold_workers: bool = False) -> Plan:
    """Everything a topology Cluster should have, with no Runtime Extension to call (an external patch fails,
    naming the RuntimeSDK gate). Raises TopologyError for input the user must fix."""
    return P.drive(compute_steps(cluster, bp, cur, rand, hold_control_plane=hold_control_plane,
                                 hold_workers=hold_workers))


def compute_steps(cluster: dict[str, Any], bp: Blueprint, cur: Current, rand: Callable[[], str],
                  runtime_sdk: bool = False, hold_control_plane: bool = False,
                  hold_workers: bool = False) -> ComputeSteps:
    """`compute`, yielding the external patches' calls (patches.ExternalCall; send each one's response, throw
    patches.ExtensionCallError into it when a call fails); returns the Plan. `runtime_sdk`: the RuntimeSDK gate.
    `hold_control_plane` / `hold_workers`: a lifecycle hook blocks (hooks.py): the control plane keeps its version;
    workers neither take a new version nor get created (upstream's computeControlPlaneVersion returning the current
    version, computeMachineDeploymentVersion's IsBlocking checks)."""
    topo = topology_of(cluster)
    cc = bp.clusterclass
    cname = cluster["metadata"]["name"]
    cns = cluster["metadata"].get("namespace") or ""
    version = topo.get("version") or ""
    defs, sources = class_variables(cc)
    values = V.default_values(defs, list(topo.get("variables") or []))
    errs = V.validate_values(defs, values, "spec.topology.variables")
    workers = topo.get("workers") or {}
    mds_topo = list(workers.get("machineDeployments") or [])
    mps_topo = list(workers.get("machinePools") or [])
    _names_unique(mds_topo, "machineDeployments")
    _names_unique(mps_topo, "machinePools")
    cp_topo = topo.get("controlPlane") or {}
    errs += V.validate_values(defs, list((cp_topo.get("variables") or {}).get("overrides") or []),
                              "spec.topology.controlPlane.variables.overrides", overrides=True)
    for kind, lst in (("machineDeployments", mds_topo), ("machinePools", mps_topo)):
        for t in lst:
            errs += V.validate_values(defs, list((t.get("variables") or {}).get("overrides") or []),
                                      f"spec.topology.workers.{kind}[{t.get('name')}].variables.overrides",
                                      overrides=True)
            classes = bp.md_classes if kind == "machineDeployments" else bp.mp_classes
            if t.get("class") not in classes:
                errs.append(f"spec.topology.workers.{kind}[{t.get('name')}].class: {t.get('class')!r} is not a "
                            f"{kind[:-1]} class of ClusterClass {cc['metadata']['name']} "
                            f"(has: {', '.join(sorted(classes)) or 'none'})")
    if errs:
        raise TopologyError("; ".join(errs))
    global_vars = V.values_map(defs, values)
    global_vars["builtin"] = _cluster_builtins(cluster)
    plan = Plan()

    # InfrastructureCluster
    ic_tpl = bp.infra_cluster_template
    if cur.infra_cluster is not None:
        ic_name = cur.infra_cluster["metadata"]["name"]
    else:
        ic_name = _name_from(contract.dig(cc, "spec", "infrastructure", "naming", "template"),
                             "{{ .cluster.name }}-{{ .random }}", {"cluster": {"name": cname}, "random": rand()})
    # ControlPlane (+ its machine infrastructure template)
    cp_cls = contract.dig(cc, "spec", "controlPlane") or {}
    cp_meta = cp_topo.get("metadata") or {}
    cls_meta = cp_cls.get("metadata") or {}
    cp_labels = _merge_maps(cp_meta.get("labels"), cls_meta.get("labels"))
    cp_ann = _merge_maps(cp_meta.get("annotations"), cls_meta.get("annotations"))
    if cur.control_plane is not None:
        cp_name = cur.control_plane["metadata"]["name"]
    else:
        cp_name = _name_from(cp_cls.get("naming", {}).get("template"), "{{ .cluster.name }}-{{ .random }}",
                             {"cluster": {"name": cname}, "random": rand()})
    cp_current_version = contract.dig(cur.control_plane, "spec", "version")

    # MachineDeployments: which exist, which are new, which version each gets
    md_versions: dict[str, str] = {}
    md_create_pending: list[str] = []
    md_upgrade_pending: list[str] = []
    md_deferred: list[str] = []
    cp_stable = cp_stable_at(cur.control_plane, version)
    cp_upgrading = cur.control_plane is not None and not cp_stable and (
        cp_current_version != version or contract.dig(cur.control_plane, "status", "version") not in (None, version))
    # MDs already moved to `version` and still rolling count against the upgrade concurrency
    upgrading_now = sum(1 for c in cur.machine_deployments.values()
                        if contract.dig(c.md, "spec", "template", "spec", "version") == version and md_rolling(c.md)
                        and not never_scaled(c.md))
    budget = _concurrency(cluster) - upgrading_now
    for t in mds_topo:
        name = t["name"]
        c = cur.machine_deployments.get(name)
        if c is None:
            if cp_upgrading or hold_workers:
                md_create_pending.append(name)
                continue
            md_versions[name] = version
            continue
        have = contract.dig(c.md, "spec", "template", "spec", "version") or version
        if have == version:
            md_versions[name] = version
            continue
        ann = c.md["metadata"].get("annotations") or {}
        if TOPOLOGY_DEFER_UPGRADE in ann or TOPOLOGY_HOLD_UPGRADE_SEQUENCE in ann:
            md_deferred.append(name)
            md_versions[name] = have
        elif cp_stable and budget > 0 and not hold_workers:
            budget -= 1
            md_versions[name] = version
        else:
            md_upgrade_pending.append(name)
            md_versions[name] = have
    mds_behind = any(contract.dig(c.md, "spec", "template", "spec", "version") not in (None, version)
                     or md_rolling(c.md) for c in cur.machine_deployments.values())
    # the control plane waits for workers still rolling to an older version (never more than one minor skew)
    cp_version = version
    cp_pending = False
    if hold_control_plane and cp_current_version:
        cp_version = cp_current_version
    if cp_current_version and cp_current_version != version and any(
            md_rolling(c.md) and contract.dig(c.md, "spec", "template", "spec", "version") == cp_current_version
            for c in cur.machine_deployments.values()):
        cp_version, cp_pending = cp_current_version, True

    # desired ControlPlane machine infrastructure template
    items: list[P.Item] = []
    ic_tpl_copy = copy.deepcopy(ic_tpl)
    cluster_holder = {"holder_api_version": G.CLUSTER.api_version, "holder_namespace": cns,
                      "holder_name": cname}
    items.append(P.Item("Cluster", P.INFRA_CLUSTER, ic_tpl_copy,
                        ref_api_version=_ref_version(cc, "spec", "infrastructure", "templateRef"), **cluster_holder))
    cp_tpl_copy = copy.deepcopy(bp.cp_template)
    cp_builtins: dict[str, Any] = {"controlPlane": {"name": cp_name, "version": cp_version}}
    if cp_topo.get("replicas") is not None:
        cp_builtins["controlPlane"]["replicas"] = cp_topo["replicas"]
    if cp_labels or cp_ann:
        cp_builtins["controlPlane"]["metadata"] = {"labels": {**cp_labels, CLUSTER_NAME: cname, TOPOLOGY_OWNED: ""},
                                                   "annotations": cp_ann}
    cp_overrides = V.values_map(defs, [], list((cp_topo.get("variables") or {}).get("overrides") or []))
    cp_overrides = {k: v for k, v in cp_overrides.items()
                    if k in {o["name"] for o in (cp_topo.get("variables") or {}).get("overrides") or []}}
    cpi_copy = None
    if bp.cp_machine_infra_template is not None:
        cpi_copy = copy.deepcopy(bp.cp_machine_infra_template)
        cur_cpi = cur.cp_machine_infra_template
        cp_builtins["controlPlane"]["machineTemplate"] = {
            "infrastructureRef": {"name": cur_cpi["metadata"]["name"] if cur_cpi else ""}}
        items.append(P.Item(_object_kind(bp.cp_template["kind"]), P.CP_MACHINE_INFRA, cpi_copy,
                            builtins=cp_builtins, overrides=cp_overrides,
                            ref_api_version=_ref_version(cc, "spec", "controlPlane", "machineInfrastructure",
                                                         "templateRef"),
                            holder_api_version=str(bp.cp_template.get("apiVersion", "")), holder_namespace=cns,
                            holder_name=cp_name))
    items.insert(1, P.Item("Cluster", P.CONTROL_PLANE, cp_tpl_copy, builtins=cp_builtins, overrides=cp_overrides,
                           ref_api_version=_ref_version(cc, "spec", "controlPlane", "templateRef"),
                           **cluster_holder))

    md_items: dict[str, tuple[P.Item, P.Item, str]] = {}
    for t in mds_topo:
        name = t["name"]
        if name not in md_versions:
            continue
        wc = bp.md_classes[t["class"]]
        c = cur.machine_deployments.get(name)
        md_name = c.md["metadata"]["name"] if c else _name_from(
            (wc.spec.get("naming") or {}).get("template"),
            "{{ .cluster.name }}-{{ .machineDeployment.topologyName }}-{{ .random }}",
            {"cluster": {"name": cname}, "machineDeployment": {"topologyName": name}, "random": rand()})
        b: dict[str, Any] = {"machineDeployment": {"version": md_versions[name], "class": t["class"],
                                                   "name": md_name, "topologyName": name}}
        if t.get("replicas") is not None:
            b["machineDeployment"]["replicas"] = t["replicas"]
        if c and c.bootstrap_template:
            b["machineDeployment"]["bootstrap"] = {"configRef": {"name": c.bootstrap_template["metadata"]["name"]}}
        if c and c.infra_template:
            b["machineDeployment"]["infrastructureRef"] = {"name": c.infra_template["metadata"]["name"]}
        ov_list = list((t.get("variables") or {}).get("overrides") or [])
        ov = {k: v for k, v in V.values_map(defs, [], ov_list).items() if k in {o["name"] for o in ov_list}}
        holder = {"holder_api_version": G.MACHINE_DEPLOYMENT.api_version, "holder_namespace": cns,
                  "holder_name": md_name}
        bi = P.Item("MachineDeployment", P.BOOTSTRAP, copy.deepcopy(wc.bootstrap_template), b, ov,
                    _ref_version(wc.spec, "bootstrap", "templateRef"), **holder)
        ii = P.Item("MachineDeployment", P.INFRA, copy.deepcopy(wc.infra_template), b, ov,
                    _ref_version(wc.spec, "infrastructure", "templateRef"), **holder)
        md_items[name] = (bi, ii, md_name)
        items += [bi, ii]

    mp_items: dict[str, tuple[P.Item, P.Item, str]] = {}
    mp_versions: dict[str, str] = {}
    mp_create_pending: list[str] = []
    mp_upgrade_pending: list[str] = []
    for t in mps_topo:
        name = t["name"]
        c2 = cur.machine_pools.get(name)
        if c2 is None and (cp_upgrading or hold_workers):
            mp_create_pending.append(name)
            continue
        have = contract.dig(c2.mp, "spec", "template", "spec", "version") if c2 else None
        if have and have != version and (not cp_stable or hold_workers):
            mp_upgrade_pending.append(name)
            mp_versions[name] = have
        else:
            mp_versions[name] = version
        wc = bp.mp_classes[t["class"]]
        mp_name = c2.mp["metadata"]["name"] if c2 else _name_from(
            (wc.spec.get("naming") or {}).get("template"),
            "{{ .cluster.name }}-{{ .machinePool.topologyName }}-{{ .random }}",
            {"cluster": {"name": cname}, "machinePool": {"topologyName": name}, "random": rand()})
        b = {"machinePool": {"version": mp_versions[name], "class": t["class"], "name": mp_name,
                             "topologyName": name}}
        if t.get("replicas") is not None:
            b["machinePool"]["replicas"] = t["replicas"]
        ov_list = list((t.get("variables") or {}).get("overrides") or [])
        ov = {k: v for k, v in V.values_map(defs, [], ov_list).items() if k in {o["name"] for o in ov_list}}
        holder = {"holder_api_version": G.MACHINE_POOL.api_version, "holder_namespace": cns,
                  "holder_name": mp_name}
        bi = P.Item("MachinePool", P.BOOTSTRAP, copy.deepcopy(wc.bootstrap_template), b, ov,
                    _ref_version(wc.spec, "bootstrap", "templateRef"), **holder)
        ii = P.Item("MachinePool", P.INFRA, copy.deepcopy(wc.infra_template), b, ov,
                    _ref_version(wc.spec, "infrastructure", "templateRef"), **holder)
        mp_items[name] = (bi, ii, mp_name)
        items += [bi, ii]

    try:
        yield from P.patch_steps(list(contract.dig(cc, "spec", "patches") or []), items, global_vars,
                                 runtime_sdk=runtime_sdk, sources=sources)
    except P.PatchError as e:
        raise TopologyError(str(e)) from e

    # --- objects from the patched templates --------------------------------------------------------------
    ic = _object_from_template(ic_tpl_copy, cluster, ic_name, {})
    if cur.infra_cluster is not None:  # a provider-written endpoint is not ours to change
        ic["spec"].pop("controlPlaneEndpoint", None)
    _owned_by_cluster(ic, cluster)
    _add(plan, ic, cur.infra_cluster)

    cpi_ref = None
    template_refs: list[dict[str, str]] = []
    if cpi_copy is not None:
        cpi_ref = _rotate(plan, cpi_copy, cur.cp_machine_infra_template, cluster, f"{cname}-", rand, {})
        template_refs.append(cpi_ref)

    cp = _object_from_template(cp_tpl_copy, cluster, cp_name, cp_labels, cp_ann)
    cp["spec"]["version"] = cp_version
    if cp_topo.get("replicas") is not None:
        cp["spec"]["replicas"] = cp_topo["replicas"]
    mt = cp["spec"].setdefault("machineTemplate", {})
    if cpi_ref is not None:
        mt.setdefault("spec", {})["infrastructureRef"] = cpi_ref
    mt_md = mt.get("metadata") or {}
    mt["metadata"] = {"labels": _merge_maps(cp_labels, {CLUSTER_NAME: cname, TOPOLOGY_OWNED: ""},
                                            mt_md.get("labels")),
                      "annotations": _merge_maps(cp_ann, mt_md.get("annotations"))}
    if not mt["metadata"]["annotations"]:
        del mt["metadata"]["annotations"]
    deletion = _class_then_topology(cp_cls, cp_topo, "deletion")
    if deletion:
        mt.setdefault("spec", {})["deletion"] = deletion
    gates = cp_topo.get("readinessGates") or cp_cls.get("readinessGates")
    if gates:
        mt.setdefault("spec", {})["readinessGates"] = gates
    if contract.dig(cp_topo, "rollout", "after"):
        cp["spec"].setdefault("rollout", {})["after"] = cp_topo["rollout"]["after"]
    _owned_by_cluster(cp, cluster)
    _add(plan, cp, cur.control_plane)

    # the Cluster points at both (refs set once; upstream does not move them)
    refs: dict[str, Any] = {}
    if not contract.dig(cluster, "spec", "infrastructureRef"):
        refs["infrastructureRef"] = ref_to(ic)
    if not contract.dig(cluster, "spec", "controlPlaneRef"):
        refs["controlPlaneRef"] = ref_to(cp)
    plan.cluster_refs = refs or None

    # MachineDeployments (upstream's UpgradeTracker counts a deferred upgrade as pending too)
    md_pending = set(md_upgrade_pending) | set(md_deferred)
    keep_md: set[str] = set()
    for t in mds_topo:
        name = t["name"]
        if name not in md_items:
            continue
        bi, ii, md_name = md_items[name]
        c = cur.machine_deployments.get(name)
        if c is not None and name in md_pending:
            # upstream's reconcileMachineDeployment returns early for a MachineDeployment pending an upgrade: no
            # write at all (not even replicas, so a scale by hand stays while a hook holds the workers), no
            # template rotation (no double rollout); its templates stay in use
            keep_md.add(md_name)
            template_refs += [ref_to(x) for x in (c.bootstrap_template, c.infra_template) if x is not None]
        else:
            labels = {TOPOLOGY_DEPLOYMENT_NAME: name}
            boot_ref = _rotate(plan, bi.obj, c.bootstrap_template if c else None, cluster, f"{cname}-{name}-", rand,
                               labels)
            infra_ref = _rotate(plan, ii.obj, c.infra_template if c else None, cluster, f"{cname}-{name}-", rand,
                                labels)
            template_refs += [boot_ref, infra_ref]
            md = _machine_deployment(cluster, bp.md_classes[t["class"]].spec, t, md_name, md_versions[name],
                                     boot_ref, infra_ref)
            keep_md.add(md_name)
            _add(plan, md, c.md if c else None)
        hc = t.get("healthCheck") or bp.md_classes[t["class"]].spec.get("healthCheck")
        if hc and (t.get("healthCheck") or {}).get("enabled", True) is not False and _has_checks(hc):
            _add(plan, _mhc(cluster, md_name, {TOPOLOGY_OWNED: "", TOPOLOGY_DEPLOYMENT_NAME: name}, hc),
                 cur.mhcs.get(md_name))
    for name, c in cur.machine_deployments.items():
        if c.md["metadata"]["name"] not in keep_md and name not in md_create_pending:
            plan.deletes.append(c.md)
            if c.md["metadata"]["name"] in cur.mhcs:
                plan.deletes.append(cur.mhcs[c.md["metadata"]["name"]])

    # MachinePools
    keep_mp: set[str] = set()
    for t in mps_topo:
        name = t["name"]
        if name not in mp_items:
            continue
        bi, ii, mp_name = mp_items[name]
        c2 = cur.machine_pools.get(name)
        labels = {TOPOLOGY_POOL_NAME: name}
        boot = _object_from_template(bi.obj, cluster, c2.bootstrap_config["metadata"]["name"]
                                     if c2 and c2.bootstrap_config else _truncate(f"{cname}-{name}-", rand()), labels)
        infra = _object_from_template(ii.obj, cluster, c2.infra_pool["metadata"]["name"]
                                      if c2 and c2.infra_pool else _truncate(f"{cname}-{name}-", rand()), labels)
        keep_mp.add(mp_name)
        if c2 is not None and name in mp_upgrade_pending:
            continue  # upstream's reconcileMachinePool returns early for a MachinePool pending an upgrade: no write
        _owned_by_cluster(boot, cluster)
        _owned_by_cluster(infra, cluster)
        _add(plan, boot, c2.bootstrap_config if c2 else None)
        _add(plan, infra, c2.infra_pool if c2 else None)
        mp = _machine_pool(cluster, bp.mp_classes[t["class"]].spec, t, mp_name, mp_versions[name],
                           ref_to(boot), ref_to(infra))
        _add(plan, mp, c2.mp if c2 else None)
    for name, c2 in cur.machine_pools.items():
        if c2.mp["metadata"]["name"] not in keep_mp and name not in mp_create_pending:
            plan.deletes.append(c2.mp)

    # ControlPlane MachineHealthCheck
    hc = cp_topo.get("healthCheck") or cp_cls.get("healthCheck")
    if hc and (cp_topo.get("healthCheck") or {}).get("enabled", True) is not False and _has_checks(hc):
        _add(plan, _mhc(cluster, cp_name, {TOPOLOGY_OWNED: "", CONTROL_PLANE: ""}, hc), cur.mhcs.get(cp_name))
    elif cp_name in cur.mhcs:
        plan.deletes.append(cur.mhcs[cp_name])

    # template copies nobody uses any more (the ones the holders point at now, or their MachineSets still do,
    # stay)
    desired_refs = {(r["kind"], r["name"]) for r in template_refs}
    for tpl in cur.templates:
        key = (tpl["kind"], tpl["metadata"]["name"])
        if key not in desired_refs and key not in cur.referenced_templates and not coreutil.is_deleting(tpl):
            plan.deletes.append(tpl)

    # --- what is still in progress ------------------------------------------------------------------------
    if cp_pending:
        plan.reason, plan.message = R_CP_UPGRADE_PENDING, \
            f"Control plane upgrade to {version} on hold: MachineDeployments are still rolling out"
    elif cp_upgrading:
        plan.reason, plan.message = R_CLUSTER_UPGRADING, f"Control plane is upgrading to {version}"
    elif md_upgrade_pending:
        plan.reason, plan.message = R_MD_UPGRADE_PENDING, \
            f"MachineDeployment(s) {', '.join(sorted(md_upgrade_pending))} upgrade to version {version} on hold"
    elif md_deferred:
        plan.reason, plan.message = R_MD_UPGRADE_DEFERRED, \
            f"MachineDeployment(s) {', '.join(sorted(md_deferred))} upgrade to version {version} deferred"
    elif md_create_pending:
        plan.reason, plan.message = R_MD_CREATE_PENDING, \
            f"MachineDeployment(s) {', '.join(sorted(md_create_pending))} creation on hold"
    elif mp_upgrade_pending:
        plan.reason, plan.message = R_MP_UPGRADE_PENDING, \
            f"MachinePool(s) {', '.join(sorted(mp_upgrade_pending))} upgrade to version {version} on hold"
    elif mp_create_pending:
        plan.reason, plan.message = R_MP_CREATE_PENDING, \
            f"MachinePool(s) {', '.join(sorted(mp_create_pending))} creation on hold"
    elif mds_behind and any(contract.dig(c.md, "spec", "template", "spec", "version") != version
                            for c in cur.machine_deployments.values()):
        plan.reason, plan.message = R_CLUSTER_UPGRADING, f"MachineDeployments are upgrading to {version}"
    return plan


def never_scaled(md: dict[str, Any]) -> bool:
    """An MD that never had Machines (being created) is scaling up, not upgrading."""
    return not (md.get("status") or {}).get("replicas")


def _has_checks(hc: dict[str, Any]) -> bool:
    return bool(hc.get("checks") or hc.get("remediation"))


def _add(plan: Plan, desired: dict[str, Any], current: dict[str, Any] | None) -> None:
    _with_hash(desired)
    if needs_write(desired, current):
        plan.writes.append(Write(desired, create=current is None))


def _rotate(plan: Plan, patched_tpl: dict[str, Any], current: dict[str, Any] | None, cluster: dict[str, Any],
            prefix: str, rand: Callable[[], str], labels: dict[str, str]) -> dict[str, str]:
    """The reference a holder should use for this template: the current copy while its spec is what we
    want, else a new copy (new name) — the holder rolls its Machines onto it."""
    want_spec = patched_tpl.get("spec") or {}
    want_hash = coreutil.stable_hash(want_spec)
    if current is not None and not coreutil.is_deleting(current):
        have_hash = (current["metadata"].get("annotations") or {}).get(DESIRED_HASH)
        if have_hash == want_hash or (have_hash is None and subset(want_spec, current.get("spec") or {})):
            return ref_to(current)
    new = _clone_template(patched_tpl, cluster, _truncate(prefix, rand()), labels)
    _owned_by_cluster(new, cluster)
    new["metadata"]["annotations"][DESIRED_HASH] = want_hash
    plan.writes.append(Write(new, create=True))
    return ref_to(new)


def _worker_base(cluster: dict[str, Any], cls: dict[str, Any], t: dict[str, Any], name_label: str, version: str,
                 boot_ref: dict[str, str], infra_ref: dict[str, str]) -> tuple[dict[str, str], dict[str, str],
                                                                               dict[str, Any]]:
    """What a MachineDeployment and a MachinePool share: their labels (topology, then class, then ours), their
    annotations and the base of their Machine template's spec."""
    cname = cluster["metadata"]["name"]
    tmeta = t.get("metadata") or {}
    cmeta = cls.get("metadata") or {}
    labels = _merge_maps(tmeta.get("labels"), cmeta.get("labels"),
                         {CLUSTER_NAME: cname, TOPOLOGY_OWNED: "", name_label: t["name"]})
    ann = _merge_maps(tmeta.get("annotations"), cmeta.get("annotations"))
    tspec: dict[str, Any] = {"clusterName": cname, "version": version,
                             "bootstrap": {"configRef": boot_ref}, "infrastructureRef": infra_ref}
    return labels, ann, tspec


def _class_then_topology(cls: dict[str, Any], t: dict[str, Any], key: str) -> dict[str, Any]:
    """The class's `key` map with the topology's entries over it."""
    return {**(cls.get(key) or {}), **(t.get(key) or {})}


def _worker(cluster: dict[str, Any], kind: str, name: str, labels: dict[str, str], ann: dict[str, str],
            spec: dict[str, Any]) -> dict[str, Any]:
    obj = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": kind,
           "metadata": {"name": name, "namespace": cluster["metadata"].get("namespace") or "default",
                        "labels": labels, **({"annotations": dict(ann)} if ann else {})},
           "spec": spec}
    return _owned_by_cluster(obj, cluster)


def _machine_deployment(cluster: dict[str, Any], cls: dict[str, Any], t: dict[str, Any], name: str, version: str,
                        boot_ref: dict[str, str], infra_ref: dict[str, str]) -> dict[str, Any]:
    cname = cluster["metadata"]["name"]
    labels, ann, tspec = _worker_base(cluster, cls, t, TOPOLOGY_DEPLOYMENT_NAME, version, boot_ref, infra_ref)
    fd = t.get("failureDomain") or cls.get("failureDomain")
    if fd:
        tspec["failureDomain"] = fd
    for k in ("minReadySeconds", "readinessGates"):
        v = t.get(k) if t.get(k) is not None else cls.get(k)
        if v is not None:
            tspec[k] = v
    deletion = _class_then_topology(cls, t, "deletion")
    order = deletion.pop("order", None)
    if deletion:
        tspec["deletion"] = deletion
    spec: dict[str, Any] = {
        "clusterName": cname,
        "selector": {"matchLabels": {CLUSTER_NAME: cname, TOPOLOGY_OWNED: "", TOPOLOGY_DEPLOYMENT_NAME: t["name"]}},
        "template": {"metadata": {"labels": dict(labels), **({"annotations": ann} if ann else {})}, "spec": tspec},
    }
    if t.get("replicas") is not None:
        spec["replicas"] = t["replicas"]
    if order:
        spec["deletion"] = {"order": order}
    rollout = _class_then_topology(cls, t, "rollout")
    if rollout:
        spec["rollout"] = rollout
    return _worker(cluster, "MachineDeployment", name, labels, ann, spec)


def _machine_pool(cluster: dict[str, Any], cls: dict[str, Any], t: dict[str, Any], name: str, version: str,
                  boot_ref: dict[str, str], infra_ref: dict[str, str]) -> dict[str, Any]:
    labels, ann, tspec = _worker_base(cluster, cls, t, TOPOLOGY_POOL_NAME, version, boot_ref, infra_ref)
    deletion = _class_then_topology(cls, t, "deletion")
    if deletion:
        tspec["deletion"] = deletion
    if t.get("minReadySeconds") is not None or cls.get("minReadySeconds") is not None:
        tspec["minReadySeconds"] = t.get("minReadySeconds", cls.get("minReadySeconds"))
    spec: dict[str, Any] = {"clusterName": cluster["metadata"]["name"],
                            "template": {"metadata": {"labels": dict(labels)}, "spec": tspec}}
    fds = t.get("failureDomains") or cls.get("failureDomains")
    if fds:
        spec["failureDomains"] = fds
    if t.get("replicas") is not None:
        spec["replicas"] = t["replicas"]
    return _worker(cluster, "MachinePool", name, labels, ann, spec)


def _mhc(cluster: dict[str, Any], name: str, selector: dict[str, str], hc: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"clusterName": cluster["metadata"]["name"], "selector": {"matchLabels": selector}}
    if hc.get("checks"):
        spec["checks"] = copy.deepcopy(hc["checks"])
    if hc.get("remediation"):
        spec["remediation"] = copy.deepcopy(hc["remediation"])
    mhc = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
           "metadata": {"name": name, "namespace": cluster["metadata"].get("namespace") or "default",
                        "labels": {CLUSTER_NAME: cluster["metadata"]["name"], TOPOLOGY_OWNED: ""}},
           "spec": spec}
    return _owned_by_cluster(mhc, cluster)


def _cluster_builtins(cluster: dict[str, Any]) -> dict[str, Any]:
    md = cluster["metadata"]
    topo = topology_of(cluster)
    ns, cls = class_ref(cluster)
    c: dict[str, Any] = {
        "name": md["name"], "namespace": md.get("namespace") or "default", "uid": md.get("uid", ""),
        "topology": {"version": topo.get("version", ""), "class": cls, "classNamespace": ns,
                     "classRef": {"name": cls, "namespace": ns}},
    }
    if md.get("labels") or md.get("annotations"):
        c["metadata"] = {"labels": md.get("labels") or {},
                         "annotations": {k: v for k, v in (md.get("annotations") or {}).items()
                                         if k != "kubectl.kubernetes.io/last-applied-configuration"}}
    net = contract.dig(cluster, "spec", "clusterNetwork") or {}
    n: dict[str, Any] = {}
    if net.get("serviceDomain"):
        n["serviceDomain"] = net["serviceDomain"]
    if contract.dig(net, "services", "cidrBlocks") is not None:
        n["services"] = net["services"]["cidrBlocks"]
    if contract.dig(net, "pods", "cidrBlocks") is not None:
        n["pods"] = net["pods"]["cidrBlocks"]
    if n:
        c["network"] = n
    return {"cluster": c}
