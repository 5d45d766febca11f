from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capd_py.cli import cleanup

pytestmark = pytest.mark.unit


class FakeAPI:
    def __init__(self) -> None:
        self.containers_ = [
            {"Id": "a", "Labels": {"io.x-k8s.capd-py.managed": "true", "io.x-k8s.capd-py.cluster": "c1"}},
            {"Id": "b", "Labels": {"io.x-k8s.capd-py.management": "capd-mgmt"}},
            {"Id": "x", "Labels": {"com.example": "1"}},
        ]
        self.networks_ = [{"Id": "n1", "Labels": {"io.x-k8s.capd-py.managed": "true"}},
                          {"Id": "bridge", "Labels": {}}]
        self.volumes_ = [{"Name": "v1", "Labels": {"io.x-k8s.capd-py.cluster": "c1"}},
                         {"Name": "other", "Labels": None}]
        self.removed: list[str] = []

    def containers(self, all: bool, filters: dict[str, Any]) -> list[dict[str, Any]]:
        key = filters["label"]
        return [c for c in self.containers_ if key in c["Labels"]]

    def remove_container(self, cid: str, v: bool, force: bool) -> None:
        assert v and force
        self.removed.append(f"c:{cid}")

    def networks(self) -> list[dict[str, Any]]:
        return self.networks_

    def remove_network(self, nid: str) -> None:
        self.removed.append(f"n:{nid}")

    def volumes(self) -> dict[str, Any]:
        return {"Volumes": self.volumes_}

    def remove_volume(self, name: str, force: bool) -> None:
        self.removed.append(f"v:{name}")


class FakeClient:
    def __init__(self) -> None:
        self.api = FakeAPI()


def test_delete_everything_only_ours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_HOME", str(tmp_path))
    (tmp_path / "capd-mgmt.kubeconfig").write_text("x")
    c = FakeClient()
    counts = cleanup.delete_everything(c)
    assert sorted(c.api.removed) == ["c:a", "c:b", "n:n1", "v:v1"]
    assert counts == {"containers": 2, "networks": 1, "volumes": 1}
    assert not (tmp_path / "capd-mgmt.kubeconfig").exists()


def test_ours() -> None:
    assert cleanup.ours({"io.x-k8s.capd-py.role": "x"})
    assert not cleanup.ours({"io.x-k8s.other": "x"}) and not cleanup.ours(None)
