"""ClusterClass status: variables discovered, template references resolvable (pure).

Upstream's ClusterClass controller reports `VariablesReady` (the variable definitions are valid and listed in
`status.variables`) and `RefVersionsUpToDate` (every templateRef names an object that exists, in the latest
apiVersion of its kind). The topology controller reconciles a Cluster only against a ClusterClass whose status
is current (`observedGeneration`), whose variables are ready and whose templates exist (a ref in an older
apiVersion, e.g. v1beta1, is reported as upstream does and holds nothing).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, conversion
from capd_py.reconcile.topology import variables as V

VARIABLES_READY = "VariablesReady"
REF_VERSIONS_UP_TO_DATE = "RefVersionsUpToDate"
R_VARIABLES_READY = "VariablesReady"
R_VARIABLE_DISCOVERY_FAILED = "VariableDiscoveryFailed"
R_REFS_UP_TO_DATE = "RefVersionsUpToDate"
R_REFS_NOT_UP_TO_DATE = "RefVersionsNotUpToDate"
R_INTERNAL_ERROR = "InternalError"


@dataclass(frozen=True)
class TemplateRef:
    path: str  # where in the class, e.g. spec.workers.machineDeployments[default-worker].infrastructure
    api_version: str
    kind: str
    name: str


def template_refs(cc: dict[str, Any]) -> list[TemplateRef]:
    """Every templateRef of the class, with the field path a message should name."""
    out: list[TemplateRef] = []

    def add(path: str, ref: dict[str, Any] | None) -> None:
        if ref and ref.get("name"):
            out.append(TemplateRef(path, ref.get("apiVersion", ""), ref.get("kind", ""), ref["name"]))

    spec = cc.get("spec") or {}
    add("spec.infrastructure.templateRef", contract.dig(spec, "infrastructure", "templateRef"))
    add("spec.controlPlane.templateRef", contract.dig(spec, "controlPlane", "templateRef"))
    add("spec.controlPlane.machineInfrastructure.templateRef",
        contract.dig(spec, "controlPlane", "machineInfrastructure", "templateRef"))
    for kind in ("machineDeployments", "machinePools"):
        for c in contract.dig(spec, "workers", kind) or []:
            base = f"spec.workers.{kind}[{c.get('class')}]"
            add(f"{base}.bootstrap.templateRef", contract.dig(c, "bootstrap", "templateRef"))
            add(f"{base}.infrastructure.templateRef", contract.dig(c, "infrastructure", "templateRef"))
    return out


def outdated_refs(cc: dict[str, Any]) -> list[TemplateRef]:
    """templateRefs not in the latest apiVersion of their kind (v1beta1 of a kind capd-py serves in v1beta2 too,
    e.g. every ref of upstream v1.10's quick-start class). Upstream reports them (RefVersionsUpToDate False,
    RefVersionsNotUpToDate) and keeps using them: the topology patches those templates in that version."""
    out: list[TemplateRef] = []
    for r in template_refs(cc):
        group, _, version = r.api_version.rpartition("/")
        if (group, r.kind) in conversion.CONVERTIBLE_KINDS and version != conversion.HUB_VERSION \
                and all((o.api_version, o.kind, o.name) != (r.api_version, r.kind, r.name) for o in out):
            out.append(r)  # each object once, as upstream
    return out


OUTDATED_HEADER = "The following templateRefs are not using the latest apiVersion:"


def status_variables(cc: dict[str, Any]) -> list[dict[str, Any]]:
    """status.variables: each inline definition, as upstream lists them (from: inline)."""
    out = []
    for d in contract.dig(cc, "spec", "variables") or []:
        definition: dict[str, Any] = {"from": "inline", "required": bool(d.get("required", False)),
                                      "schema": d.get("schema") or {}}
        if d.get("deprecatedV1Beta1Metadata"):
            definition["deprecatedV1Beta1Metadata"] = d["deprecatedV1Beta1Metadata"]
        out.append({"name": d.get("name", ""), "definitions": [definition]})
    return out


def compute_status(cc: dict[str, Any], missing: list[TemplateRef], unknown_kinds: list[TemplateRef]) -> dict[str, Any]:
    """The whole status. `missing`: references whose object does not exist; `unknown_kinds`: references to a
    group/kind capd-py does not serve (no provider would ever reconcile them)."""
    old = cc.get("status") or {}
    gen = (cc.get("metadata") or {}).get("generation")
    conds = list(old.get("conditions") or [])
    errs = V.validate_class_variables(list(contract.dig(cc, "spec", "variables") or []))
    if errs:
        conds = cond.set_condition(conds, VARIABLES_READY, False, R_VARIABLE_DISCOVERY_FAILED,
                                   "; ".join(errs), observed_generation=gen)
    else:
        conds = cond.set_condition(conds, VARIABLES_READY, True, R_VARIABLES_READY, observed_generation=gen)
    if unknown_kinds or missing:
        msgs = [f"{r.path}: {r.kind} {r.name} ({r.api_version}) is not a kind capd-py serves"
                for r in unknown_kinds]
        msgs += [f"{r.path}: {r.kind} {r.name} not found" for r in missing]
        conds = cond.set_condition(conds, REF_VERSIONS_UP_TO_DATE, False, R_REFS_NOT_UP_TO_DATE,
                                   "; ".join(msgs), observed_generation=gen)
    elif outdated := outdated_refs(cc):
        # upstream's message; not a reason to hold the topology (ready_for_topology)
        msg = "\n".join([OUTDATED_HEADER] + [
            f"* {r.kind} {r.name}: current: {r.api_version.rpartition('/')[2]}, latest: {conversion.HUB_VERSION}"
            for r in outdated])
        conds = cond.set_condition(conds, REF_VERSIONS_UP_TO_DATE, False, R_REFS_NOT_UP_TO_DATE, msg,
                                   observed_generation=gen)
    else:
        conds = cond.set_condition(conds, REF_VERSIONS_UP_TO_DATE, True, R_REFS_UP_TO_DATE,
                                   observed_generation=gen)
    st: dict[str, Any] = {k: v for k, v in old.items() if k not in ("conditions", "variables", "observedGeneration")}
    st["conditions"] = conds
    if not errs:
        st["variables"] = status_variables(cc)
    elif old.get("variables"):
        st["variables"] = old["variables"]
    if gen is not None:
        st["observedGeneration"] = gen
    return st


def ready_for_topology(cc: dict[str, Any]) -> str | None:
    """None when a Cluster may be reconciled against this class; else why not (for TopologyReconciled)."""
    gen = (cc.get("metadata") or {}).get("generation")
    st = cc.get("status") or {}
    name = (cc.get("metadata") or {}).get("name")
    if gen is not None and st.get("observedGeneration") != gen:
        return f"ClusterClass {name} is not reconciled yet (generation {gen})"
    c = cond.get(cc, VARIABLES_READY)
    if c is None or c.get("status") != "True":
        return f"ClusterClass {name} variables are not ready: {(c or {}).get('message', 'not reconciled')}"
    c = cond.get(cc, REF_VERSIONS_UP_TO_DATE)
    # a missing template or a kind nobody serves holds the topology; a ref in an older apiVersion does not
    if c is not None and c.get("status") == "False" and not str(c.get("message", "")).startswith(OUTDATED_HEADER):
        return f"ClusterClass {name}: {c.get('message', '')}"
    return None
