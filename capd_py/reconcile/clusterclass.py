"""ClusterClass status: variables discovered, template references resolvable (pure).

Upstream's ClusterClass controller reports `VariablesReady` (the variable definitions are valid and listed in
`status.variables`) and `RefVersionsUpToDate` (every templateRef names an object that exists, in the latest
apiVersion of its kind). The topology controller reconciles a Cluster only against a ClusterClass whose status
is current (`observedGeneration`), whose variables are ready and whose templates exist (a ref in an older
apiVersion, e.g. v1beta1, is reported as upstream does and holds nothing).

Variables come from `spec.variables` (`from: inline`) and, with the RuntimeSDK gate on, from each external patch's
`discoverVariablesExtension` (`from: <patch name>`; the controller makes the calls `discovery_calls` lists and
hands back what each returned). Definitions of one name from several sources are merged; if they differ
(required, schema, deprecated metadata) the variable is marked `definitionsConflict` and VariablesReady is False,
as upstream's reconcileVariables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, conversion
from capd_py.api import runtime_hooks as hooks
from capd_py.reconcile.topology import variables as V
from capd_py.reconcile.topology.gotemplate import go_quote

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


INLINE = "inline"


@dataclass(frozen=True)
class Discovery:
    """A DiscoverVariables call for external patch `patch`: handler `extension`, `request` (its settings)."""

    patch: str
    extension: str
    request: dict[str, Any]


@dataclass(frozen=True)
class Discovered:
    """What a DiscoverVariables call gave: the response, or why the call failed."""

    patch: str
    response: Mapping[str, Any] | None = None
    error: str = ""


def discovery_calls(cc: dict[str, Any], runtime_sdk: bool) -> list[Discovery]:
    """The DiscoverVariables calls to make, in patch order (none with the RuntimeSDK gate off, as upstream)."""
    if not runtime_sdk:
        return []
    out = []
    for p in contract.dig(cc, "spec", "patches") or []:
        ext = p.get("external") or {}
        if ext.get("discoverVariablesExtension"):
            body: dict[str, object] = {"settings": dict(ext["settings"])} if ext.get("settings") else {}
            out.append(Discovery(p.get("name", ""), ext["discoverVariablesExtension"],
                                 hooks.request(hooks.DISCOVER_VARIABLES, body)))
    return out


# the CRD's default of status.variables[].definitions[].schema.openAPIV3Schema.x-kubernetes-validations[].reason
RULE_REASON_DEFAULT = "FieldValueInvalid"


def _as_stored(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A definition's schema as the API server stores it in status.variables: the CRD defaults the top-level
    rules' `reason` (nested schemas are not structural there: nothing is defaulted in them). Written without it,
    every reconcile saw a difference and wrote a status the server then left as it was (found by the write counter
    in the in-memory runtime-SDK spec: the test extension's kubeadmControlPlaneMaxSurge has a rule without one)."""
    oas = schema.get("openAPIV3Schema")
    rules = oas.get("x-kubernetes-validations") if isinstance(oas, dict) else None
    if not isinstance(oas, dict) or not isinstance(rules, list):
        return dict(schema)
    rules = [{**r, "reason": RULE_REASON_DEFAULT} if isinstance(r, dict) and "reason" not in r else r for r in rules]
    return {**schema, "openAPIV3Schema": {**oas, "x-kubernetes-validations": rules}}


def _new_status_variable(v: Mapping[str, Any], origin: str) -> dict[str, Any]:
    definition: dict[str, Any] = {"from": origin, "required": bool(v.get("required", False)),
                                  "schema": _as_stored(v.get("schema") or {})}
    if v.get("deprecatedV1Beta1Metadata"):
        definition["deprecatedV1Beta1Metadata"] = v["deprecatedV1Beta1Metadata"]
    return {"name": v.get("name", ""), "definitionsConflict": False, "definitions": [definition]}


_FALSE_DROPPED = ("uniqueItems", "exclusiveMaximum", "exclusiveMinimum", "x-kubernetes-preserve-unknown-fields",
                  "x-kubernetes-int-or-string")


def _drop_false(s: Any) -> Any:
    """A schema without the boolean fields that are false (false and unset are the same: upstream's
    dropFalsePtrBool), through every nested schema."""
    if not isinstance(s, dict):
        return s
    out = {k: v for k, v in s.items() if not (k in _FALSE_DROPPED and v is False)}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _drop_false(v) for k, v in out["properties"].items()}
    for k in ("additionalProperties", "items", "not"):
        if k in out:
            out[k] = _drop_false(out[k])
    for k in ("allOf", "oneOf", "anyOf"):
        if isinstance(out.get(k), list):
            out[k] = [_drop_false(x) for x in out[k]]
    return out


def _add_definition(existing: dict[str, Any], v: Mapping[str, Any], origin: str) -> dict[str, Any]:
    new = _new_status_variable(v, origin)["definitions"][0]
    out = {**existing, "definitions": [*existing["definitions"], new]}
    if not out.get("definitionsConflict"):
        first = out["definitions"][0]
        if first.get("required", False) != new.get("required", False) \
                or _drop_false((first.get("schema") or {}).get("openAPIV3Schema")) \
                != _drop_false((new.get("schema") or {}).get("openAPIV3Schema")) \
                or first.get("deprecatedV1Beta1Metadata") != new.get("deprecatedV1Beta1Metadata"):
            out["definitionsConflict"] = True
    return out


def aggregate(messages: Sequence[str]) -> str:
    """Several errors in one message, as Kubernetes' utilerrors.NewAggregate prints them."""
    msgs = list(dict.fromkeys(messages))
    return msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"


def merge_variables(cc: dict[str, Any], discovered: Sequence[Discovered]) -> tuple[list[dict[str, Any]], list[str]]:
    """status.variables (sorted by name) from the inline definitions and the discovered ones, and the discovery
    errors (upstream's messages; with any, status.variables must stay as it was)."""
    merged: dict[str, dict[str, Any]] = {}
    for v in contract.dig(cc, "spec", "variables") or []:
        merged[v.get("name", "")] = _new_status_variable(v, INLINE)
    errs: list[str] = []
    for d in discovered:
        if d.response is None:
            errs.append(f"failed to call DiscoverVariables for patch {d.patch}: {d.error}")
            continue
        status = d.response.get("status")
        if status != hooks.SUCCESS:
            errs.append(f"patch {d.patch} returned status {go_quote(str(status or ''))} with message "
                        f"{go_quote(str(d.response.get('message') or ''))}")
            continue
        found = [v for v in d.response.get("variables") or [] if isinstance(v, dict)]
        if found and not errs:
            problems = V.validate_class_variables(found, f"{d.patch}.variables")
            if problems:
                errs.append(aggregate(problems))
                continue
            for v in found:
                name = v.get("name", "")
                merged[name] = _add_definition(merged[name], v, d.patch) if name in merged \
                    else _new_status_variable(v, d.patch)
    return [merged[k] for k in sorted(merged)], errs


def status_variables(cc: dict[str, Any]) -> list[dict[str, Any]]:
    """status.variables of the inline definitions alone (from: inline), as upstream lists them."""
    return merge_variables(cc, [])[0]


DISCOVERY_FAILED_PREFIX = "VariableDiscovery failed: "


def compute_status(cc: dict[str, Any], missing: list[TemplateRef], unknown_kinds: list[TemplateRef],
                   discovered: Sequence[Discovered] = ()) -> dict[str, Any]:
    """The whole status. `missing`: references whose object does not exist; `unknown_kinds`: references to a
    group/kind capd-py does not serve (no provider would ever reconcile them); `discovered`: the answers of
    `discovery_calls`."""
    old = cc.get("status") or {}
    gen = (cc.get("metadata") or {}).get("generation")
    conds = list(old.get("conditions") or [])
    errs = V.validate_class_variables(list(contract.dig(cc, "spec", "variables") or []))
    variables, discovery_errs = merge_variables(cc, discovered)
    conflicts = [v["name"] for v in variables if v.get("definitionsConflict")]
    if errs:
        conds = cond.set_condition(conds, VARIABLES_READY, False, R_VARIABLE_DISCOVERY_FAILED,
                                   "; ".join(errs), observed_generation=gen)
    elif discovery_errs:
        conds = cond.set_condition(conds, VARIABLES_READY, False, R_VARIABLE_DISCOVERY_FAILED,
                                   DISCOVERY_FAILED_PREFIX + aggregate(discovery_errs), observed_generation=gen)
    elif conflicts:
        conds = cond.set_condition(conds, VARIABLES_READY, False, R_VARIABLE_DISCOVERY_FAILED,
                                   DISCOVERY_FAILED_PREFIX + "the following variables have conflicting schemas: "
                                   + ",".join(conflicts), observed_generation=gen)
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
    # a conflict is still listed (upstream writes it); a failed discovery keeps what was there
    if not errs and not discovery_errs:
        st["variables"] = variables
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
