"""A topology Cluster is defaulted and checked against its reconciled ClusterClass at admission, as upstream's
Cluster defaulting webhook does (internal/webhooks/cluster.go Default -> DefaultAndValidateVariables): through a real
kube-apiserver with capd-py's CRDs and webhooks as `capd-py init` installs them and its controllers reconciling the
class. A value the class's schema refuses and an undefined one are refused with upstream's field paths, a variable
left out gets its default; a Cluster of a class that does not exist is admitted at once (the topology controller
reports it)."""

from __future__ import annotations

import copy
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from capd_py.api.gvk import CLUSTER, CLUSTER_CLASS
from capd_py.cli.apply import apply_objects
from capd_py.cli.generate import generate_cluster, parse_documents
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile.topology.classchecks import reconciled
from capd_py.testing.admission_oracle import capd_py_plane, webhooks_answer
from capd_py.testing.envtest import EnvTest
from capd_py.testing.inprocess import Operator, eventually, in_process_operator

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]

Obj = dict[str, Any]
DRY = [("dryRun", "All")]


@pytest.fixture(scope="module")
def envtest() -> Iterator[EnvTest]:
    """This module's API server (replaces the shared one for `kube` and `namespace`): CRDs and webhook
    configurations as `capd-py init` installs them, the webhooks served by the controllers below."""
    with capd_py_plane() as started:
        yield started


@pytest.fixture
async def operator(envtest: EnvTest, kube: Kube) -> AsyncIterator[Operator]:
    async with in_process_operator(envtest, workloads="none") as op:
        await webhooks_answer(kube)
        yield op


async def _class_and_cluster(kube: Kube, namespace: str) -> Obj:
    docs = parse_documents(generate_cluster("cc-adm", namespace=namespace, flavor="development",
                                            control_plane_machine_count=1, worker_machine_count=1, env={}))
    cluster = next(d for d in docs if d["kind"] == "Cluster")
    assert all(o.ok for o in await apply_objects(kube, [d for d in docs if d["kind"] != "Cluster"]))
    name = cluster["spec"]["topology"]["classRef"]["name"]

    async def class_reconciled() -> bool:
        cc = await kube.get(CLUSTER_CLASS, namespace, name)
        return cc is not None and reconciled(cc)
    await eventually(class_reconciled, 30, "the ClusterClass reconciled by capd-py's controllers")
    return cluster


async def _refusal(kube: Kube, cluster: Obj) -> list[tuple[str, str]]:
    with pytest.raises(KubeError) as e:
        await kube.acall("POST", CLUSTER.path(cluster["metadata"]["namespace"]), body=cluster, query=DRY)
    assert e.value.status == 422, e.value
    return [(c["reason"], c["field"]) for c in e.value.body["details"]["causes"]]


def _variables(cluster: Obj) -> list[Obj]:
    return list(cluster["spec"]["topology"]["variables"])


async def test_values_the_class_refuses_are_refused_with_upstreams_field_paths(
        operator: Operator, kube: Kube, namespace: str) -> None:
    cluster = await _class_and_cluster(kube, namespace)
    admitted = await kube.acall("POST", CLUSTER.path(namespace), body=cluster, query=DRY)
    assert {v["name"] for v in _variables(admitted)} == {v["name"] for v in _variables(cluster)}

    wrong_type = copy.deepcopy(cluster)
    wrong_type["spec"]["topology"]["variables"] = [
        {**v, "value": 5} if v["name"] == "etcdImageTag" else v for v in _variables(cluster)]
    assert [f for _, f in await _refusal(kube, wrong_type)] == ["spec.topology.variables[etcdImageTag].value"]

    # a required variable left out gets its default (here ""), as upstream's DefaultClusterVariables gives it
    missing = copy.deepcopy(cluster)
    missing["spec"]["topology"]["variables"] = [v for v in _variables(cluster) if v["name"] != "imageRepository"]
    defaulted = await kube.acall("POST", CLUSTER.path(namespace), body=missing, query=DRY)
    assert {"name": "imageRepository", "value": ""} in _variables(defaulted)

    undefined = copy.deepcopy(cluster)
    undefined["spec"]["topology"]["variables"] = [*_variables(cluster), {"name": "nope", "value": 1}]
    assert await _refusal(kube, undefined) == [("FieldValueInvalid", "spec.topology.variables[nope]")]


async def test_a_cluster_of_a_class_that_does_not_exist_is_admitted_at_once(
        operator: Operator, kube: Kube, namespace: str) -> None:
    cluster = await _class_and_cluster(kube, namespace)
    other = copy.deepcopy(cluster)
    other["spec"]["topology"]["classRef"]["name"] = "not-there"
    other["spec"]["topology"]["variables"] = [{"name": "nope", "value": 1}]  # nothing to check it against
    start = time.monotonic()
    await kube.acall("POST", CLUSTER.path(namespace), body=other, query=DRY)
    # upstream polls 2 s for a missing class in each webhook; an apply sends objects one after the other, so a
    # missing class does not appear meanwhile: capd-py does not wait (docs/validation.md)
    assert time.monotonic() - start < 1.5
