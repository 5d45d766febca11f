"""A real cert-manager (v1.21.1 built from source by hack/build-cert-manager.sh, `make cert-manager`) on a real
management cluster (`capd-py init --for-clusterctl`), put there by capd_py/testing/cert_manager.py the way the
conformance runner does before upstream's `clusterctl init`: its three images loaded into the node, the release
manifest applied, the Deployments Available and clusterctl's Issuer + Certificate probe passed. Then a self-signed
Certificate of the test's own is issued (Ready=True, its Secret holds a certificate for the DNS name asked), and
upstream clusterctl installs capd-py's providers on that cluster: it finds cert-manager installed ("Skipping
installing cert-manager") and `--wait-providers` sees capd-py's controllers Deployment Available.

Marked `cert_manager` and left out of the default run (pyproject addopts) to keep `make test` within its budget:
the default run puts cert-manager into a management cluster with the same helper and upstream's `clusterctl init`
through it in tests/e2e/test_upstream_e2e_suite.py (upstream's PR-blocking spec); what only this file adds is a
Certificate of its own and the images check. Run it with `make test-cert-manager` (or `pytest -m cert_manager
tests/e2e/test_cert_manager.py`)."""

from __future__ import annotations

import base64
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from capd_py.cli import management as mgmt
from capd_py.runtime.docker_runtime import DockerRuntime
from capd_py.testing import cert_manager
from capd_py.testing.clusterctl import local_repository
from capd_py.testing.e2e import cli, kubectl_bin, remove_management, run, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.cert_manager, pytest.mark.timeout(1200)]

VERSION = os.environ.get("CAPD_PY_CERT_MANAGER_VERSION", cert_manager.DEFAULT_VERSION)


@dataclass
class Made:
    name: str
    env: dict[str, str]
    kubeconfig: Path
    node: str
    seconds: dict[str, float]


@pytest.fixture(scope="module")
def with_cert_manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Made]:
    """A `capd-py init --for-clusterctl` management cluster with cert-manager installed by the helper."""
    rt = DockerRuntime()
    why = cert_manager.missing(rt, VERSION)
    if why:
        pytest.fail(why, pytrace=False)
    name = f"e2e-cm-{secrets.token_hex(2)}"
    env = {**os.environ, "CAPD_PY_HOME": str(tmp_path_factory.mktemp("cert-manager") / "home"), "CAPD_PY_PLAIN": "1"}
    try:
        t0 = time.monotonic()
        r = cli("init", "--for-clusterctl", "--name", name, env=env)
        assert r.returncode == 0, r.stderr
        kc = Path(r.stdout.strip().splitlines()[-1])
        t1 = time.monotonic()
        node = mgmt.node_name(name)
        cert_manager.install_cert_manager(kc, [node], VERSION, runtime=rt)
        t2 = time.monotonic()
        made = Made(name, env, kc, node, {"init --for-clusterctl": t1 - t0, "install_cert_manager": t2 - t1})
        print(f"\ncapd-py init --for-clusterctl {t1 - t0:.1f}s, install_cert_manager {t2 - t1:.1f}s")
        yield made
    finally:
        remove_management(name, env)




def test_a_self_signed_certificate_becomes_ready(with_cert_manager: Made) -> None:
    m = with_cert_manager
    kc = ["--kubeconfig", str(m.kubeconfig)]
    images = run(["docker", "exec", m.node, "ctr", "--namespace=k8s.io", "images", "ls", "-q"]).stdout.split()
    assert set(cert_manager.image_refs(VERSION)) <= set(images)
    # every cert-manager Pod runs the image loaded, never pulled
    pods = run([kubectl_bin(), *kc, "-n", cert_manager.NAMESPACE, "get", "pods", "-o",
                "jsonpath={range .items[*]}{.spec.containers[0].image} {.status.phase}{'\\n'}{end}"]).stdout.split("\n")
    assert sorted(p for p in pods if p) == sorted(f"{r} Running" for r in cert_manager.image_refs(VERSION))

    ns = f"cm-{secrets.token_hex(3)}"
    t0 = time.monotonic()
    run([kubectl_bin(), *kc, "apply", "-f", "-"], input_=cert_manager.self_signed_certificate(
        ns, "selfsigned", "serving", "capd-py.example.com", "serving-tls"))
    cert = wait_for(lambda: (c := cert_manager.certificate(m.kubeconfig, ns, "serving")) and cert_manager.ready(c)
                    and c, 120, "the Certificate Ready", interval=1.0)
    print(f"\nCertificate Ready {time.monotonic() - t0:.1f}s after apply")
    assert cert["status"]["notAfter"]
    tls = run([kubectl_bin(), *kc, "-n", ns, "get", "secret", "serving-tls", "-o",
               "jsonpath={.data.tls\\.crt}"]).stdout
    pem = base64.b64decode(tls)
    assert pem.startswith(b"-----BEGIN CERTIFICATE-----")
    text = run(["openssl", "x509", "-noout", "-ext", "subjectAltName"], input_=pem.decode()).stdout
    assert "DNS:capd-py.example.com" in text
    run([kubectl_bin(), *kc, "delete", "namespace", ns, "--wait=false"])


def test_clusterctl_init_finds_cert_manager_and_installs_capd_py(with_cert_manager: Made, clusterctl: str,
                                                                 tmp_path: Path) -> None:
    m = with_cert_manager
    config = local_repository(tmp_path / "repository")
    env = {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "NO_COLOR": "1"}
    t0 = time.monotonic()
    r = run([clusterctl, "init", "--config", str(config), "--kubeconfig", str(m.kubeconfig), "--core", "cluster-api",
             "--bootstrap", "kubeadm", "--control-plane", "kubeadm", "--infrastructure", "docker", "--wait-providers",
             "--wait-provider-timeout", "300"], env=env, timeout=420)
    print(f"\nclusterctl init --wait-providers {time.monotonic() - t0:.1f}s\n{r.stderr}")
    out = r.stdout + r.stderr
    assert "Skipping installing cert-manager as it is already installed" in out
    assert 'Installing provider="cluster-api"' in out
    deployment = run([kubectl_bin(), "--kubeconfig", str(m.kubeconfig), "-n", "capd-system", "get", "deployment",
                      "capd-py-controllers", "-o", "jsonpath={.status.conditions[?(@.type=='Available')].status}"])
    assert deployment.stdout == "True"
