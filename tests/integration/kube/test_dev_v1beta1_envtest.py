"""The deprecated v1beta1 of the Dev* kinds behind a real kube-apiserver, as upstream v1.14.0 serves it: CRDs,
conversion and admission webhooks as `capd-py init` installs them (capd_py.testing.conversion.started_as_init_does).
Upstream-shaped v1beta1 DevCluster / DevClusterTemplate / DevMachine / DevMachineTemplate manifests (the docker
backend's fields, upstream v1.10.10's in-memory ClusterClass) apply unchanged and read back in both versions;
`kubectl get devclusters.v1beta1.infrastructure.cluster.x-k8s.io` answers; what only v1beta2 can say survives a
v1beta1 edit; the served v1beta1 version equals upstream v1.14.0's (schema field by field, printer columns,
subresources, served / storage / deprecated)."""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import gvk
from capd_py.api.conversion import DATA_ANNOTATION, to_hub
from capd_py.kube.client import Kube, KubeError
from capd_py.kube.conversion_webhook import V1BETA1_SCHEMAS
from capd_py.testing.conversion import at, create_and_read_back, of, started_as_init_does
from capd_py.testing.envtest import EnvTest

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

ROOT = Path(__file__).resolve().parents[3]
GROUP = "infrastructure.cluster.x-k8s.io"
DEV_V1BETA1 = ROOT / "tests" / "fixtures" / "conversion" / "dev-v1beta1.yaml"
IN_MEMORY_V1BETA1 = ROOT / "tests" / "fixtures" / "upstream" / "v1beta1" / "in-memory.yaml"
SERVED_IN_V1BETA1 = ("devclusters", "devclustertemplates", "devmachines", "devmachinetemplates")


@pytest.fixture(scope="module")
def envtest() -> Iterator[EnvTest]:
    """This module's API server (replaces the shared one for `kube` and `namespace`)."""
    with started_as_init_does() as started:
        yield started


def _manifest(path: Path, namespace: str) -> list[dict[str, Any]]:
    out = []
    for d in yaml.safe_load_all(path.read_text()):
        if d and d["apiVersion"].endswith("cluster.x-k8s.io/v1beta1"):
            d["metadata"]["namespace"] = namespace
            d.pop("status", None)  # a create ignores it (status subresource); written below through v1beta1
            out.append(d)
    return out


def _kubectl(env: EnvTest, *args: str) -> str:
    return subprocess.run(["kubectl", f"--kubeconfig={env.kubeconfig_path}", *args], check=True,
                          capture_output=True, text=True, timeout=60).stdout


async def test_upstream_shaped_v1beta1_dev_manifests_apply_and_read_back(envtest: EnvTest, kube: Kube,
                                                                        namespace: str) -> None:
    objs = _manifest(DEV_V1BETA1, namespace) + _manifest(IN_MEMORY_V1BETA1, namespace)
    assert {o["kind"] for o in objs} >= {"DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate",
                                         "ClusterClass", "Cluster"}
    read = {(o["kind"], o["metadata"]["name"]): (hub, spoke)
            for o, hub, spoke in await create_and_read_back(kube, objs)}
    hub, spoke = read[("DevCluster", "dev-docker")]
    # v1beta2: the failure domains a sorted list; the admission webhook (matched for v1beta1 writes too, matchPolicy
    # Equivalent) defaulted the endpoint's port and each domain's controlPlane
    assert hub["spec"]["backend"]["docker"]["failureDomains"] == [
        {"name": "fd1", "controlPlane": True}, {"name": "fd2", "controlPlane": False, "attributes": {"rack": "2"}}]
    assert hub["spec"]["controlPlaneEndpoint"] == {"port": 6443}
    assert hub["spec"]["backend"]["docker"]["loadBalancer"] == {"imageRepository": "kindest",
                                                               "imageTag": "v20230606-42a2262b"}
    # v1beta1: as written (a map)
    assert spoke["spec"]["backend"]["docker"]["failureDomains"] == {
        "fd1": {"controlPlane": True}, "fd2": {"controlPlane": False, "attributes": {"rack": "2"}}}
    hub, spoke = read[("DevMachineTemplate", "dev-docker-control-plane")]
    assert hub["spec"]["template"]["spec"]["backend"]["docker"] == {
        "customImage": "kindest/node:v1.34.4", "preLoadImages": ["kindest/kindnetd:v20250214-acbabc1a"],
        "extraMounts": [{"containerPath": "/var/run/docker.sock", "hostPath": "/var/run/docker.sock",
                         "readOnly": True}], "bootstrapTimeout": "5m0s"}
    assert spoke["spec"] == next(o for o in objs if o["metadata"]["name"] == "dev-docker-control-plane")["spec"]
    hub, _ = read[("DevClusterTemplate", "in-memory-cluster")]
    assert hub["spec"]["template"]["spec"]["backend"] == {"inMemory": {}}
    hub, _ = read[("DevMachineTemplate", "in-memory-control-plane")]
    assert hub["spec"]["template"]["spec"]["backend"]["inMemory"]["vm"] == {
        "provisioning": {"startupDuration": "10s", "startupJitter": "0.2"}}
    # a LIST in v1beta1 through kubectl: `kubectl get devclusters.v1beta1.infrastructure.cluster.x-k8s.io`
    listed = json.loads(await asyncio.to_thread(
        _kubectl, envtest, "get", f"devclusters.v1beta1.{GROUP}", "-n", namespace, "-o", "json"))
    assert [(i["apiVersion"], i["metadata"]["name"]) for i in listed["items"]] == [(f"{GROUP}/v1beta1", "dev-docker")]
    assert listed["items"][0]["spec"]["backend"]["docker"]["failureDomains"]["fd2"]["attributes"] == {"rack": "2"}
    table = await asyncio.to_thread(_kubectl, envtest, "get", f"devclusters.v1beta1.{GROUP}", "-n", namespace)
    assert table.split("\n")[0].split() == ["NAME", "CLUSTER", "AGE"] and "dev-docker" in table
    # upstream's v1beta1 DevMachine columns (not v1beta2's)
    table = await asyncio.to_thread(_kubectl, envtest, "get", f"devmachines.v1beta1.{GROUP}", "-n", namespace)
    assert table.split("\n")[0].split() == ["NAME", "CLUSTER", "MACHINE", "PROVIDERID", "READY", "AGE"], table
    print(f"\nkubectl get devmachines.v1beta1.{GROUP}:\n{table}")


async def test_v1beta1_status_and_edits_keep_what_only_v1beta2_says(kube: Kube, namespace: str) -> None:
    machine = next(o for o in _manifest(DEV_V1BETA1, namespace) if o["metadata"]["name"] == "dev-docker-cp-1")
    await kube.create(of(machine), copy.deepcopy(machine))
    hub_gvk = at(of(machine), "v1beta2")
    # the controllers write status in v1beta2: provisioned, the v1beta2-only failureDomain
    hub = await kube.get(hub_gvk, namespace, "dev-docker-cp-1")
    assert hub is not None
    hub["status"] = {"initialization": {"provisioned": True}, "failureDomain": "fd1",
                     "addresses": [{"type": "InternalIP", "address": "172.18.0.5"}]}
    await kube.replace(hub_gvk, hub, subresource="status")
    spoke = await kube.get(of(machine), namespace, "dev-docker-cp-1")
    assert spoke is not None and spoke["status"]["ready"] is True and "failureDomain" not in spoke["status"]
    assert DATA_ANNOTATION in spoke["metadata"]["annotations"]
    # a v1beta1 client edits the spec and writes back what it read
    spoke["spec"]["backend"]["docker"]["preLoadImages"] = ["kindest/kindnetd:v20250214-acbabc1a"]
    await kube.replace(of(machine), spoke)
    hub = await kube.get(hub_gvk, namespace, "dev-docker-cp-1")
    assert hub is not None
    assert hub["spec"]["backend"]["docker"]["preLoadImages"] == ["kindest/kindnetd:v20250214-acbabc1a"]
    assert hub["status"]["failureDomain"] == "fd1" and hub["status"]["initialization"] == {"provisioned": True}
    assert DATA_ANNOTATION not in (hub["metadata"].get("annotations") or {})
    # upstream's DevMachine webhook through v1beta1 too: customImage cannot change
    with pytest.raises(KubeError) as e:
        await kube.merge_patch(of(machine), namespace, "dev-docker-cp-1",
                               {"spec": {"backend": {"docker": {"customImage": "other:v1"}}}})
    assert "customImage" in e.value.message and "cannot be modified" in e.value.message
    # and a template's spec stays immutable through v1beta1 (capd-py's CEL rule copied into upstream's schema)
    template = next(o for o in _manifest(DEV_V1BETA1, namespace) if o["kind"] == "DevMachineTemplate")
    await kube.create(of(template), copy.deepcopy(template))
    with pytest.raises(KubeError) as e:
        await kube.merge_patch(of(template), namespace, template["metadata"]["name"],
                               {"spec": {"template": {"spec": {"backend": {"docker": {"customImage": "x:v1"}}}}}})
    assert e.value.invalid and "spec.template.spec is immutable" in e.value.message


async def test_a_v1beta1_devcluster_naming_no_backend_gets_upstreams_default(kube: Kube, namespace: str) -> None:
    cluster = {"apiVersion": f"{GROUP}/v1beta1", "kind": "DevCluster",
               "metadata": {"name": "plain", "namespace": namespace}, "spec": {"backend": {}}}
    await kube.create(of(cluster), copy.deepcopy(cluster))
    hub = await kube.get(at(of(cluster), "v1beta2"), namespace, "plain")
    # loadBalancer: {} as upstream's webhook answers (its Go type's struct field: api/admission/dev.py)
    assert hub is not None and hub["spec"]["backend"] == {"docker": {"loadBalancer": {}}}
    assert to_hub(cluster)["spec"] == {"backend": {}}  # the default is the webhook's, not the conversion's


def _compare_tool() -> Any:
    path = ROOT / "hack" / "compare_upstream_crds.py"
    spec = importlib.util.spec_from_file_location("compare_upstream_crds", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def test_the_served_v1beta1_is_upstream_v1_14s(kube: Kube) -> None:
    """What the API server serves as v1beta1 for each Dev* kind against upstream v1.14.0's CRD bases (vendored by
    hack/vendor_upstream_v1beta1.py, its header names the commit): every field of upstream's schema, spec and
    status, with the same types and bounds; nothing upstream refuses is accepted; the only addition is capd-py's
    immutability rule on a template's spec (upstream's template webhooks refuse the same change)."""
    tool = _compare_tool()
    for plural in SERVED_IN_V1BETA1:
        vendored_path = V1BETA1_SCHEMAS / f"{GROUP}_{plural}.yaml"
        assert vendored_path.read_text().startswith("# Upstream Cluster API v1.14.0 ("), plural
        upstream = yaml.safe_load(vendored_path.read_text())
        crd = await kube.get(gvk.CRD, None, f"{plural}.{GROUP}")
        assert crd is not None
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert sorted(versions) == ["v1beta1", "v1beta2"], plural
        spoke = versions["v1beta1"]
        assert (spoke["served"], spoke["storage"], spoke.get("deprecated")) == (True, False, True), plural
        assert versions["v1beta2"]["storage"] is True
        assert crd["spec"]["conversion"]["strategy"] == "Webhook"
        assert spoke.get("additionalPrinterColumns", []) == upstream["additionalPrinterColumns"], plural
        assert spoke.get("subresources", {}) == upstream["subresources"], plural
        served = spoke["schema"]["openAPIV3Schema"]
        assert tool.laxer(served, upstream["openAPIV3Schema"]) == [], plural
        stricter = tool.differences(served, upstream["openAPIV3Schema"])
        if plural.endswith("templates"):
            kind = crd["spec"]["names"]["kind"]
            assert stricter == [f".spec.template.spec: CEL '{kind} spec.template.spec is immutable; create a new "
                                "template instead'"], (plural, stricter)
        else:
            assert stricter == [], (plural, stricter)
    for plural in ("devmachinepools", "devmachinepooltemplates"):  # upstream v1.14.0: v1beta2 only
        crd = await kube.get(gvk.CRD, None, f"{plural}.{GROUP}")
        assert crd is not None and [v["name"] for v in crd["spec"]["versions"]] == ["v1beta2"], plural
