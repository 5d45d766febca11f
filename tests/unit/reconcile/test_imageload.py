"""Image loading rules: containerd names, ctr output parsing, which nodes need what, the Cluster's record,
and what a booting machine loads or waits for."""

from __future__ import annotations

import json

import pytest

from capd_py.reconcile import imageload as il

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("ref", "name"), [
    ("busybox", "docker.io/library/busybox:latest"),
    ("busybox:1.36", "docker.io/library/busybox:1.36"),
    ("capd-py/echo:v1", "docker.io/capd-py/echo:v1"),
    ("registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:3.10.1"),
    ("localhost/app", "localhost/app:latest"),
    ("localhost:5000/app:2", "localhost:5000/app:2"),
    ("docker.io/library/nginx@sha256:abc", "docker.io/library/nginx@sha256:abc"),
])
def test_normalize_names_images_as_containerd_does(ref: str, name: str) -> None:
    assert il.normalize(ref) == name


def test_parse_list_and_follow_index_to_config() -> None:
    out = ("REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
           "docker.io/capd-py/echo:v1 application/vnd.docker.distribution.manifest.v2+json sha256:m1 3.0 MiB "
           "linux/amd64 -\n")
    assert il.parse_list(out) == {"docker.io/capd-py/echo:v1": "sha256:m1"}
    assert il.next_digest(json.dumps({"config": {"digest": "sha256:c"}})) == ("config", "sha256:c")
    index = {"manifests": [{"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
                           {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}}]}
    assert il.next_digest(json.dumps(index)) == ("manifest", "sha256:amd")
    assert il.next_digest("not json") is None and il.next_digest("{}") is None


def test_plan_skips_images_with_the_same_id() -> None:
    images = {"a:1": "sha256:a", "b:1": "sha256:b"}
    assert il.plan(images, {"a:1": "sha256:a", "b:1": None}) == ["b:1"]
    assert il.plan(images, {"a:1": "sha256:old", "b:1": "sha256:b"}) == ["a:1"]  # rebuilt under the same tag
    assert il.plan(images, {"a:1": "sha256:a", "b:1": "sha256:b"}) == []


def test_record_adds_once_in_order() -> None:
    cluster = {"metadata": {"annotations": {il.RECORDED_ANNOTATION: "a:1"}}}
    assert il.record(cluster, ["b:1", "a:1"]) == "a:1,b:1"
    assert il.record(cluster, ["a:1"]) is None  # nothing to write: a stable object gets no writes
    assert il.recorded({"metadata": {}}) == [] and il.record({"metadata": {}}, ["x"]) == "x"


def test_boot_images_spec_first_then_recorded() -> None:
    dm = {"spec": {"preLoadImages": ["a:1", "b:1"]}}
    cluster = {"metadata": {"annotations": {il.RECORDED_ANNOTATION: "b:1,c:1"}}}
    assert il.boot_images(dm, cluster) == {"a:1": il.SOURCE_SPEC, "b:1": il.SOURCE_SPEC, "c:1": il.SOURCE_RECORDED}
    assert il.boot_images({"spec": {}}, None) == {}


def test_boot_decision_missing_spec_image_blocks_with_a_clear_message() -> None:
    wanted = {"a:1": il.SOURCE_SPEC, "c:1": il.SOURCE_RECORDED}
    d = il.boot_decision(wanted, {"a:1": None, "c:1": "sha256:c"})
    assert d.blocked and d.requeue_after and "a:1 (spec.preLoadImages) not present in the local docker daemon" in \
        d.message and "never pulls" in d.message
    # a recorded image removed from the daemon since: the node boots without it (reported), not blocked
    d = il.boot_decision(wanted, {"a:1": "sha256:a", "c:1": None})
    assert not d.blocked and d.load == {"a:1": "sha256:a"} and d.skipped == ["c:1"]
