from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest
import yaml

from capd_py.cli.kubeconfig import (
    KubeconfigError,
    find_load_balancer,
    lb_host_port,
    rewrite_server,
    server_of,
    workload_kubeconfig,
    write_private,
)
from capd_py.kube.inmemory_api import InMemoryAPI
from capd_py.runtime.protocol import ContainerInfo

pytestmark = pytest.mark.unit

KC = """apiVersion: v1
kind: Config
clusters:
- name: demo
  cluster:
    certificate-authority-data: Q0E=
    server: https://172.18.0.3:6443
contexts:
- name: demo-admin@demo
  context: {cluster: demo, user: demo-admin}
current-context: demo-admin@demo
users:
- name: demo-admin
  user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ}
"""


def test_rewrite_server_keeps_credentials() -> None:
    out = rewrite_server(KC, "https://127.0.0.1:32771")
    cfg = yaml.safe_load(out)
    assert server_of(out) == "https://127.0.0.1:32771"
    assert cfg["clusters"][0]["cluster"]["certificate-authority-data"] == "Q0E="
    assert cfg["users"] == yaml.safe_load(KC)["users"]
    assert cfg["current-context"] == "demo-admin@demo"


def test_rewrite_renames_single_context() -> None:
    cfg = yaml.safe_load(rewrite_server(KC.encode(), "https://127.0.0.1:1", context_name="capd-py-demo"))
    assert cfg["contexts"][0]["name"] == "capd-py-demo" and cfg["current-context"] == "capd-py-demo"


def test_rewrite_errors() -> None:
    with pytest.raises(KubeconfigError, match="not valid YAML"):
        rewrite_server("a: [", "https://x")
    with pytest.raises(KubeconfigError, match="no clusters"):
        rewrite_server("apiVersion: v1\n", "https://x")


class FakeRT:
    def __init__(self, containers: list[ContainerInfo]):
        self.cs = containers

    def get_container(self, name: str) -> ContainerInfo | None:
        return next((c for c in self.cs if c.name == name), None)

    def list_containers(self, labels: dict[str, str] | None = None) -> list[ContainerInfo]:
        return [c for c in self.cs if all(c.labels.get(k) == v for k, v in (labels or {}).items())]


def ci(name: str, labels: dict[str, str], ports: dict[int, int]) -> ContainerInfo:
    return ContainerInfo(id=name, name=name, image="i", status="running", labels=labels, ipv4={}, ipv6={},
                         ports=ports)


def test_lb_host_port_by_name_and_labels() -> None:
    lab = {"io.x-k8s.capd-py.cluster": "demo", "io.x-k8s.capd-py.namespace": "default",
           "io.x-k8s.capd-py.role": "load-balancer"}
    rt = FakeRT([ci("demo-lb", lab, {6443: 40001})])
    assert lb_host_port(rt, "default", "demo") == 40001  # type: ignore[arg-type]
    # an LB of the same name for another namespace's cluster is not ours; find ours by label
    other = {**lab, "io.x-k8s.capd-py.namespace": "other"}
    rt = FakeRT([ci("demo-lb", other, {6443: 1}), ci("x-demo-lb", lab, {6443: 2})])
    assert lb_host_port(rt, "default", "demo") == 2  # type: ignore[arg-type]
    assert find_load_balancer(FakeRT([]), "default", "demo") is None  # type: ignore[arg-type]
    with pytest.raises(KubeconfigError, match="no load balancer"):
        lb_host_port(FakeRT([]), "default", "demo")  # type: ignore[arg-type]
    with pytest.raises(KubeconfigError, match="does not publish"):
        lb_host_port(FakeRT([ci("demo-lb", lab, {})]), "default", "demo")  # type: ignore[arg-type]


def test_write_private(tmp_path: Path) -> None:
    p = write_private(tmp_path / "d" / "k.kubeconfig", "x")
    assert p.read_text() == "x"
    assert stat.S_IMODE(p.stat().st_mode) == 0o600


async def test_an_in_memory_cluster_kubeconfig_is_the_secret_as_is() -> None:
    """An in-memory DevCluster's endpoint is its HTTPS listener (docs/in-memory.md): no load balancer to look up."""
    mgmt = InMemoryAPI("-", "management")   # a management API in memory
    mgmt.put_object("clusters", {"metadata": {"name": "mem", "namespace": "ns"}, "spec": {"infrastructureRef": {
        "apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DevCluster", "name": "mem-x"}}})
    dev = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DevCluster",
           "metadata": {"name": "mem-x", "namespace": "ns"},
           "spec": {"backend": {"inMemory": {}}, "controlPlaneEndpoint": {"host": "127.0.0.1", "port": 20007}}}
    mgmt.put_object("devclusters", dev)
    text = KC.replace("https://172.18.0.3:6443", "https://127.0.0.1:20007")
    mgmt.put_object("secrets", {"metadata": {"name": "mem-kubeconfig", "namespace": "ns"},
                                "data": {"value": base64.b64encode(text.encode()).decode()}})

    def no_docker() -> None:
        raise AssertionError("docker asked for an in-memory cluster's load balancer")
    assert await workload_kubeconfig(mgmt, no_docker, "ns", "mem") == text  # type: ignore[arg-type]
    # the same cluster on the docker backend: its load balancer's port is looked up (and there is none here)
    mgmt.put_object("devclusters", {**dev, "spec": {"backend": {"docker": {}}}})
    with pytest.raises(AssertionError, match="docker asked"):
        await workload_kubeconfig(mgmt, no_docker, "ns", "mem")  # type: ignore[arg-type]
