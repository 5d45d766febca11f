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

External patches (`spec.patches[].external`, Runtime Extensions) sit in the same list and run in its order: the
engine is a generator (`patch_steps`) that yields an `ExternalCall` (a GeneratePatches request: every item with its
holder reference, a uid, the template and its variables, the patch's `settings`) and is sent the extension's
response back; the response's JSONPatch / JSONMergePatch items (base64 `patch`) apply to the items their uid names.
After the last patch, every external patch with a `validateTopologyExtension` gets a ValidateTopology request
(the final templates). The caller performs the calls (capd_py/controllers/topology_external.py), so this module
stays pure; `drive` runs the steps with a plain function answering them (unit tests, or no extension at all).
Each patch sees only the variables whose ClusterClass `status.variables` definitions come from it (`from:
inline` for inline patches, the patch's name for external ones), as upstream. As upstream, `enabledIf` is not
evaluated for external patches, and an external patch without a `generatePatchesExtension` fails generation.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from capd_py.api import conversion, gvk, kubeyaml
from capd_py.api import runtime_hooks as hooks
from capd_py.reconcile.topology import gotemplate
from capd_py.reconcile.topology.gotemplate import go_quote

# Holder field paths, as upstream's request items name them.
INFRA_CLUSTER = "spec.infrastructureRef"
CONTROL_PLANE = "spec.controlPlaneRef"
CP_MACHINE_INFRA = "spec.machineTemplate.spec.infrastructureRef"
BOOTSTRAP = "spec.template.spec.bootstrap.configRef"
INFRA = "spec.template.spec.infrastructureRef"
INLINE = "inline"  # status.variables definitions' `from` of spec.variables (upstream VariableDefinitionFromInline)
BUILTIN = "builtin"
JSON_PATCH = "JSONPatch"
JSON_MERGE_PATCH = "JSONMergePatch"
# not sent to extensions (upstream's cleanupUnstructured): size only, never read by a patch
_DROPPED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration", "cluster.x-k8s.io/conversion-data")
# uids of request items: derived from the holder reference, so a request is the same for the same input
_UID_NAMESPACE = uuid.UUID("5d3b6c1e-7f7a-4c55-9d0e-2a8f4f0c9b11")


class PatchError(ValueError):
    """A patch could not be generated or applied; the message names the patch and the template."""


class ExtensionCallError(Exception):
    """Thrown into the patch steps by their driver: the extension call of the yielded ExternalCall failed (the
    message says which handler and why)."""


@dataclass(frozen=True)
class ExternalCall:
    """One Runtime Extension call the engine needs: `hook` (GeneratePatches or ValidateTopology) of the handler
    registered as `extension`, for ClusterClass patch `patch`; the driver sends back the response."""

    patch: str
    extension: str
    hook: hooks.Hook
    request: dict[str, Any]


PatchSteps = Generator[ExternalCall, Mapping[str, Any], None]
T = TypeVar("T")


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
    # the holder object (with holder_kind and holder_field: the request item's holderReference)
    holder_api_version: str = ""
    holder_namespace: str = ""
    holder_name: str = ""


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
        return kubeyaml.load(out)
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


def _walk(doc: Any, toks: list[str], path: str) -> Any:
    """The value `toks` leads to in `doc` (JSON pointer tokens of `path`, for messages)."""
    cur = doc
    for t in toks:
        if isinstance(cur, dict):
            if t not in cur:
                raise PatchError(f"path {path!r}: {t!r} does not exist")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, path, False)]
        else:
            raise PatchError(f"path {path!r}: {t!r} is not an object or array")
    return cur


def _target(doc: Any, path: str) -> tuple[Any, str]:
    """(the container `path` ends in, its last token): where add, remove and replace act."""
    toks = _tokens(path)
    if not toks:
        raise PatchError(f"path {path!r}: the whole document cannot be patched")
    return _walk(doc, toks[:-1], path), toks[-1]


def _get_at(doc: Any, path: str) -> Any:
    return _walk(doc, _tokens(path), path)


def _add(doc: Any, path: str, value: Any) -> None:
    parent, last = _target(doc, path)
    if isinstance(parent, dict):
        parent[last] = copy.deepcopy(value)
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, path, True), copy.deepcopy(value))
    else:
        raise PatchError(f"path {path!r}: parent is not an object or array")


def _remove(doc: Any, path: str, kind: str = "remove") -> Any:
    parent, last = _target(doc, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{kind} {path!r}: {last!r} does not exist")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, path, False))
    raise PatchError(f"path {path!r}: parent is not an object or array")


def _replace(doc: Any, path: str, value: Any) -> None:
    parent, last = _target(doc, path)
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"replace {path!r}: {last!r} does not exist")
        parent[last] = copy.deepcopy(value)  # in place: the key keeps its position
    elif isinstance(parent, list):
        parent[_index(parent, last, path, False)] = copy.deepcopy(value)
    else:
        raise PatchError(f"path {path!r}: parent is not an object or array")


def apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 on a copy of `doc`. A ClusterClass's inline patches may use add / replace / remove (the CRD says
    so); an extension's JSONPatch any operation, move / copy / test too."""
    out = copy.deepcopy(doc)
    for op in ops:
        path = op.get("path", "")
        kind = op.get("op")
        if kind == "add":
            _add(out, path, op.get("value"))
        elif kind == "remove":
            _remove(out, path)
        elif kind == "replace":
            _replace(out, path, op.get("value"))
        elif kind in ("move", "copy"):
            src = op.get("from", "")
            if not isinstance(src, str):
                raise PatchError(f"{kind} {path!r}: from is not a JSON pointer")
            if kind == "move" and (path + "/").startswith(src + "/") and path != src:
                raise PatchError(f"move {path!r}: cannot move {src!r} into itself")
            value = _remove(out, src, kind) if kind == "move" else copy.deepcopy(_get_at(out, src))
            _add(out, path, value)
        elif kind == "test":
            if _get_at(out, path) != op.get("value"):
                raise PatchError(f"testing value {path} failed: test failed")
        else:
            raise PatchError(f"unsupported JSON patch op {kind!r}")
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


def apply_patches(patches: list[dict[str, Any]], items: list[Item], global_vars: dict[str, Any],
                  sources: Mapping[str, set[str]] | None = None) -> None:
    """Run the ClusterClass's patches over `items` (in place) with no Runtime Extension to call: an external patch
    fails naming the RuntimeSDK gate (see `patch_steps`)."""
    drive(patch_steps(patches, items, global_vars, sources=sources))


def drive(steps: Generator[ExternalCall, Mapping[str, Any], T],
          answer: Callable[[ExternalCall], Mapping[str, Any]] | None = None) -> T:
    """Run `steps` to the end, `answer` giving each ExternalCall's response (or raising ExtensionCallError, which is
    thrown into the steps as a failed call would be). Pure when `answer` is."""
    try:
        call = next(steps)
        while True:
            if answer is None:
                call = steps.throw(ExtensionCallError(f"no Runtime SDK to call {call.extension!r}"))
                continue
            try:
                response = answer(call)
            except ExtensionCallError as e:
                call = steps.throw(e)
                continue
            call = steps.send(response)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def patch_steps(patches: list[dict[str, Any]], items: list[Item], global_vars: dict[str, Any], *,
                runtime_sdk: bool = False, sources: Mapping[str, set[str]] | None = None) -> PatchSteps:
    """The ClusterClass's patches over `items` (in place), inline and external in the class's order, each in the
    apiVersion its templateRef names (see the module docstring); yields the external calls to make. `runtime_sdk`:
    the RuntimeSDK gate (off: an external patch fails, as upstream, naming the gate). `sources`: variable name ->
    the `from` of its status.variables definitions (None: every variable is inline). Raises PatchError with every
    failure of the first failing patch."""
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
        yield from _apply(patches, items, global_vars, runtime_sdk, sources)
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


def _visible(values: Mapping[str, Any], sources: Mapping[str, set[str]] | None, origin: str) -> dict[str, Any]:
    """The variables a patch from `origin` (`inline` or an external patch's name) sees: those with a definition
    from it (upstream's definitionsForPatch); `builtin` always."""
    if sources is None:
        return dict(values) if origin == INLINE else {k: v for k, v in values.items() if k == BUILTIN}
    return {k: v for k, v in values.items() if k == BUILTIN or origin in sources.get(k, set())}


def _apply(patches: list[dict[str, Any]], items: list[Item], global_vars: dict[str, Any], runtime_sdk: bool,
           sources: Mapping[str, set[str]] | None) -> PatchSteps:
    uids = [_uid(item) for item in items]
    last_origin = INLINE
    for p in patches:
        name = p.get("name", "")
        ext = p.get("external")
        last_origin = name if ext is not None else INLINE
        if p.get("definitions"):
            _apply_inline(p, items, _visible(global_vars, sources, INLINE), sources)
            continue
        if not ext or not ext.get("generatePatchesExtension"):
            raise PatchError(f"failed to create patch generator for patch {go_quote(name)}")
        if not runtime_sdk:
            raise PatchError(f"can not use external patch {go_quote(name)} if RuntimeSDK feature flag is disabled")
        request = generate_request(items, uids, global_vars, sources, name, ext.get("settings"))
        try:
            response = yield ExternalCall(name, ext["generatePatchesExtension"], hooks.GENERATE_PATCHES, request)
        except ExtensionCallError as e:
            raise PatchError(f"failed to generate patches for patch {go_quote(name)}: {e}") from e
        try:
            apply_response(items, uids, response)
        except PatchError as e:
            raise PatchError(f"failed to apply patches for patch {go_quote(name)}: {e}") from e
    # every external patch validates the final templates, with the variables the last patch saw (upstream reuses
    # its one request)
    for p in patches:
        ext = p.get("external") or {}
        if not ext.get("validateTopologyExtension"):
            continue
        name = p.get("name", "")
        if not runtime_sdk:
            raise PatchError(f"can not use external patch {go_quote(ext['validateTopologyExtension'])} if "
                             "RuntimeSDK feature flag is disabled")
        gen = generate_request(items, uids, global_vars, sources, last_origin, ext.get("settings"))
        request = hooks.request(hooks.VALIDATE_TOPOLOGY, {
            **({"settings": gen["settings"]} if "settings" in gen else {}),
            "variables": gen["variables"],
            "items": [{k: v for k, v in it.items() if k != "uid"} for it in gen["items"]]})
        try:
            yield ExternalCall(name, ext["validateTopologyExtension"], hooks.VALIDATE_TOPOLOGY, request)
        except ExtensionCallError as e:
            raise PatchError(f"validation of patch {go_quote(name)} failed: {e}") from e


def _apply_inline(p: dict[str, Any], items: list[Item], global_vars: dict[str, Any],
                  sources: Mapping[str, set[str]] | None) -> None:
    name = p.get("name", "")
    errors: list[str] = []
    for item in items:
        defs = [d for d in p.get("definitions") or [] if matches(d.get("selector") or {}, item)]
        if not defs:
            continue
        overrides = _visible(item.overrides, sources, INLINE)
        data = item_variables(global_vars, Item(item.holder_kind, item.holder_field, item.obj, item.builtins,
                                                overrides))
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


# --- external patches: requests and responses ------------------------------------------------------------

def holder_reference(item: Item) -> dict[str, str]:
    return {"apiVersion": item.holder_api_version, "kind": item.holder_kind, "namespace": item.holder_namespace,
            "name": item.holder_name, "fieldPath": item.holder_field}


def _uid(item: Item) -> str:
    h = holder_reference(item)
    return str(uuid.uuid5(_UID_NAMESPACE, "/".join(h[k] for k in ("apiVersion", "kind", "namespace", "name",
                                                                      "fieldPath"))))


def _variables(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """{name: value} as the hook's variable list, `builtin` last (upstream's order)."""
    out = [{"name": k, "value": copy.deepcopy(v)} for k, v in values.items() if k != BUILTIN]
    if BUILTIN in values:
        out.append({"name": BUILTIN, "value": copy.deepcopy(values[BUILTIN])})
    return out


def _item_variables(item: Item, sources: Mapping[str, set[str]] | None, origin: str) -> list[dict[str, Any]]:
    """An item's own variables: the control plane's and each worker's overrides and builtins; the
    InfrastructureCluster has none (upstream's addVariablesForPatch)."""
    if item.holder_field in (CONTROL_PLANE, CP_MACHINE_INFRA) or item.holder_kind in ("MachineDeployment",
                                                                                     "MachinePool"):
        return _variables({**_visible(item.overrides, sources, origin), BUILTIN: item.builtins})
    return []


def _request_object(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    md = out.get("metadata")
    if isinstance(md, dict):
        md.pop("managedFields", None)
        ann = md.get("annotations")
        if isinstance(ann, dict):
            for a in _DROPPED_ANNOTATIONS:
                ann.pop(a, None)
    return out


def generate_request(items: list[Item], uids: list[str], global_vars: Mapping[str, Any],
                     sources: Mapping[str, set[str]] | None, origin: str,
                     settings: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The GeneratePatchesRequest for a patch from `origin` over the current templates."""
    body: dict[str, Any] = {}
    if settings:
        body["settings"] = dict(settings)
    body["variables"] = _variables(_visible(global_vars, sources, origin))
    body["items"] = []
    for item, uid in zip(items, uids, strict=True):
        it: dict[str, Any] = {"uid": uid, "holderReference": holder_reference(item),
                              "object": _request_object(item.obj)}
        variables = _item_variables(item, sources, origin)
        if variables:
            it["variables"] = variables
        body["items"].append(it)
    return hooks.request(hooks.GENERATE_PATCHES, body)


def _decode(patch: Any) -> Any:
    """The `patch` field: bytes in Go, so base64 in JSON."""
    if not isinstance(patch, str):
        raise PatchError(f"patch is not a base64 string: {patch!r}")
    try:
        raw = base64.b64decode(patch, validate=True)
    except (binascii.Error, ValueError) as e:
        raise PatchError(f"patch is not base64: {e}") from e
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise PatchError(f"patch is not JSON: {e}") from e


def apply_response(items: list[Item], uids: list[str], response: Mapping[str, Any]) -> None:
    """A GeneratePatchesResponse's patches, in order, each on the item its uid names; only `spec` is taken over."""
    by_uid = dict(zip(uids, items, strict=True))
    for r in response.get("items") or []:
        item = by_uid.get(str(r.get("uid", "")))
        if item is None:
            raise PatchError("unable to find corresponding request item for patch")
        kind = r.get("patchType")
        if kind == JSON_PATCH:
            try:
                ops = _decode(r.get("patch"))
            except PatchError as e:
                raise PatchError(f"failed to apply patch: error decoding json patch (RFC6902): {e}") from e
            if ops is None or ops == []:
                continue
            if not isinstance(ops, list) or not all(isinstance(o, dict) for o in ops):
                raise PatchError("failed to apply patch: error decoding json patch (RFC6902): not a list of "
                                 "operations")
            try:
                patched = apply_json_patch(item.obj, ops)
            except PatchError as e:
                raise PatchError(f"failed to apply patch: error applying json patch (RFC6902): {e}") from e
        elif kind == JSON_MERGE_PATCH:
            try:
                merge = _decode(r.get("patch"))
            except PatchError as e:
                raise PatchError(f"failed to apply patch: error applying json merge patch (RFC7386): {e}") from e
            if merge is None or merge == {}:
                continue
            patched = apply_merge_patch(item.obj, merge)
            if not isinstance(patched, dict):
                raise PatchError("failed to apply patch: error applying json merge patch (RFC7386): the result "
                                 "is not an object")
        else:
            raise PatchError(f"failed to apply patch: unknown patchType {kind!r} (JSONPatch or JSONMergePatch)")
        if not isinstance(patched.get("spec"), dict):
            raise PatchError(f"failed to apply patch to template: missing field \"spec\" in {_describe(item)}")
        item.obj["spec"] = patched["spec"]


def apply_merge_patch(doc: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (a copy)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(doc) if isinstance(doc, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = apply_merge_patch(out.get(k), v)
    return out
