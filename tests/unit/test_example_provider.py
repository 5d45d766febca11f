"""The provider example (examples/minimal-provider/) stays what it claims to be: third-party code that imports
nothing of capd-py, with CRDs the core resolves through the contract. Its behaviour is
tests/integration/test_minimal_provider_example.py."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from capd_py.api import crdcontract as cc

pytestmark = pytest.mark.unit

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "minimal-provider"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLE / "config" / name).read_text()) if d]


def test_the_example_imports_nothing_of_capd_py() -> None:
    sources = sorted(EXAMPLE.rglob("*.py"))
    assert sources
    for src in sources:
        for node in ast.walk(ast.parse(src.read_text(), str(src))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not [n for n in names if n.split(".")[0] == "capd_py"], f"{src.name} imports {names}"


def test_crds_follow_the_contract() -> None:
    crds = {c["spec"]["names"]["kind"]: c for c in _docs("crds.yaml")}
    assert set(crds) == {"MinimalCluster", "MinimalMachine", "MinimalMachineTemplate", "MinimalControlPlane"}
    for kind, crd in crds.items():
        info = cc.crd_info(crd)
        assert info.namespaced
        assert info.name == cc.crd_name(info.group, kind), "named <plural>.<group>"
        assert cc.choose(info) == cc.Choice("v1beta2", "v1alpha1")
        (version,) = crd["spec"]["versions"]
        props = version["schema"]["openAPIV3Schema"]["properties"]
        if kind != "MinimalMachineTemplate":
            assert version["subresources"]["status"] == {}, kind
            assert "initialization" in props["status"]["properties"], kind
    assert crds["MinimalControlPlane"]["spec"]["versions"][0]["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector"}


def test_the_sample_cluster_references_the_example_kinds() -> None:
    crds = {(c["spec"]["group"], c["spec"]["names"]["kind"]) for c in _docs("crds.yaml")}
    objs = {(d["kind"], d["metadata"]["name"]): d for d in _docs("cluster.yaml")}
    cluster = objs[("Cluster", "demo")]
    md = objs[("MachineDeployment", "demo-md-0")]
    refs = [cluster["spec"]["infrastructureRef"], cluster["spec"]["controlPlaneRef"],
            md["spec"]["template"]["spec"]["infrastructureRef"]]
    for ref in refs:
        assert (ref["apiGroup"], ref["kind"]) in crds
        assert (ref["kind"], ref["name"]) in objs
    assert ("Secret", md["spec"]["template"]["spec"]["bootstrap"]["dataSecretName"]) in objs
