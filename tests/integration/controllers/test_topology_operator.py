"""ClusterClass + managed topology through the whole controllers process, in-process, against a real
kube-apiserver, with the fake container runtime and fake workload clusters: capd-py's `development` flavor
(ClusterClass `quick-start` + a topology Cluster) becomes Available; the stable topology writes nothing; a
version bump upgrades the control plane first and the MachineDeployment only once every control-plane
machine runs the new version (upstream's order; until node images of two versions exist this is where the
order is tested end to end); a bad variable is a TopologyReconciled=False condition naming it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import (
    CLUSTER,
    CLUSTER_CLASS,
    DOCKER_CLUSTER,
    DOCKER_MACHINE_TEMPLATE,
    KUBEADM_CONFIG_TEMPLATE,
    KUBEADM_CONTROL_PLANE,
    MACHINE,
    MACHINE_DEPLOYMENT,
    MACHINE_HEALTH_CHECK,
)
from capd_py.api.labels import CLUSTER_NAME
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import eventually, in_process_operator
from capd_py.testing.quiet import quiet_versions

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

NAME = "topo"
NEW = "v1.35.0"


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[tuple[Manager, FakeRuntime]]:
    async with in_process_operator(envtest) as op:
        yield op.manager, op.runtime


async def _refs(kube: Kube, ns: str) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    c = await kube.get(CLUSTER, ns, NAME)
    assert c is not None
    kcp_ref = (c.get("spec") or {}).get("controlPlaneRef")
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, ns, kcp_ref["name"]) if kcp_ref else None
    mds = await kube.list(MACHINE_DEPLOYMENT, ns, labels={CLUSTER_NAME: NAME})
    return c, kcp, mds[0] if mds else None


async def _versions(kube: Kube, ns: str) -> dict[str, str]:
    out = {}
    for g in (CLUSTER, DOCKER_CLUSTER, KUBEADM_CONTROL_PLANE, MACHINE_DEPLOYMENT, DOCKER_MACHINE_TEMPLATE,
              KUBEADM_CONFIG_TEMPLATE, MACHINE_HEALTH_CHECK, MACHINE):
        for o in await kube.list(g, ns):
            out[f"{g.kind}/{o['metadata']['name']}"] = o["metadata"]["resourceVersion"]
    return out


async def test_development_flavor_upgrade_order_and_bad_variable(
        operator: tuple[Manager, FakeRuntime], kube: Kube, namespace: str) -> None:
    docs = parse_documents(generate_cluster(NAME, namespace=namespace, flavor="development",
                                            control_plane_machine_count=1, worker_machine_count=1, env={}))
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def state() -> Any:
        c, kcp, md = await _refs(kube, namespace)
        cc = await kube.get(CLUSTER_CLASS, namespace, "quick-start")
        return {"cluster": [(x["type"], x["status"], x.get("message")) for x in
                            (c.get("status") or {}).get("conditions") or [] if x["status"] != "True"],
                "class": [(x["type"], x["status"], x.get("message")) for x in
                          ((cc or {}).get("status") or {}).get("conditions") or []],
                "kcp": kcp and ((kcp["spec"]["version"]), kcp.get("status", {}).get("version")),
                "md": md and (md["spec"]["template"]["spec"]["version"], md.get("status", {}).get("replicas"))}

    async def available() -> bool:
        c, kcp, md = await _refs(kube, namespace)
        return cond.is_true(c, "Available") and cond.is_true(c, "TopologyReconciled")
    await eventually(available, 120, "topology cluster Available and TopologyReconciled", state)
    c, kcp, md = await _refs(kube, namespace)
    assert kcp is not None and md is not None
    assert kcp["metadata"]["name"].startswith(f"{NAME}-") and md["metadata"]["name"].startswith(f"{NAME}-md-0-")
    assert 'enforce: "baseline"' in kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]

    # stable: once the controllers wrote nothing for 6 s, no object changed over those 6 s
    before, after = await quiet_versions(operator[0], lambda: _versions(kube, namespace), window=6, timeout=60,
                                         what="the topology cluster converged", namespace=namespace)
    assert before == after, {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}

    # upgrade: sample the order while it happens
    c["spec"]["topology"]["version"] = NEW
    await kube.merge_patch(CLUSTER, namespace, NAME, {"spec": {"topology": {"version": NEW}}})
    samples: list[tuple[str | None, str | None, str | None]] = []

    async def upgraded() -> bool:
        _, kcp, md = await _refs(kube, namespace)
        assert kcp is not None and md is not None
        s = (kcp["spec"]["version"], (kcp.get("status") or {}).get("version"),
             md["spec"]["template"]["spec"]["version"])
        samples.append(s)
        machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: NAME})
        c2 = await kube.get(CLUSTER, namespace, NAME)
        return s == (NEW, NEW, NEW) and all(m["spec"].get("version") == NEW for m in machines) \
            and len(machines) == 2 and c2 is not None and cond.is_true(c2, "TopologyReconciled")
    await eventually(upgraded, 240, "control plane and workers at the new version", state)
    assert samples[0][0] == NEW or samples[0][2] != NEW
    for kcp_spec, kcp_status, md_version in samples:
        if md_version == NEW:  # workers move only after every control-plane machine runs the new version
            assert kcp_spec == NEW and kcp_status == NEW, samples
    assert any(s[2] != NEW for s in samples), "the workers never waited for the control plane"

    # a bad variable: nothing changes, the condition says why
    await kube.merge_patch(CLUSTER, namespace, NAME, {"spec": {"topology": {"variables": [
        {"name": "podSecurityStandard", "value": {"enabled": "yes"}}, {"name": "nosuch", "value": 1}]}}})

    async def refused() -> bool:
        c2 = await kube.get(CLUSTER, namespace, NAME)
        tc = cond.get(c2 or {}, "TopologyReconciled")
        return bool(tc and tc["status"] == "False" and "nosuch" in tc["message"] and "enabled" in tc["message"])
    await eventually(refused, 30, "TopologyReconciled=False naming the bad variables", state)
