"""e2e tier: a management plane (etcd + kube-apiserver + kube-controller-manager for garbage
collection) with the CRDs, and `capd-py controllers` running as its own process."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from capd_py.testing.e2e import (
    E2E_RESYNC_SECONDS,
    K8S_VERSION,
    UPGRADE_TO_VERSION,
    Mgmt,
    SharedClusters,
    WorkloadCluster,
    create_namespace,
    delete_cluster_objects,
    delete_namespace,
    management_plane,
    run,
    sweep_leftovers,
)
from capd_py.testing.envtest import cache_dir, missing_binaries


@pytest.fixture(scope="session")
def mgmt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mgmt]:
    missing = missing_binaries()
    if missing:
        pytest.fail(f"missing binaries {missing}: run `make images`", pytrace=False)
    for version in dict.fromkeys((K8S_VERSION, UPGRADE_TO_VERSION)):  # the default, and the upgrade tests' target
        if run(["docker", "image", "inspect", f"capd-py/node:{version}"], check=False).returncode != 0:
            pytest.fail(f"capd-py/node:{version} is missing: run `make images`", pytrace=False)
    sweep_leftovers()
    # resyncs every E2E_RESYNC_SECONDS (15 s): the waits for "nothing changes" wait for resync passes, not minutes
    with management_plane(tmp_path_factory.mktemp("controllers") / "controllers.log",
                          resync_seconds=E2E_RESYNC_SECONDS) as m:
        yield m


@pytest.fixture
def cluster_cleanup(mgmt: Mgmt) -> Iterator[list[str]]:
    """Names appended here are deleted (and their containers force-removed) after the test."""
    names: list[str] = []
    yield names
    for name in names:
        delete_cluster_objects(mgmt, name)


@pytest.fixture
def own_namespace(mgmt: Mgmt) -> Iterator[str]:
    """A fresh namespace for a test that acts on a whole namespace (`capd-py move` takes every cluster of
    it; the shared clusters live in `default`). Its clusters left at the end are deleted, then it."""
    ns = create_namespace(mgmt, "e2e-ns")
    yield ns
    delete_namespace(mgmt, ns)


@pytest.fixture(scope="session")
def shared_clusters(mgmt: Mgmt, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedClusters]:
    """Workload clusters several tests use (made once per session; deleted at its end unless a test did)."""
    shared = SharedClusters(mgmt, tmp_path_factory.mktemp("clusters"))
    try:
        yield shared
    finally:
        shared.cleanup()


@pytest.fixture
def quick_cluster(shared_clusters: SharedClusters) -> WorkloadCluster:
    """`e2e-quick`: 1 control plane + 1 worker from the default template (its CNI through a
    ClusterResourceSet), Available with Ready nodes. Shared: test_clusterctl.py reads it, and
    test_workload_cluster.py's quick test checks traffic and stability, then deletes it (last)."""
    return shared_clusters.get("e2e-quick", 1, 1, timeout=600)


CLUSTERCTL_VERSION = os.environ.get("CAPD_PY_CLUSTERCTL_VERSION", "v1.13.6")
# upstream v1.14's Dev* templates are rendered by the clusterctl of their release (Makefile CLUSTERCTL_V1_14)
CLUSTERCTL_V1_14 = os.environ.get("CAPD_PY_CLUSTERCTL_V1_14", "v1.14.2")


def _clusterctl(version: str) -> str:
    p = cache_dir() / "clusterctl" / version / "clusterctl"
    if not p.exists():
        pytest.fail(f"{p} is missing: run `make clusterctl` (hack/build-clusterctl.sh {version})", pytrace=False)
    return str(p)


@pytest.fixture(scope="session")
def clusterctl() -> str:
    """Upstream clusterctl, built from the Go module proxy into the cache by `make clusterctl`."""
    return _clusterctl(CLUSTERCTL_VERSION)


@pytest.fixture
def clusterctl_v1_14() -> str:
    """Upstream clusterctl v1.14 (`make e2e-suite` builds it in the suite's module; `make test` beside the tests, so its
    users are marked `late_build("e2e-suite")`). Per test: looked for after the `_late_builds` wait, not before it as a
    session fixture would be."""
    return _clusterctl(CLUSTERCTL_V1_14)


# tests/integration/runtime/ssh_server.py (a throwaway SSH server; asyncssh is a dev extra, so not in capd_py.testing)
# serves test_ssh_docker_host.py too: its folder on the import path, as pytest puts it there for its own tier
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration" / "runtime"))
