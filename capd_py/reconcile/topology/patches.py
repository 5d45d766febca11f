"""ClusterClass inline patches (spec.patches[].definitions[].jsonPatches) applied to the desired templates.

Upstream's engine, in our words: every template the topology uses becomes a request item with its holder
(Cluster spec.infrastructureRef / spec.controlPlaneRef, the control plane's machine template, a
MachineDeployment's or MachinePool's bootstrap / infrastructure reference) and its builtin variables. The
patches run in the order the ClusterClass lists them, each on the result of the previous ones; a patch whose
`enabledIf` does not render to exactly `true` is skipped; its definitions apply to the items their selector
matches (apiVersion + kind, then matchResources). Only `spec` of a patched template is taken over, so a
patch cannot rename or relabel anything. JSON Patch is RFC 6902 (a missing parent on `add` is an error, as
upstream's library reports it); `valueFrom.template` renders Go text/template + sprig and is read back as YAML.

Patches apply to a template in the apiVersion its ClusterClass `templateRef` names, as upstream's engine gets
the template in that version: a class written for v1beta1 templates (upstream v1.10's quick-start) selects
`.../v1beta1` and patches v1beta1 shapes (e.g. `apiServer.extraArgs` as a map). Templates come in as the hub
(v1beta2); an item whose `ref_api_version` is v1beta1 is converted down (api.conversion.from_hub, which records
the hub object as the API server's conversion does) before the first patch and its result up (to_hub) after
the last, so the desired objects are v1beta2 with exactly what a v1beta1 write of the patched template gives.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import yaml

from capd_py.api import conversion, gvk
from capd_py.reconcile.topology import gotemplate

# Holder field paths, as upstream's request items name them.
INFRA_CLUSTER = "spec.infrastructureRef"
CONTROL_PLANE = "spec.controlPlaneRef"
CP_MACHINE_INFRA = "spec.machineTemplate.spec.infrastructureRef"
BOOTSTRAP = "spec.template.spec.bootstrap.configRef"
INFRA = "spec.template.spec.infrastructureRef"


class PatchError(ValueError):
    """A patch could not be generated or applied; the message names the patch and the template."""


@dataclass
class Item:
    """One template to patch: `obj` is patched in place (its spec only)."""

    holder_kind: str  # Cluster, KubeadmControlPlane (the CP kind), MachineDeployment, MachinePool
    holder_field: str
    obj: dict[str, Any]
    # builtin variables of this item (merged over the global builtins), e.g. {"machineDeployment": {...}}
    builtins: dict[str, Any] = field(default_factory=dict)
    # per-item variable overrides (MachineDeployment / MachinePool / control plane topology overrides)
    overrides: dict[str, Any] = field(default_factory=dict)
    # the apiVersion the ClusterClass templateRef names (patches apply in it); None: obj's own
    ref_api_version: str | None = None


def _class_name(item: Item, key: str) -> str | None:
    v = (item.builtins.get(key) or {}).get("class")
    return v if isinstance(v, str) else None


def _names_match(names: list[str], cls: str | None) -> bool:
    if cls is None:
        return False
    for n in names:
        if n == "*" or n == cls:
            return True
        if n.startswith("*") and cls.endswith(n[1:]):
            return True
        if n.endswith("*") and cls.startswith(n[:-1]):
            return True
    return False


def matches(selector: dict[str, Any], item: Item) -> bool:
    if item.obj.get("apiVersion") != selector.get("apiVersion") or item.obj.get("kind") != selector.get("kind"):
        return False
    mr = selector.get("matchResources") or {}
    if mr.get("infrastructureCluster") and item.holder_kind == "Cluster" and item.holder_field == INFRA_CLUSTER:
        return True
    if mr.get("controlPlane"):
        if item.holder_kind == "Cluster" and item.holder_field == CONTROL_PLANE:
            return True
        if item.holder_field == CP_MACHINE_INFRA:
            return True
    if mr.get("machineDeploymentClass") is not None and item.holder_kind == "MachineDeployment" \
            and item.holder_field in (BOOTSTRAP, INFRA) \
            and _names_match(list(mr["machineDeploymentClass"].get("names") or []),
                             _class_name(item, "machineDeployment")):
        return True
    return mr.get("machinePoolClass") is not None and item.holder_kind == "MachinePool" \
        and item.holder_field in (BOOTSTRAP, INFRA) \
        and _names_match(list(mr["machinePoolClass"].get("names") or []), _class_name(item, "machinePool"))


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(out.get(k), dict) and isinstance(v, dict) else v
    return out


def item_variables(global_vars: dict[str, Any], item: Item) -> dict[str, Any]:
    """Template data for one item: the Cluster's variables, the item's overrides over them, and `builtin`
    = the global builtins (cluster) merged with the item's (controlPlane / machineDeployment / machinePool)."""
    data = {**global_vars, **item.overrides}
    data["builtin"] = _merge(global_vars.get("builtin") or {}, item.builtins)
    return data


def _render(text: str, data: dict[str, Any], what: str) -> Any:
    try:
        out = gotemplate.render(text, data)
    except gotemplate.TemplateError as e:
        raise PatchError(f"{what}: {e}") from e
    try:
        return yaml.safe_load(out)
    except yaml.YAMLError as e:
        raise PatchError(f"{what}: rendered template is not YAML/JSON: {out!r}") from e


def enabled(enabled_if: str | None, data: dict[str, Any], patch_name: str) -> bool:
    if not enabled_if:
        return True
    v = _render(enabled_if, data, f"patch {patch_name!r} enabledIf")
    return v is True


def _variable(data: dict[str, Any], name: str) -> Any:
    """`valueFrom.variable`: a top-level variable or a dotted path into one (e.g. `builtin.cluster.name`,
    `myObject.field`)."""
    parts = name.split(".")
    if parts[0] not in data:
        raise PatchError(f"variable {parts[0]!r} not found")
    cur: Any = data[parts[0]]
    for p in parts[1:]:
        if not isinstance(cur, dict) or p not in cur:
            raise PatchError(f"variable {name!r}: {p!r} not found")
        cur = cur[p]
    return copy.deepcopy(cur)


def value_of(jp: dict[str, Any], data: dict[str, Any], what: str) -> Any:
    vf = jp.get("valueFrom")
    if "value" in jp and vf:
        raise PatchError(f"{what}: both value and valueFrom are set")
    if not vf:
        if "value" not in jp:
            raise PatchError(f"{what}: neither value nor valueFrom is set")
        return copy.deepcopy(jp["value"])
    if vf.get("variable") and vf.get("template"):
        raise PatchError(f"{what}: both valueFrom.variable and valueFrom.template are set")
    if vf.get("variable"):
        try:
            return _variable(data, vf["variable"])
        except PatchError as e:
            raise PatchError(f"{what}: {e}") from e
    if vf.get("template"):
        return _render(vf["template"], data, what)
    raise PatchError(f"{what}: valueFrom has neither variable nor template")


# --- RFC 6902 --------------------------------------------------------------------------------------------

def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"JSON pointer {path!r} must start with '/'")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], tok: str, path: str, for_add: bool) -> int:
    if tok == "-" and for_add:
        return len(container)
    if not tok.isdigit() or (len(tok) > 1 and tok.startswith("0")):
        raise PatchError(f"path {path!r}: {tok!r} is not an array index")
    i = int(tok)
    if i > len(container) or (i == len(container) and not for_add):
        raise PatchError(f"path {path!r}: index {i} out of range")
    return i


def _parent(doc: Any, toks: list[str], path: str) -> Any:
    cur = doc
    for t in toks[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"path {path!r}: {t!r} does not exist")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, path, False)]
        else:
            raise PatchError(f"path {path!r}: {t!r} is not an object or array")
    return cur


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 add / replace / remove (the ops a ClusterClass may use) on a copy of `doc`."""
    out = copy.deepcopy(doc)
    for op in ops:
        path = op.get("path", "")
        toks = _tokens(path)
        if not toks:
            raise PatchError(f"path {path!r}: the whole document cannot be patched")
        parent = _parent(out, toks, path)
        last = toks[-1]
        kind = op.get("op")
        if kind == "add":
            if isinstance(parent, dict):
                parent[last] = copy.deepcopy(op.get("value"))
            elif isinstance(parent, list):
                parent.insert(_index(parent, last, path, True), copy.deepcopy(op.get("value")))
            else:
                raise PatchError(f"path {path!r}: parent is not an object or array")
        elif kind in ("replace", "remove"):
            if isinstance(parent, dict):
                if last not in parent:
                    raise PatchError(f"{kind} {path!r}: {last!r} does not exist")
                if kind == "replace":
                    parent[last] = copy.deepcopy(op.get("value"))
                else:
                    del parent[last]
            elif isinstance(parent, list):
                i = _index(parent, last, path, False)
                if kind == "replace":
                    parent[i] = copy.deepcopy(op.get("value"))
                else:
                    del parent[i]
            else:
                raise PatchError(f"path {path!r}: parent is not an object or array")
        else:
            raise PatchError(f"unsupported JSON patch op {kind!r} (add, replace or remove)")
    return out


def _describe(item: Item) -> str:
    return f"{item.obj.get('kind')} {item.obj.get('metadata', {}).get('name', '')} ({item.holder_kind} " \
           f"{item.holder_field})"


def _needs_conversion(item: Item) -> bool:
    ref, have = item.ref_api_version, item.obj.get("apiVersion")
    if not ref or not isinstance(have, str) or ref == have:
        return False
    return (have.rsplit("/", 1)[-1] == conversion.HUB_VERSION
            and ref.rsplit("/", 1)[-1] == conversion.SPOKE_VERSION
            and (gvk.group_of(ref), item.obj.get("kind")) in conversion.CONVERTIBLE_KINDS
            and gvk.group_of(ref) == gvk.group_of(have))


def apply_patches(patches: list[dict[str, Any]], items: list[Item], global_vars: dict[str, Any]) -> None:
    """Run the ClusterClass's inline patches over `items` (in place), each in the apiVersion its templateRef
    names (see the module docstring). Raises PatchError with every failure of the first failing patch.
    External patches (runtime extensions) are not supported here: a ClusterClass with one fails with a clear
    message instead of being silently half-applied."""
    if not patches:
        return
    hubs: list[tuple[Item, dict[str, Any]]] = []
    for item in items:
        if _needs_conversion(item):
            hub = item.obj
            try:
                item.obj = conversion.from_hub(hub)
            except conversion.ConversionError as e:
                raise PatchError(f"{_describe(item)}: cannot convert to {item.ref_api_version}: {e}") from e
            hubs.append((item, hub))
    try:
        _apply(patches, items, global_vars)
    except PatchError:
        for item, hub in hubs:
            item.obj = hub
        raise
    for item, hub in hubs:
        spoke, item.obj = item.obj, hub
        try:
            patched = conversion.to_hub(spoke)
        except (conversion.ConversionError, TypeError, ValueError, AttributeError, KeyError) as e:
            # patched content is user input: whatever the conversion cannot read is the class's error
            raise PatchError(f"{_describe(item)}: the patched template does not convert to "
                             f"{hub.get('apiVersion')}: {e}") from e
        # only the spec is taken over (as in _apply); the object stays the one the caller holds
        hub["spec"] = patched.get("spec")


def _apply(patches: list[dict[str, Any]], items: list[Item], global_vars: dict[str, Any]) -> None:
    for p in patches:
        name = p.get("name", "")
        if p.get("external"):
            raise PatchError(f"patch {name!r}: external patches (Runtime Extensions) are not supported by capd-py")
        errors: list[str] = []
        for item in items:
            defs = [d for d in p.get("definitions") or [] if matches(d.get("selector") or {}, item)]
            if not defs:
                continue
            data = item_variables(global_vars, item)
            try:
                if not enabled(p.get("enabledIf"), data, name):
                    continue
                for d in defs:
                    ops = []
                    for jp in d.get("jsonPatches") or []:
                        op = {"op": jp.get("op"), "path": jp.get("path")}
                        if jp.get("op") in ("add", "replace"):
                            op["value"] = value_of(jp, data, f"patch {name!r} {jp.get('op')} {jp.get('path')}")
                        ops.append(op)
                    patched = apply_json_patch(item.obj, ops)
                    # only the spec is taken over (as upstream): names, labels and annotations stay ours
                    item.obj["spec"] = patched.get("spec")
            except PatchError as e:
                errors.append(f"{_describe(item)}: {e}")
        if errors:
            raise PatchError(f"failed to apply patch {name!r}: " + "; ".join(errors))
