"""`capd-py load image` parts over the fake runtime and a stand-in API client."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_MACHINE, CONTAINER_NAMESPACE
from capd_py.cli import loadimage as li
from capd_py.kube.client import KubeError
from capd_py.reconcile.imageload import RECORDED_ANNOTATION
from capd_py.runtime.protocol import ContainerSpec
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


def _node(rt: FakeRuntime, name: str, cluster: str = "c1", ns: str = "default", machine: bool = True) -> None:
    labels = {CONTAINER_CLUSTER: cluster, CONTAINER_NAMESPACE: ns, **({CONTAINER_MACHINE: name} if machine else {})}
    rt.run_container(ContainerSpec(name=name, image="capd-py/node:v1.34.4", labels=labels, node=machine))


def test_nodes_are_the_clusters_machine_containers() -> None:
    rt = FakeRuntime()
    _node(rt, "c1-md-0")
    _node(rt, "c1-cp-0")
    _node(rt, "c1-lb", machine=False)        # the load balancer has no containerd to load into
    _node(rt, "c1-other", ns="prod")         # same cluster name, other namespace
    assert li.cluster_nodes(rt, "default", "c1") == ["c1-cp-0", "c1-md-0"]
    assert li.select_nodes(["a", "b"], []) == ["a", "b"]
    assert li.select_nodes(["a", "b"], ["b"]) == ["b"]
    with pytest.raises(li.LoadImageError, match="unknown node.*nope.*the cluster's nodes are: a, b"):
        li.select_nodes(["a", "b"], ["nope"])


def test_resolve_requires_every_image_locally() -> None:
    rt = FakeRuntime(images={"app:1"})
    assert set(li.resolve(rt, ["app:1", "app:1"])) == {"app:1"}
    with pytest.raises(li.LoadImageError, match="not present locally: absent:1.*never pulls"):
        li.resolve(rt, ["app:1", "absent:1"])


class _Kube:
    def __init__(self, cluster: dict[str, Any] | None, conflicts: int = 0):
        self.cluster, self.conflicts, self.patches = cluster, conflicts, []  # type: ignore[var-annotated]

    async def get(self, gvk: Any, ns: str, name: str) -> dict[str, Any] | None:
        return self.cluster

    async def merge_patch(self, gvk: Any, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            raise KubeError(409, "Conflict", "the object has been modified")
        self.patches.append(patch)
        assert self.cluster is not None
        self.cluster["metadata"].setdefault("annotations", {}).update(patch["metadata"]["annotations"])
        return self.cluster


async def test_record_on_the_cluster_once_with_retries_on_conflict() -> None:
    kube = _Kube({"metadata": {"name": "c1", "resourceVersion": "7"}}, conflicts=1)
    assert await li.record(kube, "default", "c1", ["app:1"])
    assert kube.patches == [{"metadata": {"resourceVersion": "7", "annotations": {RECORDED_ANNOTATION: "app:1"}}}]
    assert not await li.record(kube, "default", "c1", ["app:1"])  # already there: no write
    with pytest.raises(li.LoadImageError, match="cluster default/c1 not found"):
        await li.record(_Kube(None), "default", "c1", ["app:1"])


def test_load_report_table_is_the_data_on_stdout() -> None:
    rt = FakeRuntime()
    _node(rt, "c1-md-0")
    ids = li.resolve(rt, ["app:1"])
    first = li.load(rt, ["c1-md-0"], ids)
    assert first.ok and first.table() == "c1-md-0\tapp:1\tloaded\n"
    assert li.load(rt, ["c1-md-0"], ids).table() == "c1-md-0\tapp:1\tpresent\n"


def test_command_data_on_stdout_progress_on_stderr_and_exit_codes(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from capd_py.cli import main
    rt = FakeRuntime()
    _node(rt, "c1-cp-0")
    _node(rt, "c1-md-0")
    kube = _Kube({"metadata": {"name": "c1", "resourceVersion": "1"}})

    async def with_kube(_kc: Any, fn: Any) -> Any:
        return await fn(kube)
    monkeypatch.setattr(main.mgmt, "default_runtime", lambda: rt)
    monkeypatch.setattr(main, "_with_kube", with_kube)
    monkeypatch.setenv("CAPD_PY_PLAIN", "1")
    runner = CliRunner()
    r = runner.invoke(main.app, ["load", "image", "app:1", "--cluster", "c1"])
    assert r.exit_code == 0, r.output
    assert r.stdout == "c1-cp-0\tapp:1\tloaded\nc1-md-0\tapp:1\tloaded\n"
    assert "not yet present on node 'c1-md-0', loading..." in r.stderr and "✓ Loading 1 image(s)" in r.stderr
    assert kube.cluster["metadata"]["annotations"][RECORDED_ANNOTATION] == "app:1"  # type: ignore[index]

    r = runner.invoke(main.app, ["load", "image", "app:1", "--cluster", "c1", "--nodes", "c1-md-0"])
    assert r.exit_code == 0 and r.stdout == "c1-md-0\tapp:1\tpresent\n"

    rt.set_status("c1-md-0", "exited")
    r = runner.invoke(main.app, ["load", "image", "app:2", "--cluster", "c1"])
    assert r.exit_code == 1 and "c1-md-0\tapp:2\tfailed" in r.stdout and "loading failed" in r.stderr
    assert kube.cluster["metadata"]["annotations"][RECORDED_ANNOTATION] == "app:1,app:2"  # type: ignore[index]

    rt.set_status("c1-md-0", "running")
    kube.cluster = None  # the Cluster is gone from the management cluster: loaded, not recorded, exit 1
    r = runner.invoke(main.app, ["load", "image", "app:3", "--cluster", "c1"])
    assert r.exit_code == 1 and r.stdout.count("\tloaded") == 2 and "not recorded on the Cluster" in r.stderr
