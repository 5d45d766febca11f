"""upstream v1.10's quick-start ClusterClass (v1beta1, tests/fixtures/upstream/v1beta1/development.yaml) applied
through v1beta1 to what `capd-py init` installs, with the controllers process serving the conversion webhook:
its patches, written for v1beta1 templates, apply in the version the templateRefs name (see
reconcile/topology/patches.py), and the objects the topology writes (v1beta2) carry them in v1beta2's shapes.

Uses the envtest + controllers process fixtures of test_serving_v1beta1.py (an envtest of its own)."""

from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from capd_py.kube.client import Kube

try:
    from test_serving_v1beta1 import (  # the fixtures installed, controllers, kube, port are used by name
        DOCKER_CLUSTER,
        KINDS,
        Controllers,
        at,
        controllers,
        installed,
        kube,
        new_namespace,
        of,
        port,
        serving,
        upstream_v1beta1,
    )
except ImportError:  # pragma: no cover - package-style import
    from .test_serving_v1beta1 import (  # type: ignore[no-redef]
        DOCKER_CLUSTER,
        KINDS,
        Controllers,
        at,
        controllers,
        installed,
        kube,
        new_namespace,
        of,
        port,
        serving,
        upstream_v1beta1,
    )

pytestmark = pytest.mark.integration

__all__ = ["controllers", "installed", "kube", "port"]


async def test_upstream_v1_10_clusterclass_patches_apply_to_its_v1beta1_templates(kube: Kube,
                                                                                  controllers: Controllers) -> None:
    """upstream v1.10's quick-start ClusterClass (v1beta1) patches its templates in v1beta1 shapes (apiServer
    extraArgs as a map): the topology controller applies them in the version the templateRefs name, and the
    control plane it writes (v1beta2) has them as v1beta2's list; read through v1beta1 it is the map again."""
    ns = await new_namespace(kube)
    await serving(kube, ns, controllers)
    objs = upstream_v1beta1(ns, "development.yaml")
    for obj in objs:
        await kube.create(of(obj), copy.deepcopy(obj))
    cluster = next(o for o in objs if o["kind"] == "Cluster")
    name = cluster["metadata"]["name"]
    cluster_v2 = at(of(cluster), "v1beta2")
    started = time.monotonic()
    kcp_gvk = KINDS[("controlplane.cluster.x-k8s.io", "KubeadmControlPlane")]

    async def reconciled() -> dict[str, Any] | None:
        c = await kube.get(cluster_v2, ns, name)
        tr = next((x for x in ((c or {}).get("status") or {}).get("conditions") or []
                   if x["type"] == "TopologyReconciled"), None)
        ref = ((c or {}).get("spec") or {}).get("controlPlaneRef")
        if not tr or tr["status"] != "True" or not ref:
            return None
        return await kube.get(kcp_gvk, ns, ref["name"])
    kcp = None
    try:
        async with asyncio.timeout(60):
            while (kcp := await reconciled()) is None:
                await asyncio.sleep(0.3)
    except TimeoutError:
        c = await kube.get(cluster_v2, ns, name)
        pytest.fail(f"TopologyReconciled not True within 60s: {(c or {}).get('status')}\n{controllers.tail()}")
    print(f"topology of the v1beta1 class reconciled {time.monotonic() - started:.2f}s after the create")
    pss = "/etc/kubernetes/kube-apiserver-admission-pss.yaml"
    api_server = kcp["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]
    assert api_server["extraArgs"] == [{"name": "admission-control-config-file", "value": pss}]
    assert api_server["extraVolumes"][0]["hostPath"] == pss
    assert 'enforce: "baseline"' in kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
    spoke = await kube.get(at(kcp_gvk, "v1beta1"), ns, kcp["metadata"]["name"])
    assert spoke is not None
    assert spoke["spec"]["kubeadmConfigSpec"]["clusterConfiguration"]["apiServer"]["extraArgs"] == {
        "admission-control-config-file": pss}
    cpi = kcp["spec"]["machineTemplate"]["spec"]["infrastructureRef"]
    dmt = await kube.get(KINDS[("infrastructure.cluster.x-k8s.io", "DockerMachineTemplate")], ns, cpi["name"])
    assert dmt is not None and dmt["spec"]["template"]["spec"]["customImage"] == "kindest/node:v1.34.4"
    # the class says its refs are not in the latest apiVersion (as upstream) and is used all the same
    cc_obj = next(o for o in objs if o["kind"] == "ClusterClass")
    cc = await kube.get(at(of(cc_obj), "v1beta2"), ns, cc_obj["metadata"]["name"])
    refs = next(x for x in ((cc or {}).get("status") or {}).get("conditions") or []
                if x["type"] == "RefVersionsUpToDate")
    assert (refs["status"], refs["reason"]) == ("False", "RefVersionsNotUpToDate"), refs
    assert "* KubeadmControlPlaneTemplate quick-start-control-plane: current: v1beta1, latest: v1beta2" \
        in refs["message"].splitlines()
    # stable: the topology writes nothing more (generations of what it owns stay)
    md_gvk = KINDS[("cluster.x-k8s.io", "MachineDeployment")]

    async def generations() -> dict[str, int]:
        out = {}
        for g in (kcp_gvk, md_gvk, DOCKER_CLUSTER):
            for o in await kube.list(g, ns):
                out[f"{g.kind}/{o['metadata']['name']}"] = o["metadata"]["generation"]
        return out
    before = await generations()
    await asyncio.sleep(5)
    assert await generations() == before
