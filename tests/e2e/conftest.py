"""e2e tier: a management plane (etcd + kube-apiserver + kube-controller-manager for garbage
collection) with the CRDs, and `capd-py controllers` running as its own process."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from capd_py.kube.crds import install_crds
from capd_py.testing.e2e import CAPD, K8S_VERSION, Mgmt, run
from capd_py.testing.envtest import EnvTest, missing_binaries


@pytest.fixture(scope="session")
def mgmt(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mgmt]:
    missing = missing_binaries()
    if missing:
        pytest.fail(f"missing binaries {missing}: run `make images`", pytrace=False)
    if run(["docker", "image", "inspect", f"capd-py/node:{K8S_VERSION}"], check=False).returncode != 0:
        pytest.fail(f"capd-py/node:{K8S_VERSION} is missing: run `make images`", pytrace=False)
    env = EnvTest(controller_manager=True).start()
    k = env.kube()
    try:
        asyncio.run(install_crds(k, wait=True))
    finally:
        k.close()
    log = tmp_path_factory.mktemp("controllers") / "controllers.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([*CAPD, "controllers", "--kubeconfig", str(env.kubeconfig_path)], stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    m = Mgmt(env, str(env.kubeconfig_path), log)
    try:
        yield m
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
        print(f"\n--- controllers log tail ---\n{m.log_tail(60)}")
        env.stop()


@pytest.fixture
def cluster_cleanup(mgmt: Mgmt) -> Iterator[list[str]]:
    """Names appended here are deleted (and their containers force-removed) after the test."""
    names: list[str] = []
    yield names
    for name in names:
        mgmt.capd("delete", "cluster", name, "--wait", "--timeout", "300", check=False)
        for c in run(["docker", "ps", "-a", "-q", "--filter", f"label=io.x-k8s.capd-py.cluster={name}"]).stdout.split():
            run(["docker", "rm", "-f", "-v", c], check=False)
