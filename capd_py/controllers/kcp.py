"""KubeadmControlPlane controller: cluster certificates and kubeconfig, control-plane Machines (init,
one-at-a-time joins, scale down with etcd member removal, rollouts), status and deletion.

Decisions: capd_py.reconcile.kcp. This module reads the KCP, its Cluster, its Machines (with their
KubeadmConfigs and infrastructure machines) and the workload cluster's nodes and static pods, then
performs at most one scaling step per reconcile.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import re
import secrets
import socket
import ssl
import string
from typing import Any

import kubernetes.client
from cryptography import x509
from kubernetes.stream import stream as k8s_stream

from capd_py.api import conditions, contract, gvk
from capd_py.api.gvk import CLUSTER, CONFIG_MAP, KUBEADM_CONFIG, KUBEADM_CONTROL_PLANE, MACHINE, NODE, POD, SECRET
from capd_py.api.labels import (
    CLONED_FROM_GROUP_KIND,
    CLONED_FROM_NAME,
    CLUSTER_NAME,
    CONTROL_PLANE,
    CONTROL_PLANE_NAME,
    DELETE_MACHINE_ANNOTATION,
    FINALIZER_KCP,
)
from capd_py.controllers import lifecycle
from capd_py.controllers.context import Ctx
from capd_py.controllers.kubeadmconfig import lookup_or_generate_certs
from capd_py.controllers.manager import Controller, Mapper, owner_mapper
from capd_py.controllers.queue import Result
from capd_py.kube import events
from capd_py.kube.cache import Reader
from capd_py.kube.client import Kube, KubeError
from capd_py.reconcile import certs as certs_mod
from capd_py.reconcile import kcp as rk
from capd_py.reconcile.kubeadmconfig import cluster_infrastructure_provisioned

log = logging.getLogger("capd_py.kcp")

ETCD_PKI = "/etc/kubernetes/pki/etcd"
WORKLOAD_TIMEOUT = 10.0
ETCDCTL_BASE = ["etcdctl", "--endpoints=https://127.0.0.1:2379", f"--cacert={ETCD_PKI}/ca.crt",
                f"--cert={ETCD_PKI}/healthcheck-client.crt", f"--key={ETCD_PKI}/healthcheck-client.key",
                "--command-timeout=15s"]


def _now() -> _dt.datetime:
    return _dt.datetime.now(_dt.UTC)


def _suffix(n: int = 5) -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(n))


async def _owner_cluster(kube: Kube, kcp: dict[str, Any]) -> dict[str, Any] | None:
    for o in kcp["metadata"].get("ownerReferences") or []:
        if o.get("kind") == "Cluster" and str(o.get("apiVersion", "")).startswith("cluster.x-k8s.io/"):
            return await kube.get(CLUSTER, kcp["metadata"]["namespace"], o["name"])
    return None


_Conds = conditions.StatusBuilder


async def reconcile(ctx: Ctx, namespace: str, name: str) -> Result | None:
    kube = ctx.kube
    kcp = await kube.get(KUBEADM_CONTROL_PLANE, namespace, name)
    if kcp is None:
        return None
    cluster = await _owner_cluster(kube, kcp)
    if kcp["metadata"].get("deletionTimestamp"):
        return await _delete(ctx, kcp, cluster)
    if cluster is None:
        log.debug("KCP %s/%s: waiting for the Cluster controller to set the owner reference", namespace, name)
        return None
    if await lifecycle.pause_if_needed(kube, KUBEADM_CONTROL_PLANE, kcp, cluster):
        return None
    kcp = await lifecycle.ensure_finalizer(kube, KUBEADM_CONTROL_PLANE, kcp, FINALIZER_KCP)
    st = _Conds(kcp)
    st.set(conditions.PAUSED, False, "NotPaused")
    res = await _reconcile(ctx, kcp, cluster, st)
    await kube.update_status(KUBEADM_CONTROL_PLANE, kcp, st.final())
    return res


# --- certificates / kubeconfig -----------------------------------------------------------------

async def _ensure_kubeconfig(kube: Kube, kcp: dict[str, Any], cluster: dict[str, Any],
                             ca: certs_mod.KeyPair, endpoint: dict[str, Any]) -> None:
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    sname = certs_mod.secret_name(cname, certs_mod.KUBECONFIG)
    cur = await kube.get(SECRET, ns, sname)
    why = certs_mod.kubeconfig_needs_regeneration(cur, endpoint, ca)
    if why is None:
        return
    text = certs_mod.admin_kubeconfig(cname, endpoint, ca)
    want = certs_mod.kubeconfig_secret(cname, ns, text, contract.owner_ref(kcp))
    if cur is None:
        try:
            await kube.create(SECRET, want)
        except KubeError as e:
            if not e.conflict:
                raise
        return
    log.info("regenerating %s/%s: %s", ns, sname, why)
    want["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
    want["metadata"]["ownerReferences"] = cur["metadata"].get("ownerReferences") or want["metadata"]["ownerReferences"]
    await kube.replace(SECRET, want)


# --- observation -------------------------------------------------------------------------------

async def _owned_machines(kube: Kube, kcp: dict[str, Any], cluster_name: str) -> list[dict[str, Any]]:
    ns = kcp["metadata"]["namespace"]
    ms = await kube.list(MACHINE, ns, labels={CLUSTER_NAME: cluster_name, CONTROL_PLANE_NAME: kcp["metadata"]["name"]})
    uid = kcp["metadata"]["uid"]
    return [m for m in ms if any(o.get("uid") == uid for o in m["metadata"].get("ownerReferences") or [])]


def _pod_ready(pod: dict[str, Any]) -> bool:
    if contract.dig(pod, "status", "phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in contract.dig(pod, "status", "conditions", default=[]) or [])


def _node_ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in contract.dig(node, "status", "conditions", default=[]) or [])


def _cond_status(obj: dict[str, Any], ctype: str) -> bool | None:
    c = conditions.get(obj, ctype)
    return None if c is None else c.get("status") == conditions.TRUE


class _Workload:
    def __init__(self) -> None:
        self.kube: Kube | None = None
        self.reachable = False
        self.error = ""
        self.nodes: list[dict[str, Any]] = []
        self.pods: dict[str, dict[str, Any]] = {}


async def _observe_workload(ctx: Ctx, cluster: dict[str, Any]) -> _Workload:
    w = _Workload()
    w.kube = await ctx.workload.get(cluster["metadata"]["namespace"], cluster["metadata"]["name"])
    if w.kube is None:
        w.error = "kubeconfig not available"
        return w
    try:
        # short timeouts: an unreachable workload API must not hold the KCP key for minutes
        nodes = await w.kube.acall("GET", NODE.path(), timeout=WORKLOAD_TIMEOUT)
        w.nodes = list(nodes.get("items") or [])
        pods = await w.kube.acall("GET", POD.path("kube-system"), query=[("labelSelector", "tier=control-plane")],
                                  timeout=WORKLOAD_TIMEOUT)
        w.pods = {p["metadata"]["name"]: p for p in pods.get("items") or []}
        w.reachable = True
    except Exception as e:  # noqa: BLE001 - an unreachable workload API is a state to report, not a crash
        # no object addresses / varying detail in status: the message must be stable between passes
        w.error = f"{e.__class__.__name__}: {re.sub(r' at 0x[0-9a-fA-F]+', '', str(e))[:200]}"
    return w


def _node_for(machine: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any] | None:
    ref = contract.dig(machine, "status", "nodeRef", "name")
    pid = contract.provider_id(machine)
    for n in nodes:
        if ref and n["metadata"]["name"] == ref:
            return n
    for n in nodes:
        if pid and contract.dig(n, "spec", "providerID") == pid:
            return n
    for n in nodes:
        if n["metadata"]["name"] == machine["metadata"]["name"]:
            return n
    return None


async def _views(kube: Kube, kcp: dict[str, Any], machines: list[dict[str, Any]],
                 w: _Workload) -> list[rk.MachineView]:
    out = []
    ns = kcp["metadata"]["namespace"]
    now = _now()
    for m in machines:
        md = m["metadata"]
        cref = contract.ref(m, "spec", "bootstrap", "configRef")
        cfg = await kube.get(KUBEADM_CONFIG, ns, cref["name"]) if cref and cref["kind"] == "KubeadmConfig" else None
        iref = contract.ref(m, "spec", "infrastructureRef")
        ig = gvk.by_group_kind(iref["apiGroup"], iref["kind"]) if iref else None
        infra = await kube.get(ig, ns, iref["name"]) if ig and iref else None
        node = _node_for(m, w.nodes)
        nname = node["metadata"]["name"] if node else ""
        v = rk.MachineView(
            name=md["name"], created=rk.parse_time(md.get("creationTimestamp")) or now,
            failure_domain=contract.dig(m, "spec", "failureDomain") or "",
            deleting=bool(md.get("deletionTimestamp")),
            delete_annotation=DELETE_MACHINE_ANNOTATION in (md.get("annotations") or {}),
            node_name=nname, node_ready=bool(node and _node_ready(node)),
            pods_ready={p: bool(nname and f"{p}-{nname}" in w.pods and _pod_ready(w.pods[f"{p}-{nname}"]))
                        for p in rk.STATIC_PODS},
            outdated_reasons=rk.outdated_reasons(kcp, m, (cfg or {}).get("spec") if cfg else None, infra, now,
                                                 config_meta=(cfg or {}).get("metadata")),
            machine_ready=_cond_status(m, conditions.READY),
            machine_available=_cond_status(m, conditions.AVAILABLE),
            remediate=_cond_status(m, "OwnerRemediated") is False,
        )
        out.append(v)
    return out


def _apiserver_cert_expiry_blocking(host: str, port: int, timeout: float = 3.0) -> str | None:
    """notAfter of the kube-apiserver serving certificate on a node (RFC3339), or None if unreachable."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((host, port), timeout=timeout) as raw, \
                ctx.wrap_socket(raw, server_hostname=host) as tls:
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    if not der:
        return None
    cert = x509.load_der_x509_certificate(der)
    return cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")


async def _record_certificate_expiries(kube: Kube, kcp: dict[str, Any], machines: list[dict[str, Any]],
                                       w: _Workload) -> None:
    """Like upstream: once per machine, note its API server certificate expiry on its KubeadmConfig
    (drives spec.rollout.before.certificatesExpiryDays). Best effort: unreachable nodes are retried."""
    if not contract.dig(kcp, "spec", "rollout", "before", "certificatesExpiryDays") or not w.reachable:
        return
    ns = kcp["metadata"]["namespace"]
    for m in machines:
        cref = contract.ref(m, "spec", "bootstrap", "configRef")
        node = _node_for(m, w.nodes)
        if m["metadata"].get("deletionTimestamp") or not cref or node is None:
            continue
        cfg = await kube.get(KUBEADM_CONFIG, ns, cref["name"])
        if cfg is None or rk.CERTIFICATES_EXPIRY_ANNOTATION in (cfg["metadata"].get("annotations") or {}):
            continue
        ip = next((a["address"] for a in contract.dig(node, "status", "addresses", default=[]) or []
                   if a.get("type") == "InternalIP"), None)
        if not ip:
            continue
        expiry = await asyncio.to_thread(_apiserver_cert_expiry_blocking, ip, 6443)
        if expiry:
            await kube.merge_patch(KUBEADM_CONFIG, ns, cref["name"],
                                   {"metadata": {"annotations": {rk.CERTIFICATES_EXPIRY_ANNOTATION: expiry}}})


# --- machine creation ---------------------------------------------------------------------------

async def _create_machine(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], *, init: bool,
                          failure_domain: str) -> str | None:
    """Clone the infrastructure template, create the KubeadmConfig and the Machine; returns a problem
    message when the template is missing."""
    kube = ctx.kube
    ns, cname, kname = kcp["metadata"]["namespace"], cluster["metadata"]["name"], kcp["metadata"]["name"]
    tref = rk.infra_template_ref(kcp)
    tg = gvk.by_group_kind(tref["apiGroup"], tref["kind"]) if tref else None
    if not tref or tg is None:
        return "spec.machineTemplate.spec.infrastructureRef is not set or of an unknown kind"
    tpl = await kube.get(tg, ns, tref["name"])
    if tpl is None:
        return f"{tref['kind']} {tref['name']} not found"
    name = rk.machine_name(kcp, cname, _suffix())
    labels = rk.machine_labels(kcp, cname)
    owner = contract.owner_ref(kcp)
    tspec = contract.dig(tpl, "spec", "template", default={}) or {}
    infra_kind = tref["kind"][:-len("Template")] if tref["kind"].endswith("Template") else tref["kind"]
    infra_gvk = gvk.by_group_kind(tref["apiGroup"], infra_kind)
    if infra_gvk is None:
        return f"unknown infrastructure machine kind {infra_kind}"
    infra = {
        "apiVersion": infra_gvk.api_version, "kind": infra_kind,
        "metadata": {"name": name, "namespace": ns,
                     "labels": {**(contract.dig(tspec, "metadata", "labels", default={}) or {}), **labels},
                     "annotations": {**(contract.dig(tspec, "metadata", "annotations", default={}) or {}),
                                     CLONED_FROM_NAME: tref["name"],
                                     CLONED_FROM_GROUP_KIND: f"{tref['kind']}.{tref['apiGroup']}"},
                     "ownerReferences": [owner]},
        "spec": json.loads(json.dumps(tspec.get("spec") or {})),
    }
    cfg = {
        "apiVersion": KUBEADM_CONFIG.api_version, "kind": "KubeadmConfig",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels), "ownerReferences": [owner]},
        "spec": rk.init_config_spec(kcp) if init else rk.join_config_spec(kcp),
    }
    mt = contract.dig(kcp, "spec", "machineTemplate", default={}) or {}
    mspec: dict[str, Any] = {
        "clusterName": cname,
        "version": contract.dig(kcp, "spec", "version"),
        "bootstrap": {"configRef": {"apiGroup": KUBEADM_CONFIG.group, "kind": "KubeadmConfig", "name": name}},
        "infrastructureRef": {"apiGroup": infra_gvk.group, "kind": infra_kind, "name": name},
    }
    if failure_domain:
        mspec["failureDomain"] = failure_domain
    for k in ("readinessGates", "deletion", "taints"):
        if contract.dig(mt, "spec", k):
            mspec[k] = contract.dig(mt, "spec", k)
    machine = {
        "apiVersion": MACHINE.api_version, "kind": "Machine",
        "metadata": {"name": name, "namespace": ns, "labels": dict(labels),
                     "annotations": dict(contract.dig(mt, "metadata", "annotations", default={}) or {}),
                     "ownerReferences": [owner]},
        "spec": mspec,
    }
    created_infra = await kube.create(infra_gvk, infra)
    try:
        created_cfg = await kube.create(KUBEADM_CONFIG, cfg)
    except Exception:
        await kube.delete(infra_gvk, ns, name)
        raise
    try:
        created_m = await kube.create(MACHINE, machine)
    except Exception:
        await kube.delete(infra_gvk, ns, name)
        await kube.delete(KUBEADM_CONFIG, ns, name)
        raise
    # The Machine now controls its bootstrap config and infrastructure machine (upstream's end state).
    mref = contract.owner_ref(created_m)
    for g, obj in ((infra_gvk, created_infra), (KUBEADM_CONFIG, created_cfg)):
        try:
            await kube.merge_patch(g, ns, name, {"metadata": {"ownerReferences": [mref]}})
        except KubeError as e:
            log.info("could not hand %s %s/%s to its Machine yet: %s", obj.get("kind"), ns, name, e)
    log.info("KCP %s/%s: created control-plane Machine %s (%s)", ns, kname, name, "init" if init else "join")
    return None


# --- etcd ---------------------------------------------------------------------------------------

def _exec_blocking(cfg: kubernetes.client.Configuration, pod: str, cmd: list[str],
                   timeout: float = 60) -> tuple[int, str, str]:
    api = kubernetes.client.ApiClient(configuration=cfg)  # own client: stream() patches the one it uses
    try:
        core = kubernetes.client.CoreV1Api(api)
        ws = k8s_stream(core.connect_get_namespaced_pod_exec, pod, "kube-system", command=cmd,
                        stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
        ws.run_forever(timeout=timeout)
        out, err = ws.read_stdout() or "", ws.read_stderr() or ""
        try:
            rc = ws.returncode
        except Exception:  # noqa: BLE001 - no status frame (timeout / closed early): judge by stderr
            rc = 1 if err else 0
        ws.close()
        return (0 if rc is None else int(rc)), out, err
    finally:
        api.close()


async def _etcdctl(wl: Kube, pod: str, *args: str) -> str:
    rc, out, err = await asyncio.to_thread(_exec_blocking, wl.api.configuration, pod, [*ETCDCTL_BASE, *args])
    if rc != 0:
        raise RuntimeError(f"etcdctl {' '.join(args)} in {pod}: exit {rc}: {err.strip()[:300]}")
    return out


async def remove_etcd_member(wl: Kube, via_node: str, target_node: str) -> str:
    """Remove `target_node`'s etcd member, moving leadership away first; run through the etcd static
    pod on `via_node`. Returns what was done."""
    pod = f"etcd-{via_node}"
    members = json.loads(await _etcdctl(wl, pod, "member", "list", "-w", "json")).get("members") or []
    target = rk.etcd_member_to_remove(members, target_node)
    if target is None:
        return f"no etcd member named {target_node}"
    tid = rk.member_id(target)
    via = rk.etcd_member_to_remove(members, via_node)
    try:
        status = json.loads(await _etcdctl(wl, pod, "endpoint", "status", "-w", "json"))
        leader = int(status[0]["Status"]["leader"]) if status else 0
    except (RuntimeError, ValueError, KeyError, IndexError, TypeError):
        leader = 0
    if leader == tid and via is not None and target.get("clientURLs"):
        ep = target["clientURLs"][0]
        await asyncio.to_thread(_exec_blocking, wl.api.configuration, pod,
                                [*[a for a in ETCDCTL_BASE if not a.startswith("--endpoints=")], f"--endpoints={ep}",
                                 "move-leader", format(rk.member_id(via), "x")])
    await _etcdctl(wl, pod, "member", "remove", format(tid, "x"))
    return f"removed etcd member {format(tid, 'x')} ({target_node})"


async def _sync_kubeadm_config(wl: Kube, kcp: dict[str, Any], cluster: dict[str, Any]) -> str | None:
    """Before a join: kubeadm reads ClusterConfiguration from the workload cluster (version, settings)."""
    try:
        cm = await wl.get(CONFIG_MAP, "kube-system", rk.KUBEADM_CONFIG_MAP)
        if cm is None:
            return "not found (kubeadm init has not uploaded it yet)"
        new = rk.updated_cluster_configuration((cm.get("data") or {}).get("ClusterConfiguration", ""), kcp, cluster)
        if new is not None:
            await wl.merge_patch(CONFIG_MAP, "kube-system", rk.KUBEADM_CONFIG_MAP, {
                "metadata": {"resourceVersion": cm["metadata"]["resourceVersion"]},
                "data": {"ClusterConfiguration": new}})
            log.info("updated the workload kubeadm-config of %s/%s", cluster["metadata"]["namespace"],
                     cluster["metadata"]["name"])
    except KubeError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - workload API unreachable: retried
        return f"{e.__class__.__name__}: {e}"
    return None


# --- the main pass ------------------------------------------------------------------------------

async def _reconcile(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], st: _Conds) -> Result | None:
    kube = ctx.kube
    ns, cname = cluster["metadata"]["namespace"], cluster["metadata"]["name"]
    poll = Result(requeue_after=ctx.settings.poll_seconds)
    owner = contract.owner_ref(kcp)
    try:
        found = await lookup_or_generate_certs(kube, ns, cname, owner)
    except KubeError as e:
        st.set(rk.CERTIFICATES_AVAILABLE, False, "InternalError", f"Cannot generate certificates: {e}")
        raise
    problems = [m for p, kp in found.items() if (m := certs_mod.validate_keypair(p, kp))]
    if problems:
        st.set(rk.CERTIFICATES_AVAILABLE, False, "InternalError", "; ".join(problems))
        await events.record(kube, kcp, "CertificatesCorrupted", "; ".join(problems))
        return None
    st.set(rk.CERTIFICATES_AVAILABLE, True, "Available")

    st.status["selector"] = rk.selector(cname)
    even = rk.even_replicas_message(kcp)
    if even:
        st.set(rk.REPLICAS_WARNING, True, "EvenReplicas", even)
    else:
        st.set(rk.REPLICAS_WARNING, False, "OddReplicas")

    machines = await _owned_machines(kube, kcp, cname)
    initialized = bool(contract.dig(st.status, "initialization", "controlPlaneInitialized"))
    w = _Workload()
    endpoint = contract.control_plane_endpoint(cluster)
    if endpoint is not None:
        await _ensure_kubeconfig(kube, kcp, cluster, found[certs_mod.CLUSTER_CA], endpoint)
        if machines:
            w = await _observe_workload(ctx, cluster)
            if w.reachable and w.nodes:
                initialized = True
    if initialized:
        await _record_certificate_expiries(kube, kcp, machines, w)
    views = await _views(kube, kcp, machines, w)
    _status(kcp, st, views, machines, initialized, w)

    if not cluster_infrastructure_provisioned(cluster):
        st.set(rk.SCALING_UP, False, "WaitingForClusterInfrastructure",
               "Waiting for Cluster status.initialization.infrastructureProvisioned")
        return None
    if endpoint is None:
        st.set(rk.SCALING_UP, False, "WaitingForControlPlaneEndpoint", "Waiting for Cluster spec.controlPlaneEndpoint")
        return None

    action = rk.next_action(kcp, cluster, views, initialized)
    if action.kind == "scale-up" and w.kube is not None:
        problem = await _sync_kubeadm_config(w.kube, kcp, cluster)
        if problem:
            st.set(rk.SCALING_UP, True, "ScalingUp", f"Cannot update kube-system/kubeadm-config: {problem}")
            return Result(requeue_after=15.0)
    if action.kind in ("create-init", "scale-up"):
        problem = await _create_machine(ctx, kcp, cluster, init=action.kind == "create-init",
                                        failure_domain=action.failure_domain)
        if problem:
            st.set(rk.SCALING_UP, True, "ScalingUp", f"Cannot create a Machine: {problem}")
            await events.record(kube, kcp, "MachineCreationFailed", problem)
            return Result(requeue_after=30.0)
        _progress(kcp, st, rk.next_action(kcp, cluster, await _restatus(ctx, kcp, cluster, st, initialized, w),
                                           initialized), await _live_count(ctx, kcp, cluster))
        return poll
    if action.kind == "scale-down":
        res = await _scale_down(ctx, kcp, cluster, views, action, w, st)
        if res is None:
            views2 = await _restatus(ctx, kcp, cluster, st, initialized, w)
            _progress(kcp, st, rk.next_action(kcp, cluster, views2, initialized), len(views2))
            res = poll
        return res
    if action.kind == "wait":
        _progress(kcp, st, action, len(views))
        return poll
    # steady: keep health fresh without writing anything when nothing changes
    return Result(requeue_after=max(ctx.settings.poll_seconds, 30.0)) if views else None


async def _restatus(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], st: _Conds, initialized: bool,
                    w: _Workload) -> list[rk.MachineView]:
    """Recompute the status after a step so it reflects the Machine just created / deleted (and equals
    what the next pass will compute, so that pass writes nothing)."""
    machines = await _owned_machines(ctx.kube, kcp, cluster["metadata"]["name"])
    views = await _views(ctx.kube, kcp, machines, w)
    _status(kcp, st, views, machines, initialized, w)
    return views


async def _live_count(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any]) -> int:
    return len(await _owned_machines(ctx.kube, kcp, cluster["metadata"]["name"]))


def _progress(kcp: dict[str, Any], st: _Conds, action: rk.Action, machines: int) -> None:
    """Add what a scaling / rollout step waits for to ScalingUp / ScalingDown."""
    if action.kind != "wait":
        return
    want = rk.replicas(kcp)
    if machines > want or action.reason == "WaitingForMachineDeletion":
        st.set(rk.SCALING_DOWN, True, "ScalingDown", f"Scaling down from {machines} to {want} replicas; "
                                                     f"{action.message}")
    elif machines < want or action.rollout:
        st.set(rk.SCALING_UP, True, "ScalingUp", f"Scaling up from {machines} to {want} replicas; {action.message}")


async def _scale_down(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any], views: list[rk.MachineView],
                      action: rk.Action, w: _Workload, st: _Conds) -> Result | None:
    kube = ctx.kube
    ns = kcp["metadata"]["namespace"]
    target = next(v for v in views if v.name == action.machine)
    others = [v for v in views if v.name != target.name and not v.deleting and v.healthy]
    if target.node_name and others and w.kube is not None:
        try:
            done = await remove_etcd_member(w.kube, others[0].node_name, target.node_name)
            log.info("KCP %s/%s: %s", ns, kcp["metadata"]["name"], done)
        except Exception as e:  # noqa: BLE001 - reported on the condition, retried
            msg = f"Cannot remove the etcd member of Machine {target.name}: {e}"
            st.set(rk.SCALING_DOWN, True, "ScalingDown", msg)
            await events.record(kube, kcp, "EtcdMemberRemovalFailed", msg)
            return Result(requeue_after=15.0)
    m = await kube.get(MACHINE, ns, target.name)
    if m is not None:
        await kube.delete(MACHINE, ns, target.name, uid=m["metadata"].get("uid"))
    log.info("KCP %s/%s: deleting control-plane Machine %s", ns, kcp["metadata"]["name"], target.name)
    return None


def _status(kcp: dict[str, Any], st: _Conds, views: list[rk.MachineView], machines: list[dict[str, Any]],
            initialized: bool, w: _Workload) -> None:
    want = rk.replicas(kcp)
    live = [v for v in views if not v.deleting]
    s = st.status
    s["replicas"] = len(views)
    s["readyReplicas"] = sum(1 for v in views if v.ready)
    s["availableReplicas"] = sum(1 for v in views if v.available)
    s["upToDateReplicas"] = sum(1 for v in views if v.up_to_date)
    ver = rk.min_version([str(contract.dig(m, "spec", "version") or "") for m in machines])
    if ver:
        s["version"] = ver
    if initialized:
        s["initialization"] = {**(s.get("initialization") or {}), "controlPlaneInitialized": True}
        st.set(rk.INITIALIZED, True, "Initialized")
    else:
        st.set(rk.INITIALIZED, False, "NotInitialized", "Control plane not yet initialized")

    ready = [v for v in views if v.ready]
    if initialized and live and len(ready) > len(live) // 2:
        st.set(rk.AVAILABLE, True, "Available")
    else:
        st.set(rk.AVAILABLE, False, "NotAvailable",
               "Control plane not yet initialized" if not initialized
               else f"{len(ready)} of {len(live)} control-plane machines ready: no quorum")

    if not views:
        st.set(rk.MACHINES_READY, True, "NoReplicas")
        st.set(rk.MACHINES_UP_TO_DATE, True, "NoReplicas")
    else:
        not_ready = sorted(v.name for v in views if not v.ready)
        st.set(rk.MACHINES_READY, not not_ready, "NotReady" if not_ready else "Ready",
               f"Machine {', '.join(not_ready)} not ready" if not_ready else "")
        outdated = [v for v in views if not v.up_to_date]
        msg = "; ".join(f"{v.name}: {', '.join(v.outdated_reasons)}" for v in outdated)
        st.set(rk.MACHINES_UP_TO_DATE, not outdated, "NotUpToDate" if outdated else "UpToDate", msg)
    outdated = [v for v in live if not v.up_to_date]
    if outdated:
        st.set(rk.ROLLING_OUT, True, "RollingOut",
               f"Rolling out {len(outdated)} not up-to-date replicas: "
               + "; ".join(sorted({r for v in outdated for r in v.outdated_reasons})))
    else:
        st.set(rk.ROLLING_OUT, False, "NotRollingOut")
    if len(live) < want:
        st.set(rk.SCALING_UP, True, "ScalingUp", f"Scaling up from {len(live)} to {want} replicas")
    else:
        st.set(rk.SCALING_UP, False, "NotScalingUp")
    if len(live) > want or any(v.deleting for v in views):
        st.set(rk.SCALING_DOWN, True, "ScalingDown", f"Scaling down from {len(views)} to {want} replicas")
    else:
        st.set(rk.SCALING_DOWN, False, "NotScalingDown")

    if not initialized or not views:
        st.set(rk.ETCD_CLUSTER_HEALTHY, conditions.UNKNOWN, "HealthUnknown", "Control plane not yet initialized")
        st.set(rk.COMPONENTS_HEALTHY, conditions.UNKNOWN, "HealthUnknown", "Control plane not yet initialized")
    elif not w.reachable:
        msg = f"The workload cluster API is not reachable: {w.error}"
        st.set(rk.ETCD_CLUSTER_HEALTHY, conditions.UNKNOWN, "ConnectionDown", msg)
        st.set(rk.COMPONENTS_HEALTHY, conditions.UNKNOWN, "ConnectionDown", msg)
    else:
        bad_etcd = sorted(v.name for v in live if not v.pods_ready.get("etcd"))
        st.set(rk.ETCD_CLUSTER_HEALTHY, not bad_etcd, "NotHealthy" if bad_etcd else "Healthy",
               f"etcd not running/ready on Machine {', '.join(bad_etcd)}" if bad_etcd else "")
        bad = sorted(f"{v.name} ({', '.join(p for p in rk.STATIC_PODS[:3] if not v.pods_ready.get(p))})"
                     for v in live if not all(v.pods_ready.get(p) for p in rk.STATIC_PODS[:3]))
        st.set(rk.COMPONENTS_HEALTHY, not bad, "NotHealthy" if bad else "Healthy",
               f"Control plane components not healthy on {'; '.join(bad)}" if bad else "")
    fix = sorted(v.name for v in live if v.remediate)
    if fix:
        st.set(rk.REMEDIATING, True, "Remediating", f"Machine {', '.join(fix)} marked for remediation by a "
                                                   "MachineHealthCheck")
    else:
        st.set(rk.REMEDIATING, False, "NotRemediating")
    st.set(rk.DELETING, False, "NotDeleting")


# --- deletion -----------------------------------------------------------------------------------

async def _delete(ctx: Ctx, kcp: dict[str, Any], cluster: dict[str, Any] | None) -> Result | None:
    kube = ctx.kube
    md = kcp["metadata"]
    ns = md["namespace"]
    if FINALIZER_KCP not in (md.get("finalizers") or []):
        return None
    cname = cluster["metadata"]["name"] if cluster else (md.get("labels") or {}).get(CLUSTER_NAME)
    st = _Conds(kcp)
    if cname:
        everything = await kube.list(MACHINE, ns, labels={CLUSTER_NAME: cname})
        workers = [m for m in everything if CONTROL_PLANE not in (m["metadata"].get("labels") or {})]
        ours = await _owned_machines(kube, kcp, cname)
        if workers:
            st.set(rk.DELETING, True, "WaitingForWorkersDeletion",
                   f"Waiting for worker Machines to be deleted ({len(workers)} left)")
            await kube.update_status(KUBEADM_CONTROL_PLANE, kcp, st.final())
            return Result(requeue_after=ctx.settings.poll_seconds)
        if ours:
            for m in ours:
                if not m["metadata"].get("deletionTimestamp"):
                    await kube.delete(MACHINE, ns, m["metadata"]["name"], uid=m["metadata"].get("uid"))
            st.set(rk.DELETING, True, "WaitingForMachineDeletion",
                   f"Deleting control-plane Machines ({', '.join(sorted(m['metadata']['name'] for m in ours))})")
            await kube.update_status(KUBEADM_CONTROL_PLANE, kcp, st.final())
            return Result(requeue_after=ctx.settings.poll_seconds)
    await lifecycle.remove_finalizer(kube, KUBEADM_CONTROL_PLANE, kcp, FINALIZER_KCP)
    return None


# --- wiring -------------------------------------------------------------------------------------

def _cluster_to_kcp(obj: dict[str, Any], cache: Reader) -> list[tuple[str, str]]:
    r = contract.ref(obj, "spec", "controlPlaneRef")
    if r and r["kind"] == "KubeadmControlPlane":
        return [(obj["metadata"].get("namespace") or "", r["name"])]
    return []


def controller() -> Controller:
    watches: list[tuple[Any, Mapper]] = [(MACHINE, owner_mapper("KubeadmControlPlane")), (CLUSTER, _cluster_to_kcp)]
    return Controller(gvk=KUBEADM_CONTROL_PLANE, reconcile=reconcile, watches=watches)
