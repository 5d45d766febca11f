"""`make conformance`'s pure parts (capd_py/testing/conformance.py): the flavors upstream's Makefile renders, the
e2e config derived from upstream's, the JUnit report read back as a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from capd_py.testing import conformance as c

pytestmark = pytest.mark.unit

UPSTREAM = {
    "images": [{"name": "gcr.io/k8s-staging-cluster-api/cluster-api-controller-{ARCH}:dev"}],
    "providers": [
        {"name": "cluster-api", "type": "CoreProvider", "versions": [
            {"name": "{go://sigs.k8s.io/cluster-api@v1.11}", "value": "https://github.com/x/core-components.yaml",
             "type": "url"},
            {"name": "v1.14.99", "value": "../../../core/config/default"}]},
        {"name": "kubeadm", "type": "BootstrapProvider", "versions": [{"name": "v1.14.99", "value": "x"}]},
        {"name": "kubeadm", "type": "ControlPlaneProvider", "versions": [{"name": "v1.14.99", "value": "x"}]},
        {"name": "docker", "type": "InfrastructureProvider", "versions": [{"name": "v1.14.99", "value": "x"}]},
        {"name": "test-extension", "type": "RuntimeExtensionProvider", "versions": [{"name": "v1.14.99"}]},
    ],
    "variables": {"KUBERNETES_VERSION": "v1.37.0", "CNI": "./data/cni/kindnet/kindnet.yaml", "IP_FAMILY": "dual",
                  "DOCKER_PRELOAD_IMAGES": "[kindest/kindnetd:v20250214-acbabc1a]", "EXP_MACHINE_POOL": "true"},
    "intervals": {"default/wait-cluster": ["5m", "10s"]},
}


def test_flavor_builds_follow_upstreams_makefile(tmp_path: Path) -> None:
    main = tmp_path / "main"
    for d in ("bases", "cluster-template", "cluster-template-kcp-adoption/step1",
              "cluster-template-kcp-adoption/step2", "clusterclass-quick-start-kcp-only"):
        (main / d).mkdir(parents=True)
        if d != "bases":
            (main / d / "kustomization.yaml").write_text("resources: []\n")
    (main / "clusterclass-quick-start.yaml").write_text("kind: ClusterClass\n")
    builds = c.flavor_builds(main)
    assert builds == {
        "cluster-template.yaml": [main / "cluster-template"],
        "cluster-template-kcp-adoption.yaml": [main / "cluster-template-kcp-adoption" / "step1",
                                               main / "cluster-template-kcp-adoption" / "step2"],
        "clusterclass-quick-start-kcp-only.yaml": [main / "clusterclass-quick-start-kcp-only"],
    }


def test_e2e_config_names_capd_pys_providers_and_keeps_upstreams_intervals(tmp_path: Path) -> None:
    inputs = c.Inputs(repository=tmp_path / "repo", flavors=[tmp_path / "f" / "cluster-template.yaml"],
                      cni=tmp_path / "cni.yaml", data=tmp_path / "data", version="v1.13.6")
    config = c.e2e_config(UPSTREAM, inputs)
    assert [(p["name"], p["type"]) for p in config["providers"]] == list(c.PROVIDERS)
    core = config["providers"][0]["versions"]
    assert core == [{"name": "v1.13.6", "value": str(tmp_path / "repo/cluster-api/v1.13.6/core-components.yaml"),
                     "type": "url", "contract": "v1beta2",
                     "files": [{"sourcePath": str(tmp_path / "repo/cluster-api/v1.13.6/metadata.yaml")}]}]
    infra = config["providers"][3]["versions"][0]
    assert infra["files"][0] == {"sourcePath": str(tmp_path / "f" / "cluster-template.yaml")}
    assert infra["files"][-1]["sourcePath"].endswith("infrastructure-docker/v1.13.6/metadata.yaml")
    v = config["variables"]
    assert v["CNI"] == str(tmp_path / "cni.yaml") and v["DOCKER_PRELOAD_IMAGES"] == "[]"
    assert v["KUBERNETES_VERSION"] == c.KUBERNETES_VERSION
    assert v["KUBERNETES_VERSION_UPGRADE_FROM"] < v["KUBERNETES_VERSION_UPGRADE_TO"]
    assert v["EXP_IN_PLACE_UPDATES"] == v["EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION"] == "false"  # not in capd-py
    assert v["IP_FAMILY"] == "dual" and v["EXP_MACHINE_POOL"] == "true"  # the rest: upstream's
    assert config["intervals"] == UPSTREAM["intervals"]
    assert config["images"][0] == {"name": c.CONTROLLERS_IMAGE, "loadBehavior": "mustLoad"}


JUNIT = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites><testsuite name="capi-e2e" tests="4">
  <testcase name="[SynchronizedBeforeSuite]" time="60"></testcase>
  <testcase name="[It] When following the Cluster API quick-start Should create a workload cluster" time="151.2">
  </testcase>
  <testcase name="[It] When testing MachineDeployment scale out/in Should scale" time="88.9">
    <failure message="Timed out after 300s.&#10;Expected 3 to equal 1" type="failed">[FAILED] Timed out</failure>
  </testcase>
  <testcase name="[It] When testing Node drain A node should be drained" time="0"><skipped message="skipped"/>
  </testcase>
</testsuite></testsuites>
"""


def test_results_and_table_from_a_junit_report(tmp_path: Path) -> None:
    (junit := tmp_path / "junit.xml").write_text(JUNIT)
    results = c.results_of(junit)
    assert [(r.name, r.state) for r in results] == [
        ("When following the Cluster API quick-start Should create a workload cluster", "passed"),
        ("When testing MachineDeployment scale out/in Should scale", "failed"),
        ("When testing Node drain A node should be drained", "not run"),
    ]
    assert results[1].failure.startswith("Timed out after 300s. Expected 3 to equal 1")
    text = c.table(results)
    assert "| When testing MachineDeployment scale out/in Should scale | failed | 89 s | Timed out" in text
    assert "| When testing Node drain A node should be drained | not run |  |  |" in text
    assert text.rstrip().endswith("1 of 3 upstream specs pass.")


def test_the_test_extension_is_packaged_where_upstreams_runtimesdk_specs_look_for_it(tmp_path: Path) -> None:
    from capd_py.cli.extension import load_extension
    from capd_py.testing import test_extension_provider as tep

    entry = tep.write(tmp_path / "repo", "v1.13.6", "docker.io/capd-py/controllers:dev")
    assert entry == {"name": "test-extension", "type": "RuntimeExtensionProvider",
                     "url": str(tmp_path / "repo/runtime-extension-test-extension/v1.13.6/"
                                "runtime-extension-components.yaml")}
    assert (tmp_path / "repo/runtime-extension-test-extension/v1.13.6/metadata.yaml").is_file()
    docs = {(d["kind"], d["metadata"]["name"]): d for d in tep.documents("img")}
    # the names upstream's cluster_upgrade_runtimesdk spec puts into its ExtensionConfig
    service = docs[("Service", "test-extension-webhook-service")]
    assert service["metadata"]["namespace"] == "test-extension-system"
    cert = docs[("Certificate", "test-extension-serving-cert")]["spec"]
    assert cert["secretName"] == "test-extension-webhook-service-cert"
    assert "test-extension-webhook-service.test-extension-system.svc" in cert["dnsNames"]
    pod = docs[("Deployment", "test-extension-controller-manager")]["spec"]["template"]
    assert pod["metadata"]["labels"] == service["spec"]["selector"]
    container = pod["spec"]["containers"][0]
    assert container["image"] == "img"
    assert container["volumeMounts"][0]["mountPath"] == container["args"][container["args"].index("--cert-dir") + 1]
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == cert["secretName"]
    assert load_extension(container["args"][2]).registrations  # what it serves imports and registers handlers
    assert {d["metadata"]["labels"]["cluster.x-k8s.io/provider"] for d in docs.values()} == {
        "runtime-extension-test-extension"}
