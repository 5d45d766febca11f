"""`capd-py init --kubeconfig FILE`: usage errors, and the controllers' name for an existing cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from capd_py.cli import existing
from capd_py.cli import management as mgmt
from capd_py.cli.main import app

pytestmark = pytest.mark.unit
runner = CliRunner()


def test_default_name_is_stable_per_kubeconfig_and_never_the_default(tmp_path: Path) -> None:
    a, b = tmp_path / "a.kubeconfig", tmp_path / "b.kubeconfig"
    assert existing.default_name(a) == existing.default_name(a)
    assert existing.default_name(a) != existing.default_name(b)
    assert existing.default_name(a).startswith("ext-") and existing.default_name(a) != mgmt.DEFAULT_NAME


def test_init_kubeconfig_usage_errors(tmp_path: Path) -> None:
    r = runner.invoke(app, ["init", "--kubeconfig", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "does not exist" in r.stderr
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    r = runner.invoke(app, ["init", "--kubeconfig", str(kc), "--in-cluster"])
    assert r.exit_code == 2 and "--in-cluster" in r.stderr


def test_init_kubeconfig_installs_crds_then_starts_controllers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    calls: list[tuple[str, ...]] = []
    installed: dict[str, str | None] = {"url": None}
    monkeypatch.setattr(mgmt, "installed_webhook_url", lambda kc: installed["url"])
    monkeypatch.setattr(mgmt, "install_crds",
                        lambda kc, webhook_url=None: calls.append(("crds", str(kc), str(webhook_url))))
    def start(kc: Path, name: str, extra_args: list[str] | None = None) -> int:
        calls.append(("start", str(kc), name, *(extra_args or [])))
        return 42
    monkeypatch.setattr(mgmt, "start_controllers", start)
    monkeypatch.setattr(mgmt, "home", lambda: tmp_path)
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    r = runner.invoke(app, ["init", "--kubeconfig", str(kc), "--name", "wl"])
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == str(kc.resolve())
    assert calls == [("crds", str(kc.resolve()), "None"), ("start", str(kc.resolve()), "wl")]
    assert "v1beta1 not served" in r.stderr
    calls.clear()
    r = runner.invoke(app, ["init", "--kubeconfig", str(kc), "--no-controllers"])
    assert r.exit_code == 0 and calls == [("crds", str(kc.resolve()), "None")]
    # v1beta1 through the webhook at a URL that cluster's API server reaches
    calls.clear()
    url = "https://10.0.0.5:9443/convert"
    r = runner.invoke(app, ["init", "--kubeconfig", str(kc), "--name", "wl", "--webhook-url", url,
                            "--webhook-bind-address", "0.0.0.0"])
    assert r.exit_code == 0, r.stderr
    assert calls == [("crds", str(kc.resolve()), url),
                     ("start", str(kc.resolve()), "wl", "--webhook-bind-address", "0.0.0.0")]
    # an init without --webhook-url keeps the URL the CRDs name
    calls.clear()
    installed["url"] = url
    r = runner.invoke(app, ["init", "--kubeconfig", str(kc), "--no-controllers"])
    assert r.exit_code == 0 and calls == [("crds", str(kc.resolve()), url)]


def test_webhook_flags_usage_errors(tmp_path: Path) -> None:
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\n")
    r = runner.invoke(app, ["init", "--kubeconfig", str(kc), "--webhook-url", "http://10.0.0.5/convert"])
    assert r.exit_code == 2 and "https://ADDRESS:PORT/convert" in r.stderr
    r = runner.invoke(app, ["init", "--webhook-url", "https://10.0.0.5:9443/convert"])
    assert r.exit_code == 2 and "go with --kubeconfig" in r.stderr
