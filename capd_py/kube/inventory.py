"""Write upstream clusterctl's provider inventory into a management cluster (the objects are decided in
`reconcile/inventory.py`; docs/clusterctl.md says what clusterctl does with them)."""

from __future__ import annotations

import asyncio
from typing import Any

from capd_py.api.gvk import CRD, NAMESPACE, PROVIDER
from capd_py.api.versions import CLUSTER_API_VERSION
from capd_py.kube.client import Kube
from capd_py.kube.crds import wait_established
from capd_py.reconcile import inventory


async def install(kube: Kube, version: str = CLUSTER_API_VERSION, timeout: float = 60.0) -> list[dict[str, Any]]:
    """Server-side apply the Provider CRD, the providers' namespaces and one Provider object per capd-py
    provider (core, bootstrap kubeadm, control-plane kubeadm, infrastructure docker). Idempotent: a second
    run changes nothing. Returns the Provider objects as the API server answered."""
    await kube.apply(CRD, inventory.provider_crd())
    await asyncio.gather(*(kube.apply(NAMESPACE, ns) for ns in inventory.namespaces()))
    await wait_established(kube, [inventory.CRD_NAME], timeout)
    return list(await asyncio.gather(*(kube.apply(PROVIDER, p) for p in inventory.desired_providers(version))))


async def installed(kube: Kube) -> list[dict[str, Any]]:
    """Every Provider object in the cluster ([] when the inventory CRD is not installed)."""
    if await kube.get(CRD, None, inventory.CRD_NAME) is None:
        return []
    return list(await kube.list(PROVIDER, None))
