"""External patches and variable discovery (issue 29) through the whole controllers process, in-process, against a
real kube-apiserver, with a FakeRuntimeSDK as the Runtime SDK: the development flavor's ClusterClass gets an external
patch (as upstream's clusterclass-quick-start-runtimesdk.yaml: generate, validate and discover extensions); its
status.variables lists what DiscoverVariables returned (`from: <patch name>`), a Cluster sets that variable, and
the desired KubeadmControlPlane carries what GeneratePatches made of it; a failing validator is the Cluster's
TopologyReconciled=False."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api import runtime_hooks as hooks
from capd_py.api.gvk import CLUSTER, CLUSTER_CLASS, KUBEADM_CONTROL_PLANE
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import NoWorkloads, eventually, operator_in_thread
from capd_py.testing.runtime_sdk_fake import FakeRuntimeSDK

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

NAME = "rsdk"
GEN, VAL, DISC = "generate-patches.rsdk-ext", "validate-topology.rsdk-ext", "discover-variables.rsdk-ext"
SAN = "rsdk.example.com"


def discover(_req: Mapping[str, Any]) -> Mapping[str, Any]:
    return hooks.response(hooks.DISCOVER_VARIABLES, variables=[
        {"name": "apiServerSAN", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}}])


def generate(req: Mapping[str, Any]) -> Mapping[str, Any]:
    """The control plane template gets the `apiServerSAN` variable as one more certSAN."""
    san = next(v["value"] for v in req["variables"] if v["name"] == "apiServerSAN")
    items = []
    for it in req["items"]:
        if it["holderReference"]["fieldPath"] == "spec.controlPlaneRef":
            ops = [{"op": "add", "value": san,
                    "path": "/spec/template/spec/kubeadmConfigSpec/clusterConfiguration/apiServer/certSANs/-"}]
            items.append({"uid": it["uid"], "patchType": "JSONPatch",
                          "patch": base64.b64encode(json.dumps(ops).encode()).decode()})
    return hooks.response(hooks.GENERATE_PATCHES, items=items)


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[tuple[Manager, FakeRuntimeSDK]]:
    sdk = FakeRuntimeSDK()
    sdk.register(DISC, hooks.DISCOVER_VARIABLES, discover)
    sdk.register(GEN, hooks.GENERATE_PATCHES, generate)
    sdk.register(VAL, hooks.VALIDATE_TOPOLOGY)

    def use_sdk(m: Manager) -> None:
        m.ctx.runtime_sdk = sdk
    kube = envtest.kube()
    try:
        # no workload API servers: the test is about the objects the topology writes, not the machines
        async with operator_in_thread(str(envtest.kubeconfig_path), FakeRuntime(), workload=NoWorkloads(kube),
                                      on_manager=use_sdk) as m:
            yield m, sdk
    finally:
        kube.close()


async def test_discovered_variables_and_generated_patches_reach_the_class_and_the_cluster(
        operator: tuple[Manager, FakeRuntimeSDK], kube: Kube, namespace: str) -> None:
    _, sdk = operator
    docs = parse_documents(generate_cluster(NAME, namespace=namespace, flavor="development",
                                            control_plane_machine_count=1, worker_machine_count=1, env={}))
    for d in docs:
        if d["kind"] == "ClusterClass":
            d["spec"]["patches"].append({"name": "test-patch", "external": {
                "generatePatchesExtension": GEN, "validateTopologyExtension": VAL, "discoverVariablesExtension": DISC,
                "settings": {"flavor": "test"}}})
            class_name = d["metadata"]["name"]
        if d["kind"] == "Cluster":
            d["spec"]["topology"]["variables"].append({"name": "apiServerSAN", "value": SAN})
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def state() -> Any:
        cc = await kube.get(CLUSTER_CLASS, namespace, class_name)
        c = await kube.get(CLUSTER, namespace, NAME)
        return {"class": (cc or {}).get("status"), "cluster": [
            (x["type"], x["status"], x.get("message")) for x in ((c or {}).get("status") or {}).get("conditions") or []
            if x["type"] == "TopologyReconciled"], "calls": sdk.hook_calls()}

    async def class_ready() -> bool:
        cc = await kube.get(CLUSTER_CLASS, namespace, class_name)
        return cc is not None and cond.is_true(cc, "VariablesReady") and any(
            v["name"] == "apiServerSAN" for v in (cc.get("status") or {}).get("variables") or [])
    await eventually(class_ready, 60, "the ClusterClass lists the discovered variable", state)
    cc = await kube.get(CLUSTER_CLASS, namespace, class_name)
    assert cc is not None
    by_name = {v["name"]: v for v in cc["status"]["variables"]}
    assert by_name["apiServerSAN"]["definitions"] == [
        {"from": "test-patch", "required": True, "schema": {"openAPIV3Schema": {"type": "string"}}}]
    assert {d["from"] for d in by_name["podSecurityStandard"]["definitions"]} == {"inline"}
    [(_, _, discovery)] = [c for c in sdk.calls if c[0] == "DiscoverVariables"][:1]
    assert discovery["settings"] == {"flavor": "test"}

    async def patched() -> bool:
        c = await kube.get(CLUSTER, namespace, NAME)
        ref = ((c or {}).get("spec") or {}).get("controlPlaneRef")
        kcp = await kube.get(KUBEADM_CONTROL_PLANE, namespace, ref["name"]) if ref else None
        sans = ((((kcp or {}).get("spec") or {}).get("kubeadmConfigSpec") or {}).get("clusterConfiguration")
                or {}).get("apiServer", {}).get("certSANs") or []
        return SAN in sans
    await eventually(patched, 60, "the KubeadmControlPlane carries the extension's patch", state)
    assert {"GeneratePatches", "ValidateTopology"} <= set(sdk.hook_calls())
    gen_request = next(r for h, _, r in sdk.calls if h == "GeneratePatches")
    assert {i["holderReference"]["namespace"] for i in gen_request["items"]} == {namespace}
    assert gen_request["settings"] == {"flavor": "test"}

    # the validator refuses: TopologyReconciled says which patch and why
    sdk.register(VAL, hooks.VALIDATE_TOPOLOGY,
                 lambda _r: hooks.response(hooks.VALIDATE_TOPOLOGY, hooks.FAILURE, "SAN not allowed"))
    await kube.merge_patch(CLUSTER, namespace, NAME, {"spec": {"topology": {"variables": [
        *[v for v in next(d for d in docs if d["kind"] == "Cluster")["spec"]["topology"]["variables"]
          if v["name"] != "apiServerSAN"], {"name": "apiServerSAN", "value": "other.example.com"}]}}})

    async def refused() -> bool:
        c = await kube.get(CLUSTER, namespace, NAME)
        tc = cond.get(c or {}, "TopologyReconciled")
        return bool(tc and tc["status"] == "False" and tc["reason"] == "ReconcileFailed"
                    and 'validation of patch "test-patch" failed' in tc["message"]
                    and "SAN not allowed" in tc["message"])
    await eventually(refused, 60, "TopologyReconciled=False naming the failed validation", state)
