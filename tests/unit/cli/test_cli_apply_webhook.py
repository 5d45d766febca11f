"""`capd-py apply` waits for capd-py's webhook when the API server cannot reach it yet (controllers starting or
restarting), and never retries a refusal."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.cli import apply as ap
from capd_py.kube.client import KubeError

pytestmark = pytest.mark.unit

UNREACHABLE = ('Internal error occurred: failed calling webhook "validation.machinedeployment.cluster.x-k8s.io": '
               'failed to call webhook: Post "https://172.16.0.1:9443/validate?timeout=10s": dial tcp '
               '172.16.0.1:9443: connect: connection refused')


def test_only_an_unreachable_webhook_is_retried() -> None:
    assert ap.webhook_unreachable(KubeError(500, "InternalError", UNREACHABLE))
    assert not ap.webhook_unreachable(KubeError(422, "Invalid", "spec.replicas: Invalid value"))
    assert not ap.webhook_unreachable(KubeError(400, "BadRequest", 'admission webhook "x" denied the request'))
    assert not ap.webhook_unreachable(ValueError("x"))


class _Kube:
    """The API server while the controllers start: two refused connections to the webhook, then it answers."""
    def __init__(self) -> None:
        self.calls = 0

    async def get(self, g: Any, ns: str | None, name: str) -> None:
        return None

    async def acall(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= 2:
            raise KubeError(500, "InternalError", UNREACHABLE)
        return {"metadata": {"resourceVersion": "1"}}


async def test_apply_waits_for_the_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    kube = _Kube()
    doc = {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment", "metadata": {"name": "md"},
           "spec": {"clusterName": "c"}}
    out = await ap.apply_objects(kube, [doc])  # type: ignore[arg-type]
    assert [(o.ok, o.detail) for o in out] == [(True, "created")] and kube.calls == 3
