"""Upstream Cluster API's own PR-blocking e2e spec on every `make test` (issue 41 item 4): "When following the
Cluster API quick-start with ClusterClass [PR-Blocking]" from sigs.k8s.io/cluster-api/test/e2e v1.14.2, compiled
here (`make e2e-suite`) and run unchanged against capd-py by capd_py/testing/conformance.py, as `make conformance`
runs every spec (docs/conformance.md).

What upstream's spec asserts, not this file: its own `clusterctl init` installs capd-py's four providers from
capd-py's clusterctl repository on a `capd-py init --for-clusterctl` cluster with cert-manager built here; upstream's
`topology` flavor (ClusterClass quick-start, Dev* kinds, a MachineDeployment and a MachinePool) becomes Available;
every owner reference is as upstream's and comes back when all are removed or rewritten to v1alpha1; every finalizer
comes back when removed; no object's resourceVersion moves for 2 minutes once stable; the cluster is deleted.
This file checks that the one spec ran and passed (a focus that matched nothing would pass vacuously)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from capd_py.testing import conformance

# cert-manager and the e2e suite build beside the tests in `make test` (capd_py/testing/late_builds.py): the spec runs
# once both are done, and waits for them (up to tests/conftest.py's LATE_BUILD_WAIT, 30 min) only when nothing else is
# left; the spec itself has 30 min
pytestmark = [pytest.mark.e2e, pytest.mark.late_build("cert-manager", "e2e-suite"), pytest.mark.timeout(3600)]

FOCUS = r"quick-start with ClusterClass \[PR-Blocking\]"
# as ginkgo's JUnit report names it: container and leaf texts, then the labels
SPEC = ("When following the Cluster API quick-start with ClusterClass [PR-Blocking] [ClusterClass] "
        "Should create a workload cluster [PR-Blocking, ClusterClass]")


def test_upstream_quick_start_with_clusterclass_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    why = conformance.missing()
    if why:
        pytest.fail(why, pytrace=False)
    suite = conformance.suite_dir()
    monkeypatch.setenv("CAPD_PY_HOME", str(tmp_path / "home"))
    name = f"e2e-conf-{secrets.token_hex(2)}"
    config = conformance.prepare(tmp_path / "work", suite)
    kubeconfig = conformance.create_management(name)
    try:
        code, junit = conformance.run_suite(suite, config, tmp_path / "work" / "artifacts", kubeconfig, FOCUS, "",
                                            timeout="25m")
    finally:
        conformance.delete_management(kubeconfig, name)
    log = (tmp_path / "work" / "artifacts" / "e2e.log")
    tail = log.read_text()[-6000:] if log.is_file() else "(no log)"
    assert junit.is_file(), tail
    ran = [(r.name, r.state, r.failure) for r in conformance.results_of(junit) if r.state != "not run"]
    assert ran == [(SPEC, "passed", "")], f"{ran}\n{tail}"
    assert code == 0, tail
