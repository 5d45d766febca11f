"""KubeadmConfig phase decisions, the init lock and bootstrap-token maths."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest

from capd_py.reconcile import kubeadmconfig as kc

try:
    from bootstrap_fixtures import cluster, config, machine
except ImportError:  # pragma: no cover - when tests/unit/reconcile becomes a package
    from .bootstrap_fixtures import cluster, config, machine  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
TTL = kc.DEFAULT_TOKEN_TTL


def test_waits_for_owner_cluster_infra_endpoint() -> None:
    assert kc.decide(config(), None, cluster()).action == kc.WAIT_OWNER
    assert kc.decide(config(), machine(), None).action == kc.WAIT_CLUSTER
    c = cluster()
    c["status"]["initialization"]["infrastructureProvisioned"] = False
    assert kc.decide(config(), machine(), c).action == kc.WAIT_INFRA
    c = cluster()
    del c["spec"]["controlPlaneEndpoint"]
    assert kc.decide(config(), machine(), c).action == kc.WAIT_ENDPOINT


def test_paused_and_ignition() -> None:
    c = cluster()
    c["spec"]["paused"] = True
    assert kc.decide(config(), machine(), c).action == kc.PAUSED
    cfg = config()
    cfg["spec"]["format"] = "ignition"
    p = kc.decide(cfg, machine(), cluster())
    assert p.action == kc.NOT_SUPPORTED and "ignition" in p.message


def test_init_candidates_are_control_plane_machines() -> None:
    assert kc.decide(config(), machine(), cluster()).action == kc.INIT
    assert kc.decide(config(), machine(control_plane=False), cluster()).action == kc.WAIT_CP_INIT
    # upstream: any control-plane machine may init; the init lock decides which one does
    assert kc.decide(config({"format": "cloud-config"}), machine(), cluster()).action == kc.INIT


def test_join_after_initialization() -> None:
    c = cluster(initialization={"infrastructureProvisioned": True, "controlPlaneInitialized": True})
    assert kc.decide(config(), machine(), c).action == kc.JOIN_CONTROL_PLANE
    assert kc.decide(config(), machine(control_plane=False), c).action == kc.JOIN_WORKER
    c2 = cluster(conditions=[{"type": "ControlPlaneInitialized", "status": "True"}])
    assert kc.decide(config(), machine(control_plane=False), c2).action == kc.JOIN_WORKER


def test_done_and_adopt() -> None:
    done = config(dataSecretName="m1", initialization={"dataSecretCreated": True})
    assert kc.decide(done, machine(), cluster()).action == kc.DONE
    m = machine()
    m["spec"]["bootstrap"]["dataSecretName"] = "m1"
    assert kc.decide(config(), m, cluster()).action == kc.ADOPT


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


def test_token_format_and_secret() -> None:
    t = kc.new_token()
    assert kc.TOKEN_RE.match(t)
    assert kc.new_token() != t
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
