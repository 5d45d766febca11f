from __future__ import annotations

from pathlib import Path

import pytest

from capd_py.api import gvk
from capd_py.kube import crds

pytestmark = pytest.mark.unit
# MachineDrainRule: served, read by the drain, not moved (yet); ExtensionConfig: cluster-scoped, no Cluster's
SERVED = (*gvk.ALL_CAPI, gvk.MACHINE_DRAIN_RULE, gvk.EXTENSION_CONFIG)


def test_loads_one_crd_per_kind() -> None:
    docs = crds.load_crds()
    assert [d["metadata"]["name"] for d in docs] == sorted(f"{g.plural}.{g.group}" for g in SERVED)
    for d in docs:
        assert d["apiVersion"] == "apiextensions.k8s.io/v1"
        (v,) = d["spec"]["versions"]
        assert v["name"] == gvk.VERSION and v["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"] == "object"


def test_package_data_and_repo_dir_agree() -> None:
    here = Path(crds.__file__).resolve().parent
    assert crds.crds_dir() in {here / "crds_data", here.parents[1] / "crds"}
    assert sorted(p.name for p in crds.crds_dir().glob("*.yaml")) == sorted(
        f"{g.group}_{g.plural}.yaml" for g in SERVED)


def test_env_override_and_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"
                                     "metadata: {name: things.example.com}\n---\nkind: ConfigMap\n")
    monkeypatch.setenv("CAPD_PY_CRDS_DIR", str(tmp_path))
    assert crds.crds_dir() == tmp_path
    assert [d["metadata"]["name"] for d in crds.load_crds()] == ["things.example.com"]


def test_missing_dir_names_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("CAPD_PY_CRDS_DIR", str(tmp_path))  # empty
    monkeypatch.setattr(crds, "__file__", str(tmp_path / "pkg" / "api" / "crds.py"))
    with pytest.raises(FileNotFoundError, match="run `python hack/gen_crds.py`"):
        crds.crds_dir()


def test_is_established() -> None:
    assert crds.is_established({"status": {"conditions": [{"type": "Established", "status": "True"}]}})
    assert not crds.is_established({"status": {"conditions": [{"type": "Established", "status": "False"}]}})
    assert not crds.is_established(None)
