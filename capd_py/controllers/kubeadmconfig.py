"""KubeadmConfig controller (the kubeadm bootstrap provider): turns a KubeadmConfig owned by a Machine
into a `<config name>` Secret holding cloud-config (`value`, `format`), following upstream CABPK.

It runs on the skeleton (controllers/skeleton.py: pause, status, no finalizer: upstream CABPK has none and
ignores deleted configs). Each pass reads the owner, the Cluster and the init lock, asks
`reconcile.kubeadmconfig.decide` for the next step and does it: the I/O around the data secret is in
`bootstrap_data.py`, the init lock in `init_lock.py`, the workload's join tokens in `bootstrap_tokens.py`.
"""

from __future__ import annotations

import logging
from typing import Any

from capd_py.api import contract
from capd_py.api.gvk import CLUSTER, KUBEADM_CONFIG, MACHINE, MACHINE_POOL
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import bootstrap_data as data
from capd_py.controllers import bootstrap_tokens as tokens
from capd_py.controllers import init_lock
from capd_py.controllers.context import Ctx
from capd_py.controllers.mappers import Controller, Mapper
from capd_py.controllers.skeleton import Kind, Outcome, Subject, reconciler
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Unreachable
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import kubeadmconfig as kc

log = logging.getLogger("capd_py.kubeadmconfig")

WAIT_SHORT = 5.0
WAIT_INPUTS = 30.0
Obj = dict[str, Any]


async def _reconcile(ctx: Ctx, sub: Subject) -> Outcome:
    kube, cfg = ctx.kube, sub.obj
    owner = await data.owner_of(kube, cfg)
    cluster = sub.cluster
    if cluster is None and owner is not None and contract.dig(owner, "spec", "clusterName"):
        # no cluster-name label yet: the owner names the Cluster
        cluster = await kube.get(CLUSTER, sub.namespace, str(owner["spec"]["clusterName"]))
    lock, holder_exists = await init_lock.observe(kube, cluster) if cluster is not None else (None, False)
    st = kc.BootstrapStatus(cfg)
    action = kc.decide(kc.Observed(cfg, owner, cluster, lock, holder_exists))
    requeue = await _act(ctx, st, action, owner, cluster)
    # st.config may have been replaced by a spec patch (token / discovery): the status goes against the latest
    return Outcome(status=st.final(), obj=st.config, requeue_after=requeue)


async def _act(ctx: Ctx, st: kc.BootstrapStatus, action: kc.Action, owner: Obj | None,
               cluster: Obj | None) -> float | None:
    kube = ctx.kube
    if isinstance(action, kc.WaitForOwner | kc.WaitForCluster):
        st.wait(action)  # the Machine controller (owner) or a Cluster event brings us back
        return None
    assert owner is not None and cluster is not None
    await data.ensure_data_secret_owner(kube, st.config)
    match action:
        case kc.Wait():
            st.wait(action)
            return action.requeue_after
        case kc.AdoptDataSecret(secret_name=name) | kc.Ready(secret_name=name):
            st.created(name)
            return None
        case kc.RefreshToken():
            st.created(action.secret_name)
            return await _refresh_token(ctx, st, action, owner, cluster)
        case kc.ReleaseStaleLock(uid=uid):
            await init_lock.release(kube, cluster, uid)
            st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_WAITING_FOR_INIT_LOCK,
                   "Released a stale init lock; retrying")
            return kc.WAIT_LOCK_SECONDS
        case kc.AcquireInitLock() | kc.RenderInit():
            if not st.has(kc.DATA_SECRET_AVAILABLE):
                st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_GENERATING,
                       "Generating bootstrap data (kubeadm init)")
            if isinstance(action, kc.AcquireInitLock) and not await init_lock.acquire(kube, cluster, owner):
                st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_WAITING_FOR_INIT_LOCK,
                       "The init lock was acquired by another Machine")
                return kc.WAIT_LOCK_SECONDS
            try:
                return await _init(ctx, st, owner, cluster)
            except Exception:  # noqa: BLE001 - re-raised: any failure frees the lock (upstream's deferred Unlock)
                await init_lock.release(kube, cluster)
                raise
        case kc.InvalidJoin() | kc.RenderJoin():
            if action.release_lock:  # joins: the cluster is initialised, the init lock has served
                await init_lock.release(kube, cluster)
            if isinstance(action, kc.InvalidJoin):
                st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_INVALID, action.message)
                return None
            return await _join(ctx, st, owner, cluster, control_plane=action.control_plane)
    raise AssertionError(f"unhandled action {action!r}")


async def _certificates(ctx: Ctx, st: kc.BootstrapStatus, cluster: Obj, purposes: tuple[str, ...] | None,
                        *, need_keys: bool, generate: bool) -> dict[str, certs_mod.KeyPair] | float | None:
    """The cluster certificates (generated for a standalone control plane), or what to return instead: a requeue
    while they are missing (a control plane provider makes them), None when they are corrupted."""
    kube, cfg = ctx.kube, st.config
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    if generate:
        found = await ctx.certificates.lookup_or_generate(kube, ns, cname, contract.owner_ref(cfg))
    else:
        found, missing = await (ctx.certificates.lookup(kube, ns, cname, purposes) if purposes
                                else ctx.certificates.lookup(kube, ns, cname))
        if missing:
            msg = (f"Waiting for cluster certificates ({', '.join(missing)})" if purposes else
                   f"Waiting for the control plane provider to generate certificates ({', '.join(missing)})")
            st.set(kc.CERTIFICATES_AVAILABLE, False, kc.REASON_WAITING_FOR_CERTIFICATES, msg)
            return WAIT_SHORT
    problem = data.certs_problem(found, need_keys=need_keys)
    if problem:
        st.set(kc.CERTIFICATES_AVAILABLE, False, kc.REASON_INTERNAL_ERROR, f"Certificates are corrupted: {problem}")
        await events.record(kube, cfg, "CertificatesCorrupted", problem)
        return None
    st.set(kc.CERTIFICATES_AVAILABLE, True, kc.REASON_AVAILABLE)
    return found


async def _init(ctx: Ctx, st: kc.BootstrapStatus, machine: Obj, cluster: Obj) -> float | None:
    cfg = st.config
    standalone = not contract.ref(cluster, "spec", "controlPlaneRef")
    found = await _certificates(ctx, st, cluster, None, need_keys=True, generate=standalone)
    if not isinstance(found, dict):
        return found
    inputs = await data.user_inputs(ctx, cfg, st)
    if inputs is None:
        return WAIT_INPUTS
    files, users = inputs
    version = str(contract.dig(machine, "spec", "version") or "")
    value = kc.render_init(cfg.get("spec") or {}, cluster, version, found, files=files, users=users,
                           templates=ctx.bootstrap_templates.get())
    await data.store(ctx.kube, cfg, cluster["metadata"]["name"], value)
    st.created(cfg["metadata"]["name"])
    log.info("bootstrap data for the first control plane %s/%s created", cfg["metadata"]["namespace"],
             cfg["metadata"]["name"])
    return None


async def _join(ctx: Ctx, st: kc.BootstrapStatus, machine: Obj, cluster: Obj, *, control_plane: bool) -> float | None:
    kube = ctx.kube
    purposes = certs_mod.PURPOSES if control_plane else (certs_mod.CLUSTER_CA,)
    found = await _certificates(ctx, st, cluster, purposes, need_keys=control_plane, generate=False)
    if not isinstance(found, dict):
        return found
    # discovery: like upstream, token / endpoint / CA hashes go into the spec, so the refresh can find the token
    fill, needs_token = kc.discovery_fill(st.config.get("spec") or {}, cluster, found[certs_mod.CLUSTER_CA].cert)
    if needs_token:
        wl = await tokens.workload(ctx, cluster)
        token = await tokens.create(wl) if wl is not None else None
        if not isinstance(token, str):
            why = f": {token.cause.__class__.__name__}" if token is not None else ""
            what = "API" if token is not None else "kubeconfig"
            st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_WAITING_FOR_WORKLOAD,
                   f"Waiting for the workload cluster {what} to create a bootstrap token{why}")
            return WAIT_SHORT
        fill["token"] = token
    if fill:
        md = st.config["metadata"]
        st.config = await kube.merge_patch(KUBEADM_CONFIG, md["namespace"], md["name"],
                                           kc.discovery_patch(st.config, fill))
    cfg = st.config
    inputs = await data.user_inputs(ctx, cfg, st)
    if inputs is None:
        return WAIT_INPUTS
    files, users = inputs
    value = kc.render_join(cfg.get("spec") or {}, cluster, control_plane=control_plane, token=None,
                           ca_cert=found[certs_mod.CLUSTER_CA].cert, certs=found if control_plane else None,
                           files=files, users=users, templates=ctx.bootstrap_templates.get())
    await data.store(kube, cfg, cluster["metadata"]["name"], value)
    st.created(cfg["metadata"]["name"])
    log.info("bootstrap data for %s join %s/%s created", "control-plane" if control_plane else "worker",
             cfg["metadata"]["namespace"], cfg["metadata"]["name"])
    return kc.refresh_interval(tokens.TOKEN_TTL).total_seconds()


async def _refresh_token(ctx: Ctx, st: kc.BootstrapStatus, action: kc.RefreshToken, machine: Obj,
                         cluster: Obj) -> float | None:
    wl = await tokens.workload(ctx, cluster)
    if wl is None:
        return WAIT_SHORT
    step = await tokens.check(wl, st.config, action.token, action.pool)
    if isinstance(step, Unreachable):
        return WAIT_SHORT
    if step.kind == "recreate":
        md = st.config["metadata"]
        st.config = await ctx.kube.merge_patch(KUBEADM_CONFIG, md["namespace"], md["name"],
                                               kc.discovery_patch(st.config, {"token": None}))
        return await _join(ctx, st, machine, cluster, control_plane=False)
    return kc.refresh_interval(tokens.TOKEN_TTL).total_seconds()


async def _deleted(ctx: Ctx, sub: Subject) -> Outcome:
    return Outcome(done=True)  # as upstream: a deleted KubeadmConfig is ignored (its Secret goes with it)


def _has_owner(sub: Subject) -> bool:
    """As upstream: nothing to say (and nothing written) until the Machine (or MachinePool) controller sets the
    owner; its patch brings us back (one status write fewer per Machine)."""
    return bool(contract.core_owner_name(sub.obj, "Machine") or contract.core_owner_name(sub.obj, "MachinePool"))


KIND = Kind(KUBEADM_CONFIG, reconcile=_reconcile, delete=_deleted, ready=_has_owner)


reconcile = reconciler(KIND)


# --- wiring -------------------------------------------------------------------------------------

def _machine_to_config(obj: Obj, cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "bootstrap", "configRef")
    if r and r["kind"] == "KubeadmConfig":
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def _pool_to_config(obj: Obj, cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "template", "spec", "bootstrap", "configRef")
    if r and r["kind"] == "KubeadmConfig":
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def _cluster_to_configs(obj: Obj, cache: Reader) -> list[tuple[str, str]]:
    """A Cluster event (infrastructure provisioned, control plane initialised, endpoint set) reaches every
    KubeadmConfig of that cluster: those labelled with it and those its Machines point at."""
    ns = obj["metadata"].get("namespace") or ""
    sel = {CLUSTER_NAME: obj["metadata"]["name"]}
    names = {c["metadata"]["name"] for c in cache.list(KUBEADM_CONFIG, ns, labels=sel)}
    for m in cache.list(MACHINE, ns, labels=sel):
        names.update(n for _, n in _machine_to_config(m, cache))
    for mp in cache.list(MACHINE_POOL, ns, labels=sel):
        names.update(n for _, n in _pool_to_config(mp, cache))
    return [(ns, n) for n in sorted(names)]


def controller() -> Controller:
    watches: list[tuple[Any, Mapper]] = [(MACHINE, _machine_to_config), (MACHINE_POOL, _pool_to_config),
                                         (CLUSTER, _cluster_to_configs)]
    return Controller(gvk=KUBEADM_CONFIG, reconcile=reconcile, watches=watches)
