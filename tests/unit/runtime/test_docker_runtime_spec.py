"""docker_runtime.spec_of: the ContainerSpec read back from `docker inspect` makes the same container again. The
HostConfig is the one DockerRuntime itself builds for a spec (docker's own create_host_config, no daemon), so a
spec -> HostConfig -> spec round trip shows snapshot restores recreate node and load balancer containers alike."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import docker
import pytest

from capd_py.api.containers import ContainerSpec, Mount, PortMapping
from capd_py.runtime.docker_runtime import DockerRuntime, spec_of

pytestmark = pytest.mark.unit

LABELS = {"io.x-k8s.capd-py.cluster": "c1", "io.x-k8s.capd-py.namespace": "default"}


def inspect_of(spec: ContainerSpec) -> dict[str, Any]:
    """What docker inspect shows of a container `_run` created from spec (the parts spec_of reads)."""
    rt = DockerRuntime(client=SimpleNamespace(api=docker.APIClient(base_url="unix:///nonexistent",
                                                                   version="1.41")))
    hc = rt._host_config(spec)
    hc["PortBindings"] = {k: [{"HostIp": b["HostIp"], "HostPort": str(b["HostPort"])} for b in v]
                          for k, v in (hc.get("PortBindings") or {}).items()}
    ipam = {"IPv4Address": spec.ipv4} if spec.ipv4 else None
    return {"Name": f"/{spec.name}", "Config": {"Image": spec.image, "Hostname": spec.hostname,
                                                "Labels": spec.labels, "Tty": spec.node},
            "HostConfig": {**hc, "NetworkMode": spec.network or "default"},
            "NetworkSettings": {"Networks": {spec.network: {"IPAMConfig": ipam, "IPAddress": spec.ipv4}}}}


@pytest.mark.parametrize("spec", [
    ContainerSpec(name="c1-control-plane-a", image="kindest/node:v1.34.4", hostname="c1-control-plane-a",
                  network="c1-net", labels={**LABELS, "io.x-k8s.capd-py.role": "control-plane"},
                  mounts=(Mount("/srv/data", "/mnt/data", read_only=True),), privileged_mode="restricted",
                  restart_policy="unless-stopped", ipv4="172.20.0.3",
                  sysctls={"net.ipv6.conf.all.disable_ipv6": "0"}),
    ContainerSpec(name="c1-md-0-x", image="kindest/node:v1.34.4", hostname="c1-md-0-x", network="c1-net",
                  labels=LABELS, privileged_mode="privileged", restart_policy="unless-stopped", ipv4="172.20.0.4"),
    ContainerSpec(name="c1-lb", image="kindest/haproxy:v20230606-42a2262b", hostname="c1-lb", network="c1-net",
                  labels=LABELS, ports=(PortMapping(6443, 41234, "127.0.0.1"),), node=False,
                  restart_policy="unless-stopped", ipv4="172.20.0.2"),
    ContainerSpec(name="plain", image="busybox:1", network="", mounts=(Mount("", "/cache", kind="volume"),
                                                                       Mount("", "/scratch", kind="tmpfs")),
                  node=False),
], ids=["control-plane-restricted", "worker-privileged", "load-balancer", "plain"])
def test_spec_round_trip(spec: ContainerSpec) -> None:
    got = spec_of(inspect_of(spec))
    # the privilege mode only means something for nodes (_host_config ignores it otherwise)
    want = spec if spec.node else ContainerSpec(**{**spec.__dict__, "privileged_mode": got.privileged_mode})
    assert got == want
