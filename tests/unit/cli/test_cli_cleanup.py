from __future__ import annotations

from pathlib import Path

import pytest

from capd_py.cli import cleanup
from capd_py.runtime import networks
from capd_py.runtime.protocol import ContainerSpec
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


class RecordingRuntime(FakeRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.removed: list[str] = []
        networks.ensure_network(self, "n1", {"io.x-k8s.capd-py.managed": "true"})
        networks.ensure_network(self, "bridge", {})
        for name, labels in (("a", {"io.x-k8s.capd-py.managed": "true", "io.x-k8s.capd-py.cluster": "c1"}),
                             ("b", {"io.x-k8s.capd-py.management": "capd-mgmt"}),
                             ("x", {"com.example": "1"})):
            self.run_container(ContainerSpec(name=name, image="img", labels=labels, node=False))
        self.volumes.update({"v1": {"io.x-k8s.capd-py.cluster": "c1"}, "other": {}})

    def remove_container(self, name: str) -> None:
        self.removed.append(f"c:{name}")
        super().remove_container(name)

    def remove_network(self, name: str) -> None:
        self.removed.append(f"n:{name}")
        super().remove_network(name)

    def remove_volume(self, name: str) -> None:
        self.removed.append(f"v:{name}")
        super().remove_volume(name)


def test_delete_everything_only_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_HOME", str(tmp_path))
    (tmp_path / "capd-mgmt.kubeconfig").write_text("x")
    c = RecordingRuntime()
    counts = cleanup.delete_everything(c)
    assert sorted(c.removed) == ["c:a", "c:b", "n:n1", "v:v1"]
    assert counts == {"containers": 2, "networks": 1, "volumes": 1}
    assert not (tmp_path / "capd-mgmt.kubeconfig").exists()


def test_ours() -> None:
    assert cleanup.ours({"io.x-k8s.capd-py.role": "x"})
    assert not cleanup.ours({"io.x-k8s.other": "x"}) and not cleanup.ours(None)


def _cluster_objects(rt: FakeRuntime, ns: str, cluster: str) -> None:
    labels = {"io.x-k8s.capd-py.managed": "true", "io.x-k8s.capd-py.cluster": cluster,
              "io.x-k8s.capd-py.namespace": ns}
    networks.ensure_network(rt, f"{ns}-{cluster}", labels)
    for role in ("lb", "cp"):
        rt.run_container(ContainerSpec(name=f"{cluster}-{role}-{ns}", image="img", labels=labels, node=False))
    rt.volumes[f"{cluster}-{ns}-vol"] = labels


def test_on_a_shared_host_only_the_named_clusters_go() -> None:
    shared = RecordingRuntime()  # holds capd-py objects of others too (a, b, n1, v1)
    _cluster_objects(shared, "default", "mine")
    _cluster_objects(shared, "other", "mine")  # same name, another namespace: not ours to delete
    _cluster_objects(shared, "default", "theirs")
    counts = cleanup.delete_clusters_on(shared, ["default/mine"])
    assert sorted(shared.removed) == ["c:mine-cp-default", "c:mine-lb-default", "n:default-mine",
                                      "v:mine-default-vol"]
    assert counts == {"containers": 2, "networks": 1, "volumes": 1}
    assert shared.get_container("mine-lb-other") is not None and shared.get_container("theirs-lb-default")


async def test_remote_clusters_of_a_management_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cli_hosts import MemKube, _dc

    from capd_py.api import dockerhosts as dh
    from capd_py.cli import hosts as hc
    from capd_py.runtime import endpoints
    from capd_py.runtime.protocol import RuntimeError_
    kube = MemKube()
    await hc.add(kube, dh.DockerHost("two", "unix:///run/capd-py-dockerd-two.sock"))
    await hc.add(kube, dh.DockerHost("three", "unix:///run/capd-py-dockerd-three.sock"))
    for name, host in (("c0", ""), ("c2", "two"), ("c2b", "two"), ("c3", "three")):
        kube.objs[("DockerCluster", "default", name)] = _dc(name, host)
    two = FakeRuntime()
    _cluster_objects(two, "default", "c2")

    def runtime_for(host: dh.DockerHost, tls: object = None) -> FakeRuntime:
        if host.name == "three":
            raise RuntimeError_("docker daemon not reachable: connection refused")
        return two
    monkeypatch.setattr(endpoints, "runtime_for", runtime_for)
    remotes = await cleanup.remote_clusters(kube)
    assert [(r.host, r.clusters, r.runtime is two) for r in remotes] == [
        ("three", ("default/c3",), False), ("two", ("default/c2", "default/c2b"), True)]  # never `local`
    counts, left = cleanup.delete_remote(remotes)
    assert counts == {"containers": 2, "networks": 1, "volumes": 1} and two.list_containers({}) == []
    assert left == ["left on docker host three: default/c3 (docker daemon not reachable: connection refused)"]


def test_management_kubeconfigs_are_those_of_running_management_clusters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_HOME", str(tmp_path))
    rt = FakeRuntime()
    for name in ("capd-mgmt", "gone", "stopped"):
        rt.run_container(ContainerSpec(name=f"{name}-control-plane", image="img", node=False,
                                       labels={"io.x-k8s.capd-py.management": name}))
    rt.stop_container("stopped-control-plane")
    (tmp_path / "capd-mgmt.kubeconfig").write_text("x")
    (tmp_path / "stopped.kubeconfig").write_text("x")
    assert cleanup.management_kubeconfigs(rt) == [tmp_path / "capd-mgmt.kubeconfig"]
