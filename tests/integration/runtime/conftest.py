"""The docker runtime the tests of this folder drive: the real daemon, answering."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from capd_py.runtime.docker_runtime import DockerRuntime


@pytest.fixture
def rt() -> Iterator[DockerRuntime]:
    r = DockerRuntime()
    r.ping()
    yield r

