"""`capd-py init --in-cluster` as a new user runs it: the controllers as a Deployment of 2 replicas in the
management cluster (leader election on a Lease), the default template applied unchanged. The workload
cluster gets its own docker network and the controllers reach its API server all the same (their node
container joins that network). Mid-create the leading pod is deleted: the other replica takes over and the
cluster becomes Available with exactly one container per Machine. Then everything is deleted and nothing
with our labels is left.

Its own management cluster (a fresh name, its own CAPD_PY_HOME): never the default `capd-mgmt`, nor the
session's envtest plane."""

from __future__ import annotations

import json
import os
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from capd_py.api.labels import MANAGEMENT_LABEL
from capd_py.testing.e2e import CAPD, K8S_VERSION, docker_leftovers, kubectl_bin, remove_management, run, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(2400)]

NS = "capd-py-system"


class InCluster:
    def __init__(self, name: str, home: Path):
        self.name, self.home = name, home
        self.env = {"CAPD_PY_HOME": str(home), "CAPD_PY_PLAIN": "1"}

    @property
    def kubeconfig(self) -> str:
        return str(self.home / f"{self.name}.kubeconfig")

    def capd(self, *args: str, input_: str | None = None, check: bool = True, timeout: float = 900) -> str:
        return run([*CAPD, *args], input_=input_, check=check, timeout=timeout, env=self.env).stdout

    def kubectl(self, *args: str, check: bool = True) -> str:
        return run([kubectl_bin(), "--kubeconfig", self.kubeconfig, *args], check=check, timeout=120).stdout

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json"))

    def leader(self) -> str:
        """The pod holding the Lease (identities are `<pod>_<random>`, as controller-runtime's)."""
        lease = self.get("lease", "capd-py-controllers", "-n", NS)
        return str(lease["spec"].get("holderIdentity") or "").partition("_")[0]

    def pods(self) -> dict[str, dict[str, Any]]:
        items = self.get("pods", "-n", NS, "-l", "app=capd-py-controllers")["items"]
        return {p["metadata"]["name"]: p for p in items}

    def condition(self, kind: str, name: str, ctype: str) -> dict[str, Any]:
        obj = self.get(kind, name, "-n", "default")
        return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == ctype), {})

    def logs(self) -> str:
        out = []
        for pod in self.pods():
            r = run([kubectl_bin(), "--kubeconfig", self.kubeconfig, "logs", "-n", NS, pod, "--tail", "40"],
                    check=False, timeout=60)
            out.append(f"--- {pod}\n{r.stdout}{r.stderr}")
        return "\n".join(out)


def management_leftovers(name: str) -> dict[str, list[str]]:
    lab = f"label={MANAGEMENT_LABEL}={name}"
    ps = run(["docker", "ps", "-a", "-q", "--filter", lab]).stdout.split()
    vols = run(["docker", "volume", "ls", "-q", "--filter", lab]).stdout.split()
    return {k: v for k, v in {"containers": ps, "volumes": vols}.items() if v}


@pytest.fixture
def in_cluster(tmp_path: Path) -> Iterator[InCluster]:
    if run(["docker", "image", "inspect", f"capd-py/node:{K8S_VERSION}"], check=False).returncode != 0:
        pytest.fail(f"capd-py/node:{K8S_VERSION} is missing: run `make images`", pytrace=False)
    ic = InCluster(f"e2e-ic-{secrets.token_hex(2)}", tmp_path / "home")
    try:
        yield ic
    finally:  # whatever failed: no node, cluster container, network or volume stays behind
        remove_management(ic.name, {**os.environ, **ic.env})


def test_in_cluster_controllers_survive_losing_their_leader(in_cluster: InCluster) -> None:
    ic = in_cluster
    cluster = f"ic-{secrets.token_hex(2)}"
    t_start = time.monotonic()
    timings: dict[str, float] = {}
    try:
        ic.capd("init", "--in-cluster", "--name", ic.name, timeout=1200)
        timings["init --in-cluster"] = time.monotonic() - t_start
        dep = ic.get("deployment", "capd-py-controllers", "-n", NS)
        assert dep["spec"]["replicas"] == 2 and dep["status"].get("readyReplicas") == 2, dep["status"]
        first = wait_for(ic.leader, 60, "a controllers pod holding the lease")
        replicas = set(ic.pods())
        assert first in replicas and len(replicas) == 2

        node_name = f"{ic.name}-control-plane"
        route = run(["docker", "exec", node_name, "ip", "-4", "route", "show", "default"]).stdout
        manifest = ic.capd("generate", "cluster", cluster)  # the default template, default flags
        t0 = time.monotonic()
        ic.capd("apply", "-f", "-", "--kubeconfig", ic.kubeconfig, input_=manifest)

        # mid-create: once the first Machine exists, the leader's pod goes
        wait_for(lambda: ic.get("machines", "-n", "default", "-l", f"cluster.x-k8s.io/cluster-name={cluster}")
                 ["items"], 180, "the first Machine")
        timings["apply -> first Machine"] = time.monotonic() - t0
        t_kill = time.monotonic()
        ic.kubectl("delete", "pod", "-n", NS, first, "--wait=false")
        second = wait_for(lambda: (lambda h: h if h and h != first else None)(ic.leader()), 60,
                          "another controllers pod holding the lease")
        timings["leader pod deleted -> new leader"] = time.monotonic() - t_kill
        # usually the standby replica; the Deployment's replacement pod may win the race for a released Lease
        print(f"\nleader {first} deleted; now {second} ({'standby' if second in replicas else 'replacement'})")
        assert second != first

        try:
            wait_for(lambda: ic.condition("cluster", cluster, "Available").get("status") == "True", 900,
                     f"cluster {cluster} Available", 5)
        except AssertionError:
            print(ic.logs())
            print(ic.capd("describe", "cluster", cluster, "--kubeconfig", ic.kubeconfig, check=False))
            raise
        timings["apply -> Available"] = time.monotonic() - t0
        probe = ic.condition("cluster", cluster, "RemoteConnectionProbe")
        assert probe.get("status") == "True", probe

        # the cluster has its own network, and the management node was joined to it
        node = json.loads(run(["docker", "inspect", node_name]).stdout)[0]
        assert f"capd-py-default-{cluster}" in node["NetworkSettings"]["Networks"]
        # ... keeping its default route, and its DNS (resolv.conf re-pointed at the gateway, DNAT to docker's
        # embedded DNS) answers for names on the joined network
        assert run(["docker", "exec", node_name, "ip", "-4", "route", "show", "default"]).stdout == route
        assert run(["docker", "exec", node_name, "getent", "hosts", f"{cluster}-lb"]).stdout.strip()

        # exactly one container per Machine, plus the load balancer: the takeover made no duplicate
        machines = ic.get("machines", "-n", "default", "-l", f"cluster.x-k8s.io/cluster-name={cluster}")["items"]
        names = sorted(m["metadata"]["name"] for m in machines)
        containers = sorted(run(["docker", "ps", "-a", "--filter", f"label=io.x-k8s.capd-py.cluster={cluster}",
                                 "--format", "{{.Names}}"]).stdout.split())
        assert len(machines) == 2, names  # 1 control plane + 1 worker: the template's defaults
        assert containers == sorted([*names, f"{cluster}-lb"]), (containers, names)

        # an API server the controllers cannot reach shows on the Cluster, naming the address and the error:
        # the DockerCluster paused (nothing re-joins the network), the node container leaves the network
        t2 = time.monotonic()
        server = "https://{host}:{port}".format(**ic.get("dockercluster", cluster, "-n", "default")
                                               ["spec"]["controlPlaneEndpoint"])
        ic.kubectl("annotate", "dockercluster", cluster, "-n", "default", "cluster.x-k8s.io/paused=true")
        run(["docker", "network", "disconnect", f"capd-py-default-{cluster}", node_name])
        probe = wait_for(lambda: (lambda c: c if c.get("status") == "False" else None)(
            ic.condition("cluster", cluster, "RemoteConnectionProbe")), 120, "RemoteConnectionProbe False", 3)
        assert probe["reason"] == "ProbeFailed", probe
        # upstream's wording (the last success, after the 50 s grace period), then the address tried and the error
        assert re.match(rf"Remote connection probe failed, probe last succeeded at [0-9TZ:-]+: {re.escape(server)}: ",
                        probe["message"]), probe
        assert "no answer within 5s" in probe["message"], probe  # isolated bridges drop, they do not refuse
        timings["disconnected -> RemoteConnectionProbe False"] = time.monotonic() - t2
        ic.kubectl("annotate", "dockercluster", cluster, "-n", "default", "cluster.x-k8s.io/paused-")
        wait_for(lambda: ic.condition("cluster", cluster, "RemoteConnectionProbe").get("status") == "True", 120,
                 "the DockerCluster re-joining the network and the probe succeeding", 3)
        wait_for(lambda: ic.condition("cluster", cluster, "Available").get("status") == "True", 120,
                 f"cluster {cluster} Available again", 3)
        timings["unpaused -> Available again"] = time.monotonic() - t2 - timings[
            "disconnected -> RemoteConnectionProbe False"]

        t1 = time.monotonic()
        ic.capd("delete", "cluster", cluster, "--wait", "--timeout", "300", "--kubeconfig", ic.kubeconfig)
        timings["delete cluster"] = time.monotonic() - t1
        assert docker_leftovers(cluster) == {}
        node = json.loads(run(["docker", "inspect", node_name]).stdout)[0]
        assert f"capd-py-default-{cluster}" not in node["NetworkSettings"]["Networks"]
    finally:
        timings["whole test (before management deletion)"] = time.monotonic() - t_start
        print("\n" + "\n".join(f"{k}: {v:.0f}s" for k, v in timings.items()))
        for c in run(["docker", "ps", "-a", "-q", "--filter", f"label=io.x-k8s.capd-py.cluster={cluster}"],
                     check=False).stdout.split():
            run(["docker", "rm", "-f", "-v", c], check=False)
    ic.capd("delete", "management", "--name", ic.name, timeout=120)
    assert management_leftovers(ic.name) == {} and docker_leftovers(cluster) == {}
    assert not Path(ic.kubeconfig).exists()
    print(f"whole test: {time.monotonic() - t_start:.0f}s")

