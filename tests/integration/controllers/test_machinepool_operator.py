"""MachinePools through the whole controllers process, in-process, against a real kube-apiserver, with the fake
container runtime and fake workload clusters (capd_py.testing.fake_workload: a Node appears for every
bootstrapped node container): a MachinePool of 1 -> 3 -> 1 replicas gets that many containers, DockerMachines and
Machines, its status and providerIDList/nodeRefs follow; a version bump and a DockerMachinePool template change
replace the instances one at a time; a pool whose DockerMachinePool is missing reports it and creates nothing;
deleting the pool and then the Cluster leaves no container and no object."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import conditions as cond
from capd_py.api.gvk import (
    CLUSTER,
    DOCKER_CLUSTER,
    DOCKER_MACHINE,
    DOCKER_MACHINE_POOL,
    KUBEADM_CONFIG,
    MACHINE,
    MACHINE_POOL,
    SECRET,
)
from capd_py.api.labels import CLUSTER_NAME, CONTAINER_CLUSTER, CONTAINER_ROLE, MACHINE_POOL_NAME
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.controllers.manager import Manager
from capd_py.kube.client import Kube
from capd_py.reconcile.dockercluster import ROLE_WORKER
from capd_py.reconcile.kubeadmconfig import token_secret_name
from capd_py.testing import envsubst
from capd_py.testing.envsubst import E2E_VARIABLES
from capd_py.testing.envtest import EnvTest
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.inprocess import eventually, in_process_operator
from capd_py.testing.quiet import quiet_versions
from capd_py.testing.upstream import UPSTREAM

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

CLUSTER_NAME_ = "mpc"
POOL = f"{CLUSTER_NAME_}-mp-0"
CLUSTERCTL_VERSION = "v1.13.6"  # hack/build-clusterctl.sh's default


def pool_objects(namespace: str, name: str, dmp: str, replicas: int, version: str = "v1.34.4") -> list[dict[str, Any]]:
    """What upstream's machine-pool flavor writes for a pool (KubeadmConfig without spec)."""
    return list(yaml.safe_load_all(f"""
apiVersion: bootstrap.cluster.x-k8s.io/v1beta2
kind: KubeadmConfig
metadata: {{name: {name}-config, namespace: {namespace}}}
---
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachinePool
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  clusterName: {CLUSTER_NAME_}
  replicas: {replicas}
  template:
    spec:
      bootstrap:
        configRef: {{apiGroup: bootstrap.cluster.x-k8s.io, kind: KubeadmConfig, name: {name}-config}}
      clusterName: {CLUSTER_NAME_}
      infrastructureRef: {{apiGroup: infrastructure.cluster.x-k8s.io, kind: DockerMachinePool, name: {dmp}}}
      version: {version}
"""))


def docker_machine_pool(namespace: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerMachinePool",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"template": {"preLoadImages": []}}}


@pytest.fixture
async def operator(envtest: EnvTest, kube: Kube) -> AsyncIterator[tuple[Manager, FakeRuntime]]:
    """The operator in-process, with fake workload clusters."""
    async with in_process_operator(envtest) as op:
        yield op.manager, op.runtime


def pool_containers(runtime: FakeRuntime) -> list[Any]:
    return [c for c in runtime.list_containers({CONTAINER_CLUSTER: CLUSTER_NAME_})
            if c.labels.get(CONTAINER_ROLE) == ROLE_WORKER]


def clusterctl() -> Path:
    """Upstream clusterctl, built by hack/build-clusterctl.sh (a missing prerequisite fails, never skips)."""
    path = Path(os.environ.get("CAPD_PY_CACHE", Path.home() / ".cache" / "capd-py")) / "clusterctl" / \
        CLUSTERCTL_VERSION / "clusterctl"
    if not path.exists():
        pytest.fail(f"upstream clusterctl {CLUSTERCTL_VERSION} is missing at {path}: run "
                    f"`flock /tmp/capd-heavy.lock hack/build-clusterctl.sh {CLUSTERCTL_VERSION}`", pytrace=False)
    return path


async def test_machine_pool_scale_rollout_missing_template_and_deletion(
        operator: tuple[Manager, FakeRuntime], kube: Kube, envtest: EnvTest, namespace: str) -> None:
    _, runtime = operator
    docs = parse_documents(generate_cluster(CLUSTER_NAME_, namespace=namespace, control_plane_machine_count=1,
                                            worker_machine_count=0, env={}))
    docs += pool_objects(namespace, POOL, f"{CLUSTER_NAME_}-dmp-0", 1)
    docs.append(docker_machine_pool(namespace, f"{CLUSTER_NAME_}-dmp-0"))
    # a second pool whose DockerMachinePool does not exist
    docs += pool_objects(namespace, f"{CLUSTER_NAME_}-mp-missing", f"{CLUSTER_NAME_}-dmp-missing", 2)
    assert all(o.ok for o in await apply_objects(kube, docs))
    sel = {MACHINE_POOL_NAME: POOL, CLUSTER_NAME: CLUSTER_NAME_}

    async def state() -> dict[str, Any]:
        mp = await kube.get(MACHINE_POOL, namespace, POOL) or {}
        dmp = await kube.get(DOCKER_MACHINE_POOL, namespace, f"{CLUSTER_NAME_}-dmp-0") or {}
        return {"mp.spec.providerIDList": (mp.get("spec") or {}).get("providerIDList"),
                "mp.status": {k: v for k, v in (mp.get("status") or {}).items() if k != "conditions"},
                "mp.conditions": [(c["type"], c["status"], c.get("message")) for c in
                                  (mp.get("status") or {}).get("conditions") or [] if c["status"] != "True"],
                "dmp.status": {k: v for k, v in (dmp.get("status") or {}).items() if k != "instances"},
                "dms": [(d["metadata"]["name"], bool(d["metadata"].get("deletionTimestamp")),
                         [(c["type"], c["status"], c.get("message")) for c in
                          (d.get("status") or {}).get("conditions") or [] if c["status"] != "True"])
                        for d in await kube.list(DOCKER_MACHINE, namespace, labels=sel)],
                "machines": [(m["metadata"]["name"], (m.get("status") or {}).get("phase"))
                             for m in await kube.list(MACHINE, namespace, labels=sel)],
                "containers": sorted(c.name for c in pool_containers(runtime))}

    async def converged(n: int, version: str = "v1.34.4") -> bool:
        mp = await kube.get(MACHINE_POOL, namespace, POOL)
        if mp is None:
            return False
        st = mp.get("status") or {}
        dms = await kube.list(DOCKER_MACHINE, namespace, labels=sel)
        machines = await kube.list(MACHINE, namespace, labels=sel)
        ids = (mp.get("spec") or {}).get("providerIDList") or []
        return (len(dms) == n and len(machines) == n and len(pool_containers(runtime)) == n
                and all(not o["metadata"].get("deletionTimestamp") for o in dms + machines)
                and all((m.get("spec") or {}).get("version") == version for m in machines)
                and all(c.image.endswith(version) for c in pool_containers(runtime))
                and st.get("replicas") == n and st.get("readyReplicas") == n and st.get("availableReplicas") == n
                and st.get("upToDateReplicas") == n and len(st.get("nodeRefs") or []) == n and len(ids) == n
                and st.get("phase") == "Running" and cond.is_true(mp, "Available")
                and mp["metadata"].get("generation") == st.get("observedGeneration"))

    # 1 replica
    await eventually(lambda: converged(1), 120, "MachinePool of 1 running", state)
    mp = await kube.get(MACHINE_POOL, namespace, POOL)
    assert mp is not None
    (m,) = await kube.list(MACHINE, namespace, labels=sel)
    (dm,) = await kube.list(DOCKER_MACHINE, namespace, labels=sel)
    assert m["metadata"]["ownerReferences"][0]["kind"] == "MachinePool"
    assert {o["kind"] for o in dm["metadata"]["ownerReferences"]} == {"DockerMachinePool", "Machine"}
    assert m["spec"]["bootstrap"]["dataSecretName"] == f"{POOL}-config"
    assert mp["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"] == f"{POOL}-config"
    assert mp["spec"]["providerIDList"] == [dm["spec"]["providerID"]]
    assert mp["status"]["initialization"] == {"bootstrapDataSecretCreated": True, "infrastructureProvisioned": True}
    assert (cond.get(mp, "Paused") or {}).get("status") == cond.FALSE  # the reconcile skeleton's
    cfg = await kube.get(KUBEADM_CONFIG, namespace, f"{POOL}-config")
    assert cfg is not None and cfg["metadata"]["ownerReferences"][0]["kind"] == "MachinePool"
    assert cfg["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"]["token"]  # a worker join, not init

    # the pool's bootstrap token is gone from the workload cluster: a new token and new join data (upstream
    # rotates a MachinePool's token so that scale ups keep joining)
    mgr, _ = operator
    wl = mgr.ctx.workload.kube_for(namespace, CLUSTER_NAME_)  # type: ignore[attr-defined]
    token = cfg["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"]["token"]
    data = (await kube.get(SECRET, namespace, f"{POOL}-config") or {}).get("data")
    assert await wl.get(SECRET, "kube-system", token_secret_name(token)) is not None
    await wl.delete(SECRET, "kube-system", token_secret_name(token))
    await kube.merge_patch(KUBEADM_CONFIG, namespace, f"{POOL}-config", {"metadata": {"annotations": {"poke": "1"}}})

    async def new_token() -> bool:
        c = await kube.get(KUBEADM_CONFIG, namespace, f"{POOL}-config") or {}
        t = c["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].get("token")
        sec = await kube.get(SECRET, namespace, f"{POOL}-config") or {}
        return bool(t) and t != token and sec.get("data") != data and \
            await wl.get(SECRET, "kube-system", token_secret_name(t)) is not None
    await eventually(new_token, 30, "a new bootstrap token and join data for the pool", state)

    # steady: no writes to the pool's objects (both pools, the instances, their Machines)
    async def versions() -> dict[str, str]:
        out = {}
        for g in (MACHINE_POOL, DOCKER_MACHINE_POOL, MACHINE, DOCKER_MACHINE, KUBEADM_CONFIG):
            for o in await kube.list(g, namespace):
                out[f"{g.kind}/{o['metadata']['name']}"] = o["metadata"]["resourceVersion"]
        return out
    v1, v2 = await quiet_versions(operator[0], versions, window=4, timeout=60, what="the pools converged",
                                  namespace=namespace)
    assert v2 == v1

    # the pool whose DockerMachinePool is missing: a clear condition, nothing created
    missing = await kube.get(MACHINE_POOL, namespace, f"{CLUSTER_NAME_}-mp-missing")
    assert missing is not None
    c = cond.get(missing, "InfrastructureReady")
    assert c is not None and c["status"] == "False" and c["reason"] == "ObjectDoesNotExist", c
    assert f"DockerMachinePool {CLUSTER_NAME_}-dmp-missing does not exist" in c["message"]
    msel = {MACHINE_POOL_NAME: f"{CLUSTER_NAME_}-mp-missing"}
    assert not await kube.list(MACHINE, namespace, labels=msel)
    assert not await kube.list(DOCKER_MACHINE, namespace, labels=msel)

    # 1 -> 3 through the scale subresource
    await kube.merge_patch(MACHINE_POOL, namespace, POOL, {"spec": {"replicas": 3}}, subresource="scale")
    await eventually(lambda: converged(3), 120, "MachinePool of 3 running", state)
    cl = await kube.get(CLUSTER, namespace, CLUSTER_NAME_)
    assert cl is not None and cl["status"]["workers"]["desiredReplicas"] == 5  # 3 + the missing pool's 2

    # upstream clusterctl finds the MachinePools (it failed with `no matches for kind "MachinePool"` before)
    out = await asyncio.to_thread(subprocess.run, [str(clusterctl()), "describe", "cluster", CLUSTER_NAME_, "-n",
                                                   namespace, "--kubeconfig", str(envtest.kubeconfig_path)],
                                  capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = {ln.split()[0].lstrip("├└─│ "): ln.split()[1:] for ln in out.stdout.splitlines() if "MachinePool/" in ln}
    assert set(rows) == {f"MachinePool/{POOL}", f"MachinePool/{CLUSTER_NAME_}-mp-missing"}, out.stdout
    after_pool = out.stdout.split(f"MachinePool/{POOL}", 1)[1].splitlines()[1]
    assert "3 Machines" in after_pool and after_pool.split("...")[1].split()[:2] == ["3", "3"], out.stdout

    # 3 -> 1
    await kube.merge_patch(MACHINE_POOL, namespace, POOL, {"spec": {"replicas": 1}})
    await eventually(lambda: converged(1), 120, "MachinePool scaled down to 1", state)

    # a version bump replaces the instance, with never more than one extra instance
    peak = 0
    stop = asyncio.Event()

    async def watch_peak() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, len([d for d in await kube.list(DOCKER_MACHINE, namespace, labels=sel)
                                  if not d["metadata"].get("deletionTimestamp")]))
            await asyncio.sleep(0.1)

    await kube.merge_patch(MACHINE_POOL, namespace, POOL, {"spec": {"replicas": 2}})
    await eventually(lambda: converged(2), 120, "MachinePool of 2 running", state)
    before = {d["metadata"]["name"] for d in await kube.list(DOCKER_MACHINE, namespace, labels=sel)}
    watcher = asyncio.create_task(watch_peak())
    await kube.merge_patch(MACHINE_POOL, namespace, POOL, {"spec": {"template": {"spec": {"version": "v1.35.0"}}}})
    await eventually(lambda: converged(2, "v1.35.0"), 180, "instances replaced with v1.35.0", state)
    after = {d["metadata"]["name"] for d in await kube.list(DOCKER_MACHINE, namespace, labels=sel)}
    assert not before & after
    # a DockerMachinePool template change replaces them too
    await kube.merge_patch(DOCKER_MACHINE_POOL, namespace, f"{CLUSTER_NAME_}-dmp-0",
                           {"spec": {"template": {"extraMounts": [{"containerPath": "/x", "hostPath": "/tmp"}]}}})

    async def remounted() -> bool:
        dms = await kube.list(DOCKER_MACHINE, namespace, labels=sel)
        return await converged(2, "v1.35.0") and all((d.get("spec") or {}).get("extraMounts") for d in dms)
    await eventually(remounted, 180, "instances replaced with the new template", state)
    stop.set()
    await watcher
    assert peak == 3, f"at most one instance above the 2 replicas during the rollouts, saw {peak}"

    # deleting the pool takes its instances, Machines, DockerMachinePool and KubeadmConfig with it
    await kube.delete(MACHINE_POOL, namespace, POOL)

    async def pool_gone() -> bool:
        return (await kube.get(MACHINE_POOL, namespace, POOL) is None
                and not await kube.list(MACHINE, namespace, labels=sel)
                and not await kube.list(DOCKER_MACHINE, namespace, labels=sel)
                and await kube.get(DOCKER_MACHINE_POOL, namespace, f"{CLUSTER_NAME_}-dmp-0") is None
                and await kube.get(KUBEADM_CONFIG, namespace, f"{POOL}-config") is None
                and not pool_containers(runtime))
    await eventually(pool_gone, 120, "the pool and everything it made gone", state)

    # deleting the Cluster deletes the other MachinePool (and everything else)
    await kube.delete(CLUSTER, namespace, CLUSTER_NAME_)

    async def all_gone() -> bool:
        left = [await kube.list(g, namespace) for g in (CLUSTER, MACHINE_POOL, MACHINE, DOCKER_MACHINE,
                                                         DOCKER_MACHINE_POOL, DOCKER_CLUSTER)]
        return not any(left) and not runtime.list_containers({CONTAINER_CLUSTER: CLUSTER_NAME_})

    async def left() -> Any:
        kinds = (CLUSTER, MACHINE_POOL, MACHINE, DOCKER_MACHINE, DOCKER_MACHINE_POOL, DOCKER_CLUSTER)
        return {g.kind: [(o["metadata"]["name"], o["metadata"].get("finalizers"))
                         for o in await kube.list(g, namespace)] for g in kinds}
    await eventually(all_gone, 120, "cluster, pools, machines and containers gone", left)


def _upstream_documents(name: str, namespace: str, version: str) -> list[dict[str, Any]]:
    """upstream's e2e template `name` with the variables of upstream's docker e2e config."""
    values = {**E2E_VARIABLES, "NAMESPACE": namespace, "CLUSTER_NAME": "up-" + name.removesuffix(".yaml")[-20:],
              "KUBERNETES_VERSION": version}
    return envsubst.documents(UPSTREAM / name, values, namespace)


async def test_upstream_machine_pool_flavor(operator: tuple[Manager, FakeRuntime], kube: Kube,
                                            namespace: str) -> None:
    """upstream release-1.13's machine-pool e2e flavor, unchanged: the Cluster becomes Available with its
    MachinePool running (spread over the flavor's failure domains), and deleting the Cluster removes it all."""
    _, runtime = operator
    docs = _upstream_documents("e2e-cluster-template-machine-pool.yaml", namespace, "v1.34.4")
    cname = next(d["metadata"]["name"] for d in docs if d["kind"] == "Cluster")
    mp_name = next(d["metadata"]["name"] for d in docs if d["kind"] == "MachinePool")
    for d in docs:
        if d["kind"] == "MachinePool":
            d["spec"]["replicas"] = 2
    assert all(o.ok for o in await apply_objects(kube, docs))

    async def running() -> bool:
        mp = await kube.get(MACHINE_POOL, namespace, mp_name) or {}
        c = await kube.get(CLUSTER, namespace, cname) or {}
        st = mp.get("status") or {}
        return (st.get("phase") == "Running" and st.get("readyReplicas") == 2 and len(st.get("nodeRefs") or []) == 2
                and cond.is_true(c, "Available"))

    async def state() -> Any:
        mp = await kube.get(MACHINE_POOL, namespace, mp_name) or {}
        c = await kube.get(CLUSTER, namespace, cname) or {}
        return {"mp": mp.get("status"), "cluster": [(x["type"], x["status"], x.get("message"))
                                                     for x in (c.get("status") or {}).get("conditions") or []
                                                     if x["status"] != "True"]}
    await eventually(running, 120, "upstream's machine-pool flavor Available with its pool running", state)
    machines = await kube.list(MACHINE, namespace, labels={MACHINE_POOL_NAME: mp_name})
    assert sorted(m["spec"]["failureDomain"] for m in machines) == ["fd4", "fd5"]

    await kube.delete(CLUSTER, namespace, cname)

    async def gone() -> bool:
        left = [await kube.list(g, namespace) for g in (CLUSTER, MACHINE_POOL, MACHINE, DOCKER_MACHINE,
                                                         DOCKER_MACHINE_POOL, DOCKER_CLUSTER)]
        return not any(left) and not runtime.list_containers({CONTAINER_CLUSTER: cname})
    await eventually(gone, 120, "the flavor's objects and containers gone", state)
