"""Controllers stay thin (issue 27): a controllers module over 300 lines is holding decisions that belong in
capd_py/reconcile or a service; split it rather than raise the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

import capd_py.controllers

pytestmark = pytest.mark.unit

LIMIT = 300


def test_no_controllers_module_is_over_the_limit() -> None:
    root = Path(capd_py.controllers.__file__).parent
    sizes = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in root.rglob("*.py")}
    assert len(sizes) > 20  # the package itself was found
    assert {k: v for k, v in sizes.items() if v > LIMIT} == {}
