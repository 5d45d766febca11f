"""Upstream v1.14's Dev* kinds through the whole controllers process, in-process, against a real kube-apiserver.

- docker backend (`--flavor dev`, and a DevMachinePool): the Docker provider's own code makes the same network, load
  balancer and node containers (the fake container runtime, fake workload clusters over it, as the other operator
  tests), the Cluster becomes Available, and deleting it removes every container and object;
- inMemory backend (`--flavor in-memory`, 1 control plane + 3 workers): no container at all, Machines Running on
  in-memory Nodes with an etcd member per control-plane machine, the Cluster Available in under 5 s, with the
  workload clients `capd-py controllers` runs (no test fake behind them);
- upstream v1.14.0's own templates (tests/fixtures/upstream-v1.14, copied unchanged; variables substituted as
  clusterctl does): `clusterclass-quick-start` + `cluster-template-development` (Dev* docker templates, patched by
  the ClusterClass) and `clusterclass-in-memory` + `cluster-template-in-memory` become Available."""

from __future__ import annotations

import base64
import json
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import (
    CLUSTER,
    DEV_CLUSTER,
    DEV_MACHINE,
    DEV_MACHINE_POOL,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    MACHINE,
    MACHINE_POOL,
    POD,
    SECRET,
)
from capd_py.api.labels import (
    CLUSTER_NAME,
    CONTAINER_CLUSTER,
    CONTAINER_ROLE,
    FINALIZER_DOCKER_CLUSTER,
    FINALIZER_DOCKER_MACHINE,
    MACHINE_POOL_NAME,
)
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.cli.kubeconfig import workload_kubeconfig
from capd_py.kube.client import Kube
from capd_py.kube.inmemory_api import InMemoryAPI
from capd_py.reconcile.dockercluster import ROLE_CONTROL_PLANE, ROLE_LB, ROLE_WORKER
from capd_py.testing import envsubst
from capd_py.testing.e2e import kubectl_async
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import Operator, eventually, in_process_operator

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

IN_MEMORY_AVAILABLE_BOUND = 20.0   # seconds: well under the operator's 60 s resync


@pytest.fixture
async def fake_workloads(envtest: EnvTest) -> AsyncIterator[Operator]:
    async with in_process_operator(envtest, workloads="fake") as op:
        yield op


@pytest.fixture
async def real_workloads(envtest: EnvTest) -> AsyncIterator[Operator]:
    async with in_process_operator(envtest, workloads="real") as op:
        yield op


def _not_true(obj: dict[str, Any] | None) -> list[tuple[str, str, str]]:
    return [(c["type"], c.get("reason", ""), c.get("message", "")) for c in
            ((obj or {}).get("status") or {}).get("conditions") or [] if c["status"] != "True"]


def dev_machine_pool(namespace: str, cluster: str) -> list[dict[str, Any]]:
    pool = f"{cluster}-mp-0"
    return [
        {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta2", "kind": "KubeadmConfig",
         "metadata": {"name": f"{pool}-config", "namespace": namespace}},
        {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevMachinePool",
         "metadata": {"name": f"{cluster}-dmp-0", "namespace": namespace},
         "spec": {"backend": {"docker": {"preLoadImages": []}}}},
        {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
         "metadata": {"name": pool, "namespace": namespace},
         "spec": {"clusterName": cluster, "replicas": 1, "template": {"spec": {
             "clusterName": cluster, "version": "v1.34.4",
             "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig",
                                         "name": f"{pool}-config"}},
             "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevMachinePool",
                                   "name": f"{cluster}-dmp-0"}}}}},
    ]


async def test_dev_kinds_with_the_docker_backend_run_the_docker_provider(fake_workloads: Operator, kube: Kube,
                                                                         namespace: str) -> None:
    runtime, name = fake_workloads.runtime, "devd"
    docs = parse_documents(generate_cluster(name, namespace=namespace, flavor="dev", control_plane_machine_count=1,
                                            worker_machine_count=1, env={}))
    assert {d["kind"] for d in docs} >= {"DevCluster", "DevMachineTemplate"}
    assert not {d["kind"] for d in docs} & {"DockerCluster", "DockerMachineTemplate"}
    docs += dev_machine_pool(namespace, name)
    assert all(o.ok for o in await apply_objects(kube, docs))

    def containers(role: str) -> list[Any]:
        return [c for c in runtime.list_containers({CONTAINER_CLUSTER: name}) if c.labels.get(CONTAINER_ROLE) == role]

    async def available() -> bool:
        c = await kube.get(CLUSTER, namespace, name)
        mp = await kube.get(MACHINE_POOL, namespace, f"{name}-mp-0") or {}
        return (c is not None and cond.is_true(c, "Available") and (mp.get("status") or {}).get("phase") == "Running"
                and len(await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name})) == 3)

    async def state() -> Any:
        return {"cluster": _not_true(await kube.get(CLUSTER, namespace, name)),
                "devcluster": _not_true(await kube.get(DEV_CLUSTER, namespace, name)),
                "devmachines": [(d["metadata"]["name"], _not_true(d)) for d in await kube.list(DEV_MACHINE, namespace)],
                "containers": sorted(c.name for c in runtime.list_containers({CONTAINER_CLUSTER: name}))}
    await eventually(available, 120, "the Dev* docker cluster Available, its MachinePool running", state)

    # the Docker provider's work, done for the Dev* kinds: a load balancer, a node container per machine
    assert len(containers(ROLE_LB)) == 1
    assert len(containers(ROLE_CONTROL_PLANE)) == 1 and len(containers(ROLE_WORKER)) == 2
    dc = await kube.get(DEV_CLUSTER, namespace, name)
    assert dc is not None and FINALIZER_DOCKER_CLUSTER in dc["metadata"]["finalizers"]
    assert cond.is_true(dc, "LoadBalancerAvailable") and cond.is_true(dc, "Ready")
    assert dc["spec"]["controlPlaneEndpoint"]["host"] and dc["spec"]["controlPlaneEndpoint"]["port"]
    assert dc["status"]["initialization"] == {"provisioned": True}
    dms = await kube.list(DEV_MACHINE, namespace, labels={CLUSTER_NAME: name})
    assert len(dms) == 3
    node_names = {c.name for c in containers(ROLE_CONTROL_PLANE) + containers(ROLE_WORKER)}
    assert {d["spec"]["providerID"] for d in dms} == {f"docker:////{n}" for n in node_names}
    for d in dms:
        assert FINALIZER_DOCKER_MACHINE in d["metadata"]["finalizers"]
        assert d["status"]["initialization"] == {"provisioned": True}
        assert cond.is_true(d, "Ready"), _not_true(d)
        assert "docker" in d["spec"]["backend"]
    pool_dms = await kube.list(DEV_MACHINE, namespace, labels={MACHINE_POOL_NAME: f"{name}-mp-0"})
    assert len(pool_dms) == 1 and pool_dms[0]["spec"]["backend"] == {"docker": {}}
    dmp = await kube.get(DEV_MACHINE_POOL, namespace, f"{name}-dmp-0")
    assert dmp is not None and dmp["status"]["infrastructureMachineKind"] == "DevMachine"
    assert dmp["spec"]["providerIDList"] == [pool_dms[0]["spec"]["providerID"]]
    # nothing of the Docker* kinds was made
    assert not await kube.list(DOCKER_CLUSTER, namespace) and not await kube.list(DOCKER_MACHINE, namespace)

    await kube.delete(CLUSTER, namespace, name)

    async def gone() -> bool:
        left = [await kube.list(g, namespace) for g in (CLUSTER, MACHINE, DEV_MACHINE, DEV_CLUSTER, MACHINE_POOL,
                                                         DEV_MACHINE_POOL)]
        return not any(left) and not runtime.list_containers({CONTAINER_CLUSTER: name})
    await eventually(gone, 120, "the cluster, its Dev* objects and its containers gone", state)


async def test_in_memory_cluster_is_available_in_seconds(real_workloads: Operator, kube: Kube,
                                                                  namespace: str, tmp_path: Path) -> None:
    op, name = real_workloads, "mem"
    docs = parse_documents(generate_cluster(name, namespace=namespace, flavor="in-memory",
                                            control_plane_machine_count=1, worker_machine_count=3, env={}))
    start = time.monotonic()
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def available() -> bool:
        c = await kube.get(CLUSTER, namespace, name)
        machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name})
        return (c is not None and cond.is_true(c, "Available") and len(machines) == 4
                and all((m.get("status") or {}).get("phase") == "Running" for m in machines))

    async def state() -> Any:
        return {"cluster": _not_true(await kube.get(CLUSTER, namespace, name)),
                "machines": [(m["metadata"]["name"], (m.get("status") or {}).get("phase"), _not_true(m))
                             for m in await kube.list(MACHINE, namespace)],
                "devmachines": [(d["metadata"]["name"], _not_true(d)) for d in await kube.list(DEV_MACHINE, namespace)]}
    await eventually(available, 60, "the in-memory cluster Available with 4 Machines Running", state)
    took = time.monotonic() - start
    print(f"in-memory 1 CP + 3 W: apply -> Available and every Machine Running in {took:.2f} s")
    # ~2 s alone on this machine; the speed is bench/scale_fake.py's to measure (bench/README.md: timed tests share
    # 2 cores with the e2e tier's nodes, 6.9 s measured once in a whole run). What this bound catches is a cluster
    # that waited for something: a lost event (the next resync is 60 s away) or an error's backoff.
    assert took < IN_MEMORY_AVAILABLE_BOUND, f"in-memory 1 CP + 3 W took {took:.2f} s to be Available"

    # no container: the workload cluster is in the controllers' memory (the operator watches every namespace of
    # the shared API server, so other tests' leftovers may have containers of their own in its fake runtime)
    assert not op.runtime.list_containers({CONTAINER_CLUSTER: name})
    assert not [c for c in op.runtime.created if c.startswith(f"{name}-")]
    api = op.manager.ctx.workload.in_memory.get(namespace, name)
    assert isinstance(api, InMemoryAPI)
    # what going through HTTPS would multiply (docs/dev-kinds.md: why the controllers stay in process)
    print(f"in-memory 1 CP + 3 W: the controllers' calls into the workload store: {dict(api.requests)}")
    machines = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name})
    dms = {d["metadata"]["name"]: d for d in await kube.list(DEV_MACHINE, namespace)}
    nodes = api.nodes()
    assert sorted(nodes) == sorted(dms)
    for m in machines:
        dm = dms[m["spec"]["infrastructureRef"]["name"]]
        assert dm["spec"]["providerID"] == f"in-memory://{dm['metadata']['name']}" == m["spec"]["providerID"]
        assert m["status"]["nodeRef"]["name"] == dm["metadata"]["name"]
        assert cond.is_true(dm, "Ready") and cond.is_true(dm, "VMProvisioned") and cond.is_true(dm, "NodeProvisioned")
    cps = [m for m in machines if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]]
    assert len(cps) == 1
    cp_name = cps[0]["spec"]["infrastructureRef"]["name"]
    assert cond.is_true(dms[cp_name], "EtcdProvisioned") and cond.is_true(dms[cp_name], "APIServerProvisioned")
    assert api.etcd.names() == [cp_name]
    pods = {p["metadata"]["name"] for p in await api.list(POD, "kube-system")}
    assert {f"{c}-{cp_name}" for c in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")} <= pods
    # served over HTTPS at its endpoint (upstream's listener: the controllers' address, a port from 20000-30000):
    # the real kubectl with the cluster's kubeconfig Secret (made by KCP from the endpoint and the cluster CA)
    dc = await kube.get(DEV_CLUSTER, namespace, name)
    assert dc is not None
    ep = dc["spec"]["controlPlaneEndpoint"]
    assert ep["host"] == "127.0.0.1" and 20000 <= ep["port"] <= 30000, ep
    c = await kube.get(CLUSTER, namespace, name)
    assert c is not None and c["spec"]["controlPlaneEndpoint"] == ep
    sec = await kube.get(SECRET, namespace, f"{name}-kubeconfig")
    assert sec is not None
    kc = tmp_path / "kubeconfig"
    kc.write_bytes(base64.b64decode(sec["data"]["value"]))
    # what `capd-py get kubeconfig` gives: the Secret's as is (no load balancer to point it at)
    assert await workload_kubeconfig(kube, op.runtime, namespace, name) == kc.read_text()
    assert f"https://127.0.0.1:{ep['port']}" in kc.read_text()
    table = (await kubectl_async(kc, "get", "nodes"))[1].splitlines()
    rows = {r.split()[0]: r.split() for r in table[1:]}
    assert sorted(rows) == sorted(dms) and all(r[1] == "Ready" for r in rows.values()), table
    assert rows[cp_name][2] == "control-plane"
    listed = json.loads((await kubectl_async(kc, "get", "nodes", "-o", "json"))[1])["items"]
    for n in listed:
        assert [c["status"] for c in n["status"]["conditions"] if c["type"] == "Ready"] == ["True"]
        assert n["spec"]["providerID"] == f"in-memory://{n['metadata']['name']}"
    kube_system = (await kubectl_async(kc, "get", "pods", "-n", "kube-system", "-o", "name"))[1].split()
    assert {f"pod/{c}-{cp_name}" for c in ("etcd", "kube-apiserver", "kube-controller-manager",
                                           "kube-scheduler")} <= set(kube_system)
    version = json.loads((await kubectl_async(kc, "version", "-o", "json"))[1])
    assert version["serverVersion"]["gitVersion"] == machines[0]["spec"]["version"]

    # deleting it: the in-memory workload cluster goes with the DevCluster, and its endpoint closes
    await kube.delete(CLUSTER, namespace, name)

    async def gone() -> bool:
        left = [await kube.list(g, namespace) for g in (CLUSTER, MACHINE, DEV_MACHINE, DEV_CLUSTER)]
        return not any(left) and op.manager.ctx.workload.in_memory.get(namespace, name) is None
    await eventually(gone, 60, "the in-memory cluster and its objects gone", state)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", ep["port"]), timeout=2).close()


UPSTREAM_V1_14 = Path(__file__).resolve().parents[2] / "fixtures" / "upstream-v1.14"


def upstream_v1_14(files: list[str], namespace: str, name: str, workers: int) -> list[dict[str, Any]]:
    """upstream v1.14.0's templates with clusterctl's variable substitution."""
    values = {"NAMESPACE": namespace, "CLUSTER_NAME": name, "KUBERNETES_VERSION": "v1.34.4",
              "CONTROL_PLANE_MACHINE_COUNT": "1", "WORKER_MACHINE_COUNT": str(workers)}
    return [d for f in files for d in envsubst.documents(UPSTREAM_V1_14 / f, values, namespace)]


async def _available(kube: Kube, namespace: str, name: str, machines: int) -> bool:
    c = await kube.get(CLUSTER, namespace, name)
    ms = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name})
    return (c is not None and cond.is_true(c, "Available") and len(ms) == machines
            and all((m.get("status") or {}).get("phase") == "Running" for m in ms))


async def test_upstream_v1_14_development_template_is_available(fake_workloads: Operator, kube: Kube,
                                                                 namespace: str) -> None:
    """upstream v1.14's quick-start ClusterClass (DevClusterTemplate / DevMachineTemplate with the docker backend,
    its customImage patch) and cluster-template-development, unchanged: Available, on node containers; upgraded
    through spec.topology.version, every new machine's container runs the new version's kindest/node image."""
    runtime, name = fake_workloads.runtime, "up14dev"
    docs = upstream_v1_14(["clusterclass-quick-start.yaml", "cluster-template-development.yaml"], namespace, name, 1)
    applied = await apply_objects(kube, docs)
    assert all(o.ok for o in applied), [(o.ref, o.detail) for o in applied if not o.ok]

    async def state() -> Any:
        return {"cluster": _not_true(await kube.get(CLUSTER, namespace, name)),
                "devmachines": [(d["metadata"]["name"], _not_true(d)) for d in await kube.list(DEV_MACHINE, namespace)]}
    await eventually(lambda: _available(kube, namespace, name, 2), 180, "upstream v1.14 development Available", state)
    dms = await kube.list(DEV_MACHINE, namespace, labels={CLUSTER_NAME: name})
    # the ClusterClass's customImage patch reached the machines: kindest/node:<version>, capd-py's node image
    assert [d["spec"]["backend"]["docker"]["customImage"] for d in dms] == ["kindest/node:v1.34.4"] * 2
    nodes = [c for c in runtime.list_containers({CONTAINER_CLUSTER: name}) if c.labels.get(CONTAINER_ROLE) != ROLE_LB]
    assert sorted(c.image for c in nodes) == ["kindest/node:v1.34.4"] * 2

    # spec.topology.version: the patch follows the version, every machine is replaced by one running the new
    # version's image (moved here from tests/e2e/test_topology.py, whose cluster is in-memory now)
    await kube.merge_patch(CLUSTER, namespace, name, {"spec": {"topology": {"version": "v1.35.4"}}})

    async def upgraded() -> bool:
        ms = await kube.list(MACHINE, namespace, labels={CLUSTER_NAME: name})
        return await _available(kube, namespace, name, 2) and all(m["spec"]["version"] == "v1.35.4" for m in ms)
    await eventually(upgraded, 180, "every machine at v1.35.4 through spec.topology.version", state)
    dms = await kube.list(DEV_MACHINE, namespace, labels={CLUSTER_NAME: name})
    assert [d["spec"]["backend"]["docker"]["customImage"] for d in dms] == ["kindest/node:v1.35.4"] * 2
    nodes = [c for c in runtime.list_containers({CONTAINER_CLUSTER: name}) if c.labels.get(CONTAINER_ROLE) != ROLE_LB]
    assert sorted(c.image for c in nodes) == ["kindest/node:v1.35.4"] * 2
    await kube.delete(CLUSTER, namespace, name)

    async def gone() -> bool:
        return (not await kube.list(DEV_MACHINE, namespace) and not await kube.list(DEV_CLUSTER, namespace)
                and not runtime.list_containers({CONTAINER_CLUSTER: name}))
    await eventually(gone, 120, "the cluster's Dev* objects and containers gone", state)


async def test_upstream_v1_14_in_memory_template_is_available(real_workloads: Operator, kube: Kube,
                                                              namespace: str) -> None:
    """upstream v1.14's in-memory ClusterClass (VMs 10 s, Node / etcd / API server 2 s, jitter 0.2) and
    cluster-template-in-memory, unchanged: Available with no container."""
    op, name = real_workloads, "up14mem"
    docs = upstream_v1_14(["clusterclass-in-memory.yaml", "cluster-template-in-memory.yaml"], namespace, name, 2)
    start = time.monotonic()
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def state() -> Any:
        return {"cluster": _not_true(await kube.get(CLUSTER, namespace, name)),
                "devmachines": [(d["metadata"]["name"], _not_true(d)) for d in await kube.list(DEV_MACHINE, namespace)]}
    await eventually(lambda: _available(kube, namespace, name, 3), 180, "upstream v1.14 in-memory Available", state)
    took = time.monotonic() - start
    print(f"upstream v1.14 in-memory (1 CP + 2 W, VM 10 s + Node 2 s + 20 % jitter): Available in {took:.1f} s")
    assert took >= 12, "the startup durations were waited for"
    assert not op.runtime.list_containers({CONTAINER_CLUSTER: name})
    api = op.manager.ctx.workload.in_memory.get(namespace, name)
    assert api is not None and len(api.nodes()) == 3
    await kube.delete(CLUSTER, namespace, name)

    async def gone() -> bool:
        return (not await kube.list(DEV_MACHINE, namespace) and not await kube.list(DEV_CLUSTER, namespace)
                and op.manager.ctx.workload.in_memory.get(namespace, name) is None)
    await eventually(gone, 120, "the in-memory cluster and its Dev* objects gone", state)
