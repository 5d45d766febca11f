"""hack/test-durations.py: the committed test times a fresh machine orders the suite by, from this machine's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "hack" / "test-durations.py"


def test_keeps_existing_tests_of_two_seconds_or_more_in_whole_seconds(tmp_path: Path) -> None:
    (tmp_path / "test-durations.json").write_text(json.dumps({
        "tests/e2e/test_upgrade.py::test_x": 130.6, "tests/unit/test_test_layout.py::test_y": 0.4,
        "tests/integration/test_crds.py::test_z": 2.2, "tests/e2e/test_gone.py::test_w": 99.0}))
    out = tmp_path / "durations.json"
    p = subprocess.run([sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True,
                       env={**os.environ, "CAPD_PY_CACHE": str(tmp_path)})
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text()) == {"tests/e2e/test_upgrade.py::test_x": 131,
                                           "tests/integration/test_crds.py::test_z": 2}


def test_without_recorded_times_it_says_so(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "out.json")], capture_output=True, text=True,
                       env={**os.environ, "CAPD_PY_CACHE": str(tmp_path)})
    assert p.returncode == 1 and "run `make test` first" in p.stderr
