"""The provider example (examples/minimal-provider/, issue 25 item 5), run the way a user runs it: its CRDs
installed from its YAML, its controller started as a separate program (which cannot import capd_py), its sample
cluster applied from config/cluster.yaml. capd-py's core (the whole controllers process, in-process, against a
real kube-apiserver) drives it: Machines Provisioned with the provider's providerIDs and addresses, the Cluster
InfrastructureReady / ControlPlaneInitialized with the provider's endpoint, failure domains and counters; then
deleting the Cluster removes workers, control plane and infrastructure in that order, each waited for through
the provider's finalizer, and leaves nothing behind."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import conditions as cond
from capd_py.api.gvk import CLUSTER, GVK, MACHINE, MACHINE_DEPLOYMENT, MACHINE_SET, SECRET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.testing.envtest import EnvTest, stop_process_group
from capd_py.testing.inprocess import eventually, in_process_operator

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "minimal-provider"
INFRA, CP = "infrastructure.minimal.example.com", "controlplane.minimal.example.com"
MINIMAL_CLUSTER = GVK(INFRA, "v1alpha1", "MinimalCluster", "minimalclusters")
MINIMAL_MACHINE = GVK(INFRA, "v1alpha1", "MinimalMachine", "minimalmachines")
MINIMAL_MACHINE_TEMPLATE = GVK(INFRA, "v1alpha1", "MinimalMachineTemplate", "minimalmachinetemplates")
MINIMAL_CONTROL_PLANE = GVK(CP, "v1alpha1", "MinimalControlPlane", "minimalcontrolplanes")
KINDS = {g.kind: g for g in (CLUSTER, MACHINE_DEPLOYMENT, SECRET, MINIMAL_CLUSTER, MINIMAL_MACHINE_TEMPLATE,
                             MINIMAL_CONTROL_PLANE)}
FINALIZER = "minimal.example.com/finalizer"
DEPROVISION_SECONDS = 1.0
Obj = dict[str, Any]


def _docs(name: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((EXAMPLE / "config" / name).read_text()) if d]


def _cond(obj: Obj | None, ctype: str) -> Obj:
    return cond.get(obj or {}, ctype) or {}


@pytest.fixture
async def operator(envtest: EnvTest) -> AsyncIterator[Manager]:
    """A pretend provider's machines have no API server behind them."""
    crds = _docs("crds.yaml")
    assert all(c["metadata"]["labels"] == {"cluster.x-k8s.io/v1beta2": "v1alpha1"} for c in crds)
    async with in_process_operator(envtest, workloads="none", crds=crds) as op:
        yield op.manager


@pytest.fixture
def provider_log(tmp_path: Path) -> Path:
    return tmp_path / "provider.log"


@pytest.fixture
def provider(envtest: EnvTest, namespace: str, provider_log: Path, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The example's controller as its own process. A `capd_py` that refuses to be imported comes first on its
    path: the example is third-party code and must not use capd-py's."""
    blocker = tmp_path / "blocker" / "capd_py"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('the provider example must not import capd_py')\n")
    env = {**os.environ, "PYTHONPATH": str(blocker.parent)}
    with open(provider_log, "wb") as out:
        p = subprocess.Popen([sys.executable, str(EXAMPLE / "minimal_provider.py"),
                              "--kubeconfig", str(envtest.kubeconfig_path), "--namespace", namespace,
                              "--deprovision-seconds", str(DEPROVISION_SECONDS)],
                             stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                             start_new_session=True)
    try:
        yield p
    finally:
        stop_process_group(p, 10)
        print("--- provider log\n" + provider_log.read_text(errors="replace"))  # shown when the test fails


async def test_core_drives_the_example_provider(operator: Manager, provider: subprocess.Popen[bytes],
                                                provider_log: Path, kube: Kube, namespace: str) -> None:
    ns = namespace
    for d in _docs("cluster.yaml"):  # the sample cluster, as the README applies it
        d["metadata"]["namespace"] = ns
        await kube.create(KINDS[d["kind"]], d)

    async def cluster() -> Obj:
        c = await kube.get(CLUSTER, ns, "demo")
        assert c is not None
        return c

    async def machines() -> list[Obj]:
        return await kube.list(MACHINE, ns, labels={CLUSTER_NAME: "demo"})

    async def state() -> str:
        c = await cluster()
        ms = [(m["metadata"]["name"], (m.get("status") or {}).get("phase"), m["spec"].get("providerID"))
              for m in await machines()]
        return (f"provider {'running' if provider.poll() is None else f'exited {provider.returncode}'}; "
                f"Cluster conditions {(c.get('status') or {}).get('conditions')}; Machines {ms}")

    # The infrastructure: the provider's endpoint and failure domains reach the Cluster.
    async def infra_ready() -> bool:
        c = await cluster()
        return _cond(c, "InfrastructureReady").get("status") == "True" and \
            bool(c["spec"].get("controlPlaneEndpoint"))
    await eventually(infra_ready, 30, "Cluster InfrastructureReady with the provider's endpoint", state)
    mc = await kube.get(MINIMAL_CLUSTER, ns, "demo")
    assert mc is not None and FINALIZER in mc["metadata"]["finalizers"]
    c = await cluster()
    assert c["spec"]["controlPlaneEndpoint"] == mc["spec"]["controlPlaneEndpoint"]
    assert c["spec"]["controlPlaneEndpoint"]["port"] == 6443
    net = ipaddress.ip_network(c["spec"]["controlPlaneEndpoint"]["host"] + "/24", strict=False)
    assert c["status"]["initialization"]["infrastructureProvisioned"] is True
    assert [f["name"] for f in c["status"]["failureDomains"]] == ["zone-a", "zone-b", "zone-c"]

    # The control plane: initialized and available, its counters and version its own (no Machines).
    async def cp_ready() -> bool:
        c = await cluster()
        return _cond(c, "ControlPlaneInitialized").get("status") == "True" and \
            _cond(c, "ControlPlaneAvailable").get("status") == "True"
    await eventually(cp_ready, 30, "Cluster ControlPlaneInitialized and ControlPlaneAvailable", state)
    c = await cluster()
    assert c["status"]["initialization"]["controlPlaneInitialized"] is True
    assert c["status"]["controlPlane"] == {"desiredReplicas": 3, "replicas": 3, "readyReplicas": 3,
                                           "availableReplicas": 3, "upToDateReplicas": 3}
    mcp = await kube.get(MINIMAL_CONTROL_PLANE, ns, "demo-cp")
    assert mcp is not None and mcp["status"]["version"] == "v1.34.4"
    assert not [m for m in await machines() if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]]

    # The workers: every Machine Provisioned with the provider's providerID and addresses.
    async def provisioned(n: int) -> bool:
        ms = await machines()
        return len(ms) == n and all((m.get("status") or {}).get("phase") == "Provisioned" for m in ms)

    async def check_machines(n: int) -> None:
        # the first Machines may wait one MachineSet preflight requeue (15 s, as upstream) when the MachineSet
        # was created before the control plane reported its version (ControlPlaneIsStable)
        await eventually(lambda: provisioned(n), 45, f"{n} Machines Provisioned", state)
        ips = set()
        for m in await machines():
            mm = await kube.get(MINIMAL_MACHINE, ns, m["spec"]["infrastructureRef"]["name"])
            assert mm is not None and FINALIZER in mm["metadata"]["finalizers"]
            assert m["spec"]["providerID"] == mm["spec"]["providerID"] == f"minimal://{ns}/{mm['metadata']['name']}"
            assert m["status"]["addresses"] == mm["status"]["addresses"]
            ip = next(a["address"] for a in m["status"]["addresses"] if a["type"] == "InternalIP")
            assert ipaddress.ip_address(ip) in net, (ip, net)
            ips.add(ip)
            assert m["status"]["initialization"]["infrastructureProvisioned"] is True
            assert _cond(m, "InfrastructureReady").get("status") == "True"
            assert _cond(m, "BootstrapConfigReady").get("status") == "True"
        assert len(ips) == n, f"addresses are not distinct: {ips}"
    await check_machines(2)
    tpl = await kube.get(MINIMAL_MACHINE_TEMPLATE, ns, "demo-workers")
    assert tpl is not None and any(r["kind"] == "Cluster" for r in tpl["metadata"].get("ownerReferences") or [])

    # Scaling up: the new machine gets an address of its own.
    await kube.merge_patch(MACHINE_DEPLOYMENT, ns, "demo-md-0", {"spec": {"replicas": 3}})
    await check_machines(3)

    # Deletion: workers, then the control plane, then the infrastructure, each held by the provider's finalizer
    # for DEPROVISION_SECONDS. Each poll lists the later stages first: under the right order, an object of a
    # later stage being deleted means every earlier stage is already gone.
    await kube.delete(CLUSTER, ns, "demo")
    stages = [(MINIMAL_CLUSTER, "infrastructure"), (MINIMAL_CONTROL_PLANE, "control plane"),
              (MINIMAL_MACHINE, "workers")]
    seen_deleting: set[str] = set()
    deadline = time.monotonic() + 45
    while True:
        present: dict[str, list[Obj]] = {}
        for g, stage in stages:
            present[stage] = await kube.list(g, ns)
            deleting = [o for o in present[stage] if o["metadata"].get("deletionTimestamp")]
            if deleting:
                seen_deleting.add(stage)
                assert all(f"{FINALIZER}" in o["metadata"]["finalizers"] for o in deleting)
            earlier = [s for s in present if s != stage]
            later_deleting = [s for s in earlier if any(o["metadata"].get("deletionTimestamp")
                                                        for o in present[s])]
            names = [o["metadata"]["name"] for o in present[stage]]
            assert not (later_deleting and names), f"{later_deleting} deleted while {stage} still exists: {names}"
        core = {g.kind: await kube.list(g, ns) for g in (CLUSTER, MACHINE_DEPLOYMENT, MACHINE_SET, MACHINE)}
        if not any(present.values()) and not any(core.values()):
            break
        assert time.monotonic() < deadline, "not deleted within 45s: " + str(
            {k: [o["metadata"]["name"] for o in v] for k, v in {**present, **core}.items() if v})
        await asyncio.sleep(0.1)
    assert seen_deleting == {"infrastructure", "control plane", "workers"}, \
        f"the provider's finalizer held only {seen_deleting}"

    # The provider saw the same order: each stage released before the next was asked to deprovision.
    lines = provider_log.read_text().splitlines()

    def at(pattern: str) -> list[int]:
        return [i for i, line in enumerate(lines) if re.search(pattern, line)]
    released_workers = at(r"MinimalMachine \S+: deprovisioned, finalizer removed")
    assert len(released_workers) == 3, lines
    assert max(released_workers) < min(at(r"MinimalControlPlane \S+: deprovisioning"))
    assert max(at(r"MinimalControlPlane \S+: deprovisioned, finalizer removed")) < \
        min(at(r"MinimalCluster \S+: deprovisioning"))
    assert at(r"MinimalCluster \S+: deprovisioned, finalizer removed")
    assert provider.poll() is None, "the provider exited"
    assert "Traceback" not in provider_log.read_text()
