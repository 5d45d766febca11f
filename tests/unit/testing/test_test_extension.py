"""The test extension's decisions: lifecycle answers from / records into the hook-responses ConfigMap (an in-memory
stand-in for the management cluster here; tests/integration/testing/test_test_extension_envtest.py uses a real API
server), and the topology-mutation handlers on upstream's runtime-SDK ClusterClass templates."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import runtime_hooks
from capd_py.api.gvk import GVK
from capd_py.kube.client import KubeError
from capd_py.reconcile.topology.patches import apply_json_patch
from capd_py.runtime_extension.patches import decode_patch
from capd_py.testing import test_extension as te

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "upstream"
API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"
CM = "c1-ext-test-extension-hookresponses"


class MemKube:
    """ConfigMaps in memory, with the API server's answers the handlers depend on."""

    def __init__(self, namespaces: tuple[str, ...] = ("ns",)) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.namespaces = set(namespaces)
        self.patches: list[dict[str, Any]] = []

    async def get(self, gvk: GVK, namespace: str, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.objects.get((namespace, name)))

    async def create(self, gvk: GVK, obj: dict[str, Any]) -> dict[str, Any]:
        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key[0] not in self.namespaces:
            raise KubeError(404, "NotFound", f'namespaces "{key[0]}" not found')
        if key in self.objects:
            raise KubeError(409, "AlreadyExists", f'configmaps "{key[1]}" already exists')
        self.objects[key] = copy.deepcopy(obj)
        return obj

    async def merge_patch(self, gvk: GVK, namespace: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(patch)
        obj = self.objects[(namespace, name)]
        obj.setdefault("data", {}).update(patch["data"])
        return obj

    def data(self, name: str = CM) -> dict[str, str]:
        return dict(self.objects[("ns", name)].get("data") or {})


def cluster() -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {"name": "c1", "namespace": "ns"}}


def request(hook: str, settings: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": f"{hook}Request", "cluster": cluster(),
            "settings": {"extensionConfigName": "ext"} if settings is None else settings, **fields}


async def call(kube: MemKube, hook: str, handler: str, body: dict[str, Any]) -> dict[str, Any]:
    ext = te.new_extension(kube)  # type: ignore[arg-type]
    out = await ext.call(runtime_hooks.path(hook, handler), json.dumps(body).encode())
    assert out is not None
    return out


# -- lifecycle hooks -----------------------------------------------------------------------------------------

async def test_a_missing_configmap_is_created_and_blocking_by_default_when_the_settings_say_so() -> None:
    kube = MemKube()
    out = await call(kube, "BeforeClusterCreate", "before-cluster-create",
                     request("BeforeClusterCreate", {"extensionConfigName": "ext",
                                                     "defaultAllHandlersToBlocking": "true"}))
    assert out == {"apiVersion": API, "kind": "BeforeClusterCreateResponse", "status": "Success",
                   "retryAfterSeconds": 5}
    assert kube.data() == {"BeforeClusterCreate-actualResponseStatus": "Status: Success, RetryAfterSeconds: 5"}


async def test_without_the_blocking_setting_hooks_proceed_and_non_blocking_ones_record_the_bare_status() -> None:
    kube = MemKube()
    out = await call(kube, "BeforeClusterDelete", "before-cluster-delete", request("BeforeClusterDelete"))
    assert (out["status"], out["retryAfterSeconds"]) == ("Success", 0)
    out = await call(kube, "AfterControlPlaneInitialized", "after-control-plane-initialized",
                     request("AfterControlPlaneInitialized"))
    assert out == {"apiVersion": API, "kind": "AfterControlPlaneInitializedResponse", "status": "Success"}
    assert kube.data() == {"BeforeClusterDelete-actualResponseStatus": "Status: Success, RetryAfterSeconds: 0",
                           "AfterControlPlaneInitialized-actualResponseStatus": "Success"}


@pytest.mark.parametrize(("hook", "handler", "fields", "key"), [
    ("BeforeClusterUpgrade", "before-cluster-upgrade",
     {"fromKubernetesVersion": "v1.34.4", "toKubernetesVersion": "v1.35.4+capd"},
     "BeforeClusterUpgrade-v1.34.4-v1.35.4_capd"),
    ("BeforeControlPlaneUpgrade", "before-control-plane-upgrade",
     {"fromKubernetesVersion": "v1.34.4", "toKubernetesVersion": "v1.35.4"},
     "BeforeControlPlaneUpgrade-v1.34.4-v1.35.4"),
    ("AfterControlPlaneUpgrade", "after-control-plane-upgrade", {"kubernetesVersion": "v1.35.4"},
     "AfterControlPlaneUpgrade-v1.35.4"),
    ("BeforeWorkersUpgrade", "before-workers-upgrade",
     {"fromKubernetesVersion": "v1.34.4", "toKubernetesVersion": "v1.35.4"}, "BeforeWorkersUpgrade-v1.34.4-v1.35.4"),
    ("AfterWorkersUpgrade", "after-workers-upgrade", {"kubernetesVersion": "v1.35.4"}, "AfterWorkersUpgrade-v1.35.4"),
    ("AfterClusterUpgrade", "after-cluster-upgrade", {"kubernetesVersion": "v1.35.4"}, "AfterClusterUpgrade-v1.35.4"),
])
async def test_upgrade_hooks_key_their_answers_by_versions(hook: str, handler: str, fields: dict[str, str],
                                                           key: str) -> None:
    kube = MemKube()
    kube.objects[("ns", CM)] = {"metadata": {"name": CM, "namespace": "ns"},
                                "data": {f"{key}-preloadedResponse": '{"Status": "Success", "RetryAfterSeconds": 9}'}}
    out = await call(kube, hook, handler, request(hook, None, **fields))
    assert (out["status"], out["retryAfterSeconds"]) == ("Success", 9)
    assert kube.data()[f"{key}-actualResponseStatus"] == "Status: Success, RetryAfterSeconds: 9"


async def test_preloaded_answers_are_read_as_upstream_reads_them() -> None:
    kube = MemKube()
    kube.objects[("ns", CM)] = {"metadata": {"name": CM, "namespace": "ns"}, "data": {
        "BeforeClusterCreate-preloadedResponse": '{"Status": "Failure", "Message": "not today"}',
        "BeforeClusterDelete-preloadedResponse": "status: Success\nretryAfterSeconds: 3\nunknown: x\n",
        "AfterControlPlaneInitialized-preloadedResponse": '{"Status": "Success", "RetryAfterSeconds": 5}'}}
    out = await call(kube, "BeforeClusterCreate", "before-cluster-create", request("BeforeClusterCreate"))
    assert (out["status"], out["message"], out["retryAfterSeconds"]) == ("Failure", "not today", 0)
    out = await call(kube, "BeforeClusterDelete", "before-cluster-delete", request("BeforeClusterDelete"))
    assert (out["status"], out["retryAfterSeconds"]) == ("Success", 3)
    out = await call(kube, "AfterControlPlaneInitialized", "after-control-plane-initialized",
                     request("AfterControlPlaneInitialized"))
    assert "retryAfterSeconds" not in out  # not a field of that response
    assert kube.data()["BeforeClusterCreate-actualResponseStatus"] == "Status: Failure, RetryAfterSeconds: 0"


async def test_the_e2e_unblocking_patch_turns_a_blocking_hook_into_a_success() -> None:
    kube = MemKube()
    settings = {"extensionConfigName": "ext", "defaultAllHandlersToBlocking": "true"}
    first = await call(kube, "BeforeClusterDelete", "before-cluster-delete", request("BeforeClusterDelete", settings))
    assert first["retryAfterSeconds"] == 5
    # what upstream's runtimeHookTestHandler patches in
    kube.objects[("ns", CM)]["data"]["BeforeClusterDelete-preloadedResponse"] = '{"Status": "Success"}'
    second = await call(kube, "BeforeClusterDelete", "before-cluster-delete",
                        request("BeforeClusterDelete", settings))
    assert (second["status"], second["retryAfterSeconds"]) == ("Success", 0)
    assert kube.data()["BeforeClusterDelete-actualResponseStatus"] == "Status: Success, RetryAfterSeconds: 0"


async def test_every_answered_call_is_listed_in_order_with_what_it_recorded() -> None:
    kube = MemKube()
    calls: list[te.HookCall] = []
    ext = te.new_extension(kube, calls=calls)  # type: ignore[arg-type]
    settings = {"extensionConfigName": "ext", "defaultAllHandlersToBlocking": "true"}

    async def ask(hook: str, handler: str, **fields: Any) -> None:
        await ext.call(runtime_hooks.path(hook, handler), json.dumps(request(hook, settings, **fields)).encode())

    await ask("BeforeClusterCreate", "before-cluster-create")
    await ask("BeforeClusterCreate", "before-cluster-create")
    kube.objects[("ns", CM)]["data"]["BeforeClusterCreate-preloadedResponse"] = '{"Status": "Success"}'
    await ask("BeforeClusterCreate", "before-cluster-create")
    await ask("AfterControlPlaneInitialized", "after-control-plane-initialized")
    await ask("AfterWorkersUpgrade", "after-workers-upgrade", kubernetesVersion="v1.35.4")
    # the ConfigMap keeps each key's last answer only; the list keeps every call, in order
    assert calls == [te.HookCall("BeforeClusterCreate", "Status: Success, RetryAfterSeconds: 5"),
                     te.HookCall("BeforeClusterCreate", "Status: Success, RetryAfterSeconds: 5"),
                     te.HookCall("BeforeClusterCreate", "Status: Success, RetryAfterSeconds: 0"),
                     te.HookCall("AfterControlPlaneInitialized", "Success"),
                     te.HookCall("AfterWorkersUpgrade-v1.35.4", "Status: Success, RetryAfterSeconds: 5")]
    # a call that could not be answered from the ConfigMap is not listed
    await ext.call(runtime_hooks.path("BeforeClusterDelete", "before-cluster-delete"),
                   json.dumps(request("BeforeClusterDelete", {})).encode())
    assert len(calls) == 5


async def test_failures_to_read_are_failures_and_nothing_is_recorded() -> None:
    kube = MemKube()
    out = await call(kube, "BeforeClusterCreate", "before-cluster-create", request("BeforeClusterCreate", {}))
    assert (out["status"], out["message"]) == ("Failure", "extensionConfigName mest be set in settings")
    assert not kube.objects
    kube.objects[("ns", CM)] = {"metadata": {"name": CM, "namespace": "ns"},
                                "data": {"BeforeClusterCreate-preloadedResponse": '{"RetryAfterSeconds": "soon"}'}}
    out = await call(kube, "BeforeClusterCreate", "before-cluster-create", request("BeforeClusterCreate"))
    assert out["status"] == "Failure"
    assert out["message"].startswith('failed to read "BeforeClusterCreate" response information from ConfigMap')
    assert "BeforeClusterCreate-actualResponseStatus" not in kube.data()
    body = request("BeforeClusterCreate")
    body["cluster"]["metadata"]["namespace"] = "gone"
    out = await call(kube, "BeforeClusterCreate", "before-cluster-create", body)
    assert out["message"] == f'failed to create the ConfigMap gone/{CM}: namespaces "gone" not found'


def test_the_extension_serves_upstreams_handler_names() -> None:
    ext = te.new_extension(MemKube())  # type: ignore[arg-type]
    assert {(r.name, r.hook.name) for r in ext.registrations} == {
        ("generate-patches", "GeneratePatches"), ("validate-topology", "ValidateTopology"),
        ("discover-variables", "DiscoverVariables"), ("generate-upgrade-plan", "GenerateUpgradePlan"),
        ("before-cluster-create", "BeforeClusterCreate"),
        ("after-control-plane-initialized", "AfterControlPlaneInitialized"),
        ("before-cluster-upgrade", "BeforeClusterUpgrade"),
        ("before-control-plane-upgrade", "BeforeControlPlaneUpgrade"),
        ("after-control-plane-upgrade", "AfterControlPlaneUpgrade"), ("before-workers-upgrade", "BeforeWorkersUpgrade"),
        ("after-workers-upgrade", "AfterWorkersUpgrade"), ("after-cluster-upgrade", "AfterClusterUpgrade"),
        ("before-cluster-delete", "BeforeClusterDelete")}
    assert ext.manifest_settings("my-ext") == {"extensionConfigName": "my-ext", "disableInPlaceUpdates": "true",
                                               "defaultAllHandlersToBlocking": "true"}


def test_the_module_extension_needs_no_cluster_until_a_lifecycle_hook_is_called() -> None:
    assert te.extension.name == "k8s-upgrade-with-runtimesdk"
    assert te.extension.registration(runtime_hooks.path("GeneratePatches", "generate-patches")) is not None


# -- topology mutation ---------------------------------------------------------------------------------------

def variable(name: str, value: Any) -> dict[str, Any]:
    return {"name": name, "value": value}


def item(uid: str, obj: dict[str, Any], variables: list[dict[str, Any]], holder_api: str = "cluster.x-k8s.io/v1beta2"
         ) -> dict[str, Any]:
    return {"uid": uid, "object": obj, "variables": variables,
            "holderReference": {"apiVersion": holder_api, "kind": "Cluster", "namespace": "ns", "name": "c1",
                                "fieldPath": "spec.infrastructureRef"}}


def typed(kind: str, group: str, spec: dict[str, Any] | None = None, version: str = "v1beta2") -> dict[str, Any]:
    obj: dict[str, Any] = {"apiVersion": f"{group}.cluster.x-k8s.io/{version}", "kind": kind}
    if spec is not None:
        obj["spec"] = spec
    return obj


CP_VARS = [variable("builtin", {"controlPlane": {"version": "v1.23.0"}}), variable("kubeadmControlPlaneMaxSurge", "3")]
MD_VARS = [variable("builtin", {"machineDeployment": {"class": "default-worker", "version": "v1.23.0"}})]
MP_VARS = [variable("builtin", {"machinePool": {"class": "default-worker", "version": "v1.23.0"}})]


def ops_of(response: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    assert response["status"] == "Success", response.get("message")
    return {i["uid"]: decode_patch(i["patch"]) for i in response["items"]}


def test_generate_patches_as_upstreams_handler_test() -> None:
    empty_template: dict[str, Any] = {"template": {"spec": {}}}
    response = te.generate_patches({"items": [
        item("1", typed("KubeadmControlPlaneTemplate", "controlplane"), CP_VARS),
        item("2", typed("DockerMachineTemplate", "infrastructure", copy.deepcopy(empty_template)), CP_VARS),
        item("3", typed("DockerMachineTemplate", "infrastructure", copy.deepcopy(empty_template)), MD_VARS),
        item("4", typed("DockerClusterTemplate", "infrastructure", {"template": {"spec": {"loadBalancer": {}}}}),
             [variable("imageRepository", "docker.io")]),
        item("6", typed("DockerMachinePoolTemplate", "infrastructure", {"template": {"spec": {"template": {}}}}),
             MP_VARS)]})
    args_v2 = [{"name": "v", "value": "2"}]
    kubelet = [{"name": "v", "value": "2"}, {"name": "node-labels", "value": "kubernetesVersion=v1.23.0"}]
    assert ops_of(response) == {
        "1": [{"op": "add", "path": "/spec", "value": {"template": {"spec": {
            "kubeadmConfigSpec": {
                "clusterConfiguration": {"apiServer": {"extraArgs": args_v2},
                                         "controllerManager": {"extraArgs": args_v2},
                                         "scheduler": {"extraArgs": args_v2}},
                "initConfiguration": {"nodeRegistration": {"kubeletExtraArgs": kubelet}},
                "joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": kubelet}}},
            "rollout": {"strategy": {"rollingUpdate": {"maxSurge": 3}, "type": "RollingUpdate"}}}}}}],
        "2": [{"op": "add", "path": "/spec/template/spec/customImage", "value": "kindest/node:v1.23.0"}],
        "3": [{"op": "add", "path": "/spec/template/spec/customImage", "value": "kindest/node:v1.23.0"}],
        "4": [{"op": "add", "path": "/spec/template/spec/loadBalancer/imageRepository", "value": "docker.io"}],
        "6": [{"op": "add", "path": "/spec/template/spec/template/customImage", "value": "kindest/node:v1.23.0"}]}
    assert {i["patchType"] for i in response["items"]} == {"JSONPatch"}


def quick_start_templates(name: str = "e2e-clusterclass-quick-start-runtimesdk.yaml") -> dict[str, dict[str, Any]]:
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", (FIXTURES / name).read_text())
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(text)
            if d and d["kind"] != "ClusterClass"}


def test_generate_patches_on_the_runtimesdk_clusterclass_templates_keeps_what_they_say() -> None:
    t = quick_start_templates()
    global_vars = [variable("builtin", {"cluster": {"name": "c1", "namespace": "ns",
                                                    "topology": {"version": "v1.35.4"}}}),
                   variable("imageRepository", "kindest"), variable("kubeadmControlPlaneMaxSurge", "1"),
                   variable("files", [{"path": "/etc/hello", "content": "hi"}])]
    cp_vars = [variable("builtin", {"controlPlane": {"version": "v1.35.4", "replicas": 1}})]
    md_vars = [variable("builtin", {"machineDeployment": {"version": "v1.34.4", "class": "default-worker"}})]
    mp_vars = [variable("builtin", {"machinePool": {"version": "v1.34.4", "class": "default-worker"}})]
    objs = {
        "dc": t["DockerClusterTemplate/quick-start-cluster"],
        "kcp": t["KubeadmControlPlaneTemplate/quick-start-control-plane"],
        "cp-dmt": t["DockerMachineTemplate/quick-start-control-plane"],
        "md-dmt": t["DockerMachineTemplate/quick-start-default-worker-machinetemplate"],
        "mp-dmpt": t["DockerMachinePoolTemplate/quick-start-default-worker-machinepooltemplate"],
        "kct": t["KubeadmConfigTemplate/quick-start-default-worker-bootstraptemplate"]}
    item_vars = {"dc": [], "kcp": cp_vars, "cp-dmt": cp_vars, "md-dmt": md_vars, "mp-dmpt": mp_vars, "kct": md_vars}
    response = te.generate_patches({"variables": global_vars,
                                    "items": [item(k, copy.deepcopy(o), item_vars[k]) for k, o in objs.items()]})
    patched = {uid: apply_json_patch(copy.deepcopy(objs[uid]), ops) for uid, ops in ops_of(response).items()}

    assert patched["dc"]["spec"]["template"]["spec"]["loadBalancer"] == {"imageRepository": "kindest"}
    assert len(patched["dc"]["spec"]["template"]["spec"]["failureDomains"]) == 8
    kcs = patched["kcp"]["spec"]["template"]["spec"]["kubeadmConfigSpec"]
    assert kcs["clusterConfiguration"]["apiServer"] == {
        "certSANs": ["localhost", "127.0.0.1", "0.0.0.0", "host.docker.internal"],
        "extraArgs": [{"name": "v", "value": "2"}]}
    assert kcs["clusterConfiguration"]["encryptionAlgorithm"] == "RSA-4096"
    assert kcs["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"][1] == {
        "name": "node-labels", "value": "kubernetesVersion=v1.35.4"}
    assert kcs["files"] == [{"path": "/etc/hello", "content": "hi", "owner": "root:root", "permissions": "0600"}]
    assert patched["kcp"]["spec"]["template"]["spec"]["rollout"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}
    assert patched["kcp"]["spec"]["template"]["spec"]["machineTemplate"] == {
        "spec": {"deletion": {"nodeDrainTimeoutSeconds": 1}}}
    assert patched["cp-dmt"]["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.35.4"
    assert patched["cp-dmt"]["spec"]["template"]["spec"]["extraMounts"] == objs["cp-dmt"]["spec"]["template"][
        "spec"]["extraMounts"]
    assert patched["md-dmt"]["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"
    assert patched["mp-dmpt"]["spec"]["template"]["spec"]["template"]["customImage"] == "kindest/node:v1.34.4"
    kct = patched["kct"]["spec"]["template"]["spec"]
    assert kct["joinConfiguration"] == {"nodeRegistration": {"kubeletExtraArgs": [{"name": "v", "value": "2"}]}}
    assert kct["files"] == kcs["files"]


def test_generate_patches_on_v1beta1_templates_uses_maps_and_rollout_strategy() -> None:
    t = quick_start_templates("e2e-clusterclass-quick-start-runtimesdk-v1beta1.yaml")
    kcp = next(o for k, o in t.items() if k.startswith("KubeadmControlPlaneTemplate/"))
    kct = next(o for k, o in t.items() if k.startswith("KubeadmConfigTemplate/"))
    vars_ = [variable("builtin", {"controlPlane": {"version": "v1.34.4"}}),
             variable("kubeadmControlPlaneMaxSurge", "20%")]
    response = te.generate_patches({"items": [item("kcp", copy.deepcopy(kcp), vars_),
                                              item("kct", copy.deepcopy(kct), [])]})
    ops = ops_of(response)
    spec = apply_json_patch(copy.deepcopy(kcp), ops["kcp"])["spec"]["template"]["spec"]
    assert spec["kubeadmConfigSpec"]["clusterConfiguration"]["scheduler"]["extraArgs"]["v"] == "2"
    assert spec["kubeadmConfigSpec"]["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] == {
        **(kcp["spec"]["template"]["spec"]["kubeadmConfigSpec"].get("initConfiguration", {}).get(
            "nodeRegistration", {}).get("kubeletExtraArgs") or {}),
        "v": "2", "node-labels": "kubernetesVersion=v1.34.4"}
    assert spec["rolloutStrategy"]["rollingUpdate"]["maxSurge"] == "20%"
    kct_spec = apply_json_patch(copy.deepcopy(kct), ops["kct"])["spec"]["template"]["spec"]
    assert kct_spec["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]["v"] == "2"


V1_14 = Path(__file__).resolve().parents[2] / "fixtures" / "upstream-v1.14"
TOP = {"labels": {"top-level-label-1": "top-level-label-value-1"},
       "annotations": {"top-level-annotation-1": "top-level-annotation-value-1"}}


def test_generate_patches_of_dev_templates_as_upstream_v1_14() -> None:
    """upstream v1.14's patches of the Dev* templates: the top-level marks, and with the docker backend the load
    balancer's imageRepository and the node image by version (control plane, MachineDeployment, MachinePool)."""
    docker: dict[str, Any] = {"template": {"spec": {"backend": {"docker": {"extraMounts": []}}}}}
    response = te.generate_patches({"items": [
        item("dc", typed("DevClusterTemplate", "infrastructure", {"template": {"spec": {"backend": {"docker": {}}}}}),
             [variable("imageRepository", "kindest")]),
        item("cp", typed("DevMachineTemplate", "infrastructure", copy.deepcopy(docker)), CP_VARS),
        item("md", typed("DevMachineTemplate", "infrastructure", copy.deepcopy(docker)), MD_VARS),
        item("mp", typed("DevMachinePoolTemplate", "infrastructure", copy.deepcopy(docker)), MP_VARS)]})
    ops = {uid: sorted(o, key=lambda op: op["path"]) for uid, o in ops_of(response).items()}
    assert ops["dc"] == [{"op": "add", "path": "/spec/template/metadata", "value": TOP},
                         {"op": "add", "path": "/spec/template/spec/backend/docker/loadBalancer",
                          "value": {"imageRepository": "kindest"}}]
    for uid in ("cp", "md"):
        assert ops[uid] == [{"op": "add", "path": "/metadata", "value": TOP},
                            {"op": "add", "path": "/spec/template/spec/backend/docker/customImage",
                             "value": "kindest/node:v1.23.0"}]
    assert ops["mp"] == [{"op": "add", "path": "/spec/template/metadata", "value": TOP},
                         {"op": "add", "path": "/spec/template/spec/backend/docker/customImage",
                          "value": "kindest/node:v1.23.0"}]


def test_generate_patches_of_the_v1_14_in_memory_class_marks_its_dev_templates_only() -> None:
    """upstream v1.14 e2e's clusterclass-in-memory (inMemory backends, an empty KCP template and KubeadmConfigTemplate):
    the Dev* templates get the marks and no node image (no docker backend); no imageRepository: the DevClusterTemplate
    is left as it is; the kubeadm templates get v1.13's patches (kubelet v=2, the node label)."""
    text = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", (V1_14 / "e2e-clusterclass-in-memory.yaml").read_text())
    t = {f"{d['kind']}/{d['metadata']['name']}": d for d in yaml.safe_load_all(text)
         if d and d["kind"] != "ClusterClass"}
    objs = {"dc": t["DevClusterTemplate/in-memory-cluster"],
            "kcp": t["KubeadmControlPlaneTemplate/in-memory-control-plane"],
            "cp": t["DevMachineTemplate/in-memory-control-plane"],
            "md": t["DevMachineTemplate/in-memory-default-worker-machinetemplate"],
            "kct": t["KubeadmConfigTemplate/in-memory-default-worker-bootstraptemplate"]}
    assert "spec" not in objs["kcp"] and "spec" not in objs["kct"]
    item_vars = {"dc": [], "kcp": CP_VARS, "cp": CP_VARS, "md": MD_VARS, "kct": MD_VARS}
    response = te.generate_patches({"items": [item(k, copy.deepcopy(o), item_vars[k]) for k, o in objs.items()]})
    patched = {uid: apply_json_patch(copy.deepcopy(objs[uid]), ops) for uid, ops in ops_of(response).items()}
    assert patched["dc"] == objs["dc"]
    for uid in ("cp", "md"):
        assert patched[uid]["metadata"] == {**objs[uid]["metadata"], **TOP}
        assert patched[uid]["spec"] == objs[uid]["spec"]
    kcs = patched["kcp"]["spec"]["template"]["spec"]["kubeadmConfigSpec"]
    assert kcs["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"] == [
        {"name": "v", "value": "2"}, {"name": "node-labels", "value": "kubernetesVersion=v1.23.0"}]
    assert patched["kct"]["spec"]["template"]["spec"]["joinConfiguration"] == {
        "nodeRegistration": {"kubeletExtraArgs": [{"name": "v", "value": "2"}]}}


def test_dev_templates_at_v1beta1_are_known_and_left_as_they_are() -> None:
    response = te.generate_patches({"items": [
        item("1", typed("DevMachineTemplate", "infrastructure", {"template": {"spec": {}}}, version="v1beta1"), [])]})
    assert ops_of(response) == {"1": []}


@pytest.mark.parametrize(("items", "message"), [
    ([item("1", typed("DevMachineTemplate", "infrastructure", {"template": {"spec": {}}}), [])],
     "error patching DevMachineTemplate: no version variables found for DevMachineTemplate patch"),
    ([item("1", typed("DevMachinePoolTemplate", "infrastructure"), [])],
     "error patching DevMachinePoolTemplate: no version variables found for DevMachinePoolTemplate patch"),
    ([item("1", typed("DevClusterTemplate", "infrastructure"), [variable("imageRepository", 3)])],
     "error patching DevClusterTemplate: could not set DevClusterTemplate loadBalancer imageRepository: "
     "invalid syntax"),
    ([item("1", typed("DevMachinePool", "infrastructure", version="v1beta1"), [])],
     'no kind "DevMachinePool" is registered for version "infrastructure.cluster.x-k8s.io/v1beta1"'),
])
def test_generate_patches_of_dev_templates_failures(items: list[dict[str, Any]], message: str) -> None:
    response = te.generate_patches({"items": items})
    assert response["status"] == "Failure" and response["message"].startswith(message), response


@pytest.mark.parametrize(("items", "message"), [
    ([item("1", typed("DockerMachineTemplate", "infrastructure", {"template": {"spec": {}}}), [])],
     "error patching DockerMachineTemplate: no version variables found for DockerMachineTemplate patch"),
    ([item("1", typed("DockerMachinePoolTemplate", "infrastructure"), [])],
     "error patching DockerMachinePoolTemplate: no version variables found for DockerMachinePoolTemplate patch"),
    ([item("1", typed("KubeadmControlPlaneTemplate", "controlplane"), [])],
     'error patching KubeadmControlPlaneTemplate: could not patch KubeadmControlPlane: could not get '
     'builtin.controlPlane.version: variable "builtin" does not exist'),
    ([item("1", typed("DockerClusterTemplate", "infrastructure"), [variable("imageRepository", 3)])],
     "error patching DockerClusterTemplate: could not set DockerClusterTemplate loadBalancer imageRepository: "
     "invalid syntax"),
    ([item("1", typed("DockerMachineTemplate", "infrastructure"),
           [variable("builtin", {"controlPlane": {"version": "latest"}})])],
     "error patching DockerMachineTemplate: could not parse control plane version: invalid semantic version"),
    ([item("1", {"apiVersion": "infrastructure.example.com/v1", "kind": "FooTemplate"}, [])],
     'no kind "FooTemplate" is registered for version "infrastructure.example.com/v1"'),
    ([item("1", typed("DockerClusterTemplate", "infrastructure"), [], holder_api="a/b/c")],
     'error generating patches - HolderReference apiVersion "a/b/c" is not in valid format: unexpected '
     "GroupVersion string: a/b/c"),
])
def test_generate_patches_failures_name_the_template(items: list[dict[str, Any]], message: str) -> None:
    response = te.generate_patches({"items": items})
    assert response["status"] == "Failure" and response["message"].startswith(message)
    assert "items" not in response


def test_templates_of_known_kinds_without_a_patcher_get_an_empty_patch() -> None:
    response = te.generate_patches({"items": [item("1", typed("DockerCluster", "infrastructure", {}), [])]})
    assert ops_of(response) == {"1": []}


def test_validate_topology_and_discover_variables() -> None:
    assert te.validate_topology({}) == {"status": "Success"}
    out = te.discover_variables({})
    assert [(v["name"], v["required"]) for v in out["variables"]] == [
        ("kubeadmControlPlaneMaxSurge", False), ("files", False), ("imageRepository", True)]
    surge = out["variables"][0]["schema"]["openAPIV3Schema"]
    assert (surge["default"], surge["example"]) == ("", "0")
    assert surge["x-kubernetes-validations"] == [{
        "rule": 'self == "" || self != ""', "messageExpression": "'just a test expression, got %s'.format([self])"}]
    repo = out["variables"][2]
    assert repo["schema"]["openAPIV3Schema"]["x-metadata"] == repo["deprecatedV1Beta1Metadata"] == {
        "labels": {"objects": "DockerCluster"},
        "annotations": {"description": "Gets set at DockerCluster.Spec.Template.Spec.LoadBalancer.ImageRepository"}}


@pytest.mark.parametrize(("version", "image"), [
    ("v1.35.4", "kindest/node:v1.35.4"), ("1.34.4", "kindest/node:v1.34.4"), ("v1.34", "kindest/node:v1.34.0"),
    (" v1.36.0-rc.1+build.2 ", "kindest/node:v1.36.0-rc.1_build.2")])
def test_node_image_by_version(version: str, image: str) -> None:
    assert te.kind_node_image(version) == image


@pytest.mark.parametrize(("versions", "to", "current", "plan"), [
    (["v1.34.4", "v1.35.4"], "v1.35.4", "v1.34.4", ["v1.35.4"]),
    (["v1.33.1", "v1.34.0", "v1.34.4", "v1.35.0", "v1.35.4", "v1.36.1"], "v1.36.1", "v1.33.1",
     ["v1.34.4", "v1.35.4", "v1.36.1"]),
    (["v1.34.0", "v1.34.2", "v1.34.4"], "v1.34.4", "v1.34.0", ["v1.34.4"]),
    (["v1.34.4", "v1.35.5", "v1.35.4"], "v1.35.4", "v1.34.4", ["v1.35.4"]),  # target placed in order
    (["v1.34.4"], "v1.34.4", "v1.34.4", []),
])
def test_upgrade_plan_takes_the_newest_patch_of_each_minor(versions: list[str], to: str, current: str,
                                                           plan: list[str]) -> None:
    assert te.upgrade_plan(versions, to, current) == plan


def test_generate_upgrade_plan_answers_with_the_versions_capd_py_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(te.VERSIONS_ENV, raising=False)
    assert te.generate_upgrade_plan({"fromControlPlaneKubernetesVersion": "v1.34.4",
                                     "toKubernetesVersion": "v1.35.4"}) == {
        "status": "Success", "controlPlaneUpgrades": [{"version": "v1.35.4"}]}
    monkeypatch.setenv(te.VERSIONS_ENV, "v1.33.0,v1.34.1")
    assert te.generate_upgrade_plan({"fromControlPlaneKubernetesVersion": "v1.33.0",
                                     "toKubernetesVersion": "v1.35.2"})["controlPlaneUpgrades"] == [
        {"version": "v1.34.1"}, {"version": "v1.35.2"}]
    bad = te.generate_upgrade_plan({"fromControlPlaneKubernetesVersion": "nope", "toKubernetesVersion": "v1.35.4"})
    assert bad["status"] == "Failure" and bad["message"].startswith("failed to parse current ControlPlane version")


def test_record_problems_checks_upstreams_order_and_blocking() -> None:
    b, r = "Status: Success, RetryAfterSeconds: 1", te.RELEASED
    keys = ["BeforeClusterCreate", "AfterControlPlaneInitialized", "BeforeClusterDelete"]

    def calls(*pairs: tuple[str, str]) -> list[te.HookCall]:
        return [te.HookCall(k, s) for k, s in pairs]
    good = calls(("BeforeClusterCreate", b), ("BeforeClusterCreate", b), ("BeforeClusterCreate", r),
                 ("AfterControlPlaneInitialized", "Success"), ("BeforeClusterDelete", b), ("BeforeClusterDelete", b),
                 ("BeforeClusterDelete", r), ("BeforeClusterDelete", r))
    assert te.record_problems(good, keys, b) == []
    # blocked once only; asked again after letting go with a block; a hook asked before the one before let go
    once = calls(("BeforeClusterCreate", b), ("BeforeClusterCreate", r), ("AfterControlPlaneInitialized", "Success"),
                 ("BeforeClusterDelete", b), ("BeforeClusterDelete", b), ("BeforeClusterDelete", r))
    assert te.record_problems(once, keys, b) == [
        f"BeforeClusterCreate: answered [{b!r}, {r!r}], expected {b!r} at least twice, then {r!r} only"]
    early = calls(("BeforeClusterCreate", b), ("BeforeClusterCreate", b), ("AfterControlPlaneInitialized", "Success"),
                  ("BeforeClusterCreate", r), ("BeforeClusterDelete", b), ("BeforeClusterDelete", b),
                  ("BeforeClusterDelete", r))
    assert te.record_problems(early, keys, b) == [
        "AfterControlPlaneInitialized asked (call 2) before BeforeClusterCreate let go (call 3)"]
    assert te.record_problems(good[:4], keys, b) == [
        "first calls in the order ['BeforeClusterCreate', 'AfterControlPlaneInitialized'], expected "
        f"{keys}", "BeforeClusterDelete: never let go: []"]
