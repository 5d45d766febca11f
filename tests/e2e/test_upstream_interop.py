"""Interop with upstream Cluster API v1.13's managers (issue 28 item 2), both directions, on real workload clusters.

a. upstream's core + kubeadm bootstrap + kubeadm control-plane managers, with only capd-py's Docker provider
   controllers (`capd-py controllers --controllers infrastructure`): capd-py's default template (1 CP + 1 worker)
   becomes an Available cluster with Ready nodes and is deleted cleanly: capd-py's provider is a conforming
   infrastructure provider.
b. capd-py's core + bootstrap + control plane (`--controllers core,bootstrap,controlplane`) with upstream CAPD's
   manager as the infrastructure provider: the same template becomes an Available cluster and is deleted cleanly.
   CAPD runs every container and exec `--privileged` (hard-coded in test/infrastructure/container/docker.go), which
   this machine refuses (no CAP_SYS_RESOURCE: docs/ENVIRONMENT.md, docs/upstream.md "Interop (b)"); CAPD reaches
   docker through capd_py/testing/docker_shim.py, which makes them capd-py's restricted mode. A separate test fails
   the day `--privileged` works here (the shim is then unneeded).

Marked `upstream` (and `e2e`): in `make test`, which builds the managers first; `make test-upstream` runs only
these. A missing binary or image fails, naming what builds it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from capd_py.kube.crds import install_crds
from capd_py.testing import docker_shim
from capd_py.testing import upstream_managers as um
from capd_py.testing.e2e import (
    K8S_VERSION,
    Mgmt,
    cluster_objects_left,
    create_cluster,
    delete_cluster_objects,
    docker_leftovers,
    management_plane,
    run,
    sweep_leftovers,
    wait_for,
)
from capd_py.testing.envtest import missing_binaries

pytestmark = [pytest.mark.e2e, pytest.mark.upstream]

HAPROXY = "kindest/haproxy:v20230606-42a2262b"  # CAPD's default load balancer image (loadbalancer/const.go)


def _require() -> None:
    """A missing prerequisite fails (CONVENTIONS), naming what builds it."""
    why = um.missing()
    if why:
        pytest.fail(f"{why} (run `make upstream`)", pytrace=False)
    missing = missing_binaries()
    if missing:
        pytest.fail(f"missing binaries {missing}: run `make images`", pytrace=False)
    for image in (f"capd-py/node:{K8S_VERSION}", f"kindest/node:{K8S_VERSION}", HAPROXY):
        if run(["docker", "image", "inspect", image], check=False).returncode != 0:
            pytest.fail(f"{image} is missing: run `make images`", pytrace=False)


@contextlib.contextmanager
def plane(tmp: Path, controllers: str, roles: tuple[str, ...], env: dict[str, str] | None = None
          ) -> Iterator[tuple[Mgmt, list[um.UpstreamManager]]]:
    """A management plane (envtest + `capd-py controllers --controllers <controllers>`, which also serves capd-py's
    webhooks) with upstream's managers `roles` beside it (`env` added to theirs), every controller of theirs
    started."""
    _require()
    sweep_leftovers()
    with management_plane(tmp / "controllers.log", env={"CAPD_PY_CONTROLLERS": controllers}) as m:
        k = m.env.kube()
        try:
            asyncio.run(install_crds(k, wait=True, crds=um.extra_crds(roles)))
        finally:
            k.close()
        with contextlib.ExitStack() as stack:
            ms = [stack.enter_context(um.UpstreamManager(r, m.env.kubeconfig_path, env=env or {})) for r in roles]
            try:
                for u in ms:
                    u.wait_healthy(60)
                    u.wait_started(timeout=120)
                    # upstream's defaulting + validating webhooks, as its deployment registers them: its
                    # controllers rely on admission defaults (a MachineDeployment's selector, ...)
                    m.kubectl("apply", "-f", "-", input_=yaml.safe_dump_all(u.webhook_configurations()))
                yield m, ms
            finally:
                for u in ms:
                    # the whole log stays in the test's tmp dir (the manager's own goes with it): a failure's
                    # first cause is rarely in the tail
                    kept = tmp / f"upstream-{u.role}.log"
                    with contextlib.suppress(OSError):
                        shutil.copyfile(u.log_path, kept)
                    print(f"\n--- upstream {u.role} manager log tail (all of it: {kept}) ---\n{u.log_tail(40)}")


@contextlib.contextmanager
def _cleaned_up(m: Mgmt, name: str) -> Iterator[Callable[[], float]]:
    """Yields the test's deletion (`capd-py delete cluster`, then nothing left: objects, containers, networks;
    returns its seconds); whatever happens, the cluster's objects and its CNI ClusterResourceSet go afterwards."""
    deleted = False

    def delete_and_check_clean() -> float:
        nonlocal deleted
        t0 = time.monotonic()
        m.capd("delete", "cluster", name, "--wait", "--timeout", "300")
        wait_for(lambda: not cluster_objects_left(m, name), 120, f"{name}'s objects gone")
        wait_for(lambda: not docker_leftovers(name), 60, f"{name}'s containers and networks gone")
        deleted = True
        return time.monotonic() - t0
    try:
        yield delete_and_check_clean
    finally:
        if not deleted:
            delete_cluster_objects(m, name)
        m.kubectl("delete", "clusterresourceset", f"{name}-crs-0", "--ignore-not-found", check=False)
        m.kubectl("delete", "configmap", f"cni-{name}-crs-0", "--ignore-not-found", check=False)


def test_upstream_core_bootstrap_kcp_with_capd_py_docker_provider(tmp_path: Path) -> None:
    """(a) capd-py's Docker provider is a conforming infrastructure provider under upstream's core, kubeadm
    bootstrap and KCP."""
    name = "e2e-upa"
    t_start = time.monotonic()
    with plane(tmp_path, "infrastructure", ("core", "kubeadm-bootstrap", "kubeadm-control-plane")) as (m, _), \
            _cleaned_up(m, name) as delete:
        c = create_cluster(m, name, 1, 1, tmp_path, timeout=600)
        # kubectl hides managedFields unless asked
        cl = json.loads(m.kubectl("get", "cluster", name, "-o", "json", "--show-managed-fields"))
        assert m.condition("cluster", name, "Available"), json.dumps(cl.get("status"), indent=1)
        # upstream's controllers did the work: the objects carry their field managers
        managers = {f.get("manager") for f in cl["metadata"].get("managedFields") or []}
        print(f"\nCluster {name} field managers: {sorted(map(str, managers))}")
        assert any(str(x).startswith(("cluster-api-manager", "capi-")) for x in managers), managers
        took = delete()
        print(f"\n(a) upstream core+bootstrap+KCP, capd-py Docker provider: Available after "
              f"{c.available_seconds:.0f}s, deleted cleanly in {took:.0f}s, test {time.monotonic() - t_start:.0f}s")


KIND_NETWORK = "kind"  # CAPD's docker.DefaultNetwork: a kind management cluster made it; here the test does


def _kind_network() -> bool:
    """CAPD's network `kind` (docker.DefaultNetwork: kind made it for a kind management cluster; here the test
    does); True if made here (removed after)."""
    if run(["docker", "network", "inspect", KIND_NETWORK], check=False).returncode == 0:
        return False
    run(["docker", "network", "create", "--label", "io.x-k8s.capd-py.test=upstream-interop", KIND_NETWORK])
    return True


def _capd_containers(name: str) -> list[str]:
    """Containers CAPD made for cluster `name` (it labels them as kind does: io.x-k8s.kind.cluster)."""
    return run(["docker", "ps", "-a", "-q", "--filter", f"label=io.x-k8s.kind.cluster={name}"]).stdout.split()


def test_privileged_refused_without_the_shim() -> None:
    """Why interop (b) needs capd_py/testing/docker_shim.py: this docker refuses `--privileged` (no
    CAP_SYS_RESOURCE to hand out), which upstream CAPD hard-codes for every container and exec. If this starts
    working, the shim is no longer needed here: this test fails to say so."""
    _require()
    privileged = run(["docker", "run", "--rm", "--privileged", "--entrypoint", "true", HAPROXY], check=False)
    assert privileged.returncode != 0, "docker run --privileged works on this machine now: the shim is not needed"
    assert "operation not permitted" in privileged.stderr, privileged.stderr


def test_capd_py_core_bootstrap_kcp_with_upstream_capd(tmp_path: Path) -> None:
    """(b) capd-py's core + bootstrap + KCP with upstream CAPD's manager as the infrastructure provider: the default
    template (1 CP + 1 worker) becomes an Available Cluster with Ready Nodes, every Docker* object CAPD's, then it
    is deleted cleanly (no objects, containers, networks or volumes). CAPD reaches docker through capd-py's Docker
    shim (DOCKER_HOST), which turns its hard-coded `--privileged` into capd-py's restricted mode (docs/upstream.md
    "Interop (b)")."""
    name = "e2e-upb"
    t_start = time.monotonic()
    made_network = _kind_network()
    try:
        with docker_shim.running(tmp_path / "docker-shim.sock") as shim, \
                plane(tmp_path, "core,bootstrap,controlplane", ("docker",),
                      env={"DOCKER_HOST": f"unix://{tmp_path / 'docker-shim.sock'}"}) as (m, _), \
                _cleaned_up(m, name) as delete:
            c = create_cluster(m, name, 1, 1, tmp_path, timeout=600)
            assert m.condition("cluster", name, "Available")
            # CAPD made the machines' containers (its labels), through the shim (restricted, not privileged)
            made = _capd_containers(name)
            assert len(made) == 3, made  # the load balancer, the control plane node, the worker
            assert shim.rewritten >= 3 and shim.exec_rewritten > 0, (shim.rewritten, shim.exec_rewritten)
            inspected = json.loads(run(["docker", "inspect", *made]).stdout)
            for hc in inspected:
                assert not hc["HostConfig"]["Privileged"] and hc["HostConfig"]["CapDrop"] == ["SYS_RESOURCE"]
            # the volumes of CAPD's containers (the nodes' /var), which the deletion must remove: read from the
            # containers, not as the host's new volumes (the other test worker makes volumes meanwhile)
            volumes = {v["Name"] for hc in inspected for v in hc.get("Mounts") or [] if v.get("Type") == "volume"}
            assert volumes, [hc.get("Mounts") for hc in inspected]
            # the Docker* objects are CAPD's (its field manager), the rest capd-py's
            dm = json.loads(m.kubectl("get", "dockermachines", "-l", f"cluster.x-k8s.io/cluster-name={name}",
                                      "-o", "json", "--show-managed-fields"))["items"]
            assert len(dm) == 2 and all(d["spec"].get("providerID", "").startswith("docker:////") for d in dm), dm
            writers = {f.get("manager") for d in dm for f in d["metadata"].get("managedFields") or []}
            print(f"\nDockerMachine field managers: {sorted(map(str, writers))}")
            assert any(str(w).startswith("capd-manager") for w in writers), writers
            took = delete()
            assert not _capd_containers(name)
            left = volumes & set(run(["docker", "volume", "ls", "-q"]).stdout.split())
            assert not left, f"volumes left by the cluster: {sorted(left)}"
            print(f"(b) capd-py core+bootstrap+KCP, upstream CAPD through the shim: Available after "
                  f"{c.available_seconds:.0f}s, deleted cleanly in {took:.0f}s, test {time.monotonic() - t_start:.0f}s")
    finally:
        # CAPD names containers <cluster>-lb, <machine>; none may stay (created or not)
        for cid in _capd_containers(name):
            run(["docker", "rm", "-f", "-v", cid], check=False)
        if made_network:
            run(["docker", "network", "rm", KIND_NETWORK], check=False)
