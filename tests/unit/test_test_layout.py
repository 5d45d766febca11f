"""The suite's own layout: pytest imports test files by basename (rootdir-less, no packages), so two test files of
one name in different tiers make `make test` stop at collection ("import file mismatch")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def test_test_file_basenames_are_unique_across_tiers() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], {
        n: sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob(n)) for n, k in names.items() if k > 1}
