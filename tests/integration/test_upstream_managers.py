"""Upstream Cluster API v1.13's managers (`make upstream`) start as host processes against an envtest API server
that holds capd-py's CRDs (the Dev* kinds CAPD's manager watches included): each
answers /healthz and /readyz, and each of its controllers starts its workers (their watches synced: the CRDs were
accepted). Marked `upstream`: `make test` builds the managers first (`make upstream`, cached); `make test-upstream`
runs only these."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from capd_py.api.gvk import CRD
from capd_py.kube.crds import install_crds, load_crds
from capd_py.testing import upstream_managers as um
from capd_py.testing.envtest import EnvTest, started_with_crds

pytestmark = [pytest.mark.integration, pytest.mark.upstream, pytest.mark.docker_free]

HEALTHY_WITHIN = 60.0
STARTED_WITHIN = 120.0
WHY_NOT = um.missing()


@pytest.fixture(scope="module")
def env() -> Iterator[EnvTest]:
    # a missing prerequisite fails (CONVENTIONS): `make test-upstream` builds the binaries first
    assert not WHY_NOT, f"{WHY_NOT} (run `make upstream`)"
    with started_with_crds() as e:
        k = e.kube()
        try:
            asyncio.run(install_crds(k, wait=True, crds=um.extra_crds(um.ROLES)))
        finally:
            k.close()
        yield e


def _paths(s: dict[str, Any], pre: str = "") -> set[str]:
    """Every field path a structural schema keeps ('/*' where it preserves unknown fields)."""
    out = {pre + "/*"} if s.get("x-kubernetes-preserve-unknown-fields") else set()
    for k, v in (s.get("properties") or {}).items():
        out |= {f"{pre}.{k}"} | _paths(v, f"{pre}.{k}")
    if "items" in s:
        out |= _paths(s["items"], pre + "[]")
    if isinstance(s.get("additionalProperties"), dict):
        out |= _paths(s["additionalProperties"], pre + "{}")
    return out


def _v1beta2(crd: dict[str, Any]) -> dict[str, Any]:
    return next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta2")["schema"]["openAPIV3Schema"]


def test_capd_py_crds_keep_every_field_upstream_writes() -> None:
    """capd-py's CRDs are its own (hack/gen_crds.py), not upstream's: an upstream manager's write of a field they
    lacked would be pruned by the API server. Every v1beta2 field path of upstream's CRD bases (copied by the build)
    is in capd-py's schema for the same kind."""
    assert not WHY_NOT, f"{WHY_NOT} (run `make upstream`)"
    upstream = {}
    for p in (um.root() / "crds").glob("*/*.yaml"):
        crd = yaml.safe_load(p.read_text())
        upstream[crd["metadata"]["name"]] = crd
    missing = {}
    for crd in load_crds():
        name = crd["metadata"]["name"]
        if crd["spec"]["names"]["kind"].startswith("Dev"):
            # capd-py follows v1.14 for the Dev* kinds (v1.13's spec.backend.docker.bootstrapped and status.backend
            # are gone there): test_upstream_admission compares them with v1.14's vendored schemas
            continue
        ours = _paths(_v1beta2(crd))
        kept = [q[:-2] for q in ours if q.endswith("/*")]
        lost = sorted(p for p in _paths(_v1beta2(upstream[name]))
                      if p not in ours and not any(p.startswith(k) for k in kept))
        if lost:
            missing[name] = lost
    assert not missing


def _check(m: um.UpstreamManager) -> tuple[float, float]:
    healthy = m.wait_healthy(HEALTHY_WITHIN)
    started = m.wait_started(timeout=STARTED_WITHIN)
    assert m.proc is not None and m.proc.poll() is None, m.log_tail()
    assert "controller_runtime_" in m.metrics()  # plain-HTTP diagnostics (--insecure-diagnostics)
    return healthy, started


@pytest.mark.parametrize("role", list(um.ROLES))
def test_manager_becomes_healthy(env: EnvTest, role: str) -> None:
    with um.UpstreamManager(role, env.kubeconfig_path) as m:
        healthy, started = _check(m)
        print(f"\n{role}: healthy after {healthy:.1f} s, controllers {sorted(um.ROLES[role].controllers)} "
              f"started {started:.1f} s later")


def test_core_bootstrap_control_plane_and_docker_together(env: EnvTest) -> None:
    """The set interop runs (issue 28 2a/2b) side by side on one API server, each on its own ports."""
    roles = ("core", "kubeadm-bootstrap", "kubeadm-control-plane", "docker")
    with contextlib.ExitStack() as stack:
        ms = [stack.enter_context(um.UpstreamManager(r, env.kubeconfig_path)) for r in roles]
        for m in ms:
            _check(m)


def test_capd_py_crds_are_left_serving_v1beta2(env: EnvTest) -> None:
    """Upstream's CRD migrators (run by every manager above) leave capd-py's CRDs as they were: the versions served
    as installed, v1beta2 stored, storedVersions [v1beta2]; they only add their observed-generation annotation."""
    k = env.kube()

    async def crds() -> list[dict[str, Any]]:
        out = []
        for c in load_crds():
            crd = await k.get(CRD, None, str(c["metadata"]["name"]))
            assert crd is not None, c["metadata"]["name"]
            out.append(crd)
        return out

    # as capd-py installs them (ExtensionConfig serves upstream's v1alpha1 beside v1beta2, stored as v1beta2)
    installed = {str(c["metadata"]["name"]): [(v["name"], v["served"], v["storage"]) for v in c["spec"]["versions"]]
                 for c in load_crds()}
    try:
        for crd in asyncio.run(crds()):
            name = crd["metadata"]["name"]
            assert crd["status"]["storedVersions"] == ["v1beta2"], name
            assert [(v["name"], v["served"], v["storage"])
                    for v in crd["spec"]["versions"]] == installed[name]
    finally:
        k.close()
