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
        ("cluster-api", "capi-system", "core-components.yaml"),
        ("bootstrap-kubeadm", "capi-kubeadm-bootstrap-system", "bootstrap-components.yaml"),
        ("control-plane-kubeadm", "capi-kubeadm-control-plane-system", "control-plane-components.yaml"),
        ("infrastructure-docker", "capd-system", "infrastructure-components.yaml")]
    assert [[c["metadata"]["name"] for c in p.crds()] for p in got] == [
        ["a.core", "z.core"], ["b.bootstrap"], ["k.cp"], ["d.infra"]]
    for p in got:  # clusterctl takes a provider's namespace from its one Namespace document (more are refused)
        assert [d["metadata"]["name"] for d in p.documents if d["kind"] == "Namespace"] == [p.namespace]
    infra = got[3]  # the provider that carries the controllers: upstream's e2e finds CAPD's pod in capd-system
    assert [d["kind"] for d in infra.documents if d["kind"] not in ("CustomResourceDefinition",)] == [
        "Namespace", "Deployment", "ValidatingWebhookConfiguration"]
    assert all(d["kind"] in ("Namespace", "CustomResourceDefinition") for p in got[:3] for d in p.documents)
    dep = next(d for d in infra.documents if d["kind"] == "Deployment")
    assert dep["metadata"]["namespace"] == "capd-system" and dep["spec"]["replicas"] == 1
    assert dep["spec"]["template"]["metadata"]["labels"] == {"control-plane": "controller-manager"}
    assert "spec" not in CONTROLLERS[1]  # inputs untouched


def test_every_webhook_reference_names_the_controllers_service_in_capd_system() -> None:
    """clusterctl moves each provider's references into its own namespace; the file itself names where the Service
    is, and the controllers point the moved ones back (kube/conversion_webhook.py)."""
    hook = {**ADMISSION[0], "webhooks": [{"name": "a", "clientConfig": {
        "service": {"namespace": "capd-py-system", "name": "capd-py-webhook"}}}]}
    got = components.split([crd("a.core", "cluster-api"), crd("d.infra", "infrastructure-docker")], CONTROLLERS,
                           [hook])
    services = [c["spec"]["conversion"]["webhook"]["clientConfig"]["service"] for p in got for c in p.crds()]
    assert services == [{"namespace": "capd-system", "name": "capd-py-webhook"}] * 2
    (admission,) = [d for d in got[3].documents if d["kind"] == "ValidatingWebhookConfiguration"]
    assert admission["webhooks"][0]["clientConfig"]["service"]["namespace"] == "capd-system"


def test_in_namespace_moves_what_names_the_namespace() -> None:
    docs: list[Obj] = [
        {"kind": "Namespace", "metadata": {"name": "old"}},
        {"kind": "Service", "metadata": {"name": "s", "namespace": "old"}},
        {"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
         "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "old"},
                      {"kind": "ServiceAccount", "name": "x", "namespace": "elsewhere"}]},
        {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "elsewhere"}}]
    got = components.in_namespace(docs, "old", "new")
    assert got[0]["metadata"]["name"] == "new" and got[1]["metadata"]["namespace"] == "new"
    assert [s["namespace"] for s in got[2]["subjects"]] == ["new", "elsewhere"]
    assert got[3] == docs[3] and docs[1]["metadata"]["namespace"] == "old"


def test_no_ca_bundle_no_cert_manager() -> None:
    """The controllers make the webhooks' CA and write it themselves: nothing for cert-manager to inject."""
    got = components.split([crd("a.core", "cluster-api")], CONTROLLERS, ADMISSION)
    core = got[0]
    c = core.crds()[0]["spec"]["conversion"]["webhook"]["clientConfig"]
    assert "caBundle" not in c and c["service"] == {"namespace": "capd-system", "name": "capd-py-webhook"}
    hook = next(d for d in got[3].documents if d["kind"] == "ValidatingWebhookConfiguration")
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
