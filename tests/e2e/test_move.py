"""Moving clusters between management clusters: issue 15 (`capd-py move`) and issue 25 items 6/7 (upstream
clusterctl v1.13's `clusterctl move`, `make clusterctl`), upstream's self-hosted spec. Issue 40 split them by
what needs real nodes, as upstream v1.14 keeps its self-hosted spec on docker and tests controller logic on its
in-memory backend:

- the move graph, pause / copy / delete order, what the source keeps, the target's controllers taking the
  cluster over (none of its Machines replaced, Available there, a worker added from there), describe / upgrade
  plan at the target, deletion there: in-memory clusters (`--flavor in-memory`, seconds each) between the e2e
  tier's management plane and a second one made by `capd-py init --kubeconfig` (an envtest API server + host
  controllers), shared by the two in-memory tests (`target`). The in-memory workload cluster leaves the source's
  process with its DevCluster and the target's controllers make it again behind the same endpoint (docs/in-memory.md
  "Moving an in-memory cluster"): the same kubeconfig still answers, from the target, after either move.
- what needs real containers: `test_self_hosted`, a docker cluster that becomes its own management cluster
  (`capd-py init --kubeconfig` with its kubeconfig, `capd-py move` into it), adds a worker of its own (kubeadm join
  of a real node), and is moved back out with upstream `clusterctl move` (which drops every status): the same
  containers and Machines after both moves (no node replaced, no second bootstrap), the DockerMachines provisioned
  again from their providerID, settled (the controllers' write counter), then deleted leaving nothing on docker.

Each test works in a namespace of its own (`own_namespace`): both movers take every cluster of a namespace, and the
shared clusters of other tests live in `default`, which must stay untouched."""

from __future__ import annotations

import asyncio
import json
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.cli import management
from capd_py.controllers.manager import ACTIVITY_FILE_ENV
from capd_py.kube import inventory
from capd_py.kube.client import Kube
from capd_py.testing import clusterctl as ctl
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
    workload_kubectl,
)
from capd_py.testing.envtest import EnvTest
from capd_py.testing.quiet import wait_quiet_sync

pytestmark = pytest.mark.e2e


def machines(m: Mgmt, cluster: str, ns: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(m.kubectl(
        "get", "machines", "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={cluster}", "-o", "json"))["items"]
    return items


def machine_nodes(m: Mgmt, cluster: str, ns: str) -> dict[str, str]:
    """Machine name -> its Node's name."""
    return {i["metadata"]["name"]: ((i.get("status") or {}).get("nodeRef") or {}).get("name", "")
            for i in machines(m, cluster, ns)}


def default_namespace(m: Mgmt) -> list[str]:
    """The Cluster API objects in `default` (where other tests' clusters live): a move of another namespace
    must leave them as they are."""
    return sorted(m.kubectl("get", "clusters,machines,kubeadmcontrolplanes,machinedeployments,clusterresourcesets",
                            "-n", "default", "-o", "name").split())


def reconciled(m: Mgmt, cluster: str, ns: str) -> bool:
    """Paused=False for the current generation: this management cluster's Cluster controller recomputed the
    status (Available alone could still be the copied status)."""
    got = m.get("cluster", cluster, ns)
    paused: dict[str, Any] = next((x for x in got["status"].get("conditions") or [] if x["type"] == "Paused"), {})
    return bool(paused.get("status") == "False" and paused.get("observedGeneration") == got["metadata"]["generation"])


def install_inventory(m: Mgmt) -> None:
    """clusterctl's provider inventory, as `capd-py init` records it (clusterctl move checks both ends)."""
    k = Kube.from_kubeconfig(m.kubeconfig)
    try:
        asyncio.run(inventory.install(k))
    finally:
        k.close()


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture(scope="module")
def target(mgmt: Mgmt, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mgmt]:
    """A second management cluster: an existing API server made one by `capd-py init --kubeconfig` (CRDs, clusterctl's
    inventory, host controllers keeping their writes in an activity file); the session's management cluster gets the
    same inventory. Shared by the in-memory move tests, each in a namespace of its own."""
    ctrl = f"e2e-target-{secrets.token_hex(3)}"
    env2 = EnvTest(controller_manager=True).start()
    t = Mgmt(env2, str(env2.kubeconfig_path), management.log_path(ctrl),
             tmp_path_factory.mktemp("target") / "activity.json")
    try:
        r = run([*CAPD, "init", "--kubeconfig", t.kubeconfig, "--name", ctrl], env={ACTIVITY_FILE_ENV: str(t.activity)})
        assert r.stdout.strip() == str(Path(t.kubeconfig).resolve())
        assert management.controllers_pid(ctrl) is not None
        t.kubectl("get", "crd", "clusters.cluster.x-k8s.io")
        assert t.kubectl("get", "providers.clusterctl.cluster.x-k8s.io", "-A", "-o", "name").split() != []
        install_inventory(mgmt)
        yield t
    finally:
        management.stop_controllers(ctrl)
        print(f"\n--- target controllers log tail ---\n{t.log_tail(40)}")
        management.log_path(ctrl).unlink(missing_ok=True)
        env2.stop()


def create_in_memory_cluster(m: Mgmt, name: str, ns: str, tmp: Path) -> Path:
    """`capd-py generate cluster --flavor in-memory` (1 CP + 1 W) plus the default template's ClusterResourceSet and
    its ConfigMap (the CNI, applied into the in-memory cluster) and a MachineHealthCheck of every machine, applied
    with `capd-py apply --wait`: Available, 2 Ready Nodes over HTTPS at its endpoint. Returns the kubeconfig's
    path."""
    docs = [d for d in yaml.safe_load_all(m.capd("generate", "cluster", name, "--flavor", "in-memory",
                                                 "--control-plane-machine-count", "1", "--worker-machine-count", "1",
                                                 "--target-namespace", ns).stdout) if d]
    crs = [d for d in yaml.safe_load_all(m.capd("generate", "cluster", name, "--target-namespace", ns).stdout)
           if d and d["kind"] in ("ClusterResourceSet", "ConfigMap")]
    assert sorted(d["metadata"]["name"] for d in crs) == sorted([f"cni-{name}-crs-0", f"{name}-crs-0"]), crs
    cluster = next(d for d in docs if d["kind"] == "Cluster")
    cluster["metadata"].setdefault("labels", {})["cni"] = f"{name}-crs-0"
    # a health check of every machine: a moved Machine whose Node the target did not have at once would be
    # remediated ("Node ... has been deleted"), and the tests below would see it replaced
    mhc = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineHealthCheck",
           "metadata": {"name": f"{name}-mhc", "namespace": ns},
           "spec": {"clusterName": name, "selector": {"matchLabels": {"cluster.x-k8s.io/cluster-name": name}},
                    "checks": {"unhealthyNodeConditions": [{"type": "Ready", "status": "False",
                                                            "timeoutSeconds": 300}]}}}
    m.capd("apply", "-f", "-", "--wait", "120s", input_=yaml.safe_dump_all([*docs, *crs, mhc]), timeout=180)
    kc = tmp / f"{name}.kubeconfig"
    m.capd("get", "kubeconfig", name, "-n", ns, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, 2), 60, "2 Ready nodes", 0.5)
    return kc


def node_uids(kc: Path) -> dict[str, str]:
    """The workload cluster's Nodes (name -> uid), as its API server at the kubeconfig's endpoint answers."""
    return {n["metadata"]["name"]: n["metadata"]["uid"]
            for n in json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]}


def devmachines_provisioned(m: Mgmt, ns: str, cluster: str) -> dict[str, Any]:
    """DevMachine name -> (provisioned, providerID, VMProvisioned status)."""
    out = {}
    for dm in json.loads(m.kubectl("get", "devmachines", "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={cluster}",
                                   "-o", "json"))["items"]:
        vm = next((c["status"] for c in (dm.get("status") or {}).get("conditions") or []
                   if c["type"] == "VMProvisioned"), None)
        out[dm["metadata"]["name"]] = (((dm.get("status") or {}).get("initialization") or {}).get("provisioned"),
                                       dm["spec"].get("providerID"), vm)
    return out


def test_self_hosted(clusterctl: str, mgmt: Mgmt, own_namespace: str, tmp_path: Path) -> None:
    """Upstream's self-hosted e2e: a workload cluster becomes its own management cluster (`capd-py init
    --kubeconfig` with its kubeconfig, then `capd-py move` into it), scales itself, and is moved back out with
    upstream `clusterctl move` (as upstream's spec does) to be deleted by the bootstrap management cluster."""
    ns = own_namespace
    t_start = time.monotonic()
    suffix = secrets.token_hex(3)
    name, ctrl = f"e2e-sh-{suffix}", f"e2e-sh-{suffix}"
    config = ctl.local_repository(tmp_path / "repository")
    created = True
    try:
        c = create_cluster(mgmt, name, 1, 1, tmp_path, 600, namespace=ns)
        before = cluster_containers(name)
        assert len(before) == 3, before  # control plane, worker, load balancer
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
        grown = cluster_containers(name)
        assert len(grown) == 4 and set(before.items()) <= set(grown.items()), (before, grown)
        machines_before = machine_nodes(self_hosted, name, ns)

        # out again with upstream clusterctl (both ends carry capd-py's inventory), to the bootstrap management
        # cluster, which deletes it
        install_inventory(mgmt)
        t2 = time.monotonic()
        r = ctl.run(["move", "-n", ns, "--kubeconfig", str(c.kubeconfig), "--to-kubeconfig", mgmt.kubeconfig,
                     "-v", "1"], config, tmp_path, timeout=300)
        move_out = time.monotonic() - t2
        assert "Clusters=1" in r.stdout + r.stderr, r.stdout + r.stderr
        assert self_hosted.kubectl("get", "clusters,machines", "-A", "-o", "name").strip() == ""
        management.stop_controllers(ctrl)
        assert not mgmt.get("cluster", name, ns)["spec"].get("paused")
        wait_for(lambda: reconciled(mgmt, name, ns), 120, "the bootstrap cluster to reconcile it again", 1)
        wait_for(lambda: mgmt.condition("cluster", name, "Available", ns), 300, "Available back home", 2)
        # settled (the bootstrap cluster's controllers wrote nothing in the namespace for 10 s): the same containers
        # and Machines (none replaced, no second bootstrap), every DockerMachine provisioned again although
        # clusterctl dropped its status
        assert mgmt.activity is not None
        wait_quiet_sync(mgmt.activity, window=10, timeout=300, what="the bootstrap cluster settled", namespace=ns)
        assert cluster_containers(name) == grown
        assert machine_nodes(mgmt, name, ns) == machines_before
        assert mgmt.condition("cluster", name, "Available", ns)
        for dm in json.loads(mgmt.kubectl("get", "dockermachines", "-n", ns, "-o", "json"))["items"]:
            assert dm["status"]["initialization"]["provisioned"] is True, dm["status"]
            assert not any(cd.get("reason") == "ContainerDeleted" for cd in dm["status"].get("conditions") or [])
        assert default_namespace(mgmt) == others
        mgmt.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
        assert docker_leftovers(name) == {}
        delete_cluster_objects(mgmt, name, ns)
        created = False
        print(f"\nself-hosted: capd-py move in {move_in:.1f}s, scale 1->2 {scale:.0f}s, clusterctl move out "
              f"{move_out:.1f}s; test {time.monotonic() - t_start:.0f}s")
    finally:
        management.stop_controllers(ctrl)
        print(f"\n--- self-hosted controllers log tail ---\n{management.log_path(ctrl).read_text()[-4000:]}"
              if management.log_path(ctrl).exists() else "")
        management.log_path(ctrl).unlink(missing_ok=True)
        if created:
            delete_cluster_objects(mgmt, name, ns)


def test_capd_py_move_of_an_in_memory_cluster(mgmt: Mgmt, target: Mgmt, own_namespace: str, tmp_path: Path) -> None:
    """`capd-py move` (formerly on a docker cluster, 94 s): dry run, move, nothing left at the source, the target
    takes over (Paused=False there, Available, the same Machines and Nodes, the DevMachines provisioned), the
    workload API answers at the same endpoint from the target, a worker added from the target joins, deleting it
    there leaves nothing and closes the endpoint."""
    ns = own_namespace
    t_start = time.monotonic()
    name = f"e2e-mv-{secrets.token_hex(3)}"
    kc = create_in_memory_cluster(mgmt, name, ns, tmp_path)
    before_machines = machine_nodes(mgmt, name, ns)
    assert len(before_machines) == 2 and all(before_machines.values()), before_machines
    cp_machine = next(m for m in machines(mgmt, name, ns)
                      if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"])
    before_dms = devmachines_provisioned(mgmt, ns, name)
    before_nodes = node_uids(kc)
    port = int(mgmt.get("cluster", name, ns)["spec"]["controlPlaneEndpoint"]["port"])
    others = default_namespace(mgmt)

    dry = mgmt.capd("move", "-n", ns, "--dry-run", "--to-kubeconfig", target.kubeconfig)
    tree = dry.stdout.splitlines()
    assert f"Cluster/{name}" in tree and f"ClusterResourceSet/{name}-crs-0" in tree, dry.stdout
    assert any(f"Secret/{name}-kubeconfig" in line for line in tree), dry.stdout
    assert target.kubectl("get", "clusters", "-n", ns, "-o", "name", "--ignore-not-found").strip() == ""

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
    # at the target: resumed, reconciled there, Available, the same Machines on the same Nodes
    assert not target.get("cluster", name, ns)["spec"].get("paused")
    t1 = time.monotonic()
    wait_for(lambda: reconciled(target, name, ns), 60, "the target's controllers to reconcile the cluster", 0.5)
    wait_for(lambda: target.condition("cluster", name, "Available", ns), 60, "Available at the target", 0.5)
    available_after_move = time.monotonic() - t1
    assert machine_nodes(target, name, ns) == before_machines
    moved_cp = target.get("machine", cp_machine["metadata"]["name"], ns)
    assert moved_cp["metadata"]["uid"] != cp_machine["metadata"]["uid"]
    assert moved_cp["status"]["nodeRef"] == cp_machine["status"]["nodeRef"]
    assert devmachines_provisioned(target, ns, name) == before_dms  # provisioned, same providerIDs, VMs up
    # the same kubeconfig, the same endpoint: answered by the target's process now (its Nodes made there again)
    wait_for(lambda: nodes_ready(kc, 2), 60, "2 Ready nodes at the moved endpoint", 0.5)
    after_nodes = node_uids(kc)
    assert sorted(after_nodes) == sorted(before_nodes)
    assert not set(after_nodes.values()) & set(before_nodes.values()), "the endpoint still served by the source"

    # the target's controllers reconcile it: a second worker joins
    t2 = time.monotonic()
    target.kubectl("scale", "machinedeployment", f"{name}-md-0", "-n", ns, "--replicas", "2")
    wait_for(lambda: nodes_ready(kc, 3), 60, "3 Ready nodes", 0.5)
    wait_for(lambda: target.condition("machinedeployment", f"{name}-md-0", "Available", ns)
             and target.condition("cluster", name, "Available", ns)
             and target.get("machinedeployment", f"{name}-md-0", ns)["status"].get("readyReplicas") == 2,
             60, "MachineDeployment 2/2 and the Cluster Available", 0.5)
    scale_seconds = time.monotonic() - t2
    after = machine_nodes(target, name, ns)
    assert len(after) == 3 and set(before_machines.items()) <= set(after.items()), (before_machines, after)
    assert cluster_objects_left(mgmt, name, ns) == []  # the source made nothing new meanwhile

    # deleting it at the target removes everything, its endpoint closes
    t3 = time.monotonic()
    target.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "120")
    assert cluster_objects_left(target, name, ns) == []
    assert refused(port)
    assert docker_leftovers(name) == {}  # it never had any
    print(f"\ncapd-py move (in-memory 1 CP + 1 W): move {move_seconds:.1f}s; Available at the target "
          f"{available_after_move:.1f}s later; scale 1->2 from the target {scale_seconds:.1f}s; delete "
          f"{time.monotonic() - t3:.1f}s; test {time.monotonic() - t_start:.1f}s")


def test_upstream_clusterctl_move_of_an_in_memory_cluster(clusterctl: str, mgmt: Mgmt, target: Mgmt,
                                                          own_namespace: str, tmp_path: Path) -> None:
    """Upstream `clusterctl move` (formerly tests/e2e/test_clusterctl_move.py on a docker cluster, 71 s): clusterctl
    drops every status; the target's controllers make the cluster Available; once they settled (their write
    counter, no sleep) the same Machines on the same Nodes, still Available, the DevMachines provisioned again; the
    source keeps nothing; `clusterctl describe cluster` and `clusterctl upgrade plan` at the target; the workload
    API answers at the same endpoint; deleting it there leaves nothing."""
    ns = own_namespace
    name = f"e2e-ccmv-{secrets.token_hex(3)}"
    config = ctl.local_repository(tmp_path / "repository")

    def cc(*args: str) -> str:
        r = ctl.run(list(args), config, tmp_path, timeout=300)
        print(f"$ clusterctl {' '.join(args)}\n{r.stdout}{r.stderr}")
        return r.stdout

    kc = create_in_memory_cluster(mgmt, name, ns, tmp_path)
    machines_before = machine_nodes(mgmt, name, ns)
    assert len(machines_before) == 2 and all(machines_before.values()), machines_before
    providers_before = {k: v[1] for k, v in devmachines_provisioned(mgmt, ns, name).items()}

    t0 = time.monotonic()
    cc("move", "-n", ns, "--kubeconfig", mgmt.kubeconfig, "--to-kubeconfig", target.kubeconfig, "-v", "1")
    move_seconds = time.monotonic() - t0
    assert cluster_objects_left(mgmt, name, ns) == []
    assert not target.get("cluster", name, ns)["spec"].get("paused")

    t1 = time.monotonic()
    wait_for(lambda: reconciled(target, name, ns), 60, "the target's controllers to reconcile the cluster", 0.5)
    wait_for(lambda: target.condition("cluster", name, "Available", ns), 60, "Available at the target", 0.5)
    available_after = time.monotonic() - t1
    # settled (the target's controllers wrote nothing in the namespace for 10 s): still the same Machines on the
    # same Nodes (none replaced), still Available, every DevMachine provisioned again with its providerID
    assert target.activity is not None
    wait_quiet_sync(target.activity, window=10, timeout=120, what="the target's controllers settled", namespace=ns,
                    interval=0.5)
    assert machine_nodes(target, name, ns) == machines_before
    assert target.condition("cluster", name, "Available", ns)
    got = devmachines_provisioned(target, ns, name)
    assert {k: v[1] for k, v in got.items()} == providers_before
    assert all(v[0] is True and v[2] == "True" for v in got.values()), got
    assert cluster_objects_left(mgmt, name, ns) == []  # the source made nothing new meanwhile
    assert nodes_ready(kc, 2)  # the same kubeconfig answers, from the target

    out = cc("describe", "cluster", name, "-n", ns, "--kubeconfig", target.kubeconfig)
    assert f"Cluster/{name}" in out and "True" in out.split(f"Cluster/{name}", 1)[1].splitlines()[0], out
    out = cc("upgrade", "plan", "--kubeconfig", target.kubeconfig)
    assert "infrastructure-docker" in out and CLUSTER_API_VERSION in out, out

    target.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "120")
    assert cluster_objects_left(target, name, ns) == []
    assert docker_leftovers(name) == {}
    print(f"\nclusterctl move (in-memory 1 CP + 1 W): {move_seconds:.1f}s; Available at the target "
          f"{available_after:.1f}s later")
