"""The init lock (upstream's ControlPlaneInitMutex): a `<cluster>-lock` ConfigMap naming the one control-plane
Machine that runs `kubeadm init`. Read it, take it, release it; who may take it is `reconcile.kubeadmconfig.decide`."""

from __future__ import annotations

from typing import Any

from capd_py.api.gvk import CONFIG_MAP, MACHINE
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import kubeadmconfig as kc

Obj = dict[str, Any]


async def observe(kube: Kube, cluster: Obj) -> tuple[Obj | None, bool]:
    """The lock and whether the Machine it names still exists."""
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    lock = await kube.get(CONFIG_MAP, ns, kc.lock_name(cname))
    holder = kc.lock_holder(lock)
    return lock, bool(holder) and (await kube.get(MACHINE, ns, str(holder))) is not None


async def acquire(kube: Kube, cluster: Obj, machine: Obj) -> bool:
    """Create the lock for `machine`; False when another Machine created it first."""
    try:
        await kube.create(CONFIG_MAP, kc.lock_configmap(cluster, machine["metadata"]["name"]))
    except KubeError as e:
        if e.conflict:
            return False
        raise
    return True


async def release(kube: Kube, cluster: Obj, uid: str | None = None) -> None:
    """Delete the lock (with `uid` as precondition when given); gone already is fine."""
    md = cluster["metadata"]
    await kube.delete(CONFIG_MAP, md["namespace"], kc.lock_name(md["name"]), uid=uid)
