"""Shared fixtures, and the tiers (capd_py/testing/tiers.py).

- Every test under tests/<tier>/ gets the marker of its tier (`unit`, `integration`, `e2e`) from its folder, so
  `-m unit` selects every unit test; a test outside the tier folders or marked with another tier's marker stops
  the run at collection (a usage error). tests/unit/test_test_layout.py checks the files agree.
- `--tier-report` (`make test`): at the end, each tier's test count, wall-clock time and summed durations, then the
  20 slowest tests; env `CAPD_PY_TIER_REPORT=FILE` writes the same as JSON, with each test's worker, start and stop
  (`make test`: $CAPD_PY_CACHE/test-report.json). Every run records each passed test's
  time in $CAPD_PY_CACHE/test-durations.json; the next orders each tier's tests longest first by it, or on a fresh
  machine by tests/durations.json (committed; the workers then end together; only the time depends on the order).
- Workers (`make test`: `-n 4`, two of them into the e2e tier; pytest-xdist, scheduled by tests/worker_units.py):
  tests that share a cluster fixture (`quick_cluster`) go to one worker together (an `xdist_group`), as do a
  module's tests on a module-scoped fixture and all `host_exclusive` tests (first of the run); integration and e2e
  tests hold the docker host's lock (capd_py/testing/host_lock.py): shared, or alone for a test marked
  `host_exclusive`; a test marked `docker_free` (envtest, the in-memory backend) takes none, runs beside an
  exclusive one, and finds no docker daemon (DOCKER_HOST names none).

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
from capd_py.testing import late_builds
from capd_py.testing.envtest import MAKE_HINT, EnvTest, binary_paths, cache_dir, missing_binaries, started_with_crds
from capd_py.testing.host_lock import host_share
from capd_py.testing.tiers import DOCKER_FREE, SLOWEST, TierReport, mark_tiers, order_by_tier, read_durations

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)
TESTS = Path(__file__).resolve().parent
# a session fixture several tests use, made once per process: its users run in one worker, one after another
SHARED_FIXTURE_GROUPS = {"quick_cluster": "e2e-quick"}


# the times this machine recorded, over the committed ones (a fresh machine orders by those: hack/test-durations.py)
SEED_DURATIONS = TESTS / "durations.json"
# a `docker_free` test's DOCKER_HOST: no daemon answers there
NO_DOCKER_HOST = "unix:///nonexistent/capd-py-docker-free-test.sock"


def durations_file() -> Path:
    return cache_dir() / "test-durations.json"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--tier-report", action="store_true",
                     help=f"at the end, print each tier's test count, wall-clock time and summed durations, and "
                          f"the {SLOWEST} slowest tests (env CAPD_PY_TIER_REPORT=FILE: also as JSON)")


def pytest_configure(config: pytest.Config) -> None:
    # tests/worker_units.py, by name: tests/ is on sys.path once this conftest is (a bare import would make tests/
    # a mypy base, where this file and tests/integration/runtime/conftest.py are both `conftest`)
    config.pluginmanager.import_plugin("worker_units")
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: its controller reports
        return
    config.pluginmanager.register(
        TierReport(print_summary=bool(config.getoption("tier_report", default=False)),
                   json_path=os.environ.get("CAPD_PY_TIER_REPORT") or None, tests_root=TESTS,
                   rootpath=config.rootpath, durations_path=durations_file()), "capd-py-tier-report")


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects (the mark plugin's own) and xdist names the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    problems = mark_tiers(items, TESTS)
    if problems:
        raise pytest.UsageError("tests out of their tier:\n  " + "\n  ".join(problems))
    for item in items:
        for fixture, group in SHARED_FIXTURE_GROUPS.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(pytest.mark.xdist_group(group))
    order_by_tier(items, TESTS, {**read_durations(SEED_DURATIONS), **read_durations(durations_file())})


# how long a `late_build` test waits for its build once nothing else is left to run (a cold cert-manager build at the
# lowest CPU weight beside the e2e tier: ~13 min measured)
LATE_BUILD_WAIT = 1800.0


@pytest.fixture(autouse=True)
def _late_builds(request: pytest.FixtureRequest) -> None:
    """A test marked `late_build(name, ...)` starts once those builds, which `make test` runs beside the tests, are
    done (capd_py/testing/late_builds.py); the scheduler (tests/worker_units.py) holds it back meanwhile, so this
    waits only when nothing else was left. Before the host lock (defined first): waiting holds no part of it."""
    for marker in request.node.iter_markers(late_builds.MARKER):
        for name in marker.args:
            try:
                late_builds.wait(str(name), LATE_BUILD_WAIT)
            except late_builds.LateBuildFailed as e:
                pytest.fail(str(e), pytrace=False)


# modules marked `host_exclusive` as a whole, while `_docker_host_module_exclusive` holds the host for them
_EXCLUSIVE_MODULES: set[Path] = set()


@pytest.fixture(scope="module", autouse=True)
def _docker_host_module_exclusive(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module marked `host_exclusive` (its `pytestmark`) holds the host alone from before its module-scoped
    fixtures are set up until after they are torn down: those run outside any test's own lock (a module fixture comes
    before function-scoped ones, autouse or not), and a second dockerd starting or stopping there changed the host's
    bridges and iptables chains beside other workers' tests."""
    module = request.node
    if not any(m.name == "host_exclusive" for m in module.own_markers):
        yield
        return
    with host_share(exclusive=True):
        _EXCLUSIVE_MODULES.add(module.path)
        try:
            yield
        finally:
            _EXCLUSIVE_MODULES.discard(module.path)


@pytest.fixture(autouse=True)
def _docker_host_share(request: pytest.FixtureRequest) -> Iterator[None]:
    """The docker host's lock around every integration and e2e test that uses docker (before its other function-
    scoped fixtures: autouse ones come first), shared or, for `host_exclusive`, alone. A `docker_free` test takes no
    lock, so it runs beside an exclusive one; its DOCKER_HOST names no daemon, so a docker call there fails at once
    instead of racing the exclusive test (the marker is checked, not trusted). A test of a module that holds the host
    already (`_docker_host_module_exclusive`) takes nothing more: a second flock of this process would wait on the
    first forever."""
    if request.node.get_closest_marker("unit") is not None:
        yield
        return
    if request.node.path in _EXCLUSIVE_MODULES:
        yield
        return
    if request.node.get_closest_marker(DOCKER_FREE) is not None:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DOCKER_HOST", NO_DOCKER_HOST)
            yield
        return
    with host_share(exclusive=request.node.get_closest_marker("host_exclusive") is not None):
        yield


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
