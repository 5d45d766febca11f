"""cli/snapshot.py against an in-memory API, the fake runtime and real folders standing for the containers'
storage: create on a stopped cluster (copies, manifest last, size), list, the refusals of restore, delete."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE, POWER_STATE_ANNOTATION
from capd_py.cli import snapshot as snap
from capd_py.cli.steps import Steps
from capd_py.runtime import networks
from capd_py.runtime.protocol import ContainerSpec
from capd_py.testing.fake_runtime import FakeRuntime
from capd_py.testing.fake_workload import FakeWorkloadKube

pytestmark = pytest.mark.unit

NODES = {"c1-lb": "load-balancer", "c1-control-plane-a": "control-plane"}


def _setup(tmp: Path) -> tuple[FakeRuntime, FakeWorkloadKube]:
    rt = FakeRuntime()
    networks.ensure_network(rt, "net", {})
    for name, role in NODES.items():
        rt.run_container(ContainerSpec(name=name, image="img:1", network="net", labels={
            CONTAINER_CLUSTER: "c1", CONTAINER_NAMESPACE: "ns", CONTAINER_ROLE: role}))
        rt.stop_container(name)
        paths = {"/": tmp / "docker" / name / "upper"}
        if role != "load-balancer":
            paths["/var"] = tmp / "docker" / name / "var"
        for p in paths.values():
            (p / "etc").mkdir(parents=True)
            (p / "etc" / "f").write_text(f"{name} {p.name}")
        rt.storage[name] = {k: str(v) for k, v in paths.items()}
    kube = FakeWorkloadKube(rt, "mgmt", "mgmt")
    kube.put_object("clusters", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
                                 "metadata": {"name": "c1", "namespace": "ns",
                                              "annotations": {POWER_STATE_ANNOTATION: "stopped"}},
                                 "spec": {"paused": True},
                                 "status": {"conditions": [{"type": "Paused", "status": "True"}]}})
    return rt, kube


def test_create_list_refusals_delete(tmp_path: Path) -> None:
    rt, kube = _setup(tmp_path)
    root = tmp_path / "snapshots"
    steps = Steps(plain=True, quiet=True)
    dest, size = asyncio.run(snap.create(kube, rt, root, "ns", "c1", "s1", steps, 30))
    assert dest == root / "ns" / "c1" / "s1"
    assert (dest / "c1-control-plane-a" / "vol_var" / "etc" / "f").read_text() == "c1-control-plane-a var"
    assert (dest / "c1-lb" / "rootfs" / "etc" / "f").read_text() == "c1-lb upper"
    m = json.loads((dest / "manifest.json").read_text())
    assert [(c["name"], c["mounts"]) for c in m["containers"]] == [("c1-control-plane-a", ["/", "/var"]),
                                                                    ("c1-lb", ["/"])]
    assert size == m["bytes"] > 0
    # still stopped: a stopped cluster is not started by create
    assert all(rt.get_container(n).status == "exited" for n in NODES)  # type: ignore[union-attr]
    with pytest.raises(snap.SnapshotError, match="exists"):
        asyncio.run(snap.create(kube, rt, root, "ns", "c1", "s1", steps, 30))
    with pytest.raises(snap.SnapshotError, match="snapshot name"):
        asyncio.run(snap.create(kube, rt, root, "ns", "c1", "Bad/Name", steps, 30))

    (root / "ns" / "c1" / "cut.partial").mkdir()
    assert [(x.name, x.complete) for x in snap.listing(root, "ns", "c1")] == [("cut", False), ("s1", True)]
    with pytest.raises(snap.SnapshotError, match="cut of ns/c1 is incomplete"):
        asyncio.run(snap.restore(kube, rt, root, "ns", "c1", "cut", steps, 30))
    with pytest.raises(snap.SnapshotError, match="no snapshot nope of ns/c1"):
        asyncio.run(snap.restore(kube, rt, root, "ns", "c1", "nope", steps, 30))
    rt.remove_container("c1-lb")
    with pytest.raises(snap.SnapshotError, match="container c1-lb is gone"):
        asyncio.run(snap.restore(kube, rt, root, "ns", "c1", "s1", steps, 30))

    assert snap.delete(root, "ns", "c1", "s1") and snap.delete(root, "ns", "c1", "cut")
    assert not snap.delete(root, "ns", "c1", "s1") and snap.listing(root, "ns", "c1") == []


def _objects(kube: FakeWorkloadKube) -> dict[str, str]:
    """A DockerCluster, a Machine (owned by the Cluster, with its facts in spec and status) and the kubeconfig
    Secret (owned by name only) besides the Cluster; their kinds -> resources."""
    uid = kube.object("clusters", "ns", "c1")["metadata"]["uid"]  # type: ignore[index]
    own = [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1", "uid": uid,
            "controller": True}]
    kube.put_object("dockerclusters", {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster",
                                       "metadata": {"name": "c1", "namespace": "ns", "ownerReferences": own,
                                                    "labels": {"cluster.x-k8s.io/cluster-name": "c1"}}, "spec": {}})
    kube.put_object("machines", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
                                 "metadata": {"name": "c1-control-plane-a", "namespace": "ns", "ownerReferences": own,
                                              "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
                                 "spec": {"clusterName": "c1", "providerID": "docker:////c1-control-plane-a"},
                                 "status": {"nodeRef": {"name": "c1-control-plane-a"}}})
    kube.put_object("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
                                "metadata": {"name": "c1-kubeconfig", "namespace": "ns"}, "data": {"value": "eA=="}})
    # a ClusterResourceSet outlives the cluster; its binding does not (owned by both)
    crs = kube.put_object("clusterresourcesets", {"apiVersion": "addons.cluster.x-k8s.io/v1beta2",
                                                  "kind": "ClusterResourceSet",
                                                  "metadata": {"name": "crs", "namespace": "ns"}, "spec": {}})
    kube.put_object("clusterresourcesetbindings", {
        "apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSetBinding",
        "metadata": {"name": "c1", "namespace": "ns", "ownerReferences": [
            *own, {"apiVersion": "addons.cluster.x-k8s.io/v1beta2", "kind": "ClusterResourceSet", "name": "crs",
                   "uid": crs["metadata"]["uid"]}]}, "spec": {"clusterName": "c1"}})
    return {"Cluster": "clusters", "DockerCluster": "dockerclusters", "Machine": "machines", "Secret": "secrets",
            "ClusterResourceSetBinding": "clusterresourcesetbindings"}


def test_restore_recreates_a_deleted_cluster_and_resumes_after_a_kill(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rt, kube = _setup(tmp_path)
    kinds = _objects(kube)
    old_uid = kube.object("clusters", "ns", "c1")["metadata"]["uid"]  # type: ignore[index]
    root = tmp_path / "snapshots"
    steps = Steps(plain=True, quiet=True)
    subnet = rt.get_network("net").subnet  # type: ignore[union-attr]
    lb_spec = rt.container_spec("c1-lb")
    dest, _ = asyncio.run(snap.create(kube, rt, root, "ns", "c1", "s1", steps, 30))
    saved = json.loads((dest / "objects.json").read_text())
    assert sorted(o["kind"] for o in saved) == sorted(kinds) and (dest / "objects.json").stat().st_mode & 0o077 == 0
    m = json.loads((dest / "manifest.json").read_text())
    assert m["network"]["subnet"] == subnet and m["objects"] == 5

    # `capd-py delete cluster`: objects, containers (their storage with them), network
    for kind, res in kinds.items():
        for o in saved:
            if o["kind"] == kind:
                kube.remove_object(res, "ns", o["metadata"]["name"])
    for n in NODES:
        rt.remove_container(n)
        for p in rt.storage[n].values():
            shutil.rmtree(p)
            Path(p).mkdir()  # a new container's empty storage
    rt.remove_network("net")

    started: list[str] = []

    async def drive(kube_: object, rt_: object, verb: str, *a: object, **kw: object) -> None:
        started.append(verb)  # start cluster's way up (powerstate, e2e-tested) is not this test's
    monkeypatch.setattr(snap, "_drive", drive)
    # killed while creating the objects, after the Cluster and one more
    made: list[object]
    real, made = snap.move.copy_object, []

    async def killed(target: object, n: object, new_uids: dict[str, str]) -> None:
        if len(made) == 2:
            raise KeyboardInterrupt
        made.append(n)
        await real(target, n, new_uids)  # type: ignore[arg-type]
    monkeypatch.setattr(snap.move, "copy_object", killed)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(snap.restore(kube, rt, root, "ns", "c1", "s1", steps, 30))
    progress = json.loads((dest / "restore.json").read_text())
    assert progress["phase"] == "objects" and progress["clusterUID"] != old_uid and started == []
    assert rt.get_network("net").subnet == subnet  # type: ignore[union-attr]
    assert {n: rt.get_container(n).status for n in NODES} == {n: "created" for n in NODES}  # type: ignore[union-attr]
    assert rt.container_spec("c1-lb") == lb_spec  # same address, host port, labels
    assert (tmp_path / "docker" / "c1-control-plane-a" / "var" / "etc" / "f").read_text() == "c1-control-plane-a var"

    # run again: the objects go on, then the start
    monkeypatch.setattr(snap.move, "copy_object", real)
    asyncio.run(snap.restore(kube, rt, root, "ns", "c1", "s1", steps, 30))
    assert started == ["start"] and not (dest / "restore.json").exists()
    c = kube.object("clusters", "ns", "c1")
    assert c is not None and c["metadata"]["uid"] == progress["clusterUID"]
    assert c["spec"]["paused"] is True and c["metadata"]["annotations"][POWER_STATE_ANNOTATION] == "stopped"
    for res, name in (("dockerclusters", "c1"), ("machines", "c1-control-plane-a")):
        o = kube.object(res, "ns", name)
        assert o is not None and [r["uid"] for r in o["metadata"]["ownerReferences"]] == [c["metadata"]["uid"]]
    mach = kube.object("machines", "ns", "c1-control-plane-a")
    assert mach["spec"]["providerID"] == "docker:////c1-control-plane-a"  # type: ignore[index]
    assert mach["status"]["nodeRef"] == {"name": "c1-control-plane-a"}  # type: ignore[index]
    assert kube.object("secrets", "ns", "c1-kubeconfig") is not None
    binding = kube.object("clusterresourcesetbindings", "ns", "c1")
    assert binding is not None and [r["uid"] for r in binding["metadata"]["ownerReferences"]] == [
        c["metadata"]["uid"], kube.object("clusterresourcesets", "ns", "crs")["metadata"]["uid"]]  # type: ignore[index]

    # a Cluster of that name made by someone else while a restore is under way: refused, nothing touched
    (dest / "restore.json").write_text(json.dumps({"phase": "storage"}))
    with pytest.raises(snap.SnapshotError, match="another cluster took the name"):
        asyncio.run(snap.restore(kube, rt, root, "ns", "c1", "s1", steps, 30))
