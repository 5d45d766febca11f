from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from capd_py.cli.main import app

pytestmark = pytest.mark.unit
runner = CliRunner()


def test_no_args_shows_help() -> None:
    r = runner.invoke(app, [])
    assert r.exit_code in (0, 2) and "generate" in r.output


@pytest.mark.parametrize("args", [
    ["generate", "cluster"],                                  # missing NAME
    ["generate", "cluster", "x", "--worker-machine-count", "many"],
    ["generate", "cluster", "x", "--control-plane-machine-count", "0"],
    ["generate", "cluster", "Bad_Name"],                       # our own validation is a usage error too
    ["generate", "cluster", "x", "--kubernetes-version", "1.34"],
    ["no-such-command"],
    ["apply"],                                                 # -f required
    ["apply", "-f", "/nonexistent/file.yaml"],
    ["init", "--port", "70000"],
    ["controllers", "--kubeconfig", "/nonexistent/kubeconfig"],
    ["delete", "cluster", "c1", "--wait", "soon"],
    ["apply", "-f", "-", "--wait", "5x"],
    ["get", "clusters", "-o", "wide"],
])
def test_usage_errors_exit_2(args: list[str]) -> None:
    r = runner.invoke(app, args)
    assert r.exit_code == 2, r.output


@pytest.mark.parametrize("var,value,says", [
    ("CAPD_PY_NETWORK_POOL", "10.0.0.0/8:4", "CAPD_PY_NETWORK_POOL: '10.0.0.0/8:4': the subnet size"),
    ("CAPD_PY_MANAGEMENT_CIDRS", "10.244.0.0/16,oops", "CAPD_PY_MANAGEMENT_CIDRS: 'oops' is not a CIDR"),
    ("CAPD_PY_MACHINESET_PREFLIGHT_CHECKS", "All,Nope", "unknown MachineSet preflight check(s) Nope"),
    ("CAPD_PY_FEATURE_GATES", "MachineTaintPropagation=maybe", "invalid value of MachineTaintPropagation"),
])
def test_controllers_refuse_bad_network_settings_at_start(monkeypatch: pytest.MonkeyPatch, var: str, value: str,
                                                          says: str) -> None:
    monkeypatch.setenv(var, value)
    r = runner.invoke(app, ["controllers", "--kubeconfig", "/nonexistent/kubeconfig"])
    assert r.exit_code == 2 and says in r.output, r.output


def test_controllers_refuse_an_unknown_preflight_check_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CAPD_PY_MACHINESET_PREFLIGHT_CHECKS", "All")  # restored afterwards; the flag overrides it
    r = runner.invoke(app, ["controllers", "--kubeconfig", "/nonexistent/kubeconfig",
                            "--machineset-preflight-checks", "ControlPlaneIsStable,KubeadmSkew"])
    assert r.exit_code == 2 and "unknown MachineSet preflight check(s) KubeadmSkew" in r.output, r.output


def test_generate_to_stdout() -> None:
    r = runner.invoke(app, ["generate", "cluster", "demo", "--worker-machine-count", "3",
                            "--control-plane-machine-count", "3", "-n", "ns1"], env={})
    assert r.exit_code == 0, r.output
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert len(docs) == 9  # 7 Cluster API objects + the CNI ConfigMap and its ClusterResourceSet
    md = next(d for d in docs if d["kind"] == "MachineDeployment")
    assert md["spec"]["replicas"] == 3 and md["metadata"]["namespace"] == "ns1"


def test_generate_flavor_machinepool() -> None:
    r = runner.invoke(app, ["generate", "cluster", "demo", "--flavor", "machinepool", "--worker-machine-count", "2"],
                      env={})
    assert r.exit_code == 0, r.output
    docs = [d for d in yaml.safe_load_all(r.stdout) if d]
    assert not [d for d in docs if d["kind"] == "MachineDeployment"]
    (mp,) = [d for d in docs if d["kind"] == "MachinePool"]
    assert mp["metadata"]["name"] == "demo-mp-0" and mp["spec"]["replicas"] == 2


@pytest.mark.parametrize("cmd", [["generate", "cluster", "demo"], ["quickstart", "demo"]])
def test_unknown_flavor_is_a_usage_error(cmd: list[str]) -> None:
    # quickstart renders before it creates anything, so this returns at once
    r = runner.invoke(app, [*cmd, "--flavor", "nope"], env={})
    assert r.exit_code == 2, r.output
    assert "unknown flavor 'nope'" in r.output and "machinepool" in r.output


def test_generate_from_file_missing_variable_exit_1(tmp_path: Path) -> None:
    t = tmp_path / "t.yaml"
    t.write_text("kind: X\nmetadata: {name: '${NEEDED_VAR}'}\n")
    r = runner.invoke(app, ["generate", "cluster", "demo", "--from", str(t)])
    assert r.exit_code == 1
    assert "NEEDED_VAR" in r.output


def test_version() -> None:
    r = runner.invoke(app, ["version"])
    assert r.exit_code == 0 and r.stdout.startswith("capd-py ")


def test_apply_invalid_yaml_exit_1(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("a: [1\n")
    r = runner.invoke(app, ["apply", "-f", str(f)])
    assert r.exit_code == 1 and "invalid YAML" in r.output


def test_list_variables_required_and_optional(tmp_path: Path) -> None:
    tpl = tmp_path / "t.yaml"
    tpl.write_text("kind: X\nmetadata: {name: ${CLUSTER_NAME}, namespace: ${NAMESPACE:=default}}\n"
                   "spec: {a: ${MY_REQUIRED}, b: '${MY_OPTIONAL:=7}'}\n")
    r = runner.invoke(app, ["generate", "cluster", "x", "--from", str(tpl), "--list-variables"], env={})
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines()[:3] == ["Required Variables:", "  - MY_REQUIRED", ""]
    assert '  - MY_OPTIONAL   (defaults to "7")' in r.stdout
    assert "  - CLUSTER_NAME  (set by the cluster name argument)" in r.stdout
    assert '  - NAMESPACE     (set by --target-namespace, defaults to "default")' in r.stdout
    r = runner.invoke(app, ["generate", "cluster", "x", "--flavor", "nope", "--list-variables"])
    assert r.exit_code == 2


def test_target_namespace_is_clusterctls_name_for_namespace() -> None:
    r = runner.invoke(app, ["generate", "cluster", "demo", "--target-namespace", "team-a"], env={})
    assert r.exit_code == 0, r.output
    assert {d["metadata"].get("namespace") for d in yaml.safe_load_all(r.stdout) if d} == {"team-a"}


def test_completion_scripts() -> None:
    for shell, marker in (("bash", "complete -o default -F _capd_py_completion capd-py"),
                          ("zsh", "compdef _capd_py_completion capd-py"), ("fish", "complete --command capd-py")):
        r = runner.invoke(app, ["completion", shell])
        assert r.exit_code == 0 and marker in r.stdout and "_CAPD_PY_COMPLETE" in r.stdout, (shell, r.output)
    assert runner.invoke(app, ["completion", "tcsh"]).exit_code == 2


def test_init_refuses_a_bad_feature_gate_variable_before_creating_anything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EXP_IN_PLACE_UPDATES", "true")
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # nothing may be created anyway
    r = runner.invoke(app, ["init", "--name", "never-made"])
    assert r.exit_code == 2 and "feature gate InPlaceUpdates=true is not supported by capd-py" in r.output, r.output


def test_delete_refuses_a_stopped_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    from capd_py.cli import main as cli_main
    from capd_py.testing.fake_runtime import FakeRuntime
    from capd_py.testing.fake_workload import FakeWorkloadKube

    kube = FakeWorkloadKube(FakeRuntime(), "mgmt", "mgmt")
    kube.put_object("clusters", {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "metadata": {
        "name": "dev", "namespace": "default",
        "annotations": {"infrastructure.cluster.x-k8s.io/capd-py-power-state": "stopped"}}})
    monkeypatch.setattr(cli_main, "connect", lambda _kubeconfig: kube)
    r = runner.invoke(app, ["delete", "cluster", "dev", "--no-wait"])
    assert r.exit_code == 1
    assert "cluster dev is stopped" in r.output and "`capd-py start cluster dev` first" in r.output
    assert kube.object("clusters", "default", "dev") is not None  # not deleted
