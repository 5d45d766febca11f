"""Run the real kubeadm (v1.34 built by `make binaries`, which `make images` runs) over the rendered init and join
configs. An integration test, as it needs that binary (it was a unit test that passed as skipped without it): a
missing kubeadm fails, naming the make target."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.reconcile import kubeadmconfig as kc

# the plain-data objects the bootstrap unit tests render (tests/unit/reconcile/bootstrap_fixtures.py, a mypy base)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "reconcile"))

from bootstrap_fixtures import CLUSTER, SPEC, TEMPLATES, cluster_certs  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

KUBEADM = Path(os.environ.get("CAPD_PY_CACHE", str(Path.home() / ".cache" / "capd-py"))) / "k8s" / "v1.34.4" / \
    "bin" / "kubeadm"


def _kubeadm() -> Path:
    if not KUBEADM.exists():
        pytest.fail(f"kubeadm binary not found at {KUBEADM}: run `make binaries` (or `make images`)", pytrace=False)
    return KUBEADM


def _kubeadm_yaml(cloud_config: str, path: str) -> str:
    files = {f["path"]: f for f in yaml.safe_load(cloud_config)["write_files"]}
    return str(files[path]["content"])


def _validate(tmp_path: Path, text: str) -> None:
    kubeadm = _kubeadm()
    cfg = tmp_path / "kubeadm.yaml"
    cfg.write_text(text)
    r = subprocess.run([str(kubeadm), "config", "validate", "--config", str(cfg)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, f"kubeadm rejected the config:\n{r.stdout}\n{r.stderr}\n---\n{text}"


def _spec() -> dict[str, Any]:
    spec = dict(SPEC)
    spec["initConfiguration"] = {**SPEC["initConfiguration"],
                                 "timeouts": {"controlPlaneComponentHealthCheckSeconds": 240}}
    return spec


def test_init_config_validates(tmp_path: Path) -> None:
    out = kc.render_init(_spec(), CLUSTER, "v1.34.4", cluster_certs(), templates=TEMPLATES)
    _validate(tmp_path, _kubeadm_yaml(out, kc.INIT_CONFIG_PATH))


@pytest.mark.parametrize("control_plane", [False, True])
def test_join_config_validates(tmp_path: Path, control_plane: bool) -> None:
    cs = cluster_certs()
    out = kc.render_join(_spec(), CLUSTER, control_plane=control_plane, token="abcdef.0123456789abcdef",
                         ca_cert=cs["ca"].cert, certs=cs if control_plane else None, templates=TEMPLATES)
    _validate(tmp_path, _kubeadm_yaml(out, kc.JOIN_CONFIG_PATH))


def test_kubeadm_uses_our_cas_and_service_account_key(tmp_path: Path) -> None:
    """`kubeadm init phase certs all` over the rendered files: it must reuse (not regenerate) every CA and
    the service-account key we wrote, and sign the serving certificates with them."""
    kubeadm = _kubeadm()
    pki = tmp_path / "pki"
    spec = {"clusterConfiguration": {"certificatesDir": str(pki), "apiServer": {"certSANs": ["localhost"]}},
            "initConfiguration": {"localAPIEndpoint": {"advertiseAddress": "172.18.0.5"}}}
    cs = cluster_certs()
    cloud = yaml.safe_load(kc.render_init(spec, CLUSTER, "v1.34.4", cs, templates=TEMPLATES))
    for f in cloud["write_files"]:
        p = Path(str(tmp_path) + f["path"]) if f["path"].startswith("/run/") else Path(f["path"])
        if not str(p).startswith(str(tmp_path)):
            continue  # spec.files of the fixture: not needed here
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f["content"])
    r = subprocess.run([str(kubeadm), "init", "phase", "certs", "all", "--config",
                        str(tmp_path / kc.INIT_CONFIG_PATH.lstrip("/"))], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    for ca in ("ca", "front-proxy-ca", "etcd/ca"):
        assert f"Using existing {ca} certificate authority" in r.stdout
    assert 'Using the existing "sa" key' in r.stdout
    assert (pki / "ca.crt").read_bytes() == cs["ca"].cert  # untouched
    from cryptography import x509
    server = x509.load_pem_x509_certificate((pki / "apiserver.crt").read_bytes())
    server.verify_directly_issued_by(x509.load_pem_x509_certificate(cs["ca"].cert))
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
