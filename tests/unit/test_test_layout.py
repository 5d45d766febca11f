"""The suite's own layout: pytest imports test files by basename (rootdir-less, no packages), so two test files of
one name in different tiers make `make test` stop at collection ("import file mismatch")."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def test_test_file_basenames_are_unique_across_tiers() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], {
        n: sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob(n)) for n, k in names.items() if k > 1}


def test_folders_importing_siblings_by_bare_name_are_mypy_bases() -> None:
    """`from core_fixtures import ...` works under pytest (and the bench scripts put bench/ on sys.path), but mypy
    finds the sibling only when its folder is in `mypy_path`; otherwise ignore_missing_imports makes it Any."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    bases = {ROOT / p.replace("$MYPY_CONFIG_FILE_DIR", ".") for p in conf["mypy_path"]}
    needing = set()
    for f in [*TESTS.rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        for name in re.findall(r"^\s*(?:from|import) (\w+)\b", f.read_text(), re.M):
            if name != f.stem and (f.parent / f"{name}.py").exists():
                needing.add(f.parent.resolve())
    assert needing, "the scan found no sibling import at all: it is broken"
    assert not sorted(str(d.relative_to(ROOT)) for d in needing if d not in {b.resolve() for b in bases})
