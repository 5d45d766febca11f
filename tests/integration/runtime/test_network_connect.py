"""connect_network / disconnect_network against the real dockerd, and why they exist: a container on one
user-defined bridge network cannot reach another network's containers until it is connected to it (what the
in-cluster controllers' node container needs to reach a workload cluster's load balancer)."""

from __future__ import annotations

import secrets
import time

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import ContainerSpec

pytestmark = pytest.mark.integration


def _tcp(rt: DockerRuntime, container: str, ip: str) -> str:
    """'refused' (reachable: nobody listens on port 1, the peer answers RST) or 'silent' (dropped)."""
    res = rt.exec(container, ["timeout", "3", "bash", "-c", f"exec 3<>/dev/tcp/{ip}/1"], timeout=15)
    return "silent" if res.exit_code == 124 else "refused" if "refused" in res.output else f"?{res.output}"


def test_a_container_reaches_another_network_only_once_connected(rt: DockerRuntime) -> None:
    bases = rt.list_images("capd-py/base")
    if not bases:
        pytest.fail("no capd-py/base image; build it with `make images`", pytrace=False)
    tag = secrets.token_hex(3)
    labels = {CONTAINER_NAMESPACE: f"t-net-{tag}"}
    mgmt_net, cluster_net = f"capd-py-t-mgmt-{tag}", f"capd-py-t-cluster-{tag}"
    ctl, peer = f"t-ctl-{tag}", f"t-peer-{tag}"
    try:
        for n in (mgmt_net, cluster_net):
            networks.ensure_network(rt, n, labels)
        for name, net in ((ctl, mgmt_net), (peer, cluster_net)):
            rt.run_container(ContainerSpec(name=name, image=bases[-1], network=net, labels=labels, node=False,
                                           privileged_mode="restricted", entrypoint=("sleep", "infinity")))
        peer_info = rt.get_container(peer)
        assert peer_info is not None
        peer_ip = peer_info.ipv4[cluster_net]
        # docker isolates the two bridges; docker 20.10 programs a new network's isolation rules beside other
        # networks' changes, and once (2026-12-07, other tests creating networks that second) the first probe right
        # after the create got through: isolated means silent within a few probes
        probes = [_tcp(rt, ctl, peer_ip)]
        while probes[-1] != "silent" and len(probes) < 3:
            time.sleep(2)
            probes.append(_tcp(rt, ctl, peer_ip))
        assert probes[-1] == "silent", probes

        rt.connect_network(cluster_net, ctl)
        rt.connect_network(cluster_net, ctl)  # idempotent
        info = rt.get_container(ctl)
        assert info is not None and set(info.ipv4) == {mgmt_net, cluster_net}
        assert _tcp(rt, ctl, peer_ip) == "refused"

        rt.remove_container(peer)
        rt.disconnect_network(cluster_net, ctl)
        rt.disconnect_network(cluster_net, ctl)  # not connected: a no-op
        info = rt.get_container(ctl)
        assert info is not None and set(info.ipv4) == {mgmt_net}
        rt.remove_network(cluster_net)  # no endpoint left: docker removes it
        assert rt.get_network(cluster_net) is None
    finally:
        for c in (ctl, peer):
            rt.remove_container(c)
        for n in (cluster_net, mgmt_net):
            try:
                rt.remove_network(n)
            except Exception:  # noqa: BLE001 - cleanup
                pass


def test_processes_racing_to_make_one_network_end_with_one(rt: DockerRuntime) -> None:
    """Two `capd-py init` at once on a fresh machine both made the shared network `capd-py` (2026-12-08, a cold run:
    docker allowed two of one name) and every container naming it then failed "network capd-py is ambiguous".
    Racers converge on the oldest network of the name and remove the others."""
    import concurrent.futures

    tag = secrets.token_hex(3)
    labels = {CONTAINER_NAMESPACE: f"t-race-{tag}"}
    name = f"capd-py-t-race-{tag}"
    try:
        for _ in range(3):
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                ids = {f.result().id for f in [pool.submit(networks.ensure_network, rt, name, labels)
                                               for _ in range(4)]}
            listed = [n for n in rt.list_networks(labels) if n.name == name]
            assert len(listed) == 1 and ids == {listed[0].id}, (ids, listed)
            rt.remove_network(name)
        # a duplicate left by an older capd-py (or another tool) is removed by the next creator
        first = rt.api.create_network(name, driver="bridge", labels=labels)["Id"]
        rt.api.create_network(name, driver="bridge", labels=labels)
        got = rt.create_network(name, labels, "172.31.250.0/24")
        assert got.id == first and [n.id for n in rt.list_networks(labels) if n.name == name] == [first]
    finally:
        for n in rt.list_networks(labels):
            rt.api.remove_network(n.id)
