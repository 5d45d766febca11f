from __future__ import annotations

from pathlib import Path

import pytest

from capd_py.cli import cleanup
from capd_py.runtime import networks
from capd_py.runtime.fake import FakeRuntime
from capd_py.runtime.protocol import ContainerSpec

pytestmark = pytest.mark.unit


class RecordingRuntime(FakeRuntime):
    def __init__(self) -> None:
        super().__init__()
        self.removed: list[str] = []
        networks.ensure_network(self, "n1", {"io.x-k8s.capd-py.managed": "true"})
        networks.ensure_network(self, "bridge", {})
        for name, labels in (("a", {"io.x-k8s.capd-py.managed": "true", "io.x-k8s.capd-py.cluster": "c1"}),
                             ("b", {"io.x-k8s.capd-py.management": "capd-mgmt"}),
                             ("x", {"com.example": "1"})):
            self.run_container(ContainerSpec(name=name, image="img", labels=labels, node=False))
        self.volumes.update({"v1": {"io.x-k8s.capd-py.cluster": "c1"}, "other": {}})

    def remove_container(self, name: str) -> None:
        self.removed.append(f"c:{name}")
        super().remove_container(name)

    def remove_network(self, name: str) -> None:
        self.removed.append(f"n:{name}")
        super().remove_network(name)

    def remove_volume(self, name: str) -> None:
        self.removed.append(f"v:{name}")
        super().remove_volume(name)


def test_delete_everything_only_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_HOME", str(tmp_path))
    (tmp_path / "capd-mgmt.kubeconfig").write_text("x")
    c = RecordingRuntime()
    counts = cleanup.delete_everything(c)
    assert sorted(c.removed) == ["c:a", "c:b", "n:n1", "v:v1"]
    assert counts == {"containers": 2, "networks": 1, "volumes": 1}
    assert not (tmp_path / "capd-mgmt.kubeconfig").exists()


def test_ours() -> None:
    assert cleanup.ours({"io.x-k8s.capd-py.role": "x"})
    assert not cleanup.ours({"io.x-k8s.other": "x"}) and not cleanup.ours(None)
