"""The release mirror's answers (capd_py/testing/release_mirror.py): what upstream's e2e suite reads from the Go
proxy and GitHub while it builds its spec tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from capd_py.testing import release_mirror as rm

pytestmark = pytest.mark.unit


def test_version_list_serves_known_modules_only() -> None:
    releases = {"sigs.k8s.io/cluster-api": ("v1.11.0", "v1.11.1")}
    assert rm.version_list(releases, "/sigs.k8s.io/cluster-api/@v/list") == "v1.11.0\nv1.11.1\n"
    # the Go proxy client also asks for /v2, /v3 ... until a 404
    assert rm.version_list(releases, "/sigs.k8s.io/cluster-api/v2/@v/list") is None
    assert rm.version_list(releases, "/k8s.io/api/@v/list") is None
    assert rm.version_list(releases, "/sigs.k8s.io/cluster-api/@v/v1.11.0.info") is None


def test_upstream_releases_cover_every_minor_the_v1_14_suite_resolves() -> None:
    versions = rm.UPSTREAM_RELEASES[rm.CLUSTER_API_MODULE]
    for minor in ("1.11", "1.12", "1.13", "1.14"):
        assert any(v.startswith(f"v{minor}.") for v in versions), minor
    assert len(set(versions)) == len(versions)


def test_release_asset_maps_download_paths_and_refuses_escapes(tmp_path: Path) -> None:
    f = tmp_path / "kubernetes-sigs" / "cluster-api" / "v1.11.11" / "metadata.yaml"
    f.parent.mkdir(parents=True)
    f.write_text("x")
    path = "/kubernetes-sigs/cluster-api/releases/download/v1.11.11/metadata.yaml"
    assert rm.release_asset(tmp_path, path) == f
    assert rm.release_asset(tmp_path, path + "?x=1") == f
    assert rm.release_asset(tmp_path, path.replace("metadata.yaml", "clusterctl-linux-amd64")) is None
    assert rm.release_asset(tmp_path, "/kubernetes-sigs/cluster-api/releases/download/../v1.11.11/metadata.yaml") \
        is None
    assert rm.release_asset(tmp_path, "/kubernetes-sigs/cluster-api/blob/main/metadata.yaml") is None


def test_stage_metadata_copies_each_minors_copy_and_names_the_rest(tmp_path: Path) -> None:
    src = tmp_path / "v1.11-metadata.yaml"
    src.write_text("releaseSeries: []\n")
    missing = rm.stage_metadata(tmp_path / "assets", ["v1.11.0", "v1.11.11", "v1.12.0"], {"1.11": src})
    assert missing == ["v1.12.0"]
    for v in ("v1.11.0", "v1.11.11"):
        assert (tmp_path / "assets" / "kubernetes-sigs" / "cluster-api" / v / "metadata.yaml").read_text() == \
            "releaseSeries: []\n"


def test_client_environment_points_go_clients_at_the_mirror(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nmirror\n-----END CERTIFICATE-----\n")
    env = rm.Mirror(url="http://127.0.0.1:1234", ca_file=ca).client_environment({"HTTP_PROXY": "http://x", "A": "b"})
    assert env["GOPROXY"] == env["HTTPS_PROXY"] == "http://127.0.0.1:1234"
    assert "HTTP_PROXY" not in env and env["A"] == "b"
    assert "172.16.0.0/12" in env["NO_PROXY"].split(",")  # docker networks: reached directly
    assert Path(env["SSL_CERT_FILE"]).read_text().endswith(ca.read_text())
