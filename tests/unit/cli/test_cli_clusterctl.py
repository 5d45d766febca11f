"""`capd-py clusterctl repository DIR`: writes capd-py's clusterctl repository, prints its clusterctl.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capd_py.cli.main import app

pytestmark = pytest.mark.unit

runner = CliRunner()


def test_repository_prints_the_config_it_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CAPD_PY_CONTROLLERS_IMAGE", raising=False)
    r = runner.invoke(app, ["clusterctl", "repository", str(tmp_path / "repo")])
    assert r.exit_code == 0, r.output
    config = Path(r.stdout.strip().splitlines()[-1])
    assert config == (tmp_path / "repo" / "clusterctl.yaml").resolve() and config.is_file()
    names = [(p["name"], p["type"]) for p in yaml.safe_load(config.read_text())["providers"]]
    assert names == [("cluster-api", "CoreProvider"), ("kubeadm", "BootstrapProvider"),
                     ("kubeadm", "ControlPlaneProvider"), ("docker", "InfrastructureProvider")]
    infra = (tmp_path / "repo" / "infrastructure-docker").glob("*/infrastructure-components.yaml")
    assert "image: docker.io/capd-py/controllers:dev" in next(infra).read_text()


def test_repository_image_from_the_environment_or_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_CONTROLLERS_IMAGE", "capd-py/controllers:env")
    assert runner.invoke(app, ["clusterctl", "repository", str(tmp_path / "a")]).exit_code == 0
    infra = next((tmp_path / "a").rglob("infrastructure-components.yaml"))
    assert "docker.io/capd-py/controllers:env" in infra.read_text()
    r = runner.invoke(app, ["clusterctl", "repository", str(tmp_path / "b"), "--image", "reg.local:5000/c:1"])
    assert r.exit_code == 0
    assert "image: reg.local:5000/c:1" in next((tmp_path / "b").rglob("infrastructure-components.yaml")).read_text()


def test_repository_refuses_a_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("")
    r = runner.invoke(app, ["clusterctl", "repository", str(f)])
    assert r.exit_code == 2 and "not a directory" in r.output


def test_init_for_clusterctl_loads_the_image_and_installs_nothing(monkeypatch: pytest.MonkeyPatch,
                                                                 tmp_path: Path) -> None:
    from capd_py.cli import management as mgmt
    from capd_py.testing.fake_runtime import FakeRuntime

    made: list[object] = []
    monkeypatch.setattr(mgmt, "default_runtime", FakeRuntime)
    def create(self: mgmt.ManagementCluster) -> Path:
        made.append(("create", self.mount_docker_socket))
        return tmp_path / "kc"

    def build(rt: object) -> str:
        made.append("build")
        return "capd-py/controllers:dev"
    monkeypatch.setattr(mgmt.ManagementCluster, "create", create)
    monkeypatch.setattr(mgmt, "build_controllers_image", build)
    monkeypatch.setattr(mgmt, "load_image_into_node", lambda rt, node, tag: made.append(("load", node, tag)))

    def never(*_a: object, **_k: object) -> None:
        raise AssertionError("--for-clusterctl installs nothing")
    monkeypatch.setattr(mgmt, "install_crds", never)
    monkeypatch.setattr(mgmt, "deploy_in_cluster", never)
    monkeypatch.setattr(mgmt, "start_controllers", never)
    r = runner.invoke(app, ["init", "--for-clusterctl", "--name", "cc"])
    assert r.exit_code == 0, r.output
    assert made == [("create", True), "build", ("load", "cc-control-plane", "capd-py/controllers:dev")]
    assert r.stdout.strip() == str(tmp_path / "kc")
    assert "clusterctl init --infrastructure docker" in r.output


def test_init_for_clusterctl_is_not_for_an_existing_cluster(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text("")
    r = runner.invoke(app, ["init", "--for-clusterctl", "--kubeconfig", str(kc)])
    assert r.exit_code == 2 and "not with --kubeconfig" in r.output
