"""A whole workload cluster on a second docker host (issue 32): a second dockerd on this machine, started by the test
(hack/second-dockerd.sh: own socket, data root, exec root, a default bridge of its own, no iptables of its own) and
registered with `capd-py host add --address <this machine's address>`, as a remote host would be. The DockerCluster
names it (`capd-py.dev/docker-host`); the controllers copy the images there (never pulled), publish the load
balancer's API port on that host, and the cluster's endpoint and kubeconfig are `address:port`. Available, kubectl
works through the published port, and deletion leaves nothing on either daemon.

The second daemon runs with --iptables=false (one started with iptables would delete the main daemon's DOCKER
chains), so the host's FORWARD policy (DROP, set by the main daemon, br_netfilter on) would drop the traffic between
its containers: the test allows the cluster network's subnet in DOCKER-USER once the network exists, and the stop
removes those rules. A real second machine runs its own dockerd with iptables and needs none of this."""

from __future__ import annotations

import datetime
import json
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from capd_py.cli import management
from capd_py.controllers.manager import ACTIVITY_FILE_ENV
from capd_py.testing.e2e import (
    CAPD,
    E2E_RESYNC_SECONDS,
    Mgmt,
    cluster_objects_left,
    delete_cluster_objects,
    host_address,
    nodes_ready,
    run,
    wait_for,
    workload_kubectl,
)
from capd_py.testing.envtest import EnvTest
from capd_py.testing.quiet import quiet_window_sync, wait_quiet_sync

# a second dockerd: its own bridges and DOCKER-USER rules on this host, its subnets picked beside the main daemon's
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800), pytest.mark.host_exclusive]

HACK = str(Path(__file__).resolve().parents[2] / "hack" / "second-dockerd.sh")
HOST = "two"
LABEL = "io.x-k8s.capd-py.cluster"


HOST_GONE_BOUND = 120.0  # a resync (60 s at most) + a reconcile: the conditions say the host is gone by then
HOST_RETRY_SECONDS = 15.0  # a DockerCluster / DockerMachine whose host does not answer looks again after this long
LOGGING_OBJECTS = 5  # the objects that log "docker daemon not reachable" while the host is away (see below)


@pytest.fixture
def second_daemon() -> Iterator[tuple[str, str]]:
    """(daemon name, endpoint) of a second dockerd made for this test; stopped and its state removed after."""
    name = f"e2e-{secrets.token_hex(2)}"
    had_docker0 = _link("docker0")
    t0 = time.monotonic()
    endpoint = run(["bash", HACK, "start", name]).stdout.strip().splitlines()[-1]
    print(f"\nsecond dockerd {name} at {endpoint} up in {time.monotonic() - t0:.1f}s")
    bridge = json.loads(run(["docker", "-H", endpoint, "network", "inspect", "bridge"]).stdout)[0]["Options"][
        "com.docker.network.bridge.name"]
    try:
        # a dockerd started with --bridge=none deletes the main daemon's docker0: the second one has its own
        assert bridge != "docker0" and _link(bridge)
        assert _link("docker0") == had_docker0
        yield name, endpoint
    finally:
        ids = run(["docker", "-H", endpoint, "network", "ls", "-q", "--no-trunc"], check=False).stdout.split()
        run(["bash", HACK, "stop", name], check=False)
        assert not Path(f"/var/lib/capd-py-docker-{name}").exists()
        assert not _link(bridge)
        # nor its networks' bridges: one left behind shadows that subnet for every later network on this machine
        assert not [i for i in ids if _link(f"br-{i[:12]}")], ids
        assert _link("docker0") == had_docker0


def _link(name: str) -> bool:
    return run(["ip", "link", "show", name], check=False).returncode == 0


def _docker(endpoint: str, *args: str) -> str:
    return run(["docker", "-H", endpoint, *args]).stdout


def _ours(endpoint: str, cluster: str) -> dict[str, list[str]]:
    flt = ["--filter", f"label={LABEL}={cluster}"]
    return {"containers": _docker(endpoint, "ps", "-a", "-q", *flt).split(),
            "networks": _docker(endpoint, "network", "ls", "-q", *flt).split(),
            "volumes": _docker(endpoint, "volume", "ls", "-q", *flt).split()}


def _manifest(mgmt: Mgmt, name: str, ns: str) -> str:
    docs = list(yaml.safe_load_all(mgmt.capd("generate", "cluster", name, "-n", ns, "--control-plane-machine-count",
                                             "1", "--worker-machine-count", "1").stdout))
    for d in docs:
        if d and d.get("kind") == "DockerCluster":
            d["metadata"].setdefault("annotations", {})["capd-py.dev/docker-host"] = HOST
            # one failure domain on the cluster's host, one on the main daemon: only the first may be offered
            d["spec"]["failureDomains"] = [
                {"name": "fd-local", "controlPlane": True, "attributes": {"capd-py.dev/docker-host": "local"}},
                {"name": "fd-two", "controlPlane": True, "attributes": {"capd-py.dev/docker-host": HOST}}]
    return yaml.safe_dump_all(docs)


def _cond(obj: dict, ctype: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == ctype), {})


def _items(m: Mgmt, kind: str, ns: str, name: str) -> list[dict]:
    return json.loads(m.kubectl("get", kind, "-n", ns, "-l", f"cluster.x-k8s.io/cluster-name={name}",
                                "-o", "json"))["items"]


def _log_lines(m: Mgmt) -> int:
    return len(m.log.read_text(errors="replace").splitlines())


def _logged_at(line: str) -> datetime.datetime:
    """When the controllers logged `line` (their format's local `asctime`, "2026-12-06 03:25:01,474 ...")."""
    return datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")


def _controllers_alive(m: Mgmt) -> list[int]:
    """Pids of the `capd-py controllers` process serving this management cluster (looked up, never signalled)."""
    out = run(["pgrep", "-f", f"controllers --kubeconfig {m.kubeconfig}"], check=False).stdout
    return sorted(int(p) for p in out.split())


def test_a_cluster_on_a_second_docker_host(mgmt: Mgmt, second_daemon: tuple[str, str], own_namespace: str,
                                           tmp_path: Path) -> None:
    daemon, endpoint = second_daemon
    ns, address = own_namespace, host_address()
    name = f"e2e-mh-{secrets.token_hex(2)}"
    timings: dict[str, float] = {}
    mgmt.capd("host", "add", HOST, "--endpoint", endpoint, "--address", address, "--label", "kind=second-dockerd")
    ctrl = f"e2e-mh-{secrets.token_hex(3)}"
    env2: EnvTest | None = None
    target: Mgmt | None = None
    try:
        listed = mgmt.capd("host", "list", "--ping").stdout
        assert re.search(rf"^{HOST}\s+{re.escape(endpoint)}\s+{re.escape(address)}\s+kind=second-dockerd.*\byes\s*$",
                         listed, re.M), listed
        t0 = time.monotonic()
        mgmt.capd("apply", "-f", "-", "-n", ns, input_=_manifest(mgmt, name, ns))

        # the cluster's network appears on the second daemon: let its bridge forward (see the module docstring)
        def network() -> str | None:
            ids = _ours(endpoint, name)["networks"]
            return ids[0] if ids else None
        net = wait_for(network, 300, f"network of {name} on the second daemon")
        subnet = json.loads(_docker(endpoint, "network", "inspect", net))[0]["IPAM"]["Config"][0]["Subnet"]
        run(["bash", HACK, "allow", daemon, subnet])

        wait_for(lambda: mgmt.condition("cluster", name, "Available", ns), 900, f"cluster {name} Available", 5)
        timings["available"] = time.monotonic() - t0
        dc = mgmt.get("dockercluster", name, ns)
        assert dc["metadata"]["annotations"]["capd-py.dev/docker-host"] == HOST
        port = int(dc["metadata"]["annotations"]["infrastructure.cluster.x-k8s.io/capd-py-lb-host-port"])
        assert dc["spec"]["controlPlaneEndpoint"] == {"host": address, "port": port}
        # failure domains: the one naming the main daemon is not offered (one cluster, one network), said so
        assert [d["name"] for d in dc["status"]["failureDomains"]] == ["fd-two"]
        fdc = _cond(dc, "FailureDomainHosts")
        assert fdc["status"] == "False" and "failure domain 'fd-local': names docker host 'local'" in fdc["message"]
        assert [d["name"] for d in mgmt.get("cluster", name, ns)["status"]["failureDomains"]] == ["fd-two"]
        cps = [m for m in _items(mgmt, "machines", ns, name)
               if "cluster.x-k8s.io/control-plane" in m["metadata"]["labels"]]
        assert [m["spec"].get("failureDomain") for m in cps] == ["fd-two"], cps

        # every container is on the second daemon, none on the main one; the images were copied there
        there, here = _ours(endpoint, name), _ours("unix:///var/run/docker.sock", name)
        assert len(there["containers"]) == 3, there  # load balancer, control plane, worker
        assert here == {"containers": [], "networks": [], "volumes": []}, here
        assert _docker(endpoint, "image", "inspect", "-f", "{{.Id}}", "capd-py/node:v1.34.4").strip() == \
            run(["docker", "image", "inspect", "-f", "{{.Id}}", "capd-py/node:v1.34.4"]).stdout.strip()

        # the kubeconfig names the published port at the host's address and works from here
        kc = tmp_path / f"{name}.kubeconfig"
        mgmt.capd("get", "kubeconfig", name, "-n", ns, "-o", str(kc))
        server = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
        assert server == f"https://{address}:{port}", server
        wait_for(lambda: nodes_ready(kc, 2), 300, "2 Ready nodes")
        nodes = workload_kubectl(kc, "get", "nodes", "-o", "name").split()

        # removing the host is refused while the cluster is placed there
        refused = mgmt.capd("host", "remove", HOST, check=False)
        assert refused.returncode == 1 and f"{ns}/{name}" in refused.stderr, refused.stderr

        # the views read the cluster's host, not the local daemon
        tree = mgmt.capd("describe", "cluster", name, "-n", ns).stdout
        assert f"DockerCluster/{name} (docker host {HOST})" in tree, tree
        rows = [r.split() for r in mgmt.capd("get", "nodes", "--cluster", name, "-n", ns).stdout.splitlines()[1:]]
        assert len(rows) == 2 and all(r[-1] == "running" and "Ready" in r for r in rows), rows
        logs = tmp_path / "logs"
        mgmt.capd("export", "logs", name, str(logs), "-n", ns)
        assert (logs / "docker-host.txt").read_text() == f"{HOST}\n"
        assert (logs / f"{name}-lb" / "haproxy.cfg").exists()
        cp_node = next(n for n in (p.name for p in logs.iterdir()) if n.startswith(f"{name}-control-plane"))
        assert "kubeadm" in (logs / cp_node / "bootstrap.log").read_text()
        assert (logs / cp_node / "kubelet.log").stat().st_size > 0

        # stop / start through the host's endpoint
        t1 = time.monotonic()
        mgmt.capd("stop", "cluster", name, "-n", ns, "--wait", "5m")
        states = _docker(endpoint, "ps", "-a", "--filter", f"label={LABEL}={name}", "--format", "{{.State}}").split()
        assert states == ["exited"] * 3, states
        timings["stop"] = time.monotonic() - t1
        t1 = time.monotonic()
        mgmt.capd("start", "cluster", name, "-n", ns, "--wait", "5m")
        timings["start->Available"] = time.monotonic() - t1
        assert mgmt.condition("cluster", name, "Available", ns) and nodes_ready(kc, 2)

        # the host goes away: its dockerd halted (containers stopped with it, its state kept)
        pids = _controllers_alive(mgmt)
        assert len(pids) == 1, pids
        machines_before = sorted(m["metadata"]["name"] for m in _items(mgmt, "machines", ns, name))
        log_lines = _log_lines(mgmt)
        t2 = time.monotonic()
        run(["bash", HACK, "halt", daemon])
        timings["halt"] = time.monotonic() - t2

        def host_gone_reported() -> bool:
            dc = mgmt.get("dockercluster", name, ns)
            lb = _cond(dc, "LoadBalancerAvailable")
            dms = _items(mgmt, "dockermachines", ns, name)
            return (lb.get("reason") == "DockerHostUnreachable" and f"docker host {HOST}: docker daemon not "
                    "reachable" in lb.get("message", "") and len(dms) == 2
                    and all(_cond(d, "ContainerProvisioned").get("reason") == "DockerHostUnreachable" for d in dms))
        wait_for(host_gone_reported, HOST_GONE_BOUND, "DockerCluster and DockerMachines to report the host gone", 2)
        timings["host gone -> conditions"] = time.monotonic() - t2
        dc = mgmt.get("dockercluster", name, ns)
        print(f"\nhost gone: {_cond(dc, 'LoadBalancerAvailable')}\n"
              f"{[_cond(d, 'ContainerProvisioned') for d in _items(mgmt, 'dockermachines', ns, name)]}")
        assert _cond(dc, "Ready").get("status") == "False"
        # a while with the host away: does anything loop, crash or create? Not a fixed 30 s: the controllers write
        # nothing to the namespace for HOST_RETRY_SECONDS (each DockerCluster / DockerMachine tried the host again
        # in it) and a full resync pass that began in that quiet completes (every object reconciled again with the
        # host away); then the same process runs, nothing was created or replaced, no traceback, no hot loop.
        assert mgmt.activity is not None
        t_w = time.monotonic()
        quiet = quiet_window_sync(mgmt.activity, window=HOST_RETRY_SECONDS, resyncs=1, namespace=ns, timeout=300,
                                  what="the controllers settled with the host away")
        quiet_from = datetime.datetime.now() - datetime.timedelta(seconds=quiet.seconds)  # the log's local time
        timings["host away: quiet + a resync"] = time.monotonic() - t_w
        assert _controllers_alive(mgmt) == pids
        assert sorted(m["metadata"]["name"] for m in _items(mgmt, "machines", ns, name)) == machines_before
        assert len(_items(mgmt, "dockermachines", ns, name)) == 2
        log_now = mgmt.log.read_text(errors="replace").splitlines()
        outage = log_now[log_lines:]
        unreachable = [line for line in outage if "docker daemon not reachable" in line]
        assert not [line for line in outage if "Traceback" in line], "\n".join(outage[-40:])
        away = time.monotonic() - t2
        # requeues of 10-15 s (+ their resyncs), not a hot loop: 5 objects log the line (the DockerCluster, the two
        # DockerMachines, and the two DockerMachineTemplates reading the host's capacity), a few times each while
        # the halt's events come in; and in the quiet window (no write, so no event) each only on its retry or a
        # resync pass (+2: a retry and a pass under way when it began)
        assert len(unreachable) <= LOGGING_OBJECTS * (away / 10 + 2) * 2, (len(unreachable), away)
        steady = [line for line in unreachable if _logged_at(line) >= quiet_from]
        assert len(steady) <= LOGGING_OBJECTS * (quiet.seconds / HOST_RETRY_SECONDS + quiet.resyncs + 2), \
            (len(steady), quiet, steady)
        timings["host away"] = away
        print(f"{len(unreachable)} 'docker daemon not reachable' log lines in {away:.0f}s, {len(steady)} of them in "
              f"the {quiet.seconds:.0f} quiet s ({quiet.resyncs} resync passes began in them)")

        # the host comes back: the same daemon (data root kept) restarts the containers; the cluster converges
        t3 = time.monotonic()
        run(["bash", HACK, "start", daemon])

        def converged() -> bool:
            dc = mgmt.get("dockercluster", name, ns)
            dms = _items(mgmt, "dockermachines", ns, name)
            return (_cond(dc, "LoadBalancerAvailable").get("status") == "True"
                    and all(_cond(d, "Ready").get("status") == "True" for d in dms)
                    and mgmt.condition("cluster", name, "Available", ns) and nodes_ready(kc, 2))
        wait_for(converged, 420, "the cluster to converge after its host came back", 3)
        timings["host back -> converged"] = time.monotonic() - t3
        assert len(_ours(endpoint, name)["containers"]) == 3
        assert workload_kubectl(kc, "get", "nodes", "-o", "name").split() == nodes

        # move to a second management cluster: the annotation and the host's entry go along
        env2 = EnvTest(controller_manager=True).start()
        target = Mgmt(env2, str(env2.kubeconfig_path), management.log_path(ctrl), tmp_path / "target-activity.json")
        assert target.activity is not None
        # its controllers count their writes and resync passes too, as often as the session plane's
        run([*CAPD, "init", "--kubeconfig", target.kubeconfig, "--name", ctrl],
            env={ACTIVITY_FILE_ENV: str(target.activity), "CAPD_PY_RESYNC_SECONDS": f"{E2E_RESYNC_SECONDS:g}"})
        t4 = time.monotonic()
        r = mgmt.capd("move", "-n", ns, "--to-kubeconfig", target.kubeconfig)
        assert f"Adding docker host(s) {HOST} at the target" in r.stderr, r.stderr
        timings["move"] = time.monotonic() - t4
        assert cluster_objects_left(mgmt, name, ns) == []
        moved = target.get("dockercluster", name, ns)
        assert moved["metadata"]["annotations"]["capd-py.dev/docker-host"] == HOST
        hosts_there = target.capd("host", "list").stdout
        assert re.search(rf"^{HOST}\s+{re.escape(endpoint)}\s+{re.escape(address)}\s", hosts_there, re.M), hosts_there
        wait_for(lambda: target.condition("cluster", name, "Available", ns)
                 and _cond(target.get("cluster", name, ns), "Paused").get("status") == "False",
                 180, "Available, reconciled at the target", 2)
        timings["moved -> Available"] = time.monotonic() - t4
        assert len(_ours(endpoint, name)["containers"]) == 3
        # nothing placed on the host at the source any more: removing it there is allowed now
        mgmt.capd("host", "remove", HOST)

        # delete at the target while the host is away: the deletion waits, says why, keeps its finalizers (the
        # containers are not left running unmanaged); the host back, it completes with nothing left on either daemon
        run(["bash", HACK, "halt", daemon])
        t5 = time.monotonic()
        target.capd("delete", "cluster", name, "-n", ns, "--no-wait")

        def deletion_waits() -> bool:
            # the Cluster deletes its machines first, the DockerCluster after them: the DockerMachines are what waits
            deleting = [d for d in _items(target, "dockermachines", ns, name) if d["metadata"].get("deletionTimestamp")]
            return bool(deleting) and all(
                f"cannot delete the node container: docker host {HOST}: docker daemon not reachable"
                in _cond(d, "Ready").get("message", "") and "dockermachine.infrastructure.cluster.x-k8s.io"
                in d["metadata"].get("finalizers", []) for d in deleting)
        wait_for(deletion_waits, HOST_GONE_BOUND, "the deletion to wait for the host, saying so", 2)
        timings["delete while away -> conditions"] = time.monotonic() - t5
        # and it keeps waiting: the objects stay, no container is forgotten. Not a fixed 10 s: a full resync pass
        # of the target's controllers (every object reconciled again with the host away) writes nothing to the
        # namespace: no finalizer removed, no deletion completed
        t_w = time.monotonic()
        wait_quiet_sync(target.activity, window=5, resyncs=1, namespace=ns, timeout=180,
                        what="the deletion waiting for the host")
        timings["delete while away: quiet + a resync"] = time.monotonic() - t_w
        assert target.get("dockercluster", name, ns)["metadata"]["finalizers"]
        assert deletion_waits()
        t6 = time.monotonic()
        run(["bash", HACK, "start", daemon])
        target.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
        timings["host back -> deleted"] = time.monotonic() - t6
        assert _ours(endpoint, name) == {"containers": [], "networks": [], "volumes": []}
        assert _ours("unix:///var/run/docker.sock", name) == {"containers": [], "networks": [], "volumes": []}
        assert cluster_objects_left(target, name, ns) == []
        print(f"\ncluster {name} on docker host {HOST} ({address}:{port}), nodes {nodes}: "
              + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()))
    finally:
        # the cluster first (its controllers need the host entry to reach its containers), then the host
        if target is not None:
            delete_cluster_objects(target, name, ns)
            target.capd("host", "remove", HOST, "--force", check=False)
            management.stop_controllers(ctrl)
            print(f"\n--- target controllers log tail ---\n{target.log_tail(40)}")
            management.log_path(ctrl).unlink(missing_ok=True)
        if env2 is not None:
            env2.stop()
        delete_cluster_objects(mgmt, name, ns)
        mgmt.capd("host", "remove", HOST, "--force", check=False)
