"""Shared fixtures.

- `envtest` (session): a running `capd_py.testing.envtest.EnvTest` (etcd + kube-apiserver) with every
  capd-py CRD installed and Established. Fails (does not skip) if the binaries are missing.
- `kube` (function): a `capd_py.kube.client.Kube` for it, authenticated as system:masters.
- `namespace` (function): the name of a fresh namespace `t-<random>`, deleted afterwards.

The envtest starts lazily, only for tests that ask for one of these fixtures.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Iterator

import pytest

from capd_py.api.gvk import GVK
from capd_py.kube.client import Kube
from capd_py.testing.envtest import MAKE_HINT, EnvTest, binary_paths, missing_binaries, started_with_crds

NAMESPACE = GVK("", "v1", "Namespace", "namespaces", namespaced=False)


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
