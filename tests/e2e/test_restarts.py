"""Issue 14: clusters survive controller kills, docker stop/start in any order and lost containers.

One management cluster made by `capd-py init` (a real node container, so it can be stopped like the rest) with
the controllers run by the test, so it can SIGKILL them; one 1 CP + 1 worker cluster from the default template.
Phases, each timed:
1. create, with the controllers SIGKILLed at five points (and started again at once) -> Available, exactly one
   container per Machine plus the load balancer, one DockerMachine per Machine;
2. a workload (Deployment) and a MachineHealthCheck;
3. every container (management node, load balancer, nodes) stopped, then started in shuffled order -> the same
   addresses and host ports, the cluster Available with Ready nodes and the workload running within 3 minutes;
4. the worker removed with `docker rm -f` -> the MachineHealthCheck replaces it, cluster Available;
5. delete, with the controllers SIGKILLed at five points -> nothing left (containers, networks, volumes, objects);
6. `capd-py delete management` -> nothing left.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.api.labels import MANAGEMENT_LABEL
from capd_py.cli import management as mgmt
from capd_py.testing.e2e import (
    KEEP_APP,
    docker_leftovers,
    kubectl_bin,
    nodes_ready,
    remove_management,
    run,
    wait_for,
    workload_kubectl,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]


MHC = """
apiVersion: cluster.x-k8s.io/v1beta2
kind: MachineHealthCheck
metadata: {name: NAME-md-0, namespace: default}
spec:
  clusterName: NAME
  selector: {matchLabels: {cluster.x-k8s.io/deployment-name: NAME-md-0}}
  checks:
    nodeStartupTimeoutSeconds: 300
    unhealthyNodeConditions:
    - {type: Ready, status: Unknown, timeoutSeconds: 10}
    - {type: Ready, status: "False", timeoutSeconds: 10}
"""


class Env:
    """The management cluster's CLI environment and the controllers process the test owns."""

    def __init__(self, name: str, home: Path):
        self.name, self.home = name, home
        self.env = {**os.environ, "CAPD_PY_HOME": str(home), "CAPD_PY_PLAIN": "1"}
        self.kubeconfig = home / f"{name}.kubeconfig"
        self.log = home / "controllers.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.kills = 0

    def capd(self, *args: str, input_: str | None = None, check: bool = True,
             timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return run([sys.executable, "-m", "capd_py.cli", *args], input_=input_, check=check, timeout=timeout,
                   env={**self.env, "CAPD_PY_KUBECONFIG": str(self.kubeconfig)})

    def kubectl(self, *args: str, check: bool = True, input_: str | None = None) -> str:
        return run([kubectl_bin(), "--kubeconfig", str(self.kubeconfig), *args], check=check,
                   input_=input_).stdout

    def start_controllers(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "capd_py.cli", "controllers", "--kubeconfig", str(self.kubeconfig)],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={**self.env, "CAPD_PY_PRIVILEGED_MODE": mgmt.privileged_mode()})

    def kill_controllers(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(30)
        self.proc = None

    def crash_and_restart(self, point: str) -> None:
        """SIGKILL the controllers (nothing flushed, nothing cleaned up) and start a new process at once."""
        self.kill_controllers()
        self.kills += 1
        print(f"  SIGKILL #{self.kills}: {point}")
        self.start_controllers()

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.kubectl("get", kind, name, "-n", "default", "-o", "json", "--ignore-not-found", check=False)
        return json.loads(out) if out.strip() else None

    def condition(self, kind: str, name: str, ctype: str) -> bool:
        obj = self.get(kind, name) or {}
        return any(c.get("type") == ctype and c.get("status") == "True"
                   for c in (obj.get("status") or {}).get("conditions") or [])

    def names(self, kind: str, cluster: str) -> list[str]:
        return self.kubectl("get", kind, "-n", "default", "-l", f"cluster.x-k8s.io/cluster-name={cluster}",
                            "-o", "name", check=False).split()


def containers(cluster: str) -> dict[str, dict[str, Any]]:
    """docker inspect of the cluster's containers (by capd-py label), by name."""
    ids = run(["docker", "ps", "-a", "-q", "--filter", f"label=io.x-k8s.capd-py.cluster={cluster}"]).stdout.split()
    if not ids:
        return {}
    return {c["Name"].lstrip("/"): c for c in json.loads(run(["docker", "inspect", *ids]).stdout)}


def addresses(cs: dict[str, dict[str, Any]]) -> dict[str, tuple[str, ...]]:
    out = {}
    for name, c in cs.items():
        nets = c["NetworkSettings"]["Networks"]
        ports = c["NetworkSettings"]["Ports"] or {}
        out[name] = (*sorted(f"{n}={v['IPAddress']}" for n, v in nets.items()),
                     *sorted(f"{p}->{b[0]['HostPort']}" for p, b in ports.items() if b))
    return out


def _ts(s: str) -> float:
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.UTC).timestamp()


def fresh_heartbeats(kc: Path, since: float) -> int:
    """Nodes whose kubelet posted Ready=True after `since` (a status from before a restart does not count)."""
    items = json.loads(workload_kubectl(kc, "get", "nodes", "-o", "json"))["items"]
    return sum(1 for n in items for c in n["status"]["conditions"]
               if c["type"] == "Ready" and c["status"] == "True" and _ts(c["lastHeartbeatTime"]) > since)


def pods_ready_since(kc: Path, selector: str, since: float) -> int:
    """Pods whose Ready condition turned True after `since` (they came back after the restart)."""
    items = json.loads(workload_kubectl(kc, "get", "pods", "-l", selector, "-o", "json"))["items"]
    return sum(1 for p in items for c in (p.get("status") or {}).get("conditions") or []
               if c["type"] == "Ready" and c["status"] == "True" and _ts(c["lastTransitionTime"]) > since)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    if run(["docker", "image", "inspect", mgmt.DEFAULT_NODE_IMAGE], check=False).returncode != 0:
        pytest.fail(f"node image {mgmt.DEFAULT_NODE_IMAGE} missing: run `make images`", pytrace=False)
    e = Env(f"e2e-rs-{secrets.token_hex(2)}", tmp_path / "home")
    try:
        yield e
    finally:
        e.kill_controllers()
        print(f"\n--- controllers log tail ---\n{e.log.read_text(errors='replace')[-6000:] if e.log.exists() else ''}")
        remove_management(e.name, {**e.env, "CAPD_PY_KUBECONFIG": str(e.kubeconfig)})


def _timed(what: str, fn: Callable[[], Any]) -> float:
    t0 = time.monotonic()
    fn()
    took = time.monotonic() - t0
    print(f"{what}: {took:.1f}s")
    return took


def test_cluster_survives_controller_kills_restarts_and_lost_containers(env: Env) -> None:
    _timed("management cluster (capd-py init --no-controllers)",
           lambda: env.capd("init", "--name", env.name, "--no-controllers"))
    env.start_controllers()
    name = f"rs{secrets.token_hex(2)}"
    manifest = env.capd("generate", "cluster", name).stdout

    # 1. create, SIGKILL at five points
    t0 = time.monotonic()
    env.capd("apply", "-f", "-", input_=manifest)
    create_points: list[tuple[str, Callable[[], bool]]] = [
        ("right after apply", lambda: env.get("cluster", name) is not None),
        ("load balancer container exists", lambda: f"{name}-lb" in containers(name)),
        ("control-plane container exists", lambda: any("control-plane" in c for c in containers(name))),
        ("worker container exists", lambda: any("-md-0-" in c for c in containers(name))),
        ("control plane initialized", lambda: env.condition("cluster", name, "ControlPlaneInitialized")),
    ]
    for point, reached in create_points:
        wait_for(reached, 300, point, 0.5)
        env.crash_and_restart(f"create: {point}")
    wait_for(lambda: env.condition("cluster", name, "Available"), 600, f"cluster {name} Available", 2)
    print(f"create with 5 SIGKILLs -> Available: {time.monotonic() - t0:.1f}s")
    machines = env.names("machines", name)
    assert len(machines) == 2, machines
    assert len(env.names("dockermachines", name)) == 2
    cs = containers(name)
    assert sorted(cs) == sorted([f"{name}-lb", *(m.split("/", 1)[1] for m in machines)]), sorted(cs)
    kc = env.home / f"{name}.kubeconfig"
    env.capd("get", "kubeconfig", name, "-o", str(kc))
    wait_for(lambda: nodes_ready(kc, 2), 300, "2 Ready nodes")

    # 2. a workload and a MachineHealthCheck
    workload_kubectl(kc, "apply", "-f", "-", input_=KEEP_APP)
    workload_kubectl(kc, "rollout", "status", "deployment/keep", "--timeout=180s")
    env.kubectl("apply", "-f", "-", input_=MHC.replace("NAME", name))

    # 3. stop every container (management included), start them in shuffled order
    everything = [mgmt.node_name(env.name), *containers(name)]
    before = addresses({**containers(name), **{c["Name"].lstrip("/"): c for c in json.loads(
        run(["docker", "inspect", mgmt.node_name(env.name)]).stdout)}})
    run(["docker", "stop", "-t", "10", *everything])
    stopped_at = time.time()
    order = everything[:]
    random.shuffle(order)
    print(f"starting in order: {order}")
    t0 = time.monotonic()
    for c in order:
        run(["docker", "start", c])
    after = addresses({**containers(name), **{c["Name"].lstrip("/"): c for c in json.loads(
        run(["docker", "inspect", mgmt.node_name(env.name)]).stdout)}})
    assert after == before

    def recovered() -> bool:
        # statuses written after the restart only: a kubelet heartbeat, the workload's pods Ready again
        return (env.condition("cluster", name, "Available") and nodes_ready(kc, 2)
                and fresh_heartbeats(kc, stopped_at) == 2 and pods_ready_since(kc, "app=keep", stopped_at) == 2)
    wait_for(recovered, 180, "cluster Available, nodes Ready, workload running after the restart", 3)
    print(f"stop all + shuffled start -> Available, workload running: {time.monotonic() - t0:.1f}s")

    # 4. the worker removed behind our back: the MachineHealthCheck replaces it
    worker = next(c for c in containers(name) if "-md-0-" in c)
    t0 = time.monotonic()
    run(["docker", "rm", "-f", worker])

    def replaced() -> bool:
        ms = [m.split("/", 1)[1] for m in env.names("machines", name)]
        return (worker not in ms and len(ms) == 2 and env.condition("cluster", name, "Available")
                and nodes_ready(kc, 2))
    wait_for(replaced, 420, "the lost worker replaced, cluster Available", 3)
    print(f"docker rm -f worker -> replaced by the MachineHealthCheck, Available: {time.monotonic() - t0:.1f}s")
    assert worker not in containers(name)
    assert not run(["docker", "volume", "ls", "-q", "--filter", f"label=io.x-k8s.capd-py.machine={worker}"]
                   ).stdout.split(), "the removed worker's /var volume is left"

    # 5. delete, SIGKILL at five points
    nodes = [c for c in containers(name) if not c.endswith("-lb")]
    assert len(nodes) == 2, nodes
    t0 = time.monotonic()
    env.capd("delete", "cluster", name, "--no-wait")
    delete_points: list[tuple[str, Callable[[], bool]]] = [
        ("right after delete", lambda: True),
        ("a node container gone", lambda: len([c for c in containers(name) if c in nodes]) < len(nodes)),
        ("every node container gone", lambda: not [c for c in containers(name) if c in nodes]),
        ("load balancer gone", lambda: f"{name}-lb" not in containers(name)),
        ("DockerCluster gone", lambda: env.get("dockercluster", name) is None),
    ]
    for point, reached in delete_points:
        wait_for(reached, 300, point, 0.3)
        env.crash_and_restart(f"delete: {point}")
    wait_for(lambda: env.get("cluster", name) is None, 300, f"cluster {name} gone", 2)
    print(f"delete with 5 SIGKILLs -> gone: {time.monotonic() - t0:.1f}s")
    assert docker_leftovers(name) == {}
    left = env.kubectl("get", "machines,dockermachines,kubeadmconfigs,dockerclusters,kubeadmcontrolplanes,"
                       "machinesets,machinedeployments", "-n", "default", "-l",
                       f"cluster.x-k8s.io/cluster-name={name}", "-o", "name").split()
    assert left == []

    # 6. the management cluster
    env.kill_controllers(signal.SIGTERM)
    env.capd("delete", "management", "--name", env.name, timeout=120)
    label = f"label={MANAGEMENT_LABEL}={env.name}"
    assert not run(["docker", "ps", "-a", "-q", "--filter", label]).stdout.split()
    assert not run(["docker", "volume", "ls", "-q", "--filter", label]).stdout.split()

