"""runtime/images.py against the real dockerd and node containers' real containerd: an image is read back
from `ctr` with docker's ID (so the same image is skipped), a rebuilt tag is loaded again, and a ~100 MB image
goes into two nodes at once (timed)."""

from __future__ import annotations

import secrets
import tempfile
import time
from pathlib import Path

import pytest

from capd_py.api.labels import CONTAINER_NAMESPACE
from capd_py.reconcile import imageload
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.images import load_images, local_ids, node_ids
from capd_py.runtime.protocol import ContainerSpec

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

NODE_IMAGE = "capd-py/node:v1.34.4"
BIG = "registry.k8s.io/kube-apiserver:v1.35.4"  # ~100 MB, built by `make images`, not in the v1.34.4 node image


def _build(rt: DockerRuntime, tag: str, label: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "Dockerfile").write_text(f"FROM capd-py/echo:latest\nLABEL t={label}\n")
        rt.build_image(d, tag)


def test_load_skip_reload_and_a_big_image_into_two_nodes(rt: DockerRuntime) -> None:
    for img in (NODE_IMAGE, BIG, "capd-py/echo:latest"):
        if not rt.image_exists(img):
            pytest.fail(f"{img} is missing: run `make images`", pytrace=False)
    tag = secrets.token_hex(3)
    labels = {CONTAINER_NAMESPACE: f"t-img-{tag}"}
    nodes = [f"t-img-{tag}-{i}" for i in range(2)]
    ref = f"capd-py/echo:t-img-{tag}"
    built: list[str] = []
    try:
        for n in nodes:
            rt.run_container(ContainerSpec(name=n, image=NODE_IMAGE, labels=labels, node=True,
                                           privileged_mode="restricted"))
        deadline = time.monotonic() + 60
        while not all(rt.exec(n, ["ctr", "version"]).exit_code == 0 for n in nodes):
            assert time.monotonic() < deadline, "containerd did not start in the node containers"
            time.sleep(0.5)

        _build(rt, ref, "one")
        ids = {r: i for r, i in local_ids(rt, [ref]).items() if i}
        built.append(ids[ref])
        assert node_ids(rt, nodes[0], [ref]) == {ref: None}
        out = load_images(rt, nodes, ids)
        assert [o.result for o in out] == ["loaded", "loaded"], out
        assert node_ids(rt, nodes[1], [ref]) == {ref: ids[ref]}  # containerd's config digest = docker's ID
        assert [o.result for o in load_images(rt, nodes, ids)] == ["present", "present"]

        _build(rt, ref, "two")  # rebuilt under the same tag: a new ID, loaded again
        ids2 = {r: i for r, i in local_ids(rt, [ref]).items() if i}
        assert ids2[ref] != ids[ref]
        assert [o.result for o in load_images(rt, nodes, ids2)] == ["loaded", "loaded"]

        big = {r: i for r, i in local_ids(rt, [BIG]).items() if i}
        t0 = time.monotonic()
        out = load_images(rt, nodes, big)
        took = time.monotonic() - t0
        assert [o.result for o in out] == ["loaded", "loaded"], out
        assert imageload.normalize(BIG) in rt.exec(nodes[0], imageload.LIST_COMMAND).output
        print(f"\n{BIG} into 2 nodes: {took:.1f}s")
    finally:
        for n in nodes:
            rt.remove_container(n)
        for img in (ref, *built):  # the first build is left untagged by the second
            try:
                rt.client.images.remove(img, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


@pytest.mark.parametrize("version", ["v1.34.4", "v1.35.4"])  # the Makefile's K8S_VERSIONS
def test_the_node_image_declares_no_volume(rt: DockerRuntime, version: str) -> None:
    """A VOLUME in the node image gives every node container an anonymous volume of its own, which outlives the
    container wherever a tool removes it without its volumes (images/build.sh once committed its build volume
    /unpack that way: one empty volume left per cluster upstream CAPD deleted). A node's /var volume is the one
    the runtime asks for at `docker run`, as kind does."""
    image = f"capd-py/node:{version}"
    if not rt.image_exists(image):
        pytest.fail(f"{image} is missing: run `make images`", pytrace=False)
    assert not rt.api.inspect_image(image)["Config"].get("Volumes"), image
