"""The topology controller's writes against a real API server: what it created, a later apply of its own can take
back (server-side apply ownership), so a version-dependent list-map entry is replaced, not duplicated."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api.gvk import KUBEADM_CONFIG_TEMPLATE
from capd_py.controllers import topology_writes
from capd_py.kube.client import Kube
from capd_py.reconcile.topology import desired as D
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


def template(namespace: str, node_labels: str) -> dict[str, Any]:
    # kubeletExtraArgs is a list-map keyed by name AND value (upstream's v1beta2 schema), names unique by CEL
    return {"apiVersion": KUBEADM_CONFIG_TEMPLATE.api_version, "kind": "KubeadmConfigTemplate",
            "metadata": {"name": "c1-md-0-abcde", "namespace": namespace,
                         "labels": {"cluster.x-k8s.io/cluster-name": "c1", "topology.cluster.x-k8s.io/owned": ""}},
            "spec": {"template": {"spec": {"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": [
                {"name": "v", "value": "2"}, {"name": "node-labels", "value": node_labels}]}}}}}}


async def test_an_entry_the_topology_created_is_replaced_by_its_next_apply(kube: Kube, namespace: str) -> None:
    ctx = direct_ctx(kube)
    await topology_writes.write(ctx, D.Write(template(namespace, "kubernetesVersion=v1.34.4"), create=True))
    # the next pass wants the entry for the new version (an external patch keyed on builtin.controlPlane.version)
    want = template(namespace, "kubernetesVersion=v1.35.4")
    await topology_writes.write(ctx, D.Write(copy.deepcopy(want), create=False))
    got = await kube.get(KUBEADM_CONFIG_TEMPLATE, namespace, "c1-md-0-abcde")
    assert got is not None
    args = got["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    assert args == want["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    # one owner of the spec: the topology's field manager, by apply
    owners = {(f["manager"], f["operation"]) for f in got["metadata"]["managedFields"] if "f:spec" in f["fieldsV1"]}
    assert owners == {(D.FIELD_MANAGER, "Apply")}, got["metadata"]["managedFields"]
