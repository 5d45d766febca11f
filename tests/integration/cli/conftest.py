"""Fixtures of the CLI integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from capd_py.testing import clusterctl


@pytest.fixture(scope="session")
def clusterctl_binary() -> Path:
    """Upstream clusterctl, built into the cache by `make clusterctl`; fails (does not skip) when it is missing."""
    why = clusterctl.missing()
    if why:
        pytest.fail(why, pytrace=False)
    return clusterctl.binary()
