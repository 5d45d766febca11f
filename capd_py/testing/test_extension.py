"""capd-py's test extension: upstream's test/extension (v1.13) rebuilt with the Python kit, what the e2e tests
register for upstream's runtime-SDK flavors (clusterclass-quick-start-runtimesdk, cluster-template-upgrades-
runtimesdk). Serve it with `capd-py extension serve capd_py.testing.test_extension:extension` (the management
cluster from CAPD_PY_KUBECONFIG, else $KUBECONFIG / ~/.kube/config).

Lifecycle handlers (upstream handlers/lifecycle): each answers from, and records into, the ConfigMap
`<cluster>-<settings.extensionConfigName>-test-extension-hookresponses` in the Cluster's namespace, created empty
when missing. The key of a call is the hook name and its versions joined by '-' ('+' -> '_'), e.g.
`BeforeClusterUpgrade-v1.34.4-v1.35.4`. The answer is `<key>-preloadedResponse` read as upstream reads it (YAML/JSON,
field names case-insensitive: `{"Status": "Success", "RetryAfterSeconds": 5}`); without one, Success with
retryAfterSeconds 5 when settings.defaultAllHandlersToBlocking is "true", else 0 (non-blocking hooks: Success).
What was answered is recorded as `<key>-actualResponseStatus`: `Status: Success, RetryAfterSeconds: 5` for a
response with retryAfterSeconds, the bare status for AfterControlPlaneInitialized.

Topology-mutation handlers (upstream handlers/topologymutation) for the Docker* / Kubeadm* templates (v1beta1 and
v1beta2): GeneratePatches sets the load balancer's imageRepository, the kubeadm `v=2` extra args and the
`kubernetesVersion=` node label, KCP maxSurge, extra files, and the node image by version; ValidateTopology
accepts; DiscoverVariables returns upstream's three variable definitions. GenerateUpgradePlan answers the plan
upstream's test extension computes, over the versions capd-py builds images for instead of kind's (upgrade_plan).
The Dev* templates (v1beta2) are patched as upstream v1.14's extension patches them, for v1.14's flavors
(clusterclass-in-memory, clusterclass-quick-start-runtimesdk): the `top-level-label-1` / `top-level-annotation-1`
marks, and with the docker backend the load balancer's imageRepository and the node image by version (an inMemory
backend gets the marks only).

One difference from upstream: the node image upstream's kind mapper names carries a digest when kind published
an image for exactly that version; capd-py never pulls and tags its own images `kindest/node:<version>`, so the
image is always that tag (for v1.34.4 and v1.35.4, the versions capd-py builds, upstream names the same)."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from capd_py.api import kubeyaml, runtime_hooks, versions
from capd_py.api.gvk import CONFIG_MAP
from capd_py.api.runtime_hooks import FAILURE, SUCCESS, Hook
from capd_py.kube.client import Kube, KubeError
from capd_py.runtime_extension import Extension, ExtensionServer, serve
from capd_py.runtime_extension import manifest as manifests
from capd_py.runtime_extension.patches import (
    VariableError,
    VariableNotFound,
    get_string_variable,
    get_variable,
    patch_item,
    template_variables,
)

DEFAULT_EXTENSION_CONFIG_NAME = "k8s-upgrade-with-runtimesdk"  # the flavors' ${EXTENSION_CONFIG_NAME} default
EXTENSION_CONFIG_NAME_KEY = "extensionConfigName"
DEFAULT_ALL_HANDLERS_TO_BLOCKING_KEY = "defaultAllHandlersToBlocking"
CONFIG_MAP_SUFFIX = "test-extension-hookresponses"
DEFAULT_BLOCKING_RETRY_SECONDS = 5


class HookError(Exception):
    """A lifecycle handler could not read or record its answer: the response is a Failure with this message."""


def config_map_name(cluster: str, extension_config: str) -> str:
    return f"{cluster}-{extension_config}-{CONFIG_MAP_SUFFIX}"


def hook_key(hook: str, attributes: list[str] | tuple[str, ...] = ()) -> str:
    # '+' is not allowed in ConfigMap keys (alphanumerics, '-', '_', '.')
    return "-".join([hook, *attributes]).replace("+", "_")


def default_preloaded_response(hook: Hook, settings: Mapping[str, str]) -> str:
    """What a hook answers until the test preloads something: blocking hooks Success with retryAfterSeconds 5 when
    defaultAllHandlersToBlocking is "true" (else 0), the non-blocking AfterControlPlaneInitialized Success."""
    if not hook.blocking:
        return '{"Status": "Success"}'
    retry = DEFAULT_BLOCKING_RETRY_SECONDS if settings.get(DEFAULT_ALL_HANDLERS_TO_BLOCKING_KEY) == "true" else 0
    return f'{{"Status": "Success", "RetryAfterSeconds": {retry}}}'


def decode_preloaded_response(data: str, hook: Hook) -> dict[str, Any]:
    """The response fields `data` sets, read as upstream reads it (sigs.k8s.io/yaml into the typed response):
    YAML or JSON, keys matched to the response's fields case-insensitively, unknown keys ignored, a null leaves the
    field unset. Raises HookError naming the hook on malformed data or a value of the wrong type."""
    try:
        doc = kubeyaml.load(data) if data.strip() else None
    except yaml.YAMLError as exc:
        raise HookError(f'failed to read "{hook.name}" response information from ConfigMap: {exc}') from exc
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise HookError(f'failed to read "{hook.name}" response information from ConfigMap: cannot unmarshal '
                        f"{type(doc).__name__} into Go value of type v1alpha1.{hook.response_kind}")
    fields = ["apiVersion", "kind", "status", "message"] + (["retryAfterSeconds"] if hook.blocking else [])
    out: dict[str, Any] = {}
    for key, value in doc.items():
        # Go's encoding/json: an exact key match wins, else a case-insensitive one
        name = key if key in fields else next((f for f in fields if f.lower() == str(key).lower()), None)
        if name is None or value is None:
            continue
        if name == "retryAfterSeconds":
            if isinstance(value, bool) or not isinstance(value, int) or not -2**31 <= value < 2**31:
                raise HookError(f'failed to read "{hook.name}" response information from ConfigMap: cannot '
                                f"unmarshal {value!r} into Go struct field {hook.response_kind}.retryAfterSeconds "
                                "of type int32")
        elif not isinstance(value, str):
            raise HookError(f'failed to read "{hook.name}" response information from ConfigMap: cannot unmarshal '
                            f"{value!r} into Go struct field {hook.response_kind}.{name} of type string")
        out[name] = value
    return out


def recorded_status(hook: Hook, response: Mapping[str, Any]) -> str:
    """The `-actualResponseStatus` value of an answer."""
    if hook.blocking:
        return f"Status: {response.get('status', '')}, RetryAfterSeconds: {response.get('retryAfterSeconds', 0)}"
    return str(response.get("status", ""))


KubeSource = Kube | Callable[[], Kube]
RELEASED = "Status: Success, RetryAfterSeconds: 0"   # what a blocking hook that let go recorded


@dataclass(frozen=True)
class HookCall:
    """One lifecycle call as answered: its ConfigMap key and the `-actualResponseStatus` value it recorded (and the
    request, for a test that looks at what the core sent: the upgrade plan, say; not compared)."""
    key: str
    status: str
    request: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)


def record_problems(calls: list[HookCall], keys: list[str], blocking: str) -> list[str]:
    """What upstream's runtime-SDK e2e expects of the lifecycle calls, checked on the extension's ordered record
    (the ConfigMap keeps only each key's last answer): the keys' first calls in the order of `keys` and no other key;
    each blocking hook answered `blocking` at least twice (asked again after its retryAfterSeconds), then RELEASED
    and never `blocking` again; a non-blocking hook (AfterControlPlaneInitialized) only Success; each key first
    asked only once the one before it let go. [] when all hold."""
    out: list[str] = []
    order = list(dict.fromkeys(c.key for c in calls))
    if order != keys:
        out.append(f"first calls in the order {order}, expected {keys}")
    for key in keys:
        answers = [c.status for c in calls if c.key == key]
        hook = runtime_hooks.HOOKS.get(key.split("-", 1)[0])
        if hook is not None and not hook.blocking:
            if not answers or set(answers) != {SUCCESS}:
                out.append(f"{key}: answered {answers}, expected Success only")
            continue
        if RELEASED not in answers:
            out.append(f"{key}: never let go: {answers}")
            continue
        released = answers.index(RELEASED)
        if released < 2 or set(answers[:released]) != {blocking} or set(answers[released:]) != {RELEASED}:
            out.append(f"{key}: answered {answers}, expected {blocking!r} at least twice, then {RELEASED!r} only")
    for earlier, later in zip(keys, keys[1:], strict=False):
        let_go = [i for i, c in enumerate(calls) if c.key == earlier and c.status != blocking]
        first = [i for i, c in enumerate(calls) if c.key == later]
        if let_go and first and first[0] < let_go[0]:
            out.append(f"{later} asked (call {first[0]}) before {earlier} let go (call {let_go[0]})")
    return out


class HookResponses:
    """The lifecycle handlers' ConfigMap, through a management-cluster Kube (made on first use when given a
    factory, so the module-level extension needs no cluster until a hook is called). `calls` lists every call
    answered, in order: the ConfigMap keeps only each key's last answer, so an e2e test proving the order of the
    hooks (and that a blocked hook was asked again) reads this list."""

    def __init__(self, kube: KubeSource | None = None, calls: list[HookCall] | None = None):
        self.calls: list[HookCall] = calls if calls is not None else []
        self._source: KubeSource = kube if kube is not None else _kube_from_env
        # a factory is any callable that is not a client itself (tests pass in-memory stand-ins)
        self._kube: Kube | None = None
        if not callable(self._source) or isinstance(self._source, Kube):
            self._kube = self._source  # type: ignore[assignment]

    @property
    def kube(self) -> Kube:
        if self._kube is None:
            assert callable(self._source)
            self._kube = self._source()
        return self._kube

    async def answer(self, hook: Hook, request: Mapping[str, Any], attributes: list[str]) -> dict[str, Any]:
        """Read the answer, record it, return it (upstream's Do<Hook> handlers)."""
        cluster = request.get("cluster") or {}
        settings = request.get("settings") or {}
        key = hook_key(hook.name, attributes)
        try:
            response = await self._read(cluster, hook, key, settings)
        except HookError as exc:
            return {"status": FAILURE, "message": str(exc)}
        try:
            await self._record(cluster, hook, key, settings, response)
        except HookError as exc:
            return {**response, "status": FAILURE, "message": str(exc)}
        self.calls.append(HookCall(key, recorded_status(hook, response), dict(request)))
        return response

    def _where(self, cluster: Mapping[str, Any], settings: Mapping[str, str], what: str) -> tuple[str, str]:
        if EXTENSION_CONFIG_NAME_KEY not in settings:
            raise HookError(what)
        meta = cluster.get("metadata") or {}
        return str(meta.get("namespace") or ""), config_map_name(str(meta.get("name") or ""),
                                                                 settings[EXTENSION_CONFIG_NAME_KEY])

    async def _read(self, cluster: Mapping[str, Any], hook: Hook, key: str,
                    settings: Mapping[str, str]) -> dict[str, Any]:
        # upstream's message, its typo included ("mest"): tests may match on it
        namespace, name = self._where(cluster, settings, f"{EXTENSION_CONFIG_NAME_KEY} mest be set in settings")
        try:
            cm = await self.kube.get(CONFIG_MAP, namespace, name)
        except KubeError as exc:
            raise HookError(f"failed to read the ConfigMap {namespace}/{name}: {_api_message(exc)}") from exc
        if cm is None:
            try:
                cm = await self.kube.create(CONFIG_MAP, {"apiVersion": "v1", "kind": "ConfigMap",
                                                         "metadata": {"name": name, "namespace": namespace}})
            except KubeError as exc:
                raise HookError(f"failed to create the ConfigMap {namespace}/{name}: {_api_message(exc)}") from exc
        data = (cm.get("data") or {}).get(f"{key}-preloadedResponse")
        if data is None:
            data = default_preloaded_response(hook, settings)
        fields = decode_preloaded_response(data, hook)
        # the typed response upstream decodes into starts empty: a field the data leaves out stays empty
        response: dict[str, Any] = {"status": fields.get("status", "")}
        if hook.blocking:
            response["retryAfterSeconds"] = fields.get("retryAfterSeconds", 0)
        if fields.get("message"):
            response["message"] = fields["message"]
        return response

    async def _record(self, cluster: Mapping[str, Any], hook: Hook, key: str, settings: Mapping[str, str],
                      response: Mapping[str, Any]) -> None:
        namespace, name = self._where(cluster, settings,
                                      f"{EXTENSION_CONFIG_NAME_KEY} must be set in runtime extension settings")
        try:
            cm = await self.kube.get(CONFIG_MAP, namespace, name)
        except KubeError as exc:
            raise HookError(f"failed to read the ConfigMap {namespace}/{name}: {_api_message(exc)}") from exc
        if cm is None:
            raise HookError(f'failed to read the ConfigMap {namespace}/{name}: configmaps "{name}" not found')
        try:
            await self.kube.merge_patch(CONFIG_MAP, namespace, name, {"data": {
                f"{key}-actualResponseStatus": recorded_status(hook, response)}})
        except KubeError as exc:
            raise HookError(f"failed to update the ConfigMap {namespace}/{name}: {_api_message(exc)}") from exc


def _api_message(exc: KubeError) -> str:
    # the API server's own message, as a Go client's error prints it (`configmaps "x" is forbidden: ...`)
    return exc.message or str(exc)


def _kube_from_env() -> Kube:
    return Kube.for_management(os.environ.get("CAPD_PY_KUBECONFIG") or None)


# -- topology mutation ---------------------------------------------------------------------------------------

INFRASTRUCTURE_GROUP = "infrastructure.cluster.x-k8s.io"
BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"
CONTROL_PLANE_GROUP = "controlplane.cluster.x-k8s.io"
# what upstream's decoder has in its scheme: CAPD's, kubeadm bootstrap's and KCP's kinds at v1beta1 and v1beta2
# (v1.14's CAPD API: the Dev* kinds beside the Docker* ones; DevMachinePool(Template) only at v1beta2)
_DOCKER_KINDS = ("DockerCluster", "DockerClusterTemplate", "DockerMachine", "DockerMachineTemplate",
                 "DockerMachinePool", "DockerMachinePoolTemplate")
_DEV_KINDS = ("DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate")
KNOWN_KINDS: dict[str, frozenset[str]] = {
    f"{INFRASTRUCTURE_GROUP}/v1beta1": frozenset((*_DOCKER_KINDS, *_DEV_KINDS)),
    f"{INFRASTRUCTURE_GROUP}/v1beta2": frozenset((*_DOCKER_KINDS, *_DEV_KINDS, "DevMachinePool",
                                                  "DevMachinePoolTemplate")),
    f"{BOOTSTRAP_GROUP}/v1beta1": frozenset(("KubeadmConfig", "KubeadmConfigTemplate")),
    f"{BOOTSTRAP_GROUP}/v1beta2": frozenset(("KubeadmConfig", "KubeadmConfigTemplate")),
    f"{CONTROL_PLANE_GROUP}/v1beta1": frozenset(("KubeadmControlPlane", "KubeadmControlPlaneTemplate")),
    f"{CONTROL_PLANE_GROUP}/v1beta2": frozenset(("KubeadmControlPlane", "KubeadmControlPlaneTemplate")),
}
KIND_NODE_IMAGE = "kindest/node"


class PatchError(Exception):
    pass


_SEMVER = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")


def parse_tolerant(version: str) -> str:
    """`major.minor.patch[-pre][+build]` from a version as blang/semver's ParseTolerant reads it (a leading v and
    surrounding spaces dropped, a missing minor or patch taken as 0); ValueError otherwise."""
    m = _SEMVER.match(version.strip())
    if m is None or (m.group(4) or m.group(5)) and m.group(3) is None:
        raise ValueError(f"invalid semantic version {version!r}")
    major, minor, patch, pre, build = m.groups()
    return f"{int(major)}.{int(minor or 0)}.{int(patch or 0)}{pre or ''}{build or ''}"


def kind_node_image(version: str) -> str:
    """The node image for a Kubernetes version (upstream kind mapper's fallback: `kindest/node:v<semver>`, '+' as
    '_', valid as an OCI tag)."""
    return f"{KIND_NODE_IMAGE}:v{parse_tolerant(version)}".replace("+", "_")


def _at(obj: dict[str, Any], *path: str) -> dict[str, Any]:
    node = obj
    for key in path:
        nxt = node.get(key)
        if not isinstance(nxt, dict):
            nxt = node[key] = {}
        node = nxt
    return node


def _append(parent: dict[str, Any], key: str, *items: Any) -> None:
    current = parent.get(key)
    parent[key] = [*(current if isinstance(current, list) else []), *items]


def _int_or_string(value: str) -> int | str:
    # k8s intstr.Parse: an integer when strconv.Atoi accepts it, else the string ("20%")
    return int(value) if re.fullmatch(r"[+-]?\d+", value) else value


def _optional_string(variables: Mapping[str, Any], name: str, what: str) -> str | None:
    try:
        return get_string_variable(variables, name)
    except VariableNotFound:
        return None
    except VariableError as exc:
        raise PatchError(f"{what}: {exc}") from exc


def _files(variables: Mapping[str, Any], what: str) -> list[dict[str, Any]]:
    try:
        raw = get_variable(variables, "files")
    except VariableNotFound:
        return []
    except VariableError as exc:
        raise PatchError(f"{what}: {exc}") from exc
    if not isinstance(raw, list) or not all(isinstance(f, dict) for f in raw):
        raise PatchError(f"{what}: failed to unmarshal variable json {raw!r} into a list of files")
    out = []
    for f in raw:
        file: dict[str, Any] = {}
        for key in ("path", "content"):  # omitempty in upstream's fileVariable and File
            if f.get(key):
                file[key] = str(f[key])
        out.append({**file, "owner": "root:root", "permissions": "0600"})
    return out


def patch_docker_cluster_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    repo = _optional_string(variables, "imageRepository",
                            "could not set DockerClusterTemplate loadBalancer imageRepository")
    if repo is not None:
        _at(obj, "spec", "template", "spec", "loadBalancer")["imageRepository"] = repo


def patch_kubeadm_control_plane_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    try:
        cp_version = get_string_variable(variables, "builtin.controlPlane.version")
    except (VariableNotFound, VariableError) as exc:
        raise PatchError(f"could not patch KubeadmControlPlane: could not get builtin.controlPlane.version: "
                         f"{exc}") from exc
    node_labels = f"kubernetesVersion={cp_version.replace('+', '_')}"
    v1beta1 = obj.get("apiVersion", "").endswith("/v1beta1")
    kcs = _at(obj, "spec", "template", "spec", "kubeadmConfigSpec")
    cc = _at(kcs, "clusterConfiguration")
    if v1beta1:  # extra args are maps there
        for component in ("apiServer", "controllerManager", "scheduler"):
            _at(cc, component, "extraArgs")["v"] = "2"
        for config in ("initConfiguration", "joinConfiguration"):
            args = _at(kcs, config, "nodeRegistration", "kubeletExtraArgs")
            args["v"] = "2"
            args["node-labels"] = node_labels
    else:
        for component in ("apiServer", "controllerManager", "scheduler"):
            _append(_at(cc, component), "extraArgs", {"name": "v", "value": "2"})
        for config in ("initConfiguration", "joinConfiguration"):
            _append(_at(kcs, config, "nodeRegistration"), "kubeletExtraArgs", {"name": "v", "value": "2"},
                    {"name": "node-labels", "value": node_labels})

    max_surge = _optional_string(variables, "kubeadmControlPlaneMaxSurge",
                                 "could not set KubeadmControlPlaneTemplate MaxSurge")
    if max_surge:
        spec = _at(obj, "spec", "template", "spec")
        if v1beta1:
            _at(spec, "rolloutStrategy", "rollingUpdate")["maxSurge"] = _int_or_string(max_surge)
        else:
            strategy = _at(spec, "rollout", "strategy")
            strategy["type"] = "RollingUpdate"
            _at(strategy, "rollingUpdate")["maxSurge"] = _int_or_string(max_surge)

    files = _files(variables, "could not set KubeadmControlPlaneTemplate files")
    if files:
        _append(kcs, "files", *files)


def patch_kubeadm_config_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    spec = _at(obj, "spec", "template", "spec")
    if obj.get("apiVersion", "").endswith("/v1beta1"):
        _at(spec, "joinConfiguration", "nodeRegistration", "kubeletExtraArgs")["v"] = "2"
    else:
        _append(_at(spec, "joinConfiguration", "nodeRegistration"), "kubeletExtraArgs", {"name": "v", "value": "2"})
    files = _files(variables, "could not set KubeadmConfigTemplate files")
    if files:
        _append(spec, "files", *files)


def _image_for(version: str, what: str) -> str:
    try:
        return kind_node_image(version)
    except ValueError as exc:
        raise PatchError(f"could not parse {what} version: {exc}") from exc


def _required_version(variables: Mapping[str, Any], owner: str, kind: str) -> str:
    """`builtin.<owner>.version` (owner MachineDeployment or MachinePool), which the `kind` patch needs; its absence
    or a bad value is a PatchError with upstream's texts."""
    try:
        return get_string_variable(variables, f"builtin.{owner[0].lower()}{owner[1:]}.version")
    except VariableNotFound as exc:
        raise PatchError(f"no version variables found for {kind} patch") from exc
    except VariableError as exc:
        raise PatchError(f"could not set customImage to {owner} {kind}: {exc}") from exc


def patch_docker_machine_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    # a control plane's template has builtin.controlPlane.version, a MachineDeployment's builtin.machineDeployment
    cp_version = _optional_string(variables, "builtin.controlPlane.version",
                                  "could not set customImage to control plane dockerMachineTemplate")
    if cp_version is not None:
        _at(obj, "spec", "template", "spec")["customImage"] = _image_for(cp_version, "control plane")
        return
    md_version = _required_version(variables, "MachineDeployment", "DockerMachineTemplate")
    _at(obj, "spec", "template", "spec")["customImage"] = _image_for(md_version, "MachineDeployment")


def patch_docker_machine_pool_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    mp_version = _required_version(variables, "MachinePool", "DockerMachinePoolTemplate")
    _at(obj, "spec", "template", "spec", "template")["customImage"] = _image_for(mp_version, "MachinePool")


# -- upstream v1.14's patches of the Dev* templates (handlers/topologymutation at v1.14.0: v1beta2 only; a v1beta1
# Dev* template decodes into another Go type there and is left as it is)

TOP_LEVEL_LABEL = ("top-level-label-1", "top-level-label-value-1")
TOP_LEVEL_ANNOTATION = ("top-level-annotation-1", "top-level-annotation-value-1")


def _add_top_level_metadata(meta: dict[str, Any]) -> None:
    """upstream v1.14 marks the templates it patches: `top-level-label-1` / `top-level-annotation-1` (added to what
    is there, as its labels.AddLabels / annotations.AddAnnotations)."""
    _at(meta, "labels")[TOP_LEVEL_LABEL[0]] = TOP_LEVEL_LABEL[1]
    _at(meta, "annotations")[TOP_LEVEL_ANNOTATION[0]] = TOP_LEVEL_ANNOTATION[1]


def _docker_backend(obj: dict[str, Any], *path: str) -> dict[str, Any] | None:
    """The template's `backend.docker` under `path` when it has one (upstream: `Backend.Docker != nil`)."""
    node: Any = obj
    for key in (*path, "backend", "docker"):
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def patch_dev_cluster_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    """The template's metadata marked and, with the docker backend, the load balancer's imageRepository, both only
    when the `imageRepository` variable is set."""
    repo = _optional_string(variables, "imageRepository",
                            "could not set DevClusterTemplate loadBalancer imageRepository")
    if repo is None:
        return
    _add_top_level_metadata(_at(obj, "spec", "template", "metadata"))
    docker = _docker_backend(obj, "spec", "template", "spec")
    if docker is not None:
        _at(docker, "loadBalancer")["imageRepository"] = repo


def patch_dev_machine_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    """The object's own metadata marked; with the docker backend, the node image by the control plane's or the
    MachineDeployment's version (the version is read, and must parse, whatever the backend)."""
    _add_top_level_metadata(_at(obj, "metadata"))
    docker = _docker_backend(obj, "spec", "template", "spec")
    cp_version = _optional_string(variables, "builtin.controlPlane.version",
                                  "could not set customImage to control plane devMachineTemplate")
    if cp_version is not None:
        image = _image_for(cp_version, "control plane")
    else:
        md_version = _required_version(variables, "MachineDeployment", "DevMachineTemplate")
        image = _image_for(md_version, "MachineDeployment")
    if docker is not None:
        docker["customImage"] = image


def patch_dev_machine_pool_template(obj: dict[str, Any], variables: Mapping[str, Any]) -> None:
    """The pool template's metadata marked; with the docker backend, the node image by the MachinePool's version."""
    _add_top_level_metadata(_at(obj, "spec", "template", "metadata"))
    mp_version = _required_version(variables, "MachinePool", "DevMachinePoolTemplate")
    image = _image_for(mp_version, "MachinePool")
    docker = _docker_backend(obj, "spec", "template", "spec")
    if docker is not None:
        docker["customImage"] = image


# by kind; the Dev* ones at v1beta2 only (DEV_PATCHERS), as upstream v1.14's type switch
PATCHERS: dict[str, Callable[[dict[str, Any], Mapping[str, Any]], None]] = {
    "DockerClusterTemplate": patch_docker_cluster_template,
    "KubeadmControlPlaneTemplate": patch_kubeadm_control_plane_template,
    "KubeadmConfigTemplate": patch_kubeadm_config_template,
    "DockerMachineTemplate": patch_docker_machine_template,
    "DockerMachinePoolTemplate": patch_docker_machine_pool_template,
}
DEV_PATCHERS: dict[str, Callable[[dict[str, Any], Mapping[str, Any]], None]] = {
    "DevClusterTemplate": patch_dev_cluster_template,
    "DevMachineTemplate": patch_dev_machine_template,
    "DevMachinePoolTemplate": patch_dev_machine_pool_template,
}


def _parse_group_version(api_version: str) -> None:
    # k8s schema.ParseGroupVersion: "", "v1" or "group/version"
    if api_version.count("/") > 1 or (api_version.count("/") == 1 and not all(api_version.split("/"))):
        raise ValueError(f"unexpected GroupVersion string: {api_version}")


def generate_patches(request: Mapping[str, Any]) -> dict[str, Any]:
    """GeneratePatches (upstream's WalkTemplates with FailForUnknownTypes): every item's template patched by kind,
    a JSON patch per item; the first error is the Failure's message and no items are returned with it."""
    items = []
    for item in request.get("items") or []:
        variables = template_variables(request, item)
        obj = item.get("object") or {}
        api_version, kind = str(obj.get("apiVersion") or ""), str(obj.get("kind") or "")
        if kind not in KNOWN_KINDS.get(api_version, ()):
            return {"status": FAILURE,
                    "message": f'no kind "{kind}" is registered for version "{api_version}" in scheme '
                               '"test-extension"'}
        holder_api_version = str((item.get("holderReference") or {}).get("apiVersion") or "")
        try:
            _parse_group_version(holder_api_version)
        except ValueError as exc:
            return {"status": FAILURE, "message": f"error generating patches - HolderReference apiVersion "
                                                  f'"{holder_api_version}" is not in valid format: {exc}'}
        modified = copy.deepcopy(obj)
        patcher = PATCHERS.get(kind) or (DEV_PATCHERS.get(kind) if api_version.endswith("/v1beta2") else None)
        if patcher is not None:
            try:
                patcher(modified, variables)
            except PatchError as exc:
                return {"status": FAILURE, "message": f"error patching {kind}: {exc}"}
        items.append(patch_item(str(item.get("uid") or ""), obj, modified))
    return {"status": SUCCESS, "items": items}


def validate_topology(_: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream's e2e only checks that the hook is called."""
    return {"status": SUCCESS}


_IMAGE_REPOSITORY_METADATA = {"labels": {"objects": "DockerCluster"},
                              "annotations": {"description": "Gets set at "
                                              "DockerCluster.Spec.Template.Spec.LoadBalancer.ImageRepository"}}


def discover_variables(_: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream's three variables (ClusterClassVariable, v1beta2 JSON)."""
    return {"status": SUCCESS, "variables": [
        {"name": "kubeadmControlPlaneMaxSurge", "required": False, "schema": {"openAPIV3Schema": {
            "type": "string", "default": "", "example": "0",
            "description": "kubeadmControlPlaneMaxSurge is the maximum number of control planes that can be "
                           "scheduled above or under the desired number of control plane machines.",
            "x-kubernetes-validations": [{"rule": 'self == "" || self != ""',
                                          "messageExpression": "'just a test expression, got %s'.format([self])"}],
        }}},
        {"name": "files", "required": False, "schema": {"openAPIV3Schema": {
            "type": "array", "items": {"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}}}}}},
        # must be set in the Cluster: no default and required
        {"name": "imageRepository", "required": True, "schema": {"openAPIV3Schema": {
            "type": "string", "example": "kindest", "x-metadata": copy.deepcopy(_IMAGE_REPOSITORY_METADATA)}},
         "deprecatedV1Beta1Metadata": copy.deepcopy(_IMAGE_REPOSITORY_METADATA)},
    ]}


# -- upgrade plan --------------------------------------------------------------------------------------------

# upstream's test extension plans with the versions kind publishes images for; capd-py's are the ones it builds
# node images for (the Makefile's K8S_VERSIONS), overridable for other builds
VERSIONS_ENV = "CAPD_PY_TEST_EXTENSION_VERSIONS"
DEFAULT_VERSIONS = ("v1.34.4", "v1.35.4")


def _semver_key(version: str) -> versions.Version:
    """semver.ParseTolerant's version, ordered as semver orders (api/versions.Version)."""
    return versions.parse("v" + parse_tolerant(version))


def upgrade_plan(versions: list[str] | tuple[str, ...], to_version: str, from_control_plane: str
                 ) -> list[str]:
    """The control plane's upgrade plan (upstream's GetUpgradePlanFromClusterClassVersions): from the versions
    after the current one up to the desired one, the newest of each minor; [] when already there. The workers'
    plan is left to the core (upstream leaves it empty too)."""
    try:
        desired = _semver_key(to_version)
    except ValueError as exc:
        raise ValueError(f"failed to parse desired version: {exc}") from exc
    try:
        current = _semver_key(from_control_plane)
    except ValueError as exc:
        raise ValueError(f"failed to parse current ControlPlane version: {exc}") from exc
    if current == desired:
        return []
    candidates = []
    for v in sorted(versions, key=_semver_key):
        key = _semver_key(v)
        if key <= current:
            continue
        if key > desired:
            break
        candidates.append(v)
        if key == desired:
            break
    plan: list[str] = []
    minor = current.minor
    if minor == desired.minor and candidates:  # a patch upgrade: the minor loop below would not add it
        plan.append(candidates[0])
    for v in candidates:
        v_minor = _semver_key(v).minor
        if v_minor > minor:
            plan.append(v)
        elif v_minor == minor and plan:
            plan[-1] = v
        minor = v_minor
    return plan


def generate_upgrade_plan(request: Mapping[str, Any]) -> dict[str, Any]:
    """GenerateUpgradePlan (upstream handlers/upgradeplan): the plan over the known versions plus the target. The
    target joins the list in version order (upstream appends it last, after versions newer than it, where the walk
    stops before reaching it)."""
    to_version = str(request.get("toKubernetesVersion") or "")
    configured = os.environ.get(VERSIONS_ENV)
    versions = [v.strip() for v in configured.split(",") if v.strip()] if configured else list(DEFAULT_VERSIONS)
    if to_version not in versions:
        versions.append(to_version)
    try:
        plan = upgrade_plan(versions, to_version, str(request.get("fromControlPlaneKubernetesVersion") or ""))
    except ValueError as exc:
        return {"status": FAILURE, "message": str(exc)}
    out: dict[str, Any] = {"status": SUCCESS}
    if plan:  # upstream's empty lists are omitted on the wire (omitempty)
        out["controlPlaneUpgrades"] = [{"version": v} for v in plan]
    return out


# -- the extension -------------------------------------------------------------------------------------------

# (handler name, hook, the request fields whose values make the ConfigMap key) as upstream's main.go registers them
LIFECYCLE: tuple[tuple[str, Hook, tuple[str, ...]], ...] = (
    ("before-cluster-create", runtime_hooks.BEFORE_CLUSTER_CREATE, ()),
    ("after-control-plane-initialized", runtime_hooks.AFTER_CONTROL_PLANE_INITIALIZED, ()),
    ("before-cluster-upgrade", runtime_hooks.BEFORE_CLUSTER_UPGRADE, ("fromKubernetesVersion", "toKubernetesVersion")),
    ("before-control-plane-upgrade", runtime_hooks.BEFORE_CONTROL_PLANE_UPGRADE,
     ("fromKubernetesVersion", "toKubernetesVersion")),
    ("after-control-plane-upgrade", runtime_hooks.AFTER_CONTROL_PLANE_UPGRADE, ("kubernetesVersion",)),
    ("before-workers-upgrade", runtime_hooks.BEFORE_WORKERS_UPGRADE, ("fromKubernetesVersion", "toKubernetesVersion")),
    ("after-workers-upgrade", runtime_hooks.AFTER_WORKERS_UPGRADE, ("kubernetesVersion",)),
    ("after-cluster-upgrade", runtime_hooks.AFTER_CLUSTER_UPGRADE, ("kubernetesVersion",)),
    ("before-cluster-delete", runtime_hooks.BEFORE_CLUSTER_DELETE, ()),
)


def _lifecycle_handler(responses: HookResponses, hook: Hook, fields: tuple[str, ...]
                       ) -> Callable[[Mapping[str, Any]], Any]:
    async def handle(request: Mapping[str, Any]) -> dict[str, Any]:
        return await responses.answer(hook, request, [str(request.get(f) or "") for f in fields])
    handle.__name__ = f"do_{hook.name}"
    return handle


def new_extension(kube: KubeSource | None = None, name: str = DEFAULT_EXTENSION_CONFIG_NAME,
                  calls: list[HookCall] | None = None) -> Extension:
    """The test extension; `kube` (or a factory) reaches the management cluster holding the hook ConfigMaps; the
    lifecycle calls it answers (and records) are appended to `calls` in order."""
    # the manifest's settings are upstream e2e's (its ExtensionConfig), under whatever name it is registered
    ext = Extension(name=name, settings={EXTENSION_CONFIG_NAME_KEY: "{name}", "disableInPlaceUpdates": "true",
                                         DEFAULT_ALL_HANDLERS_TO_BLOCKING_KEY: "true"})
    responses = HookResponses(kube, calls)
    ext.add(runtime_hooks.GENERATE_PATCHES, "generate-patches", generate_patches)
    ext.add(runtime_hooks.VALIDATE_TOPOLOGY, "validate-topology", validate_topology)
    ext.add(runtime_hooks.DISCOVER_VARIABLES, "discover-variables", discover_variables)
    ext.add(runtime_hooks.GENERATE_UPGRADE_PLAN, "generate-upgrade-plan", generate_upgrade_plan)
    for handler_name, hook, fields in LIFECYCLE:
        ext.add(hook, handler_name, _lifecycle_handler(responses, hook, fields))
    return ext


def extension_config(name: str, ca_pem: bytes, url: str, namespaces: tuple[str, ...] | list[str] = (),
                     default_all_handlers_to_blocking: bool = True) -> dict[str, Any]:
    """The ExtensionConfig upstream's runtime-SDK e2e registers (its settings; only Clusters in `namespaces` when
    given), here by URL instead of by Service."""
    return manifests.extension_config(
        name, ca_pem, url=url, namespace_selector=manifests.for_namespaces(*namespaces) if namespaces else None,
        settings={EXTENSION_CONFIG_NAME_KEY: name, "disableInPlaceUpdates": "true",
                  DEFAULT_ALL_HANDLERS_TO_BLOCKING_KEY: str(default_all_handlers_to_blocking).lower()})


async def serve_test_extension(kube: KubeSource | None, address: str, port: int = 0, *, cert_dir: str | Path,
                               name: str = DEFAULT_EXTENSION_CONFIG_NAME, namespaces: tuple[str, ...] = (),
                               default_all_handlers_to_blocking: bool = True,
                               calls: list[HookCall] | None = None) -> tuple[ExtensionServer, dict[str, Any]]:
    """For e2e tests: the test extension served on address:port (the address the management cluster's API server
    and controllers reach, e.g. the host on the management cluster's docker network) and the ExtensionConfig that
    registers it there, as upstream's e2e builds it; stop the server with `await server.stop()`. The lifecycle
    calls answered are appended to `calls`, in order."""
    server = await serve(new_extension(kube, name, calls), address, port, cert_dir=cert_dir)
    return server, extension_config(name, server.certs.ca_pem, server.url, namespaces,
                                    default_all_handlers_to_blocking)


# `capd-py extension serve capd_py.testing.test_extension:extension`
extension = new_extension()
