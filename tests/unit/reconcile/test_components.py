"""reconcile/components.py: which provider's components carry what (pure; the real release is
tests/unit/kube/test_components_release.py)."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import features
from capd_py.reconcile import components, inventory

pytestmark = pytest.mark.unit

Obj = dict[str, Any]


def crd(name: str, label: str) -> Obj:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": name, "labels": {"cluster.x-k8s.io/provider": label}},
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {
                "caBundle": "", "service": {"namespace": "capd-py-system", "name": "capd-py-webhook"}}}}}}


CONTROLLERS: list[Obj] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "capd-py-system"}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "capd-py-controllers",
                                                                 "namespace": "capd-py-system"}},
]
ADMISSION: list[Obj] = [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                         "metadata": {"name": "v"}, "webhooks": [{"name": "a", "clientConfig": {"caBundle": ""}}]}]


def test_split_gives_each_provider_its_crds_and_one_namespace() -> None:
    crds = [crd("b.bootstrap", "bootstrap-kubeadm"), crd("a.core", "cluster-api"), crd("z.core", "cluster-api"),
            crd("k.cp", "control-plane-kubeadm"), crd("d.infra", "infrastructure-docker")]
    got = components.split(crds, CONTROLLERS, ADMISSION)
    assert [(p.provider.manifest_label, p.namespace, p.file_name) for p in got] == [
        ("cluster-api", "capd-py-system", "core-components.yaml"),
        ("bootstrap-kubeadm", "capi-kubeadm-bootstrap-system", "bootstrap-components.yaml"),
        ("control-plane-kubeadm", "capi-kubeadm-control-plane-system", "control-plane-components.yaml"),
        ("infrastructure-docker", "capd-system", "infrastructure-components.yaml")]
    assert [[c["metadata"]["name"] for c in p.crds()] for p in got] == [
        ["a.core", "z.core"], ["b.bootstrap"], ["k.cp"], ["d.infra"]]
    for p in got:  # clusterctl takes a provider's namespace from its one Namespace document (more are refused)
        assert [d["metadata"]["name"] for d in p.documents if d["kind"] == "Namespace"] == [p.namespace]
    core = got[0]
    assert [d["kind"] for d in core.documents if d["kind"] not in ("CustomResourceDefinition",)] == [
        "Namespace", "Deployment", "ValidatingWebhookConfiguration"]
    assert all(d["kind"] in ("Namespace", "CustomResourceDefinition") for p in got[1:] for d in p.documents)


def test_no_ca_bundle_no_cert_manager() -> None:
    """The controllers make the webhooks' CA and write it themselves: nothing for cert-manager to inject."""
    got = components.split([crd("a.core", "cluster-api")], CONTROLLERS, ADMISSION)
    core = got[0]
    c = core.crds()[0]["spec"]["conversion"]["webhook"]["clientConfig"]
    assert "caBundle" not in c and c["service"] == {"namespace": "capd-py-system", "name": "capd-py-webhook"}
    hook = next(d for d in core.documents if d["kind"] == "ValidatingWebhookConfiguration")
    assert hook["webhooks"][0]["clientConfig"] == {}
    assert ADMISSION[0]["webhooks"][0]["clientConfig"] == {"caBundle": ""}  # inputs untouched
    for p in got:
        for d in p.documents:
            assert "cert-manager.io/inject-ca-from" not in (d["metadata"].get("annotations") or {})
            assert not d["apiVersion"].startswith("cert-manager.io/")


def test_a_crd_of_no_provider_is_refused() -> None:
    with pytest.raises(ValueError, match="names no capd-py provider"):
        components.split([crd("x.other", "infrastructure-other")], CONTROLLERS, ADMISSION)


def test_the_controllers_manifest_must_hold_its_namespace() -> None:
    with pytest.raises(ValueError, match="one Namespace"):
        components.split([], CONTROLLERS[1:], ADMISSION)


def test_metadata_names_the_release_series_and_contract() -> None:
    assert components.metadata("v1.13.6") == {
        "apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Metadata",
        "releaseSeries": [{"major": 1, "minor": 13, "contract": "v1beta2"}]}


def test_clusterctl_config_names_the_four_providers_by_file_url() -> None:
    extra = {"name": "minimal", "type": inventory.INFRASTRUCTURE, "url": "file:///r/m/v0.1.0/c.yaml"}
    cfg = components.clusterctl_config("/srv/capd py/repo/", "v1.13.6", [extra])
    assert cfg == {"providers": [
        {"name": "cluster-api", "type": "CoreProvider",
         "url": "file:///srv/capd%20py/repo/cluster-api/v1.13.6/core-components.yaml"},
        {"name": "kubeadm", "type": "BootstrapProvider",
         "url": "file:///srv/capd%20py/repo/bootstrap-kubeadm/v1.13.6/bootstrap-components.yaml"},
        {"name": "kubeadm", "type": "ControlPlaneProvider",
         "url": "file:///srv/capd%20py/repo/control-plane-kubeadm/v1.13.6/control-plane-components.yaml"},
        {"name": "docker", "type": "InfrastructureProvider",
         "url": "file:///srv/capd%20py/repo/infrastructure-docker/v1.13.6/infrastructure-components.yaml"},
        extra]}


def test_feature_gates_from_clusterctl_variables_default_to_capd_py_defaults() -> None:
    text = components.feature_gates_variables()
    assert text.startswith("MachinePool=${EXP_MACHINE_POOL:=true},ClusterTopology=${CLUSTER_TOPOLOGY:=true},")
    # clusterctl substitutes the defaults: the result parses to capd-py's defaults
    import re
    rendered = re.sub(r"\$\{[A-Z_]+:=(true|false)\}", r"\1", text)
    assert features.parse(rendered) == dict(features.DEFAULTS)
    assert set(re.findall(r"\$\{([A-Z_]+):=", text)) == set(features.INIT_VARIABLES)
