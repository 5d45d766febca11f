"""A topology pass whose write the API server refuses (issue 42: upstream's kcp-scale-in flavor, refused 422 on the
KubeadmControlPlane after the pass had created its DockerCluster and DockerMachineTemplate, retried ~4 times a
second, 353 objects in 90 s): through the whole controllers process against a real kube-apiserver, a ClusterClass
patch makes every KubeadmControlPlane the topology computes invalid. The Cluster says why in TopologyReconciled; the
objects a failed pass created are removed again (none left over, however many passes); the passes back off (a
bounded number of them in 20 s, not one per status write)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import CLUSTER, DOCKER_CLUSTER, DOCKER_MACHINE_TEMPLATE, KUBEADM_CONTROL_PLANE
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import eventually, in_process_operator

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

NAME = "refused"
# an enum the KubeadmControlPlane CRD refuses: every KubeadmControlPlane the topology computes is invalid
BAD_PATCH = {"name": "bad-format", "definitions": [{
    "selector": {"apiVersion": "controlplane.cluster.x-k8s.io/v1beta2", "kind": "KubeadmControlPlaneTemplate",
                 "matchResources": {"controlPlane": True}},
    "jsonPatches": [{"op": "add", "path": "/spec/template/spec/kubeadmConfigSpec/format", "value": "bogus"}]}]}


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[Manager]:
    async with in_process_operator(envtest) as op:
        yield op.manager


def _with_bad_patch(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for d in docs:
        if d.get("kind") == "ClusterClass":
            d["spec"].setdefault("patches", []).append(BAD_PATCH)
    return docs


async def test_a_refused_write_leaves_nothing_behind_and_backs_off(operator: Manager, kube: Kube,
                                                                   namespace: str) -> None:
    docs = _with_bad_patch(parse_documents(generate_cluster(
        NAME, namespace=namespace, flavor="development", control_plane_machine_count=1, worker_machine_count=1,
        env={})))
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def refused() -> bool:
        c = await kube.get(CLUSTER, namespace, NAME)
        got = cond.get(c, "TopologyReconciled") if c else None
        return got is not None and got["status"] == "False" and "format" in got.get("message", "")
    await eventually(refused, 60, "TopologyReconciled=False naming the refused field")

    async def counts() -> dict[str, int]:
        return {g.kind: len(await kube.list(g, namespace))
                for g in (DOCKER_CLUSTER, DOCKER_MACHINE_TEMPLATE, KUBEADM_CONTROL_PLANE)}

    def kcp_writes() -> int:  # each pass ends on the refused KubeadmControlPlane apply
        # of this namespace only: the operator also reconciles what earlier tests left in the shared envtest
        return operator.writes.by_namespace_resource[(namespace, "PATCH", "kubeadmcontrolplanes")]
    before = kcp_writes()
    seen: list[dict[str, int]] = []
    for _ in range(20):
        seen.append(await counts())
        await asyncio.sleep(1)
    passes = kcp_writes() - before
    # backed off: 1, 2, 4, 8 s ... (and no event brings a failed pass back within queue.EVENT_HOLD): at most ~5
    # passes in 20 s, where every status write used to start the next one at once
    assert 1 <= passes <= 6, passes
    # nothing a failed pass created stays (the DockerCluster, the control plane's DockerMachineTemplate clone): a
    # pass's objects exist only while it runs (one pass's worth at most), then the class's own templates only
    class_templates = sum(1 for d in docs if d.get("kind") == "DockerMachineTemplate")
    assert all(s[KUBEADM_CONTROL_PLANE.kind] == 0 and s[DOCKER_CLUSTER.kind] <= 1
               and s[DOCKER_MACHINE_TEMPLATE.kind] <= class_templates + 1 for s in seen), (class_templates, seen)

    async def only_the_class() -> bool:
        return await counts() == {DOCKER_CLUSTER.kind: 0, DOCKER_MACHINE_TEMPLATE.kind: class_templates,
                                  KUBEADM_CONTROL_PLANE.kind: 0}
    await eventually(only_the_class, 30, "no object of a failed pass left", counts)
    c = await kube.get(CLUSTER, namespace, NAME)
    assert c is not None and not (c["spec"].get("infrastructureRef") or c["spec"].get("controlPlaneRef"))
