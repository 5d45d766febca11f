"""DockerRuntime's fallback from --privileged to the restricted mode, without a docker daemon."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from capd_py.api.containers import ContainerSpec
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.runtime.protocol import RuntimeError_

pytestmark = pytest.mark.unit

REFUSED = ("start container {}: failed to create shim task: OCI runtime create failed: runc create failed: "
           "unable to start container process: unable to apply caps: operation not permitted: unknown")


class Host:
    """Refuses --privileged; `on_refusal` runs just before the refusal is raised."""

    def __init__(self, rt: DockerRuntime, on_refusal: Any = None):
        self.rt, self.on_refusal = rt, on_refusal
        self.started: list[tuple[str, str]] = []
        self.removed: list[str] = []
        rt.image_exists = lambda ref: True  # type: ignore[method-assign]
        rt._run = self.run  # type: ignore[method-assign]
        rt.remove_container = self.removed.append  # type: ignore[method-assign,assignment]

    def run(self, spec: ContainerSpec, start: bool = True) -> Any:
        if spec.privileged_mode == "privileged":
            if self.on_refusal:
                self.on_refusal()
            raise RuntimeError_(REFUSED.format(spec.name))
        self.started.append((spec.name, spec.privileged_mode))
        return SimpleNamespace(name=spec.name)


def runtime() -> DockerRuntime:
    return DockerRuntime(client=SimpleNamespace(api=None))


def test_refused_privileged_falls_back_once_and_then_goes_restricted_directly() -> None:
    rt = runtime()
    host = Host(rt)
    spec = ContainerSpec(name="a", image="capd-py/node:v1.34.4")
    rt.run_container(spec)
    rt.run_container(replace(spec, name="b"))
    assert host.started == [("a", "restricted"), ("b", "restricted")]
    assert host.removed == ["a"]  # the half-created privileged container is not left behind


def test_refusal_seen_after_another_thread_fell_back_still_falls_back() -> None:
    # Two machines created at once: both start privileged; the other thread sets the flag first.
    rt = runtime()
    host = Host(rt, on_refusal=lambda: setattr(rt, "_privileged_refused", True))
    rt.run_container(ContainerSpec(name="cp", image="capd-py/node:v1.34.4"))
    assert host.started == [("cp", "restricted")]
    assert host.removed == ["cp"]


def test_no_fallback_when_disabled_or_for_other_errors() -> None:
    rt = DockerRuntime(client=SimpleNamespace(api=None), fallback_restricted=False)
    Host(rt)
    with pytest.raises(RuntimeError_, match="apply caps"):
        rt.run_container(ContainerSpec(name="a", image="capd-py/node:v1.34.4"))
