"""Issue 25 item 6/7: upstream clusterctl v1.13 (`make clusterctl`) moves a running workload cluster between two
capd-py management clusters. The target is made by `capd-py init --kubeconfig` (which records capd-py's providers
in clusterctl's inventory); the session's management cluster gets the same inventory. After
`clusterctl move --to-kubeconfig` the cluster keeps its containers and Machines (none replaced), the target's
controllers make it Available, the source keeps nothing, `clusterctl describe cluster` and
`clusterctl upgrade plan` run against the target, and deleting it there leaves nothing on docker.

`clusterctl move` takes every cluster of its namespace: this test works in a namespace of its own."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

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
    run,
    wait_for,
)
from capd_py.testing.envtest import EnvTest
from capd_py.testing.quiet import wait_quiet_sync

pytestmark = pytest.mark.e2e


def machine_names(m: Mgmt, cluster: str, ns: str) -> dict[str, str]:
    """Machine name -> its Node's name."""
    items = json.loads(m.kubectl("get", "machines", "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={cluster}",
                                 "-o", "json"))["items"]
    return {i["metadata"]["name"]: ((i.get("status") or {}).get("nodeRef") or {}).get("name", "") for i in items}


def reconciled(m: Mgmt, cluster: str, ns: str) -> bool:
    got = m.get("cluster", cluster, ns)
    paused: dict[str, Any] = next((x for x in got["status"].get("conditions") or [] if x["type"] == "Paused"), {})
    return bool(paused.get("status") == "False" and paused.get("observedGeneration") == got["metadata"]["generation"])


def test_upstream_clusterctl_move(clusterctl: str, mgmt: Mgmt, own_namespace: str, tmp_path: Path) -> None:
    ns = own_namespace
    suffix = secrets.token_hex(3)
    name, ctrl = f"e2e-ccmv-{suffix}", f"e2e-ccmv-{suffix}"
    env2 = EnvTest(controller_manager=True).start()
    # the target's controllers keep their writes and reconciles here (`capd-py init` passes its environment on)
    target = Mgmt(env2, str(env2.kubeconfig_path), management.log_path(ctrl), tmp_path / "target-activity.json")
    config = ctl.local_repository(tmp_path / "repository")

    def cc(*args: str) -> str:
        r = ctl.run(list(args), config, tmp_path, timeout=600)
        print(f"$ clusterctl {' '.join(args)}\n{r.stdout}{r.stderr}")
        return r.stdout

    created = False
    try:
        run([*CAPD, "init", "--kubeconfig", target.kubeconfig, "--name", ctrl],
            env={ACTIVITY_FILE_ENV: str(target.activity)})
        assert target.kubectl("get", "providers.clusterctl.cluster.x-k8s.io", "-A", "-o", "name").split() != []
        k = Kube.from_kubeconfig(mgmt.kubeconfig)  # the session's management cluster: the same inventory
        try:
            asyncio.run(inventory.install(k))
        finally:
            k.close()

        created = True
        create_cluster(mgmt, name, 1, 1, tmp_path, 600, namespace=ns)
        before, machines_before = cluster_containers(name), machine_names(mgmt, name, ns)
        assert len(before) == 3 and len(machines_before) == 2, (before, machines_before)

        t0 = time.monotonic()
        cc("move", "-n", ns, "--kubeconfig", mgmt.kubeconfig, "--to-kubeconfig", target.kubeconfig, "-v", "1")
        move_seconds = time.monotonic() - t0
        assert cluster_objects_left(mgmt, name, ns) == []
        assert not target.get("cluster", name, ns)["spec"].get("paused")

        t1 = time.monotonic()
        wait_for(lambda: reconciled(target, name, ns), 120, "the target's controllers to reconcile the cluster", 1)
        wait_for(lambda: target.condition("cluster", name, "Available", ns), 300, "Available at the target", 2)
        available_after = time.monotonic() - t1
        # settled (the target's controllers wrote nothing for 20 s): still the same containers and Machines (none
        # replaced), still Available
        assert target.activity is not None
        wait_quiet_sync(target.activity, window=20, timeout=300, what="the target's controllers settled")
        assert cluster_containers(name) == before
        assert machine_names(target, name, ns) == machines_before
        assert target.condition("cluster", name, "Available", ns)
        for dm in json.loads(target.kubectl("get", "dockermachines", "-n", ns, "-o", "json"))["items"]:
            assert dm["status"]["initialization"]["provisioned"] is True, dm["status"]
        assert cluster_objects_left(mgmt, name, ns) == []  # the source made nothing new meanwhile

        out = cc("describe", "cluster", name, "-n", ns, "--kubeconfig", target.kubeconfig)
        assert f"Cluster/{name}" in out and "True" in out.split(f"Cluster/{name}", 1)[1].splitlines()[0], out
        out = cc("upgrade", "plan", "--kubeconfig", target.kubeconfig)
        assert "infrastructure-docker" in out and CLUSTER_API_VERSION in out, out

        target.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
        assert docker_leftovers(name) == {}
        created = False
        print(f"\nclusterctl move: {move_seconds:.1f}s; Available at the target {available_after:.1f}s later")
    finally:
        if created:
            delete_cluster_objects(target, name, ns)
            delete_cluster_objects(mgmt, name, ns)
        target.kubectl("delete", "clusterresourceset", f"{name}-crs-0", "-n", ns, "--ignore-not-found", check=False)
        management.stop_controllers(ctrl)
        print(f"\n--- target controllers log tail ---\n{target.log_tail(40)}")
        management.log_path(ctrl).unlink(missing_ok=True)
        env2.stop()
