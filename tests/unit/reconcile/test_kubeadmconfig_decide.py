"""KubeadmConfig phase decisions, the init lock and bootstrap-token maths."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import json
from typing import Any

import pytest

from capd_py.reconcile import certs, coreutil
from capd_py.reconcile import kubeadmconfig as kc

try:
    from bootstrap_fixtures import cluster, cluster_certs, config, machine
except ImportError:  # pragma: no cover - when tests/unit/reconcile becomes a package
    from .bootstrap_fixtures import cluster, cluster_certs, config, machine  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
TTL = kc.DEFAULT_TOKEN_TTL


def _with(obj: dict[str, Any], *path_value: Any) -> dict[str, Any]:
    """`obj` (a copy) with the value at path set: _with(c, "spec", "paused", True)."""
    out = copy.deepcopy(obj)
    *path, last, value = path_value
    cur = out
    for k in path:
        cur = cur.setdefault(k, {})
    if value is _DROP:
        cur.pop(last, None)
    else:
        cur[last] = value
    return out


_DROP = object()
INITIALIZED = {"infrastructureProvisioned": True, "controlPlaneInitialized": True}
DONE: dict[str, Any] = {"dataSecretName": "m1", "initialization": {"dataSecretCreated": True}}
TOKEN = "abcdef.0123456789abcdef"
LOCK_M1 = kc.lock_configmap(cluster(), "m1")
LOCK_M2 = _with(kc.lock_configmap(cluster(), "m2"), "metadata", "uid", "lock-uid")


def _joined(cfg: dict[str, Any]) -> dict[str, Any]:
    return _with(cfg, "spec", "joinConfiguration", "discovery", "bootstrapToken", {"token": TOKEN})


def _pool(nodes: int) -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachinePool",
            "metadata": {"name": "mp", "namespace": "ns", "uid": "mp-uid"}, "spec": {"replicas": 1},
            "status": {"nodeRefs": [{"name": "n"}] * nodes}}


# one row per state: (what, Observed, the action decide returns)
TABLE: list[tuple[str, kc.Observed, kc.Action]] = [
    ("no owner yet", kc.Observed(config(), None, cluster()),
     kc.WaitForOwner(kc.WAIT_OWNER, "Waiting for the Machine controller to set the owner reference",
                     keep_existing=True)),
    ("no Cluster", kc.Observed(config(), machine(), None),
     kc.WaitForCluster(kc.WAIT_CLUSTER, "Waiting for the Cluster to exist", keep_existing=True)),
    ("ignition", kc.Observed(_with(config(), "spec", "format", "ignition"), machine(), cluster()),
     kc.FormatNotSupported(kc.REASON_FORMAT_NOT_SUPPORTED,
                           "format 'ignition' is not supported by capd-py; use cloud-config")),
    ("infrastructure not provisioned", kc.Observed(config(), machine(), cluster(initialization={})),
     kc.WaitForInfrastructure(kc.WAIT_INFRA,
                              "Waiting for Cluster status.initialization.infrastructureProvisioned to be true")),
    ("the owner names a data secret our status lost (move, restore)",
     kc.Observed(config(), _with(machine(), "spec", "bootstrap", "dataSecretName", "m1"), cluster()),
     kc.AdoptDataSecret("m1")),
    ("data secret created (init)", kc.Observed(config(**DONE), machine(), cluster()), kc.Ready("m1")),
    ("joined with a token, no node yet: keep it fresh", kc.Observed(_joined(config(**DONE)), machine(), cluster()),
     kc.RefreshToken("m1", TOKEN, pool=False)),
    ("joined with a token, the node is there",
     kc.Observed(_joined(config(**DONE)), _with(machine(), "status", {"nodeRef": {"name": "n1"}}), cluster()),
     kc.Ready("m1")),
    ("a MachinePool's token stays fresh with every node there", kc.Observed(_joined(config(**DONE)), _pool(1),
                                                                             cluster()),
     kc.RefreshToken("m1", TOKEN, pool=True)),
    ("no control-plane endpoint", kc.Observed(config(), machine(), _with(cluster(), "spec", "controlPlaneEndpoint",
                                                                         _DROP)),
     kc.WaitForEndpoint(kc.WAIT_ENDPOINT, "Waiting for Cluster spec.controlPlaneEndpoint to be set")),
    ("a worker before the control plane is initialised", kc.Observed(config(), machine(control_plane=False),
                                                                      cluster()),
     kc.WaitForControlPlaneInit(kc.WAIT_CP_INIT, "Waiting for Cluster control plane to be initialized",
                                requeue_after=30.0)),
    ("a MachinePool before the control plane is initialised", kc.Observed(config(), _pool(0), cluster()),
     kc.WaitForControlPlaneInit(kc.WAIT_CP_INIT, "Waiting for Cluster control plane to be initialized",
                                requeue_after=30.0)),
    # upstream: any control-plane machine is an init candidate; the init lock decides which one does
    ("control plane, no init lock", kc.Observed(config(), machine(), cluster()), kc.AcquireInitLock()),
    ("control plane holding the init lock", kc.Observed(config(), machine(), cluster(), LOCK_M1, True),
     kc.RenderInit()),
    ("control plane, another Machine holds the lock", kc.Observed(config(), machine(), cluster(), LOCK_M2, True),
     kc.WaitForInitLock(kc.REASON_WAITING_FOR_INIT_LOCK,
                        "Waiting for Machine m2 to initialize the control plane (init lock c1-lock)",
                        requeue_after=kc.WAIT_LOCK_SECONDS)),
    ("control plane, the lock's Machine is gone", kc.Observed(config(), machine(), cluster(), LOCK_M2, False),
     kc.ReleaseStaleLock("lock-uid")),
    ("control-plane join", kc.Observed(config(), machine(), cluster(initialization=INITIALIZED)),
     kc.RenderJoin(control_plane=True, release_lock=False)),
    ("control-plane join, the init lock still there",
     kc.Observed(config(), machine(), cluster(initialization=INITIALIZED), LOCK_M1, True),
     kc.RenderJoin(control_plane=True, release_lock=True)),
    ("worker join", kc.Observed(config(), machine(control_plane=False), cluster(initialization=INITIALIZED)),
     kc.RenderJoin(control_plane=False, release_lock=False)),
    ("worker join, initialised by the condition",
     kc.Observed(config(), machine(control_plane=False),
                 cluster(conditions=[{"type": "ControlPlaneInitialized", "status": "True"}])),
     kc.RenderJoin(control_plane=False, release_lock=False)),
    ("a worker configured as a control-plane join",
     kc.Observed(_with(config(), "spec", "joinConfiguration", "controlPlane", {}), machine(control_plane=False),
                 cluster(initialization=INITIALIZED), LOCK_M1, False),
     kc.InvalidJoin("Machine is a worker, but joinConfiguration.controlPlane is set", release_lock=True)),
]


@pytest.mark.parametrize(("what", "observed", "action"), TABLE, ids=[row[0] for row in TABLE])
def test_decide(what: str, observed: kc.Observed, action: kc.Action) -> None:
    assert kc.decide(observed) == action


def test_paused_stops_before_decide() -> None:
    # pause is the skeleton's (controllers/skeleton.py, coreutil.is_paused), before anything decide looks at
    c = cluster()
    c["spec"]["paused"] = True
    assert coreutil.is_paused(config(), c)
    assert coreutil.is_paused(_with(config(), "metadata", "annotations", {"cluster.x-k8s.io/paused": ""}), cluster())
    assert not coreutil.is_paused(config(), cluster())


def _cond(ctype: str, ok: bool, message: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": "True" if ok else "False", "reason": "R", "message": message}


DS, CA = kc.DATA_SECRET_AVAILABLE, kc.CERTIFICATES_AVAILABLE
READY_TABLE: list[tuple[str, list[dict[str, Any]], tuple[bool, str, str]]] = [
    ("nothing yet", [], (False, kc.REASON_NOT_READY, "Waiting for bootstrap data")),
    ("data secret, certificates not reported", [_cond(DS, True)], (True, kc.REASON_READY, "")),
    ("data secret and certificates", [_cond(DS, True), _cond(CA, True)], (True, kc.REASON_READY, "")),
    ("waiting for the data secret", [_cond(DS, False, "Waiting for X")],
     (False, kc.REASON_NOT_READY, "DataSecretAvailable: Waiting for X")),
    ("certificates missing say why first", [_cond(DS, False, "Generating"), _cond(CA, False, "no ca")],
     (False, kc.REASON_NOT_READY, "CertificatesAvailable: no ca")),
    ("a false condition without a message", [_cond(DS, False)], (False, kc.REASON_NOT_READY,
                                                                 "Waiting for bootstrap data")),
]


@pytest.mark.parametrize(("what", "conds", "want"), READY_TABLE, ids=[row[0] for row in READY_TABLE])
def test_ready_derivation(what: str, conds: list[dict[str, Any]], want: tuple[bool, str, str]) -> None:
    assert kc.ready(conds) == want


def test_status_builder_keeps_the_first_wait_for_owner_and_cluster() -> None:
    st = kc.BootstrapStatus(config())
    st.wait(kc.WaitForInfrastructure(kc.WAIT_INFRA, "infra"))
    st.wait(kc.WaitForCluster(kc.WAIT_CLUSTER, "cluster", keep_existing=True))
    out = st.final()
    by = {c["type"]: c for c in out["conditions"]}
    assert by[DS]["reason"] == kc.WAIT_INFRA and by["Ready"]["message"] == "DataSecretAvailable: infra"
    st.created("m1")
    out = st.final()
    assert out["dataSecretName"] == "m1" and out["initialization"] == {"dataSecretCreated": True}
    assert {c["type"]: c["status"] for c in out["conditions"]} == {DS: "True", CA: "True", "Ready": "True"}
    assert "Paused" not in {c["type"] for c in out["conditions"]}  # the skeleton adds it


def test_init_lock() -> None:
    c = cluster()
    cm = kc.lock_configmap(c, "m1")
    assert cm["metadata"]["name"] == "c1-lock"
    assert json.loads(cm["data"]["lock-information"]) == {"machineName": "m1"}
    assert cm["metadata"]["ownerReferences"][0]["kind"] == "Cluster"
    assert kc.lock_decision(None, "m1", False) == "acquire"
    assert kc.lock_decision(cm, "m1", True) == "held"
    assert kc.lock_decision(cm, "m2", True) == "wait"
    assert kc.lock_decision(cm, "m2", False) == "release-stale"
    assert kc.lock_holder(cm) == "m1"


def test_token_secret() -> None:
    t = "abcdef.0123456789abcdef"
    s = kc.token_secret(t, NOW, TTL)
    tid, sec = t.split(".")
    assert s["metadata"] == {"name": f"bootstrap-token-{tid}", "namespace": "kube-system"}
    assert s["type"] == "bootstrap.kubernetes.io/token"
    data = {k: base64.b64decode(v).decode() for k, v in s["data"].items()}
    assert data["token-id"] == tid and data["token-secret"] == sec
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == "system:bootstrappers:kubeadm:default-node-token"
    assert data["expiration"] == "2026-01-01T12:15:00Z"
    assert kc.parse_expiration(s) == NOW + TTL
    with pytest.raises(ValueError):
        kc.token_secret("bad", NOW)


def test_token_refresh_maths() -> None:
    # upstream: requeue every TTL/3; refresh once the token expires before now + TTL*5/6
    assert kc.refresh_interval(TTL) == dt.timedelta(minutes=5)
    assert kc.skip_refresh_if_expiring_after(TTL) == dt.timedelta(minutes=12, seconds=30)
    fresh = NOW + TTL
    assert not kc.token_needs_refresh(fresh, NOW, TTL)
    assert not kc.token_needs_refresh(fresh, NOW + dt.timedelta(minutes=2), TTL)   # 13 min left
    assert kc.token_needs_refresh(fresh, NOW + dt.timedelta(minutes=2, seconds=30), TTL)  # exactly 12.5 left
    assert kc.token_needs_refresh(fresh, NOW + dt.timedelta(minutes=5), TTL)  # first periodic check refreshes
    assert kc.token_needs_refresh(None, NOW, TTL)
    # checking every TTL/3 always refreshes before expiry, with a spare chance
    exp, t = fresh, NOW
    for _ in range(20):
        t += kc.refresh_interval(TTL)
        assert t < exp
        if kc.token_needs_refresh(exp, t, TTL):
            exp = t + TTL


def test_machine_has_node() -> None:
    m = machine()
    assert not kc.machine_has_node(m)
    m["status"] = {"nodeRef": {"name": "n1"}}
    assert kc.machine_has_node(m)


TOKEN_STEPS = [
    ("a Machine's token is gone", None, False, NOW, "gone"),
    ("a MachinePool's token is gone: a new one", None, True, NOW, "recreate"),
    ("fresh", kc.token_secret(TOKEN, NOW, TTL), False, NOW + dt.timedelta(minutes=2), "fresh"),
    ("nearly expired", kc.token_secret(TOKEN, NOW, TTL), False, NOW + dt.timedelta(minutes=5), "extend"),
]


@pytest.mark.parametrize(("what", "secret", "pool", "now", "kind"), TOKEN_STEPS, ids=[r[0] for r in TOKEN_STEPS])
def test_token_step(what: str, secret: dict[str, Any] | None, pool: bool, now: dt.datetime, kind: str) -> None:
    step = kc.token_step(secret, pool, now, TTL)
    assert step.kind == kind
    if kind == "extend":
        assert base64.b64decode(step.expiration).decode() == kc.token_expiration(now, TTL)


def test_discovery_fill_and_patch() -> None:
    ca = cluster_certs()["ca"].cert
    fill, needs_token = kc.discovery_fill(config()["spec"], cluster(), ca)
    assert needs_token and fill == {"apiServerEndpoint": "172.18.0.3:6443", "caCertHashes": [certs.ca_cert_hash(ca)]}
    cfg = _with(_joined(config()), "metadata", "resourceVersion", "7")
    cfg["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"].update(fill)
    assert kc.discovery_fill(cfg["spec"], cluster(), ca) == ({}, False)
    assert kc.discovery_fill(_with(config(), "spec", "joinConfiguration", "discovery",
                                   {"file": {"kubeConfigPath": "/k"}})["spec"], cluster(), ca) == ({}, False)
    patch = kc.discovery_patch(cfg, {"token": None})
    assert patch["metadata"] == {"resourceVersion": "7"}
    assert patch["spec"]["joinConfiguration"]["discovery"]["bootstrapToken"] == {**fill, "token": None}
