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

import json
import re
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from capd_py.testing.e2e import Mgmt, nodes_ready, run, wait_for, workload_kubectl

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

HACK = str(Path(__file__).resolve().parents[2] / "hack" / "second-dockerd.sh")
HOST = "two"
LABEL = "io.x-k8s.capd-py.cluster"


def _host_address() -> str:
    """This machine's address on its default route: what the nodes on the second daemon and the management cluster
    both reach the published port at."""
    out = run(["ip", "-4", "route", "get", "1.1.1.1"]).stdout
    m = re.search(r"\bsrc (\S+)", out)
    assert m, out
    return m.group(1)


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
        run(["bash", HACK, "stop", name], check=False)
        assert not Path(f"/var/lib/capd-py-docker-{name}").exists()
        assert not _link(bridge)
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


def _manifest(mgmt: Mgmt, name: str) -> str:
    docs = list(yaml.safe_load_all(mgmt.capd("generate", "cluster", name, "--control-plane-machine-count", "1",
                                             "--worker-machine-count", "1").stdout))
    for d in docs:
        if d and d.get("kind") == "DockerCluster":
            d["metadata"].setdefault("annotations", {})["capd-py.dev/docker-host"] = HOST
    return yaml.safe_dump_all(docs)


def test_a_cluster_on_a_second_docker_host(mgmt: Mgmt, second_daemon: tuple[str, str],
                                           cluster_cleanup: list[str], tmp_path: Path) -> None:
    daemon, endpoint = second_daemon
    address = _host_address()
    name = f"e2e-mh-{secrets.token_hex(2)}"
    cluster_cleanup.append(name)
    mgmt.capd("host", "add", HOST, "--endpoint", endpoint, "--address", address, "--label", "kind=second-dockerd")
    try:
        listed = mgmt.capd("host", "list", "--ping").stdout
        assert re.search(rf"^{HOST}\s+{re.escape(endpoint)}\s+{re.escape(address)}\s+kind=second-dockerd.*\byes\s*$",
                         listed, re.M), listed
        t0 = time.monotonic()
        mgmt.capd("apply", "-f", "-", input_=_manifest(mgmt, name))

        # the cluster's network appears on the second daemon: let its bridge forward (see the module docstring)
        def network() -> str | None:
            ids = _ours(endpoint, name)["networks"]
            return ids[0] if ids else None
        net = wait_for(network, 300, f"network of {name} on the second daemon")
        subnet = json.loads(_docker(endpoint, "network", "inspect", net))[0]["IPAM"]["Config"][0]["Subnet"]
        run(["bash", HACK, "allow", daemon, subnet])

        wait_for(lambda: mgmt.condition("cluster", name, "Available"), 900, f"cluster {name} Available", 5)
        available = time.monotonic() - t0
        dc = mgmt.get("dockercluster", name)
        assert dc["metadata"]["annotations"]["capd-py.dev/docker-host"] == HOST
        port = int(dc["metadata"]["annotations"]["infrastructure.cluster.x-k8s.io/capd-py-lb-host-port"])
        assert dc["spec"]["controlPlaneEndpoint"] == {"host": address, "port": port}

        # every container is on the second daemon, none on the main one; the images were copied there
        there, here = _ours(endpoint, name), _ours("unix:///var/run/docker.sock", name)
        assert len(there["containers"]) == 3, there  # load balancer, control plane, worker
        assert here == {"containers": [], "networks": [], "volumes": []}, here
        assert _docker(endpoint, "image", "inspect", "-f", "{{.Id}}", "capd-py/node:v1.34.4").strip() == \
            run(["docker", "image", "inspect", "-f", "{{.Id}}", "capd-py/node:v1.34.4"]).stdout.strip()

        # the kubeconfig names the published port at the host's address and works from here
        kc = tmp_path / f"{name}.kubeconfig"
        mgmt.capd("get", "kubeconfig", name, "-o", str(kc))
        server = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
        assert server == f"https://{address}:{port}", server
        wait_for(lambda: nodes_ready(kc, 2), 300, "2 Ready nodes")
        nodes = workload_kubectl(kc, "get", "nodes", "-o", "name").split()
        print(f"\ncluster {name} on docker host {HOST}: Available after {available:.0f}s, nodes {nodes}, "
              f"endpoint {address}:{port}")

        # removing the host is refused while the cluster is placed there
        refused = mgmt.capd("host", "remove", HOST, check=False)
        assert refused.returncode == 1 and f"default/{name}" in refused.stderr, refused.stderr

        t0 = time.monotonic()
        mgmt.capd("delete", "cluster", name, "--wait", "--timeout", "300")
        print(f"deleted in {time.monotonic() - t0:.0f}s")
        assert _ours(endpoint, name) == {"containers": [], "networks": [], "volumes": []}
        assert _ours("unix:///var/run/docker.sock", name) == {"containers": [], "networks": [], "volumes": []}
    finally:
        # the cluster first (its controllers need the host entry to reach its containers), then the host
        mgmt.capd("delete", "cluster", name, "--wait", "--timeout", "300", check=False)
        mgmt.capd("host", "remove", HOST, "--force", check=False)
