"""hack/check_deps.py (run by `make lint`) names a third-party import its pyproject.toml does not declare."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def _load() -> object:
    spec = importlib.util.spec_from_file_location("check_deps", ROOT / "hack" / "check_deps.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["check_deps"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_undeclared_imports_are_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cd = _load()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\ndependencies = ["PyYAML>=6"]\n')
    pkg = tmp_path / "capd_py"
    pkg.mkdir()
    (pkg / "a.py").write_text("import os\nimport yaml\nfrom requests import get\nfrom . import b\nimport sibling\n")
    (pkg / "sibling.py").write_text("")
    monkeypatch.setattr(cd, "ROOT", tmp_path)
    problems = cd.check(["capd_py"], None)  # type: ignore[attr-defined]
    assert len(problems) == 1 and problems[0].startswith("requests (from requests) is imported but not declared")
    assert "capd_py/a.py:3" in problems[0]


def test_the_repository_declares_what_it_imports() -> None:
    cd = _load()
    assert cd.check(["capd_py"], None) == []  # type: ignore[attr-defined]
