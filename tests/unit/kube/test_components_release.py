"""capd-py's clusterctl release as `capd-py clusterctl repository` writes it (kube/components.py): the real CRDs,
the controllers manifest with clusterctl variables, one Deployment, the files clusterctl reads."""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import features
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube import components as kc
from capd_py.kube.admission_webhook import MUTATING_NAME, VALIDATING_NAME
from capd_py.kube.crds import load_crds
from capd_py.reconcile import components, servingcert

pytestmark = pytest.mark.unit

Obj = dict[str, Any]


@functools.cache
def _release() -> tuple[components.ProviderComponents, ...]:
    return tuple(kc.release())  # reads and converts every CRD: once per module


def _by_label() -> dict[str, components.ProviderComponents]:
    return {p.provider.manifest_label: p for p in _release()}


def test_every_crd_once_in_its_provider() -> None:
    release = _by_label()
    names = {label: sorted(c["metadata"]["name"] for c in p.crds()) for label, p in release.items()}
    assert sorted(n for ns in names.values() for n in ns) == sorted(c["metadata"]["name"] for c in load_crds())
    assert names["bootstrap-kubeadm"] == ["kubeadmconfigs.bootstrap.cluster.x-k8s.io",
                                          "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io"]
    assert names["control-plane-kubeadm"] == ["kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
                                              "kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io"]
    assert "clusters.cluster.x-k8s.io" in names["cluster-api"]
    assert "extensionconfigs.runtime.cluster.x-k8s.io" in names["cluster-api"]
    assert {"dockermachines.infrastructure.cluster.x-k8s.io", "devclusters.infrastructure.cluster.x-k8s.io"} <= set(
        names["infrastructure-docker"])
    for label, p in release.items():
        for c in p.crds():
            labels = c["metadata"]["labels"]
            assert labels["cluster.x-k8s.io/provider"] == label
            if c["spec"]["group"] != "runtime.cluster.x-k8s.io":  # ExtensionConfig: no contract, as upstream
                assert labels["cluster.x-k8s.io/v1beta2"] == "v1beta2"  # the contract label the core discovers


def test_crds_serve_v1beta1_through_the_controllers_service_without_a_ca() -> None:
    for p in _release():
        for c in p.crds():
            conv = c["spec"].get("conversion") or {}
            if conv.get("strategy") != "Webhook":
                continue
            client = conv["webhook"]["clientConfig"]
            assert client == {"service": {"namespace": "capd-system", "name": "capd-py-webhook", "port": 443,
                                          "path": "/convert"}}, c["metadata"]["name"]
    core = _by_label()["cluster-api"].crds()
    clusters = next(c for c in core if c["metadata"]["name"] == "clusters.cluster.x-k8s.io")
    assert {v["name"] for v in clusters["spec"]["versions"]} == {"v1beta1", "v1beta2"}


def test_one_deployment_in_the_infrastructure_provider_with_clusterctl_variables() -> None:
    """As upstream CAPD's: one replica in capd-system whose pod is labelled control-plane=controller-manager
    (upstream's e2e framework port-forwards to exactly that pod to reach in-memory clusters' API servers)."""
    release = _by_label()
    deployments = [(label, d) for label, p in release.items() for d in p.documents if d["kind"] == "Deployment"]
    assert [label for label, _ in deployments] == ["infrastructure-docker"]
    dep = deployments[0][1]
    assert (dep["metadata"]["namespace"], dep["metadata"]["name"]) == ("capd-system", "capd-py-controllers")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["template"]["metadata"]["labels"]["control-plane"] == "controller-manager"
    c = dep["spec"]["template"]["spec"]["containers"][0]
    # Available only once the webhook server listens (clusterctl init --wait-providers waits for that; found by
    # upstream's scale spec, whose first write came 7 s after init and was refused)
    assert c["readinessProbe"]["tcpSocket"] == {"port": servingcert.DEFAULT_PORT}
    # canonical: clusterctl refuses `capd-py/controllers:dev` ("repository name must be canonical")
    assert c["image"] == "docker.io/capd-py/controllers:dev" and c["imagePullPolicy"] == "Never"
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["CAPD_PY_PRIVILEGED_MODE"] == "${CAPD_PY_PRIVILEGED_MODE:=privileged}"
    assert env["CAPD_PY_NETWORK"] == "${CAPD_PY_NETWORK:=capd-py}"
    assert env["CAPD_PY_NETWORK_POOL"] == ("${CAPD_PY_NETWORK_POOL:=172.16.0.0/12:20,10.208.0.0/12:20,"
                                           "fd00:ca9d:7000::/40:64}")
    assert env["CAPD_PY_FEATURE_GATES"] == components.feature_gates_variables()
    # the same manifest `capd-py init --in-cluster` applies (one home), placeholders filled differently
    plain = [d for d in yaml.safe_load_all(kc.controllers_manifest("i", "p", "n", "pool", "g")) if d]
    carrier = release["infrastructure-docker"].documents
    assert [(d["kind"], d["metadata"]["name"].replace("capd-py-system", "capd-system")) for d in plain] == [
        (d["kind"], d["metadata"]["name"]) for d in carrier if d["kind"] not in (
            "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
    assert {d["metadata"].get("namespace") for d in plain} == {None, "capd-py-system"}
    assert {d["metadata"].get("namespace") for d in carrier} == {None, "capd-system"}
    hooks = {d["metadata"]["name"]: d for d in carrier if d["kind"].endswith("WebhookConfiguration")}
    assert set(hooks) == {MUTATING_NAME, VALIDATING_NAME}
    for h in hooks.values():
        for w in h["webhooks"]:
            assert "caBundle" not in w["clientConfig"]
            assert w["clientConfig"]["service"]["namespace"] == "capd-system"
    for d in carrier:
        for subject in d.get("subjects") or []:
            assert subject["namespace"] == "capd-system", d["metadata"]["name"]


def test_variables_are_only_the_documented_ones() -> None:
    """clusterctl asks for every `${VAR}` without a default: there must be none (init needs no variable), and
    nothing in the CRDs (patterns with `$`) may read as a variable."""
    for p in _release():
        text = kc.dump(p.documents)
        found = set(re.findall(r"\$\{([A-Za-z0-9_]+)(:=[^}]*)?\}", text))
        if p.provider.manifest_label != "infrastructure-docker":
            assert not found, (p.provider.manifest_label, found)
            continue
        assert all(default for _, default in found), found
        assert {v for v, _ in found} == {"CAPD_PY_PRIVILEGED_MODE", "CAPD_PY_NETWORK", "CAPD_PY_NETWORK_POOL",
                                         "CAPD_DOCKER_NETWORK", *features.INIT_VARIABLES}
        # upstream CAPD's variable as upstream spells it (an empty default is no default to clusterctl)
        assert "value: ${CAPD_DOCKER_NETWORK:=\"\"}" in text


def test_write_repository_layout(tmp_path: Path) -> None:
    config = kc.write_repository(tmp_path / "repo", image="example.com/capd-py/controllers:v9")
    assert config == (tmp_path / "repo" / "clusterctl.yaml").resolve()
    providers = yaml.safe_load(config.read_text())["providers"]
    for entry in providers:
        path = Path(entry["url"].removeprefix("file://"))
        assert path.is_file() and path.parent.name == CLUSTER_API_VERSION
        meta = yaml.safe_load((path.parent / "metadata.yaml").read_text())
        assert meta["releaseSeries"] == [{"major": 1, "minor": 13, "contract": "v1beta2"}]
        docs = [d for d in yaml.load_all(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]
        assert docs
    infra = Path(providers[3]["url"].removeprefix("file://")).read_text()
    assert providers[3]["name"] == "docker" and "image: example.com/capd-py/controllers:v9" in infra
    # no folded lines: clusterctl substitutes variables in the text, before parsing it
    assert "value: MachinePool=${EXP_MACHINE_POOL:=true},ClusterTopology=" in infra
