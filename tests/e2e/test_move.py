"""Issue 15: `capd-py move` (clusterctl move) of a running workload cluster to a second management cluster
made with `capd-py init --kubeconfig` (an envtest API server + host controllers). The cluster keeps its
containers, the target's controllers reconcile it (a worker added from there joins), the source keeps
nothing, and deleting it at the target leaves nothing on docker.

`capd-py move` moves every cluster of its namespace (as clusterctl), so each test here works in a namespace
of its own (`own_namespace`): the shared clusters of other tests live in `default`, which stays untouched
(an earlier version of this file, in `default`, moved the shared `e2e-quick` away)."""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path

import pytest

from capd_py.cli import management
from capd_py.testing.e2e import (
    CAPD,
    Mgmt,
    cluster_containers,
    cluster_objects_left,
    create_cluster,
    delete_cluster_objects,
    docker_leftovers,
    nodes_ready,
    run,
    wait_for,
)
from capd_py.testing.envtest import EnvTest

pytestmark = pytest.mark.e2e


def machines(m: Mgmt, cluster: str, ns: str) -> list[dict[str, object]]:
    items: list[dict[str, object]] = json.loads(m.kubectl(
        "get", "machines", "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={cluster}", "-o", "json"))["items"]
    return items


def default_namespace(m: Mgmt) -> list[str]:
    """The Cluster API objects in `default` (where other tests' clusters live): a move of another namespace
    must leave them as they are."""
    return sorted(m.kubectl("get", "clusters,machines,kubeadmcontrolplanes,machinedeployments,clusterresourcesets",
                            "-n", "default", "-o", "name").split())


def reconciled(m: Mgmt, cluster: str, ns: str) -> bool:
    """Paused=False for the current generation: this management cluster's Cluster controller recomputed the
    status (Available alone could still be the copied status)."""
    got = m.get("cluster", cluster, ns)
    paused: dict[str, object] = next((x for x in got["status"].get("conditions") or [] if x["type"] == "Paused"), {})
    return bool(paused.get("status") == "False" and paused.get("observedGeneration") == got["metadata"]["generation"])


def test_move_to_another_management_cluster(mgmt: Mgmt, own_namespace: str, tmp_path: Path) -> None:
    ns = own_namespace
    t_start = time.monotonic()
    suffix = secrets.token_hex(3)
    name, ctrl = f"e2e-mv-{suffix}", f"e2e-mv-{suffix}"
    env2 = EnvTest(controller_manager=True).start()
    target = Mgmt(env2, str(env2.kubeconfig_path), management.log_path(ctrl))
    created = False
    try:
        # the second management cluster: an existing API server made one by `capd-py init --kubeconfig`
        r = run([*CAPD, "init", "--kubeconfig", target.kubeconfig, "--name", ctrl])
        assert r.stdout.strip() == str(Path(target.kubeconfig).resolve())
        assert management.controllers_pid(ctrl) is not None
        target.kubectl("get", "crd", "clusters.cluster.x-k8s.io")

        created = True
        c = create_cluster(mgmt, name, 1, 1, tmp_path, 600, namespace=ns)
        before = cluster_containers(name)
        assert len(before) == 3, before  # control plane, worker, load balancer
        cp_machine = next(m for m in machines(mgmt, name, ns) if "control-plane" in str(m["metadata"]))
        others = default_namespace(mgmt)

        dry = mgmt.capd("move", "-n", ns, "--dry-run", "--to-kubeconfig", target.kubeconfig)
        tree = dry.stdout.splitlines()
        assert f"Cluster/{name}" in tree and f"ClusterResourceSet/{name}-crs-0" in tree, dry.stdout
        assert any(f"Secret/{name}-kubeconfig" in line for line in tree), dry.stdout
        assert target.kubectl("get", "clusters", "-A", "-o", "name").strip() == ""

        t0 = time.monotonic()
        r = mgmt.capd("move", "-n", ns, "--to-kubeconfig", target.kubeconfig)
        move_seconds = time.monotonic() - t0
        assert r.stdout == "" and "moved" in r.stderr, r.stderr

        # nothing of it at the source: Cluster API objects, its secrets, the CNI resource set; `default` as it was
        assert cluster_objects_left(mgmt, name, ns) == []
        assert [s for s in mgmt.kubectl("get", "secrets", "-n", ns, "-o", "name").split()
                if s.startswith(f"secret/{name}")] == []
        assert mgmt.kubectl("get", "clusterresourceset,configmap", "-n", ns, "-o", "name",
                            "--ignore-not-found").split().count(f"configmap/cni-{name}-crs-0") == 0
        assert default_namespace(mgmt) == others
        # at the target: resumed, Available, the same containers, the bootstrap facts kept
        cl = target.get("cluster", name, ns)
        assert not cl["spec"].get("paused")
        t1 = time.monotonic()

        wait_for(lambda: reconciled(target, name, ns), 120, "the target's controllers to reconcile the cluster", 1)
        wait_for(lambda: target.condition("cluster", name, "Available", ns), 120, "Available at the target", 2)
        available_after_move = time.monotonic() - t1
        assert cluster_containers(name) == before
        moved_cp = target.get("machine", cp_machine["metadata"]["name"], ns)  # type: ignore[index]
        assert moved_cp["metadata"]["uid"] != cp_machine["metadata"]["uid"]  # type: ignore[index]
        assert moved_cp["status"]["nodeRef"] == cp_machine["status"]["nodeRef"]  # type: ignore[index]
        for dm in json.loads(target.kubectl("get", "dockermachines", "-n", ns, "-o", "json"))["items"]:
            assert dm["status"]["initialization"]["provisioned"] is True
            assert not any(cd.get("reason") == "ContainerDeleted" for cd in dm["status"].get("conditions") or [])

        # the target's controllers reconcile it: a second worker joins
        t2 = time.monotonic()
        target.kubectl("scale", "machinedeployment", f"{name}-md-0", "-n", ns, "--replicas", "2")
        wait_for(lambda: nodes_ready(c.kubeconfig, 3), 420, "3 Ready nodes", 5)
        wait_for(lambda: target.condition("machinedeployment", f"{name}-md-0", "Available", ns)
                 and target.condition("cluster", name, "Available", ns)
                 and target.get("machinedeployment", f"{name}-md-0", ns)["status"].get("readyReplicas") == 2,
                 180, "MachineDeployment 2/2 and the Cluster Available", 3)
        scale_seconds = time.monotonic() - t2
        after = cluster_containers(name)
        assert len(after) == 4 and set(before.items()) <= set(after.items()), (before, after)
        assert len(machines(target, name, ns)) == 3
        assert cluster_objects_left(mgmt, name, ns) == []  # the source made nothing new meanwhile

        # deleting it at the target removes everything
        t3 = time.monotonic()
        target.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
        assert docker_leftovers(name) == {}
        assert cluster_objects_left(target, name, ns) == []
        created = False
        delete_seconds = time.monotonic() - t3
        print(f"\nmove: {move_seconds:.1f}s; Available at the target {available_after_move:.1f}s later; "
              f"scale 1->2 from the target {scale_seconds:.0f}s; delete {delete_seconds:.0f}s; "
              f"test {time.monotonic() - t_start:.0f}s")
    finally:
        if created:
            delete_cluster_objects(target, name, ns)
            delete_cluster_objects(mgmt, name, ns)
        target.kubectl("delete", "clusterresourceset", f"{name}-crs-0", "-n", ns, "--ignore-not-found",
                       check=False)
        management.stop_controllers(ctrl)
        print(f"\n--- target controllers log tail ---\n{target.log_tail(40)}")
        management.log_path(ctrl).unlink(missing_ok=True)
        env2.stop()


def test_self_hosted(mgmt: Mgmt, own_namespace: str, tmp_path: Path) -> None:
    """Upstream's self-hosted e2e: a workload cluster becomes its own management cluster (`capd-py init
    --kubeconfig` with its kubeconfig, then a move into it), scales itself, and is moved back out to be
    deleted."""
    ns = own_namespace
    t_start = time.monotonic()
    suffix = secrets.token_hex(3)
    name, ctrl = f"e2e-sh-{suffix}", f"e2e-sh-{suffix}"
    created = True
    try:
        c = create_cluster(mgmt, name, 1, 1, tmp_path, 600, namespace=ns)
        before = cluster_containers(name)
        others = default_namespace(mgmt)
        run([*CAPD, "init", "--kubeconfig", str(c.kubeconfig), "--name", ctrl])
        self_hosted = Mgmt(mgmt.env, str(c.kubeconfig), management.log_path(ctrl))

        t0 = time.monotonic()
        mgmt.capd("move", "-n", ns, "--to-kubeconfig", str(c.kubeconfig))
        move_in = time.monotonic() - t0
        assert cluster_objects_left(mgmt, name, ns) == []
        assert default_namespace(mgmt) == others
        assert self_hosted.kubectl("get", "clusters", "-A", "-o", "name").split() == [
            f"cluster.cluster.x-k8s.io/{name}"]
        wait_for(lambda: reconciled(self_hosted, name, ns), 120, "the cluster to reconcile itself", 1)
        wait_for(lambda: self_hosted.condition("cluster", name, "Available", ns), 120, "Available, self-hosted", 2)
        assert cluster_containers(name) == before

        t1 = time.monotonic()
        self_hosted.kubectl("scale", "machinedeployment", f"{name}-md-0", "-n", ns, "--replicas", "2")
        wait_for(lambda: nodes_ready(c.kubeconfig, 3), 420, "3 Ready nodes", 5)
        wait_for(lambda: self_hosted.condition("machinedeployment", f"{name}-md-0", "Available", ns)
                 and self_hosted.get("machinedeployment", f"{name}-md-0", ns)["status"].get("readyReplicas") == 2,
                 180, "MachineDeployment 2/2", 3)
        scale = time.monotonic() - t1
        assert len(cluster_containers(name)) == 4

        # out again, to the bootstrap management cluster, which deletes it
        t2 = time.monotonic()
        r = run([*CAPD, "move", "-n", ns, "--kubeconfig", str(c.kubeconfig), "--to-kubeconfig", mgmt.kubeconfig])
        move_out = time.monotonic() - t2
        assert "moved" in r.stderr
        assert self_hosted.kubectl("get", "clusters,machines", "-A", "-o", "name").strip() == ""
        management.stop_controllers(ctrl)
        wait_for(lambda: reconciled(mgmt, name, ns), 120, "the bootstrap cluster to reconcile it again", 1)
        assert len(cluster_containers(name)) == 4
        assert default_namespace(mgmt) == others
        mgmt.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
        assert docker_leftovers(name) == {}
        delete_cluster_objects(mgmt, name, ns)
        created = False
        print(f"\nself-hosted: move in {move_in:.1f}s, scale 1->2 {scale:.0f}s, move out {move_out:.1f}s; "
              f"test {time.monotonic() - t_start:.0f}s")
    finally:
        management.stop_controllers(ctrl)
        print(f"\n--- self-hosted controllers log tail ---\n{management.log_path(ctrl).read_text()[-4000:]}"
              if management.log_path(ctrl).exists() else "")
        management.log_path(ctrl).unlink(missing_ok=True)
        if created:
            delete_cluster_objects(mgmt, name, ns)
