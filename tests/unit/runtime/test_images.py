"""Loading images into nodes over the fake runtime: skip by digest, save once, parallel, failures per node."""

from __future__ import annotations

import threading

import pytest

from capd_py.reconcile import imageload
from capd_py.runtime.images import load_images, local_ids, node_ids
from capd_py.runtime.protocol import ContainerSpec, ExecResult
from capd_py.testing.fake_runtime import FakeRuntime

pytestmark = pytest.mark.unit

NODES = ["c1-cp-0", "c1-md-0", "c1-md-1"]


def _runtime() -> FakeRuntime:
    rt = FakeRuntime()
    for n in NODES:
        rt.run_container(ContainerSpec(name=n, image="capd-py/node:v1.34.4", node=True))
    return rt


def _results(outcomes: list[imageload.Outcome]) -> dict[tuple[str, str], str]:
    return {(o.node, o.ref): o.result for o in outcomes}


def test_loads_everywhere_then_skips_the_same_digest() -> None:
    rt = _runtime()
    ids = {r: i for r, i in local_ids(rt, ["capd-py/echo:t1", "busybox"]).items() if i}
    out = load_images(rt, NODES, ids)
    assert set(_results(out).values()) == {"loaded"} and len(out) == 6
    assert sorted(rt.saves) == ["busybox", "capd-py/echo:t1"]  # docker save once per image, not per node
    assert node_ids(rt, "c1-md-1", ["capd-py/echo:t1"]) == {"capd-py/echo:t1": ids["capd-py/echo:t1"]}
    assert rt.ctr_images["c1-md-1"]["docker.io/library/busybox:latest"] == ids["busybox"]

    msgs: list[str] = []
    again = load_images(rt, NODES, ids, progress=msgs.append)
    assert set(_results(again).values()) == {"present"}
    assert sorted(rt.saves) == ["busybox", "capd-py/echo:t1"]  # nothing saved or imported again
    assert any("found to be already present on all nodes" in m for m in msgs)


def test_a_rebuilt_image_under_the_same_tag_is_loaded_again_only_where_it_differs() -> None:
    rt = _runtime()
    load_images(rt, NODES, {"app:1": rt.image_id("app:1") or ""})
    rt.image_ids["app:1"] = "sha256:rebuilt"
    rt.ctr_images["c1-md-0"]["docker.io/library/app:1"] = "sha256:rebuilt"  # that node has the new one already
    out = _results(load_images(rt, NODES, {"app:1": "sha256:rebuilt"}))
    assert out == {("c1-cp-0", "app:1"): "loaded", ("c1-md-0", "app:1"): "present", ("c1-md-1", "app:1"): "loaded"}


def test_imports_run_in_parallel() -> None:
    """Every node's import must be in flight at once for the barrier to open; serial imports would time out."""
    rt = _runtime()
    barrier = threading.Barrier(len(NODES), timeout=5)
    orig_exec = rt.exec  # the fake runs exec_hook under its lock: wait outside it

    def exec_(name: str, cmd: list[str], stdin: bytes | None = None, timeout: float | None = None) -> ExecResult:
        if cmd[2:4] == ["images", "import"]:
            barrier.wait()
        return orig_exec(name, cmd, stdin, timeout)
    rt.exec = exec_  # type: ignore[method-assign]
    out = load_images(rt, NODES, {"app:1": rt.image_id("app:1") or ""})
    assert set(_results(out).values()) == {"loaded"} and not barrier.broken


def test_one_node_failing_does_not_stop_the_others() -> None:
    rt = _runtime()
    rt.set_status("c1-md-0", "exited")
    bad = ExecResult(1, "ctr: failed to extract layer: no space left on device")
    orig = rt.exec

    def exec_(name: str, cmd: list[str], stdin: bytes | None = None, timeout: float | None = None) -> ExecResult:
        if name == "c1-md-1" and cmd[2:4] == ["images", "import"]:
            return bad
        return orig(name, cmd, stdin, timeout)
    rt.exec = exec_  # type: ignore[method-assign]
    out = {(o.node, o.ref): o for o in load_images(rt, NODES, {"app:1": rt.image_id("app:1") or ""})}
    assert out[("c1-cp-0", "app:1")].result == "loaded"
    assert out[("c1-md-0", "app:1")].result == "failed" and "not running" in out[("c1-md-0", "app:1")].detail
    assert out[("c1-md-1", "app:1")].result == "failed" and "no space left" in out[("c1-md-1", "app:1")].detail


def test_missing_local_image_has_no_id() -> None:
    rt = FakeRuntime(images={"present:1"})
    assert local_ids(rt, ["present:1", "absent:1"]) == {"present:1": rt.image_id("present:1"), "absent:1": None}
