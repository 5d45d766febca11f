"""Contract discovery: references resolve through the provider's CRD (one cached discovery, fed by the CRD watch,
or looked up by CRD name and asked again on a miss when nothing watches)."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.gvk import CRD, GVK
from capd_py.kube.contracts import CRD_NOT_FOUND, NO_CONTRACT, Contracts, Resolved, Unresolved

pytestmark = pytest.mark.unit


def crd(kind: str, group: str, labels: dict[str, str], versions: tuple[str, ...] = ("v1alpha1",)) -> dict[str, Any]:
    plural = kind.lower() + "s"
    return {"metadata": {"name": f"{plural}.{group}", "labels": labels},
            "spec": {"group": group, "scope": "Namespaced", "names": {"kind": kind, "plural": plural},
                     "versions": [{"name": v, "served": True} for v in versions]}}


class FakeKube:
    def __init__(self, crds: list[dict[str, Any]]):
        self.crds = {c["metadata"]["name"]: c for c in crds}
        self.gets: list[str] = []

    async def get(self, g: GVK, namespace: str | None, name: str) -> dict[str, Any] | None:
        assert g == CRD
        self.gets.append(name)
        return self.crds.get(name)


MC = crd("MinimalCluster", "infrastructure.example.com", {"cluster.x-k8s.io/v1beta2": "v1alpha1"})


async def test_watched_contracts_answer_from_memory_and_see_changes() -> None:
    kube = FakeKube([])
    c = Contracts(kube)  # type: ignore[arg-type]
    c.replace([MC])
    r = await c.resolve("infrastructure.example.com", "MinimalCluster")
    assert r == Resolved(GVK("infrastructure.example.com", "v1alpha1", "MinimalCluster", "minimalclusters"), "v1beta2")
    with pytest.raises(Unresolved) as e:
        await c.resolve("infrastructure.example.com", "OtherCluster")
    assert e.value.reason == CRD_NOT_FOUND
    assert "CustomResourceDefinition otherclusters.infrastructure.example.com does not exist" in e.value.message
    assert kube.gets == []  # a watched discovery never asks the API server
    # a new served version in the label: the next answer names it
    assert c.observe(crd("MinimalCluster", "infrastructure.example.com",
                         {"cluster.x-k8s.io/v1beta2": "v1alpha1_v1alpha2"}, ("v1alpha1", "v1alpha2")))
    assert (await c.resolve("infrastructure.example.com", "MinimalCluster")).gvk.version == "v1alpha2"
    c.observe(MC, deleted=True)
    with pytest.raises(Unresolved):
        await c.resolve("infrastructure.example.com", "MinimalCluster")


async def test_unwatched_contracts_look_up_by_crd_name_and_again_on_a_miss() -> None:
    kube = FakeKube([])
    c = Contracts(kube)  # type: ignore[arg-type]
    for _ in range(2):
        with pytest.raises(Unresolved):
            await c.resolve("infrastructure.example.com", "MinimalCluster")
    assert kube.gets == ["minimalclusters.infrastructure.example.com"] * 2
    kube.crds[MC["metadata"]["name"]] = MC
    assert (await c.resolve("infrastructure.example.com", "MinimalCluster")).contract == "v1beta2"
    await c.resolve("infrastructure.example.com", "MinimalCluster")
    assert len(kube.gets) == 3  # found once, remembered


async def test_no_contract_label_is_its_own_reason() -> None:
    c = Contracts(FakeKube([]))  # type: ignore[arg-type]
    c.replace([crd("Bare", "example.com", {})])
    with pytest.raises(Unresolved) as e:
        await c.resolve("example.com", "Bare")
    assert e.value.reason == NO_CONTRACT and "bares.example.com has no contract version label" in e.value.message


async def test_v1beta1_contract_provider() -> None:
    c = Contracts(FakeKube([]))  # type: ignore[arg-type]
    c.replace([crd("OldMachine", "infrastructure.example.com", {"cluster.x-k8s.io/v1beta1": "v1alpha3_v1alpha4"},
                   ("v1alpha3", "v1alpha4"))])
    r = await c.resolve("infrastructure.example.com", "OldMachine")
    assert (r.gvk.version, r.contract) == ("v1alpha4", "v1beta1")
