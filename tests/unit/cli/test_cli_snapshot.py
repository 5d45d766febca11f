"""cli/snapshot.py against an in-memory API, the fake runtime and real folders standing for the containers'
storage: create on a stopped cluster (copies, manifest last, size), list, the refusals of restore, delete."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_NAMESPACE, CONTAINER_ROLE, POWER_STATE_ANNOTATION
from capd_py.cli import snapshot as snap
from capd_py.cli.steps import Steps
from capd_py.runtime import networks
from capd_py.runtime.fake import FakeRuntime
from capd_py.runtime.protocol import ContainerSpec
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
