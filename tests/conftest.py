"""Shared fixtures, and the tiers (capd_py/testing/tiers.py).

- Every test under tests/<tier>/ gets the marker of its tier (`unit`, `integration`, `e2e`) from its folder, so
  `-m unit` selects every unit test; a test outside the tier folders or marked with another tier's marker stops
  the run at collection (a usage error). tests/unit/test_test_layout.py checks the files agree.
- `--tier-report` (`make test`): at the end, each tier's test count, wall-clock time and summed durations, then the
  20 slowest tests; env `CAPD_PY_TIER_REPORT=FILE` writes the same as JSON.

- `envtest` (session): a running `capd_py.testing.envtest.EnvTest` (etcd + kube-apiserver) with every
  capd-py CRD installed and Established. Fails (does not skip) if the binaries are missing.
- `kube` (function): a `capd_py.kube.client.Kube` for it, authenticated as system:masters.
- `namespace` (function): the name of a fresh namespace `t-<random>`, deleted afterwards.

The envtest starts lazily, only for tests that ask for one of these fixtures.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from capd_py.api.gvk import GVK
from capd_py.kube.client import Kube
from capd_py.testing.envtest import MAKE_HINT, EnvTest, binary_paths, missing_binaries, started_with_crds
from capd_py.testing.tiers import SLOWEST, TierReport, mark_tiers, order_by_tier

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
TESTS = Path(__file__).resolve().parent


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier-report", action="store_true",
                     help=f"at the end, print each tier's test count, wall-clock time and summed durations, and "
                          f"the {SLOWEST} slowest tests (env CAPD_PY_TIER_REPORT=FILE: also as JSON)")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(
        TierReport(print_summary=bool(config.getoption("tier_report", default=False)),
                   json_path=os.environ.get("CAPD_PY_TIER_REPORT") or None), "capd-py-tier-report")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects (the mark plugin's own modifyitems)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    problems = mark_tiers(items, TESTS)
    if problems:
        raise pytest.UsageError("tests out of their tier:\n  " + "\n  ".join(problems))
    order_by_tier(items, TESTS)


@pytest.fixture(scope="session")
def envtest() -> Iterator[EnvTest]:
    missing = missing_binaries()
    if missing:
        pytest.fail(f"envtest needs kube-apiserver and etcd; missing: {', '.join(map(str, missing))}. "
                    f"{MAKE_HINT[0].upper()}{MAKE_HINT[1:]} (expected at {', '.join(map(str, binary_paths()))}).",
                    pytrace=False)
    with started_with_crds() as env:
        yield env


@pytest.fixture
def kube(envtest: EnvTest) -> Iterator[Kube]:
    k: Kube = envtest.kube()
    try:
        yield k
    finally:
        k.close()


@pytest.fixture
async def namespace(kube: Kube) -> AsyncIterator[str]:
    name = f"t-{secrets.token_hex(4)}"
    await kube.create(NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        # no namespace controller runs in envtest: the namespace stays Terminating, its objects stay too,
        # but every test gets a new random name so nothing leaks into the next test
        await kube.delete(NAMESPACE, None, name)
