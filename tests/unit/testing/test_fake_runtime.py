from __future__ import annotations

import pytest

from capd_py.reconcile import cloudinit
from capd_py.runtime import networks
from capd_py.runtime.protocol import ContainerSpec, ExecResult, PortMapping, RuntimeError_
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit


def _node(rt: FakeRuntime, name: str = "n1") -> None:
    networks.ensure_network(rt, "net", {"a": "b"})
    rt.run_container(ContainerSpec(name=name, image="img", network="net", labels={"x": "1"},
                                   ports=(PortMapping(6443),)))


def test_containers_networks_volumes_lifecycle() -> None:
    rt = FakeRuntime()
    _node(rt)
    info = rt.get_container("n1")
    assert info is not None and info.running and "net" in info.ipv4 and info.ports[6443] > 0
    assert [c.name for c in rt.list_containers({"x": "1"})] == ["n1"]
    assert rt.list_volumes({"x": "1"})
    with pytest.raises(RuntimeError_):
        _node(rt)  # name in use
    with pytest.raises(RuntimeError_):
        rt.remove_network("net")  # in use
    rt.remove_container("n1")
    rt.remove_container("n1")  # no-op
    assert rt.list_volumes({"x": "1"}) == []
    rt.remove_network("net")
    assert rt.get_network("net") is None


def test_images_and_exec_results() -> None:
    rt = FakeRuntime(images={"img"})
    assert rt.image_exists("img") and not rt.image_exists("other")
    _node(rt)
    rt.exec_results.append(("uname", ExecResult(0, "Linux\n")))
    assert rt.exec("n1", ["uname", "-a"]).output == "Linux\n"
    assert cloudinit.systemd_ready(rt.exec("n1", cloudinit.SYSTEMD_PROBE).output)
    assert rt.execs[-1] == ("n1", cloudinit.SYSTEMD_PROBE)
    rt.write_file("n1", "/etc/x", b"data")
    assert rt.read_file("n1", "/etc/x") == b"data" and rt.read_file("n1", "/nope") is None
    rt.kill("n1", "SIGHUP")
    assert rt.signals("n1") == ["SIGHUP"]


@pytest.mark.parametrize("fail", [False, True])
def test_bootstrap_protocol_emulation(fail: bool) -> None:
    rt = FakeRuntime()
    _node(rt)
    if fail:
        rt.fail_bootstrap_on.append("kubeadm init")
    steps = cloudinit.to_steps("#cloud-config\nruncmd:\n- kubeadm init\n")
    for p, c in cloudinit.render_script(steps).items():
        rt.write_file("n1", p, c)
    assert cloudinit.parse_probe(rt.exec("n1", cloudinit.probe_command()).output).phase == "none"
    assert rt.exec("n1", cloudinit.launch_command()).output == "launched\n"
    assert rt.exec("n1", cloudinit.launch_command()).output == "already\n"
    st = cloudinit.parse_probe(rt.exec("n1", cloudinit.probe_command()).output)
    assert st.phase == ("failed" if fail else "done")
    if fail:
        assert st.exit_code == 1 and "kubeadm init" in st.tail


def test_label_selection_matches_a_key_with_any_value_when_the_value_is_empty() -> None:
    rt = FakeRuntime()
    _node(rt)
    networks.ensure_network(rt, "other", {"b": "2"})
    assert [c.name for c in rt.list_containers({"x": ""})] == ["n1"]
    assert rt.list_containers({"y": ""}) == [] and rt.list_containers({"x": "2"}) == []
    assert [n.name for n in rt.list_networks({"a": ""})] == ["net"]
    assert len(rt.list_volumes({"x": ""})) == 1 and rt.list_volumes({"z": ""}) == []


def test_remove_volume() -> None:
    rt = FakeRuntime()
    _node(rt)
    (vol,) = rt.list_volumes({"x": "1"})
    with pytest.raises(RuntimeError_):
        rt.remove_volume(vol)  # in use by n1
    rt.volumes["loose"] = {"x": "1"}
    rt.remove_volume("loose")
    rt.remove_volume("loose")  # no-op
    assert rt.list_volumes({"x": "1"}) == [vol]


def test_images_list_build_save() -> None:
    rt = FakeRuntime(images={"capd-py/base:bookworm-1", "capd-py/base:bookworm-2", "capd-py/node:v1.34.4"})
    assert rt.list_images("capd-py/base") == ["capd-py/base:bookworm-1", "capd-py/base:bookworm-2"]
    assert rt.list_images("capd-py") == []
    rt.build_image("/tmp/ctx", "capd-py/controllers:dev", {"BASE": "capd-py/base:bookworm-2"})
    assert rt.builds == [("/tmp/ctx", "capd-py/controllers:dev", {"BASE": "capd-py/base:bookworm-2"})]
    assert rt.image_exists("capd-py/controllers:dev") and rt.list_images("capd-py/controllers") == [
        "capd-py/controllers:dev"]
    assert rt.save_image("capd-py/controllers:dev")
    with pytest.raises(RuntimeError_):
        rt.save_image("absent:1")


def test_stop_pause_unpause() -> None:
    rt = FakeRuntime()
    _node(rt)
    rt.pause_container("n1")
    rt.pause_container("n1")  # already paused: no-op, as docker's adapter
    assert rt.get_container("n1").status == "paused"  # type: ignore[union-attr]
    rt.unpause_container("n1")
    assert rt.get_container("n1").status == "running"  # type: ignore[union-attr]
    rt.stop_container("n1")
    rt.stop_container("n1")
    assert rt.get_container("n1").status == "exited"  # type: ignore[union-attr]
    with pytest.raises(RuntimeError_):
        rt.pause_container("n1")  # a stopped container cannot be frozen
    rt.start_container("n1")
    assert rt.get_container("n1").running  # type: ignore[union-attr]
