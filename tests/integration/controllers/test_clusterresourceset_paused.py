"""A paused ClusterResourceSet is left alone even while it is being deleted (upstream checks pause first): its
finalizer and bindings stay until it is unpaused, then the deletion completes."""

from __future__ import annotations

import pytest

from capd_py.api import conditions as cond
from capd_py.api.gvk import CLUSTER_RESOURCE_SET
from capd_py.api.labels import FINALIZER_CLUSTER_RESOURCE_SET, PAUSED_ANNOTATION
from capd_py.controllers import clusterresourceset as c_crs
from capd_py.kube.client import Kube
from capd_py.testing.inprocess import direct_ctx

pytestmark = [pytest.mark.integration, pytest.mark.docker_free]


async def test_paused_set_is_not_deleted_until_unpaused(kube: Kube, namespace: str) -> None:
    ctx = direct_ctx(kube)
    await kube.create(CLUSTER_RESOURCE_SET, {
        "apiVersion": CLUSTER_RESOURCE_SET.api_version, "kind": "ClusterResourceSet",
        "metadata": {"name": "crs", "namespace": namespace},
        "spec": {"clusterSelector": {"matchLabels": {"cni": "x"}}, "resources": [{"kind": "ConfigMap", "name": "cm"}]}})
    await c_crs.reconcile(ctx, namespace, "crs")
    got = await kube.get(CLUSTER_RESOURCE_SET, namespace, "crs")
    assert got is not None and FINALIZER_CLUSTER_RESOURCE_SET in got["metadata"]["finalizers"]

    await kube.merge_patch(CLUSTER_RESOURCE_SET, namespace, "crs",
                           {"metadata": {"annotations": {PAUSED_ANNOTATION: ""}}})
    await kube.delete(CLUSTER_RESOURCE_SET, namespace, "crs")
    await c_crs.reconcile(ctx, namespace, "crs")
    held = await kube.get(CLUSTER_RESOURCE_SET, namespace, "crs")
    assert held is not None and FINALIZER_CLUSTER_RESOURCE_SET in held["metadata"]["finalizers"]
    assert cond.is_true(held, cond.PAUSED)

    await kube.merge_patch(CLUSTER_RESOURCE_SET, namespace, "crs",
                           {"metadata": {"annotations": {PAUSED_ANNOTATION: None}}})
    await c_crs.reconcile(ctx, namespace, "crs")
    assert await kube.get(CLUSTER_RESOURCE_SET, namespace, "crs") is None
