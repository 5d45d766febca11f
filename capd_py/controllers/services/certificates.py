"""The cluster certificates service: finds, and where the caller owns them creates, a cluster's
`<cluster>-{ca,etcd,sa,proxy}` certificate secrets and its `<cluster>-kubeconfig` secret. Used by the
KubeadmControlPlane controller (which owns them) and the KubeadmConfig controller (which generates them
only for clusters without a control-plane provider). Held on `Ctx.certificates`.

Decisions (what a secret holds, when a kubeconfig needs regenerating, key validation) live in
`capd_py.reconcile.certs`; this module only reads and writes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from capd_py.api.gvk import SECRET
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import certs as certs_mod

Found = dict[str, certs_mod.KeyPair]


@dataclass
class ClusterCertificates:
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("capd_py.certificates"))

    async def lookup(self, kube: Kube, namespace: str, cluster: str,
                     purposes: tuple[str, ...] = certs_mod.PURPOSES) -> tuple[Found, list[str]]:
        """Existing key pairs, and the purposes missing."""
        found: Found = {}
        missing: list[str] = []
        for p in purposes:
            kp = certs_mod.keypair_from_secret(await kube.get(SECRET, namespace, certs_mod.secret_name(cluster, p)))
            if kp is None:
                missing.append(p)
            else:
                found[p] = kp
        return found, missing

    async def lookup_or_generate(self, kube: Kube, namespace: str, cluster: str, owner: dict[str, Any]) -> Found:
        """Every key pair of the cluster, creating any missing secret (owned by the owner reference
        `owner`); a secret another writer created meanwhile wins."""
        found, missing = await self.lookup(kube, namespace, cluster)
        for p in missing:
            # an RSA-2048 key each (~50-100 ms of CPU): off the event loop, which serves every controller
            kp = await asyncio.to_thread(certs_mod.generate, p)
            try:
                await kube.create(SECRET, certs_mod.certificate_secret(cluster, namespace, p, kp, owner))
                found[p] = kp
            except KubeError as e:
                if not e.conflict:
                    raise
                again = certs_mod.keypair_from_secret(
                    await kube.get(SECRET, namespace, certs_mod.secret_name(cluster, p)))
                if again is None:
                    raise
                found[p] = again
        return found

    async def ensure_kubeconfig(self, kube: Kube, cluster: dict[str, Any], owner: dict[str, Any],
                                ca: certs_mod.KeyPair, endpoint: dict[str, Any]) -> None:
        """Create the admin `<cluster>-kubeconfig` secret (owned by the owner reference `owner`), or
        regenerate it when it no longer matches the endpoint / CA; leave it alone otherwise."""
        ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
        sname = certs_mod.secret_name(cname, certs_mod.KUBECONFIG)
        cur = await kube.get(SECRET, ns, sname)
        why = certs_mod.kubeconfig_needs_regeneration(cur, endpoint, ca)
        if why is None:
            return
        text = await asyncio.to_thread(certs_mod.admin_kubeconfig, cname, endpoint, ca)  # a new key: off the loop
        want = certs_mod.kubeconfig_secret(cname, ns, text, owner)
        if cur is None:
            try:
                await kube.create(SECRET, want)
            except KubeError as e:
                if not e.conflict:
                    raise
            return
        self.log.info("regenerating %s/%s: %s", ns, sname, why)
        want["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        want["metadata"]["ownerReferences"] = (cur["metadata"].get("ownerReferences")
                                               or want["metadata"]["ownerReferences"])
        await kube.replace(SECRET, want)
