"""`capd-py extension manifest` (data on stdout) and the MODULE:ATTR loading `serve` shares with it."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capd_py.cli.main import app

pytestmark = pytest.mark.unit

runner = CliRunner()
TEST_EXTENSION = "capd_py.testing.test_extension:extension"


def test_manifest_prints_the_extension_config_trusting_the_ca_it_made(tmp_path: Path) -> None:
    r = runner.invoke(app, ["extension", "manifest", TEST_EXTENSION, "--name", "e2e-ext",
                            "--url", "https://172.18.0.1:9443", "--cert-dir", str(tmp_path),
                            "--namespace-selector", "kubernetes.io/metadata.name in (ns1)",
                            "--setting", "defaultAllHandlersToBlocking=false"])
    assert r.exit_code == 0, r.output
    obj = yaml.safe_load(r.stdout)
    assert obj["apiVersion"] == "runtime.cluster.x-k8s.io/v1beta2" and obj["kind"] == "ExtensionConfig"
    assert obj["metadata"] == {"name": "e2e-ext"}
    assert obj["spec"]["clientConfig"]["url"] == "https://172.18.0.1:9443"
    assert base64.b64decode(obj["spec"]["clientConfig"]["caBundle"]) == (tmp_path / "ca.crt").read_bytes()
    assert obj["spec"]["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["ns1"]}]}
    # the test extension's settings follow the name it is registered under; --setting overrides
    assert obj["spec"]["settings"] == {"extensionConfigName": "e2e-ext", "disableInPlaceUpdates": "true",
                                       "defaultAllHandlersToBlocking": "false"}


def test_an_extension_in_a_local_file_and_a_factory_function(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_ext.py").write_text(
        "from capd_py.runtime_extension import Extension\n"
        "def make():\n"
        "    ext = Extension(name='mine')\n"
        "    ext.add('BeforeClusterCreate', 'gate', lambda request: None)\n"
        "    return ext\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    r = runner.invoke(app, ["extension", "manifest", "my_ext:make", "--url", "https://ext.example:8443",
                            "--cert-dir", str(tmp_path / "certs")])
    assert r.exit_code == 0, r.output
    obj = yaml.safe_load(r.stdout)
    assert obj["metadata"]["name"] == "mine" and "settings" not in obj["spec"]


@pytest.mark.parametrize(("args", "message"), [
    (["nocolon"], "expected MODULE:ATTR"),
    (["no_such_module_here:x"], "cannot import no_such_module_here"),
    (["capd_py.testing.test_extension:nothing"], "has no attribute 'nothing'"),
    (["capd_py.testing.test_extension:DEFAULT_EXTENSION_CONFIG_NAME"], "is a str, not a"),
    ([TEST_EXTENSION, "--setting", "novalue"], "expected KEY=VALUE"),
    ([TEST_EXTENSION, "--namespace-selector", "a in"], "--namespace-selector"),
])
def test_usage_errors_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    r = runner.invoke(app, ["extension", "manifest", *args, "--url", "https://x:1", "--cert-dir", str(tmp_path)])
    assert r.exit_code == 2, r.output
    assert message in r.output


def test_the_url_must_be_https(tmp_path: Path) -> None:
    r = runner.invoke(app, ["extension", "manifest", TEST_EXTENSION, "--url", "http://x:1", "--cert-dir",
                            str(tmp_path)])
    assert r.exit_code == 2 and "expected https://HOST[:PORT]" in r.output
