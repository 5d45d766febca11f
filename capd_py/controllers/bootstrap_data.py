"""What the KubeadmConfig controller reads and writes around the bootstrap data: the config's owner (Machine or
MachinePool), the user's files and passwords taken from Secrets, and the `<config name>` data Secret itself."""

from __future__ import annotations

import base64
import logging
from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import MACHINE, MACHINE_POOL, SECRET
from capd_py.controllers.context import Ctx
from capd_py.kube import events
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import coreutil
from capd_py.reconcile import kubeadmconfig as kc

log = logging.getLogger("capd_py.kubeadmconfig")
Obj = dict[str, Any]


async def owner_of(kube: Kube, cfg: Obj) -> Obj | None:
    """The config owner: a Machine, or (as upstream's ConfigOwner) a MachinePool, whose one join data secret
    serves every instance of the pool."""
    ns = cfg["metadata"]["namespace"]
    for o in cfg["metadata"].get("ownerReferences") or []:
        g = {"Machine": MACHINE, "MachinePool": MACHINE_POOL}.get(o.get("kind", ""))
        if g is not None and str(o.get("apiVersion", "")).startswith("cluster.x-k8s.io/"):
            m = await kube.get(g, ns, o["name"])
            if m and m["metadata"].get("uid") == o.get("uid"):
                return m
    return None


async def ensure_data_secret_owner(kube: Kube, cfg: Obj) -> None:
    """The data Secret is the config's (upstream ensureBootstrapSecretOwnersRef), unless another kind controls it."""
    md = cfg["metadata"]
    sec = await kube.get(SECRET, md["namespace"], md["name"])
    if not sec:
        return
    cur = contract.controller_owner(sec)
    if cur and cur.get("kind") != "KubeadmConfig":
        log.warning("bootstrap secret %s/%s is controlled by %s %s", md["namespace"], md["name"],
                    cur.get("kind"), cur.get("name"))
        return
    have = list(sec["metadata"].get("ownerReferences") or [])
    # a KubeadmConfig of another uid (an older one of that name) is replaced, as is a reference at another version
    refs = coreutil.ensured_owner_refs(have, contract.owner_ref(cfg))
    if refs == have:
        return
    rv = sec["metadata"]["resourceVersion"]
    await kube.merge_patch(SECRET, md["namespace"], md["name"],
                           {"metadata": {"ownerReferences": refs, "resourceVersion": rv}})


def certs_problem(found: dict[str, certs_mod.KeyPair], need_keys: bool) -> str | None:
    for p, kp in found.items():
        if need_keys and not kp.key:
            return f"{p}: secret {p} has no tls.key"
        msg = certs_mod.validate_keypair(p, kp)
        if msg:
            return msg
    return None


async def _resolve_files(kube: Kube, cfg: Obj) -> list[Obj]:
    ns = cfg["metadata"]["namespace"]
    spec = cfg.get("spec") or {}
    data: dict[tuple[str, str], str] = {}
    for _, sname, key in kc.spec_files_needing_secrets(spec):
        sec = await kube.get(SECRET, ns, sname)
        raw = ((sec or {}).get("data") or {}).get(key)
        if raw is not None:
            data[(sname, key)] = base64.b64decode(raw).decode("utf-8", "replace")
    return kc.resolve_files(spec, data)


async def _resolve_users(kube: Kube, cfg: Obj) -> list[Obj]:
    ns = cfg["metadata"]["namespace"]
    out = []
    for u in (cfg.get("spec") or {}).get("users") or []:
        u = dict(u)
        src = contract.dig(u, "passwdFrom", "secret") or {}
        u.pop("passwdFrom", None)
        if src.get("name"):
            sec = await kube.get(SECRET, ns, src["name"])
            raw = ((sec or {}).get("data") or {}).get(src.get("key") or "")
            if raw is None:
                raise KeyError(f"secret {src['name']} key {src.get('key')!r} for user {u.get('name')}")
            u["passwd"] = base64.b64decode(raw).decode("utf-8", "replace")
        out.append(u)
    return out


async def user_inputs(ctx: Ctx, cfg: Obj, st: kc.BootstrapStatus) -> tuple[list[Obj], list[Obj]] | None:
    """spec.files and spec.users with their Secrets' content; None (and a condition and an Event saying which
    Secret) when one is missing."""
    try:
        return await _resolve_files(ctx.kube, cfg), await _resolve_users(ctx.kube, cfg)
    except KeyError as e:
        msg = f"Cannot resolve {e.args[0]}"
        st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_GENERATION_FAILED, msg)
        await events.record(ctx.kube, cfg, "DataSecretGenerationFailed", msg)
        return None


async def store(kube: Kube, cfg: Obj, cluster_name: str, value: str) -> None:
    """Create or update the data Secret holding `value` (written only when it differs)."""
    want = kc.data_secret(cfg, cluster_name, value)
    md = want["metadata"]
    cur = await kube.get(SECRET, md["namespace"], md["name"])
    if cur is None:
        try:
            await kube.create(SECRET, want)
            return
        except KubeError as e:
            if not e.conflict:
                raise
            cur = await kube.get(SECRET, md["namespace"], md["name"])
            if cur is None:
                raise
    if cur.get("data") != want["data"] or cur.get("type") != want["type"]:
        want["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
        await kube.replace(SECRET, want)
