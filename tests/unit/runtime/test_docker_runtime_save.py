"""DockerRuntime.save_image_chunks names the tarball after the reference asked for, not the image's first tag (an
image tagged capd-py/haproxy:2.6 and kindest/haproxy:... copied to another docker host for the latter arrived as the
former only: found by tests/e2e/test_multihost.py). Without a docker daemon: the SDK's image object is a stand-in
that behaves as docker-py's Image.save does with `named`."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from capd_py.runtime.docker_runtime import DockerRuntime

pytestmark = pytest.mark.unit

TAGS = ["capd-py/haproxy:2.6", "kindest/haproxy:v20230606-42a2262b"]


class Image:
    tags = TAGS

    def save(self, named: Any = False) -> Any:
        # docker-py: True -> the first tag; a string must be one of the tags; False -> no name
        name = self.tags[0] if named is True else named
        assert named is False or named is True or named in self.tags
        yield f"tarball naming {name}".encode()


def _runtime() -> DockerRuntime:
    client = SimpleNamespace(api=None, images=SimpleNamespace(get=lambda ref: Image()))
    return DockerRuntime(client)


@pytest.mark.parametrize("ref", TAGS)
def test_the_tarball_names_the_reference_asked_for(ref: str) -> None:
    assert b"".join(_runtime().save_image_chunks(ref)) == f"tarball naming {ref}".encode()


def test_a_reference_that_is_not_a_tag_falls_back_to_the_first_tag() -> None:
    assert b"".join(_runtime().save_image_chunks("sha256:abc")) == f"tarball naming {TAGS[0]}".encode()
