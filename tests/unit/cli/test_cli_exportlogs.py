"""`capd-py export logs` over the fake runtime: the folder's layout, the objects picked, best effort."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api.labels import CLUSTER_NAME, CONTAINER_CLUSTER, CONTAINER_MACHINE, CONTAINER_NAMESPACE, CONTAINER_ROLE
from capd_py.cli import exportlogs as ex
from capd_py.reconcile import haproxy
from capd_py.reconcile.cloudinit import BOOTSTRAP_LOG
from capd_py.runtime.protocol import ContainerSpec, ExecResult
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


def _obj(kind: str, name: str, labels: dict[str, str] | None = None, spec: dict[str, Any] | None = None
         ) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name, "labels": labels or {}, "managedFields": [{"x": 1}]},
            "spec": spec or {}}


def test_select_objects_follows_labels_cluster_name_and_references() -> None:
    objs = [
        _obj("Cluster", "c1", spec={"infrastructureRef": {"kind": "DockerCluster", "name": "c1-dc"},
                                    "topology": {"classRef": {"name": "quick-start"}}}),
        _obj("DockerCluster", "c1-dc"),
        _obj("MachineDeployment", "c1-md-0", spec={"clusterName": "c1", "template": {"spec": {
            "infrastructureRef": {"kind": "DockerMachineTemplate", "name": "c1-md-0-t"}}}}),
        _obj("DockerMachineTemplate", "c1-md-0-t"),
        _obj("Machine", "c1-md-0-x", labels={CLUSTER_NAME: "c1"}),
        _obj("ClusterClass", "quick-start"),
        _obj("Cluster", "c2"), _obj("Machine", "c2-m", labels={CLUSTER_NAME: "c2"}),
        _obj("DockerMachineTemplate", "unrelated"),
    ]
    got = {(o["kind"], o["metadata"]["name"]) for o in ex.select_objects(objs, "c1")}
    assert got == {("Cluster", "c1"), ("DockerCluster", "c1-dc"), ("MachineDeployment", "c1-md-0"),
                   ("DockerMachineTemplate", "c1-md-0-t"), ("Machine", "c1-md-0-x"), ("ClusterClass", "quick-start")}
    assert "managedFields" not in yaml.safe_load(ex.to_yaml(objs[:1]))["metadata"]
    ev = [{"involvedObject": {"kind": "Machine", "name": "c1-md-0-x"}},
          {"involvedObject": {"kind": "Machine", "name": "c2-m"}}]
    assert ex.related_events(ev, objs[:5]) == ev[:1]


def _cluster_runtime() -> FakeRuntime:
    rt = FakeRuntime()
    base = {CONTAINER_CLUSTER: "c1", CONTAINER_NAMESPACE: "default"}
    for name, role in (("c1-cp-0", "control-plane"), ("c1-md-0", "worker")):
        rt.run_container(ContainerSpec(name=name, image="capd-py/node:v1.34.4", node=True,
                                       labels={**base, CONTAINER_MACHINE: name, CONTAINER_ROLE: role}))
        rt.files(name)[BOOTSTRAP_LOG] = b"[capd-py] step 3/4: kubeadm join\n"
    rt.run_container(ContainerSpec(name="c1-lb", image="capd-py/haproxy:2.6",
                                   labels={**base, CONTAINER_ROLE: "load-balancer"}))
    rt.files("c1-lb")[haproxy.CONFIG_PATH] = b"frontend control-plane\n"
    rt.exec_results.append(("journalctl --no-pager -u kubelet.service", ExecResult(0, "kubelet started\n")))
    return rt


def test_export_writes_one_folder_and_reports_what_it_could_not_collect(tmp_path: Path) -> None:
    rt = _cluster_runtime()
    rt.set_status("c1-md-0", "exited")
    log = tmp_path / "controllers.log"
    log.write_text("reconciled\n")
    objs: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([_obj("Cluster", "c1")], [])
    out = tmp_path / "logs"
    rep = ex.export(rt, "default", "c1", out, objs, log, None, version="capd-py test")
    assert (out / "c1-cp-0" / "bootstrap.log").read_text().count("kubeadm join") == 1
    assert (out / "c1-cp-0" / "kubelet.log").read_text() == "kubelet started\n"
    assert (out / "c1-cp-0" / "inspect.json").exists() and (out / "c1-md-0" / "inspect.json").exists()
    assert (out / "c1-lb" / "haproxy.cfg").read_text() == "frontend control-plane\n"
    assert (out / "controllers.log").read_text() == "reconciled\n"
    assert yaml.safe_load((out / "objects.yaml").read_text())["kind"] == "Cluster"
    assert (out / "workload.txt").read_text().startswith("# from c1-cp-0")
    # the stopped worker: inspect and docker logs only, said in errors.txt
    assert not (out / "c1-md-0" / "bootstrap.log").exists()
    assert any("c1-md-0: not running" in e for e in rep.errors)
    assert "c1-md-0: not running" in (out / "errors.txt").read_text()


def test_export_without_the_management_cluster_still_collects_the_containers(tmp_path: Path) -> None:
    rt = _cluster_runtime()
    rep = ex.export(rt, "default", "c1", tmp_path, OSError("connection refused"), None, None)
    assert (tmp_path / "c1-md-0" / "bootstrap.log").exists() and not (tmp_path / "objects.yaml").exists()
    assert any("Cluster API objects: connection refused" in e for e in rep.errors)
    with pytest.raises(ex.ExportError, match="unknown cluster default/nope"):
        ex.export(rt, "default", "nope", tmp_path / "x", ([], []), None, None)


def test_pod_logs_come_out_of_a_base64_tarball(tmp_path: Path) -> None:
    import base64
    import io
    import tarfile
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        data = b"2026-12-03T08:00:00Z stdout F hello\n"
        info = tarfile.TarInfo("pods/kube-system_etcd_1/etcd/0.log")
        info.size = len(data)
        tf.addfile(info, io.BytesIO(data))
    assert ex.untar_b64(base64.encodebytes(buf.getvalue()).decode(), tmp_path) == 1
    assert (tmp_path / "pods/kube-system_etcd_1/etcd/0.log").read_bytes().endswith(b"hello\n")
    assert ex.untar_b64("", tmp_path) == 0


def _with_management_node(rt: FakeRuntime, log: bytes) -> None:
    """A management node container in `rt` whose controllers pod log (tarred and base64'd, as the export's exec
    returns it) is `log`."""
    import base64
    import io
    import tarfile
    rt.run_container(ContainerSpec(name="capd-mgmt-control-plane", image="capd-py/node:v1.34.4", node=True))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("capd-py-system_capd-py-controllers-abc_1/controllers/0.log")
        info.size = len(log)
        tf.addfile(info, io.BytesIO(log))
    rt.exec_results.append((ex.MANAGEMENT_PODS, ExecResult(0, base64.encodebytes(buf.getvalue()).decode())))


def test_in_cluster_controllers_pod_logs_come_from_the_management_node(tmp_path: Path) -> None:
    rt = _cluster_runtime()
    _with_management_node(rt, b"INFO capd_py.dockermachine: created container\n")
    rep = ex.export(rt, "default", "c1", tmp_path, ([], []), None, "capd-mgmt-control-plane")
    got = list((tmp_path / "management" / "pods").glob("capd-py-system_*/controllers/0.log"))
    assert len(got) == 1 and b"created container" in got[0].read_bytes() and not rep.errors
    assert not (tmp_path / "controllers.log").exists()


def test_a_cluster_on_another_docker_host_is_read_there_and_the_management_node_here(tmp_path: Path) -> None:
    """docs/multihost.md: the nodes and the load balancer come from the cluster's host's runtime, the in-cluster
    controllers' pods from the management node on the local daemon, and the folder names the host."""
    there = _cluster_runtime()
    here = FakeRuntime()
    _with_management_node(here, b"INFO here\n")
    rep = ex.export(there, "default", "c1", tmp_path, ([], []), None, "capd-mgmt-control-plane",
                    management_runtime=here, host="two")
    assert (tmp_path / "docker-host.txt").read_text() == "two\n"
    assert (tmp_path / "c1-cp-0" / "bootstrap.log").exists() and (tmp_path / "c1-lb" / "haproxy.cfg").exists()
    assert len(list((tmp_path / "management" / "pods").glob("*/controllers/0.log"))) == 1 and not rep.errors
    # the cluster's host has no management node: asked there, nothing would be found
    with pytest.raises(ex.ExportError, match="unknown cluster"):
        ex.export(here, "default", "c1", tmp_path / "x", ([], []), None, None)

def test_a_failed_tar_is_tried_again_and_then_reported_with_its_error(tmp_path: Path) -> None:
    import base64 as b64
    import io
    import tarfile
    from types import SimpleNamespace

    from capd_py.cli.exportlogs import RuntimeError_, copy_dir
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("pods/a/0.log")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"hi"))
    good = SimpleNamespace(exit_code=0, output=b64.b64encode(buf.getvalue()).decode())
    bad = SimpleNamespace(exit_code=2, output="tar: pods/a/0.log: file shrank by 10 bytes; padding with zeros\n")

    class Runtime:
        def __init__(self, results: list[SimpleNamespace]) -> None:
            self.results = results

        def exec(self, name: str, cmd: list[str]) -> SimpleNamespace:
            return self.results.pop(0)
    assert copy_dir(Runtime([bad, good]), "n", "/var/log", "pods", tmp_path) >= 1  # type: ignore[arg-type]
    assert (tmp_path / "pods" / "a" / "0.log").read_text() == "hi"
    with pytest.raises(RuntimeError_, match="exit 2: tar: pods/a/0.log: file shrank"):
        copy_dir(Runtime([bad, bad]), "n", "/var/log", "pods", tmp_path)  # type: ignore[arg-type]
