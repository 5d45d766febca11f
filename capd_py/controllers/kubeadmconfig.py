"""KubeadmConfig controller (the kubeadm bootstrap provider): turns a KubeadmConfig owned by a Machine
into a `<config name>` Secret holding cloud-config (`value`, `format`), following upstream CABPK.

The decisions live in capd_py.reconcile.kubeadmconfig; this module reads the Machine, Cluster,
certificate secrets, the init lock and (for joins) the workload cluster, and writes what changed.
"""

from __future__ import annotations

import base64
import datetime as _dt
import logging
from typing import Any

from capd_py.api import conditions, contract
from capd_py.api.gvk import CLUSTER, CONFIG_MAP, KUBEADM_CONFIG, MACHINE, MACHINE_POOL, SECRET
from capd_py.api.labels import CLUSTER_NAME
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.manager import Controller, Mapper
from capd_py.controllers.queue import Result
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import kubeadmconfig as kc

log = logging.getLogger("capd_py.kubeadmconfig")

WAIT_SHORT = 5.0
WAIT_LOCK = 10.0
TOKEN_TTL = kc.DEFAULT_TOKEN_TTL


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


async def _owner_machine(kube: Kube, cfg: dict[str, Any]) -> dict[str, Any] | None:
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


def _cluster_name(cfg: dict[str, Any], owner: dict[str, Any] | None) -> str | None:
    return ((cfg["metadata"].get("labels") or {}).get(CLUSTER_NAME)
            or contract.dig(owner, "spec", "clusterName") or None)


class _Status(conditions.StatusBuilder):
    """The v1beta2 status, with Ready derived from the data-secret and certificate conditions."""

    def __init__(self, cfg: dict[str, Any]):
        super().__init__(cfg)
        self.cfg = cfg

    def has(self, ctype: str) -> bool:
        return any(c.get("type") == ctype for c in self.conds)

    def created(self, secret_name: str) -> None:
        self.status["dataSecretName"] = secret_name
        init = dict(self.status.get("initialization") or {})
        init["dataSecretCreated"] = True
        self.status["initialization"] = init
        self.set(kc.DATA_SECRET_AVAILABLE, True, kc.REASON_AVAILABLE)
        self.set(kc.CERTIFICATES_AVAILABLE, True, kc.REASON_AVAILABLE)

    def final(self) -> dict[str, Any]:
        # a spec patch during the pass (join discovery) bumps the generation: report the latest one
        self.gen = self.cfg["metadata"].get("generation", self.gen)
        if self.gen is not None:
            self.conds = [{**c, "observedGeneration": self.gen} for c in self.conds]
        by = {c["type"]: c for c in self.conds}
        ds, ca = by.get(kc.DATA_SECRET_AVAILABLE), by.get(kc.CERTIFICATES_AVAILABLE)
        if ds and ds["status"] == "True" and (ca is None or ca["status"] == "True"):
            self.set(conditions.READY, True, kc.REASON_READY)
        else:
            bad = next((c for c in (ca, ds) if c and c["status"] != "True"), ds)
            msg = f"{bad['type']}: {bad['message']}" if bad and bad.get("message") else "Waiting for bootstrap data"
            self.set(conditions.READY, False, kc.REASON_NOT_READY, msg)
        return super().final()


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    cfg = await kube.get(KUBEADM_CONFIG, namespace, name)
    if cfg is None or cfg["metadata"].get("deletionTimestamp"):
        return None
    owner = await _owner_machine(kube, cfg)
    if owner is None:
        # as upstream: nothing to say (and nothing written) until the Machine controller sets the owner;
        # its patch brings us back. One status write fewer per Machine.
        return None
    cname = _cluster_name(cfg, owner)
    cluster = await kube.get(CLUSTER, namespace, cname) if cname else None
    st = _Status(cfg)
    res = await _reconcile(ctx, cfg, owner, cluster, st)
    # cfg may have been replaced by a spec patch (token / discovery): write status against the latest.
    latest = st.cfg
    await lifecycle.write_status(kube, KUBEADM_CONFIG, latest, st.final())
    return res


async def _ensure_data_secret_owner(kube: Kube, cfg: dict[str, Any]) -> None:
    md = cfg["metadata"]
    sec = await kube.get(SECRET, md["namespace"], md["name"])
    if not sec:
        return
    refs = list(sec["metadata"].get("ownerReferences") or [])
    if any(r.get("uid") == md["uid"] for r in refs):
        return
    cur = contract.controller_owner(sec)
    if cur and cur.get("kind") != "KubeadmConfig":
        log.warning("bootstrap secret %s/%s is controlled by %s %s", md["namespace"], md["name"],
                    cur.get("kind"), cur.get("name"))
        return
    refs = [r for r in refs if r.get("kind") != "KubeadmConfig"] + [contract.owner_ref(cfg)]
    rv = sec["metadata"]["resourceVersion"]
    await kube.merge_patch(SECRET, md["namespace"], md["name"],
                           {"metadata": {"ownerReferences": refs, "resourceVersion": rv}})


async def _reconcile(ctx: Ctx, cfg: dict[str, Any], owner: dict[str, Any] | None,
                     cluster: dict[str, Any] | None, st: _Status) -> Result | None:
    kube = ctx.kube
    phase = kc.decide(cfg, owner, cluster)
    if phase.action in (kc.WAIT_OWNER, kc.WAIT_CLUSTER):
        # The Machine controller sets the owner; it or the Cluster event brings us back.
        if not st.has(kc.DATA_SECRET_AVAILABLE):
            st.set(kc.DATA_SECRET_AVAILABLE, False, phase.action, phase.message)
        return None
    paused = phase.action == kc.PAUSED
    st.set(conditions.PAUSED, paused, lifecycle.R_PAUSED if paused else "NotPaused")
    if paused:
        return None
    assert owner is not None and cluster is not None
    await _ensure_data_secret_owner(kube, cfg)
    if phase.action == kc.NOT_SUPPORTED:
        st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_FORMAT_NOT_SUPPORTED, phase.message)
        return None
    if phase.action in (kc.WAIT_INFRA, kc.WAIT_ENDPOINT):
        st.set(kc.DATA_SECRET_AVAILABLE, False, phase.action, phase.message)
        return None  # the Cluster watch brings us back
    if phase.action == kc.ADOPT:
        st.created(str(contract.dig(owner, "spec", "bootstrap", "dataSecretName")))
        return None
    if phase.action == kc.DONE:
        st.created(str(st.status["dataSecretName"]))
        return await _refresh_token_if_needed(ctx, cfg, owner, cluster, st)
    if phase.action == kc.WAIT_CP_INIT:
        st.set(kc.DATA_SECRET_AVAILABLE, False, phase.action, phase.message)
        return Result(requeue_after=30.0)
    if phase.action == kc.INIT:
        return await _init(ctx, cfg, owner, cluster, st)
    # joins: release the init lock the first machine held
    await _unlock(kube, cluster)
    return await _join(ctx, cfg, owner, cluster, st, control_plane=phase.action == kc.JOIN_CONTROL_PLANE)


# --- init lock ----------------------------------------------------------------------------------

async def _lock(kube: Kube, cluster: dict[str, Any], machine: dict[str, Any]) -> tuple[bool, str]:
    ns, cname, mname = cluster["metadata"]["namespace"], cluster["metadata"]["name"], machine["metadata"]["name"]
    lock = await kube.get(CONFIG_MAP, ns, kc.lock_name(cname))
    holder = kc.lock_holder(lock)
    holder_exists = bool(holder) and (await kube.get(MACHINE, ns, str(holder))) is not None
    d = kc.lock_decision(lock, mname, holder_exists)
    if d == "held":
        return True, ""
    if d == "wait":
        return False, f"Waiting for Machine {holder} to initialize the control plane (init lock {kc.lock_name(cname)})"
    if d == "release-stale":
        await kube.delete(CONFIG_MAP, ns, kc.lock_name(cname), uid=lock["metadata"].get("uid") if lock else None)
        return False, "Released a stale init lock; retrying"
    try:
        await kube.create(CONFIG_MAP, kc.lock_configmap(cluster, mname))
    except KubeError as e:
        if e.conflict:
            return False, "The init lock was acquired by another Machine"
        raise
    return True, ""


async def _unlock(kube: Kube, cluster: dict[str, Any]) -> None:
    md = cluster["metadata"]
    if await kube.get(CONFIG_MAP, md["namespace"], kc.lock_name(md["name"])) is not None:
        await kube.delete(CONFIG_MAP, md["namespace"], kc.lock_name(md["name"]))


# --- certificates (lookup / generation: ctx.certificates, controllers/services/certificates.py) ----

def _certs_problem(found: dict[str, certs_mod.KeyPair], need_keys: bool) -> str | None:
    for p, kp in found.items():
        if need_keys and not kp.key:
            return f"{p}: secret {p} has no tls.key"
        msg = certs_mod.validate_keypair(p, kp)
        if msg:
            return msg
    return None


# --- files --------------------------------------------------------------------------------------

async def _resolve_files(kube: Kube, cfg: dict[str, Any]) -> list[dict[str, Any]]:
    ns = cfg["metadata"]["namespace"]
    spec = cfg.get("spec") or {}
    data: dict[tuple[str, str], str] = {}
    for _, sname, key in kc.spec_files_needing_secrets(spec):
        sec = await kube.get(SECRET, ns, sname)
        raw = ((sec or {}).get("data") or {}).get(key)
        if raw is not None:
            data[(sname, key)] = base64.b64decode(raw).decode("utf-8", "replace")
    return kc.resolve_files(spec, data)


async def _resolve_users(kube: Kube, cfg: dict[str, Any]) -> list[dict[str, Any]]:
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


async def _store(kube: Kube, cfg: dict[str, Any], cluster_name: str, value: str) -> None:
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


Dicts = list[dict[str, Any]]


async def _user_inputs(ctx: Ctx, cfg: dict[str, Any], st: _Status) -> tuple[Dicts, Dicts] | None:
    try:
        return await _resolve_files(ctx.kube, cfg), await _resolve_users(ctx.kube, cfg)
    except KeyError as e:
        msg = f"Cannot resolve {e.args[0]}"
        st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_GENERATION_FAILED, msg)
        await events.record(ctx.kube, cfg, "DataSecretGenerationFailed", msg)
        return None


# --- init ---------------------------------------------------------------------------------------

async def _init(ctx: Ctx, cfg: dict[str, Any], machine: dict[str, Any], cluster: dict[str, Any],
                st: _Status) -> Result | None:
    kube = ctx.kube
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    if not st.has(kc.DATA_SECRET_AVAILABLE):
        st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_GENERATING, "Generating bootstrap data (kubeadm init)")
    ok, msg = await _lock(kube, cluster, machine)
    if not ok:
        st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_WAITING_FOR_INIT_LOCK, msg)
        return Result(requeue_after=WAIT_LOCK)
    try:
        if contract.ref(cluster, "spec", "controlPlaneRef"):
            found, missing = await ctx.certificates.lookup(kube, ns, cname)
            if missing:
                st.set(kc.CERTIFICATES_AVAILABLE, False, kc.REASON_WAITING_FOR_CERTIFICATES,
                       f"Waiting for the control plane provider to generate certificates ({', '.join(missing)})")
                return Result(requeue_after=WAIT_SHORT)
        else:
            found = await ctx.certificates.lookup_or_generate(kube, ns, cname, contract.owner_ref(cfg))
        problem = _certs_problem(found, need_keys=True)
        if problem:
            st.set(kc.CERTIFICATES_AVAILABLE, False, kc.REASON_INTERNAL_ERROR, f"Certificates are corrupted: {problem}")
            await events.record(kube, cfg, "CertificatesCorrupted", problem)
            return None
        st.set(kc.CERTIFICATES_AVAILABLE, True, kc.REASON_AVAILABLE)
        inputs = await _user_inputs(ctx, cfg, st)
        if inputs is None:
            return Result(requeue_after=30.0)
        files, users = inputs
        version = str(contract.dig(machine, "spec", "version") or "")
        value = kc.render_init(cfg.get("spec") or {}, cluster, version, found, files=files, users=users)
        await _store(kube, cfg, cname, value)
    except Exception:
        await _unlock(kube, cluster)
        raise
    st.created(cfg["metadata"]["name"])
    log.info("bootstrap data for the first control plane %s/%s created", ns, cfg["metadata"]["name"])
    return None


# --- join ---------------------------------------------------------------------------------------

async def _workload(ctx: Ctx, cluster: dict[str, Any]) -> Kube | None:
    return await ctx.workload.get(cluster["metadata"]["namespace"], cluster["metadata"]["name"])


async def _join(ctx: Ctx, cfg: dict[str, Any], machine: dict[str, Any], cluster: dict[str, Any], st: _Status,
                *, control_plane: bool) -> Result | None:
    kube = ctx.kube
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    spec = cfg.get("spec") or {}
    if contract.dig(spec, "joinConfiguration", "controlPlane") is not None and not control_plane:
        msg = "Machine is a worker, but joinConfiguration.controlPlane is set"
        st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_INVALID, msg)
        return None
    purposes = certs_mod.PURPOSES if control_plane else (certs_mod.CLUSTER_CA,)
    found, missing = await ctx.certificates.lookup(kube, ns, cname, purposes)
    if missing:
        st.set(kc.CERTIFICATES_AVAILABLE, False, kc.REASON_WAITING_FOR_CERTIFICATES,
               f"Waiting for cluster certificates ({', '.join(missing)})")
        return Result(requeue_after=WAIT_SHORT)
    problem = _certs_problem(found, need_keys=control_plane)
    if problem:
        st.set(kc.CERTIFICATES_AVAILABLE, False, kc.REASON_INTERNAL_ERROR, f"Certificates are corrupted: {problem}")
        await events.record(kube, cfg, "CertificatesCorrupted", problem)
        return None
    st.set(kc.CERTIFICATES_AVAILABLE, True, kc.REASON_AVAILABLE)

    # Discovery: like upstream, fill token / endpoint / CA hashes into the spec so refresh can find the token.
    disc = contract.dig(spec, "joinConfiguration", "discovery", default={}) or {}
    if not contract.dig(disc, "file", "kubeConfigPath"):
        bt = dict(disc.get("bootstrapToken") or {})
        patch_bt: dict[str, Any] = {}
        if not bt.get("apiServerEndpoint"):
            ep = contract.control_plane_endpoint(cluster)
            assert ep is not None
            patch_bt["apiServerEndpoint"] = kc.endpoint_string(ep)
        if not bt.get("caCertHashes"):
            patch_bt["caCertHashes"] = [certs_mod.ca_cert_hash(found[certs_mod.CLUSTER_CA].cert)]
        if not bt.get("token"):
            wl = await _workload(ctx, cluster)
            if wl is None:
                st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_WAITING_FOR_WORKLOAD,
                       "Waiting for the workload cluster kubeconfig to create a bootstrap token")
                return Result(requeue_after=WAIT_SHORT)
            token = kc.new_token()
            try:
                await wl.create(SECRET, kc.token_secret(token, _now(), TOKEN_TTL))
            except KubeError:
                raise
            except Exception as e:  # noqa: BLE001 - the workload API not answering yet is waiting, not failure
                st.set(kc.DATA_SECRET_AVAILABLE, False, kc.REASON_WAITING_FOR_WORKLOAD,
                       f"Waiting for the workload cluster API to create a bootstrap token: {e.__class__.__name__}")
                return Result(requeue_after=WAIT_SHORT)
            await _sign_cluster_info(ctx, wl, token)
            patch_bt["token"] = token
        if patch_bt:
            bt.update(patch_bt)
            md = cfg["metadata"]
            cfg = await kube.merge_patch(KUBEADM_CONFIG, ns, md["name"], {
                "metadata": {"resourceVersion": md["resourceVersion"]},
                "spec": {"joinConfiguration": {"discovery": {"bootstrapToken": bt}}}})
            st.cfg = cfg
            spec = cfg.get("spec") or {}
    inputs = await _user_inputs(ctx, cfg, st)
    if inputs is None:
        return Result(requeue_after=30.0)
    files, users = inputs
    value = kc.render_join(spec, cluster, control_plane=control_plane, token=None,
                           ca_cert=found[certs_mod.CLUSTER_CA].cert, certs=found if control_plane else None,
                           files=files, users=users)
    await _store(kube, cfg, cname, value)
    st.created(cfg["metadata"]["name"])
    log.info("bootstrap data for %s join %s/%s created", "control-plane" if control_plane else "worker",
             ns, cfg["metadata"]["name"])
    return Result(requeue_after=kc.refresh_interval(TOKEN_TTL).total_seconds())


async def _sign_cluster_info(ctx: Ctx, wl: Kube, token: str) -> None:
    """Sign cluster-info for a new token at once, as kube-controller-manager's bootstrap signer will (the
    same bytes): a join right after `kubeadm init` would otherwise wait for the signer plus kubeadm's
    5 s discovery retry. Best effort: the signer does it anyway."""
    ns, name = kc.CLUSTER_INFO
    try:
        ci = await wl.get(CONFIG_MAP, ns, name)
        kubeconfig = ((ci or {}).get("data") or {}).get("kubeconfig")
        if ci is None or not kubeconfig:
            return
        key, value = kc.cluster_info_signature(kubeconfig, token)
        if ci["data"].get(key) != value:
            await wl.merge_patch(CONFIG_MAP, ns, name, {"data": {key: value}})
    except Exception as e:  # noqa: BLE001 - the signer in kube-controller-manager covers it
        ctx.log.info("signing cluster-info for a new bootstrap token: %s", e)


async def _refresh_token_if_needed(ctx: Ctx, cfg: dict[str, Any], machine: dict[str, Any],
                                   cluster: dict[str, Any], st: _Status) -> Result | None:
    token = contract.dig(cfg, "spec", "joinConfiguration", "discovery", "bootstrapToken", "token")
    pool = kc.is_machine_pool(machine)
    # a MachinePool's token stays fresh while the pool exists: a scale up joins new nodes with it any time
    if not token or (kc.machine_has_node(machine) and not pool) or not kc.token_id(str(token)):
        return None
    interval = kc.refresh_interval(TOKEN_TTL).total_seconds()
    wl = await _workload(ctx, cluster)
    if wl is None:
        return Result(requeue_after=WAIT_SHORT)
    name = kc.token_secret_name(str(token))
    try:
        sec = await wl.get(SECRET, "kube-system", name)
        if sec is None and pool:
            # upstream: a MachinePool's token secret that is gone is replaced (new token, new join data)
            log.info("bootstrap token secret %s for MachinePool config %s/%s is gone: creating a new token",
                     name, cfg["metadata"]["namespace"], cfg["metadata"]["name"])
            md = cfg["metadata"]
            cfg = await ctx.kube.merge_patch(KUBEADM_CONFIG, md["namespace"], md["name"], {
                "metadata": {"resourceVersion": md["resourceVersion"]},
                "spec": {"joinConfiguration": {"discovery": {"bootstrapToken": {"token": None}}}}})
            st.cfg = cfg
            return await _join(ctx, cfg, machine, cluster, st, control_plane=False)
        if sec is None:
            log.warning("bootstrap token secret %s for %s/%s is gone; the machine cannot join with it",
                        name, cfg["metadata"]["namespace"], cfg["metadata"]["name"])
            return Result(requeue_after=interval)
        now = _now()
        if not kc.token_needs_refresh(kc.parse_expiration(sec), now, TOKEN_TTL):
            return Result(requeue_after=interval)
        new_exp = base64.b64encode(kc.token_expiration(now, TOKEN_TTL).encode()).decode()
        await wl.merge_patch(SECRET, "kube-system", name, {"data": {"expiration": new_exp}})
        log.info("refreshed bootstrap token %s for %s/%s", name, cfg["metadata"]["namespace"], cfg["metadata"]["name"])
    except KubeError:
        raise
    except Exception as e:  # noqa: BLE001 - workload API unreachable: try again soon
        log.info("workload API not reachable to refresh token for %s: %s", cfg["metadata"]["name"], e)
        return Result(requeue_after=WAIT_SHORT)
    return Result(requeue_after=interval)


# --- wiring -------------------------------------------------------------------------------------

def _machine_to_config(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "bootstrap", "configRef")
    if r and r["kind"] == "KubeadmConfig":
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def _pool_to_config(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "template", "spec", "bootstrap", "configRef")
    if r and r["kind"] == "KubeadmConfig":
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def _cluster_to_configs(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
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
