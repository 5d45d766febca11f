"""A whole workload cluster on an `ssh://` docker host (issue 32), the host's key and known_hosts given to capd-py
(`capd-py host add --ssh-key --ssh-known-hosts`: a Secret; nothing of this machine's ssh configuration is used, so
the shared e2e controllers need nothing on their PATH). The host is a throwaway SSH server
(tests/integration/runtime/ssh_server.py) that runs `docker system dial-stdio` against this machine's daemon: every
docker call the controllers and the CLI make for the cluster goes through the real OpenSSH client, the server and
`dial-stdio`, as with a remote machine (only the network round trips are missing). The cluster becomes Available,
kubectl reaches it at the host's address, `get nodes` reads it over ssh, deletion leaves nothing."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

import pytest
import yaml
from ssh_server import SshDockerHost

from capd_py.testing.e2e import (
    Mgmt,
    cluster_containers,
    delete_cluster_objects,
    host_address,
    nodes_ready,
    run,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

HOST = "far"
DIAL = "docker system dial-stdio"


def test_a_cluster_on_an_ssh_docker_host(mgmt: Mgmt, own_namespace: str, tmp_path: Path) -> None:
    ns, address = own_namespace, host_address()
    name = f"e2e-ssh-{secrets.token_hex(2)}"
    with SshDockerHost() as sshd:
        mgmt.capd("host", "add", HOST, "--endpoint", sshd.endpoint, "--address", address,
                  "--ssh-key", str(sshd.dir / "id_ed25519"), "--ssh-known-hosts", str(sshd.dir / "known_hosts"))
        try:
            listed = mgmt.capd("host", "list", "--ping").stdout
            assert re.search(rf"^{HOST}\s+{re.escape(sshd.endpoint)}\s+{re.escape(address)}\s.*\byes\s*$", listed,
                             re.M), listed
            docs = list(yaml.safe_load_all(mgmt.capd("generate", "cluster", name, "-n", ns,
                                                     "--control-plane-machine-count", "1",
                                                     "--worker-machine-count", "0").stdout))
            for d in docs:
                if d and d.get("kind") == "DockerCluster":
                    d["metadata"].setdefault("annotations", {})["capd-py.dev/docker-host"] = HOST
            before = len(sshd.commands)
            t0 = time.monotonic()
            mgmt.capd("apply", "-f", "-", "-n", ns, input_=yaml.safe_dump_all(docs))
            wait_for(lambda: mgmt.condition("cluster", name, "Available", ns), 600, f"cluster {name} Available", 3)
            available = time.monotonic() - t0

            dc = mgmt.get("dockercluster", name, ns)
            port = int(dc["metadata"]["annotations"]["infrastructure.cluster.x-k8s.io/capd-py-lb-host-port"])
            assert dc["spec"]["controlPlaneEndpoint"] == {"host": address, "port": port}
            states = run(["docker", "ps", "-a", "--filter", f"label=io.x-k8s.capd-py.cluster={name}",
                          "--format", "{{.State}}"]).stdout.split()
            assert states == ["running", "running"], states  # load balancer, node
            # the controllers' docker calls for it went over ssh: many commands, few connections (shared)
            calls = len(sshd.commands) - before
            assert calls > 20 and set(sshd.commands) == {DIAL}, (calls, set(sshd.commands))
            assert sshd.connections <= max(3, calls // 10), (sshd.connections, calls)

            kc = tmp_path / f"{name}.kubeconfig"
            mgmt.capd("get", "kubeconfig", name, "-n", ns, "-o", str(kc))
            server = yaml.safe_load(kc.read_text())["clusters"][0]["cluster"]["server"]
            assert server == f"https://{address}:{port}", server
            wait_for(lambda: nodes_ready(kc, 1), 300, "1 Ready node")
            cli_calls = len(sshd.commands)
            rows = [r.split() for r in mgmt.capd("get", "nodes", "--cluster", name, "-n", ns).stdout.splitlines()[1:]]
            assert len(rows) == 1 and rows[0][-1] == "running", rows
            assert len(sshd.commands) > cli_calls  # the CLI read the node over ssh too

            refused = mgmt.capd("host", "remove", HOST, check=False)
            assert refused.returncode == 1 and f"{ns}/{name}" in refused.stderr, refused.stderr
            t1 = time.monotonic()
            mgmt.capd("delete", "cluster", name, "-n", ns, "--wait", "--timeout", "300")
            deleted = time.monotonic() - t1
            assert cluster_containers(name) == {}
            print(f"\nssh:// host: {name} Available after {available:.1f}s, deleted in {deleted:.1f}s; "
                  f"{len(sshd.commands)} docker calls over {sshd.connections} ssh connection(s)")
        finally:
            delete_cluster_objects(mgmt, name, ns)
            mgmt.capd("host", "remove", HOST, "--force", check=False)
