from collections.abc import Collection
from typing import Any

import pytest

from capd_py.api import crdcontract as cc

pytestmark = pytest.mark.unit


def crd(kind: str = "MinimalCluster", group: str = "infrastructure.example.com", labels: dict[str, str] | None = None,
        versions: tuple[str, ...] = ("v1alpha1",), served: Collection[str] | None = None,
        scope: str = "Namespaced") -> dict[str, Any]:
    plural = cc.plural(kind)
    return {"metadata": {"name": f"{plural}.{group}", "labels": labels or {}},
            "spec": {"group": group, "scope": scope, "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": v, "served": served is None or v in served} for v in versions]}}


def test_kube_aware_order() -> None:
    vs = ["v1alpha1", "v1", "v1beta2", "foo", "v2", "v1beta1", "v2alpha3", "v10beta1"]
    assert sorted(vs, key=cc.kube_version_key, reverse=True) == \
        ["v2", "v1", "v10beta1", "v1beta2", "v1beta1", "v2alpha3", "v1alpha1", "foo"]


@pytest.mark.parametrize(("kind", "plural"), [
    ("MinimalCluster", "minimalclusters"), ("DockerMachine", "dockermachines"), ("Proxy", "proxies"),
    ("Gateway", "gateways"), ("Box", "boxes"), ("Address", "addresses"), ("Mesh", "meshes")])
def test_plural(kind: str, plural: str) -> None:
    assert cc.plural(kind) == plural
    assert cc.crd_name("g.example.com", kind) == f"{plural}.g.example.com"


def test_choose_newest_listed_and_served() -> None:
    info = cc.crd_info(crd(labels={"cluster.x-k8s.io/v1beta2": "v1alpha1_v1alpha2_v1beta1"},
                           versions=("v1alpha1", "v1alpha2", "v1beta1"), served=("v1alpha1", "v1alpha2")))
    assert cc.choose(info) == cc.Choice("v1beta2", "v1alpha2")


def test_choose_prefers_newer_contract_and_reads_v1beta1() -> None:
    both = cc.crd_info(crd(labels={"cluster.x-k8s.io/v1beta1": "v1alpha1", "cluster.x-k8s.io/v1beta2": "v1alpha2"},
                           versions=("v1alpha1", "v1alpha2")))
    assert cc.choose(both) == cc.Choice("v1beta2", "v1alpha2")
    old = cc.crd_info(crd(labels={"cluster.x-k8s.io/v1beta1": "v1alpha3_v1alpha4"}, versions=("v1alpha3", "v1alpha4")))
    assert cc.choose(old) == cc.Choice("v1beta1", "v1alpha4")
    assert cc.contract_of_version(both, "v1alpha1") == "v1beta1"
    assert cc.contract_of_version(both, "v1alpha2") == "v1beta2"
    assert cc.contract_of_version(both, "v9") is None


def test_choose_errors_name_the_crd() -> None:
    with pytest.raises(cc.ContractError, match="minimalclusters.infrastructure.example.com has no contract version"):
        cc.choose(cc.crd_info(crd(labels={"cluster.x-k8s.io/provider": "x"})))
    with pytest.raises(cc.ContractError, match="serves none of them"):
        cc.choose(cc.crd_info(crd(labels={"cluster.x-k8s.io/v1beta2": "v1alpha9"})))


def test_crd_info() -> None:
    info = cc.crd_info(crd(scope="Cluster", labels={"a": "b"}))
    assert (info.group, info.kind, info.plural, info.namespaced, info.served) == \
        ("infrastructure.example.com", "MinimalCluster", "minimalclusters", False, ("v1alpha1",))
    assert info.label("a") == "b"


def test_compatible_contracts() -> None:
    assert cc.compatible_contracts() == ["v1beta2", "v1beta1"]
    assert cc.compatible_contracts("v1beta1") == ["v1beta1"]
