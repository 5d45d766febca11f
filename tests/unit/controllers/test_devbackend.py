"""The Dev* kinds pick their backend's functions per object, as upstream's backendReconcilerFactory."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.controllers.context import Ctx
from capd_py.controllers.devbackend import by_backend
from capd_py.controllers.skeleton import Outcome, Subject

pytestmark = pytest.mark.unit


def _obj(kind: str, backend: dict[str, Any] | None) -> dict[str, Any]:
    spec = {} if backend is None else {"backend": backend}
    return {"kind": kind, "metadata": {"name": "m", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(("obj", "want"), [
    (_obj("DevMachine", {"inMemory": {}}), "in-memory"),
    (_obj("DevMachine", {"docker": {}}), "docker"),
    (_obj("DevMachine", None), "docker"),  # upstream's default backend
    (_obj("DevCluster", {"inMemory": {"vip": "x"}}), "in-memory"),
    (_obj("DockerMachine", {"inMemory": {}}), "docker"),  # the Docker* kinds have one backend
])
async def test_by_backend_calls_the_object_s_backend(obj: dict[str, Any], want: str) -> None:
    called: list[str] = []

    def fn(name: str) -> Any:
        async def f(ctx: Ctx, sub: Subject) -> Outcome:
            called.append(name)
            return Outcome(requeue_after=1 if name == "docker" else 2)
        return f

    out = await by_backend(docker=fn("docker"), in_memory=fn("in-memory"))(None, Subject(obj, None))  # type: ignore[arg-type]
    assert called == [want]
    assert out.requeue_after == (1 if want == "docker" else 2)
