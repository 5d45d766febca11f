from __future__ import annotations

import pytest

from capd_py.reconcile import haproxy

pytestmark = pytest.mark.unit


def test_render_backends_sorted_with_weights() -> None:
    cfg = haproxy.render([haproxy.Backend("c-cp-b", "172.18.0.4", 0), haproxy.Backend("c-cp-a", "172.18.0.3")])
    lines = [ln.strip() for ln in cfg.splitlines()]
    assert "bind *:6443" in lines
    assert "mode tcp" in lines
    assert "option httpchk GET /healthz" in lines
    servers = [ln for ln in lines if ln.startswith("server ")]
    assert servers == [
        "server c-cp-a 172.18.0.3:6443 weight 100 check check-ssl verify none",
        "server c-cp-b 172.18.0.4:6443 weight 0 check check-ssl verify none",
    ]


def test_render_is_deterministic_and_ipv6() -> None:
    b = [haproxy.Backend("x", "fd00::2"), haproxy.Backend("y", "10.0.0.2")]
    assert haproxy.render(b) == haproxy.render(list(reversed(b)))
    cfg = haproxy.render(b, ipv6=True)
    assert "bind :::6443 v6only" in cfg
    assert "server x [fd00::2]:6443" in cfg


def test_render_no_backends_and_skips_addressless() -> None:
    cfg = haproxy.render([haproxy.Backend("n", "")])
    assert "\n  server " not in cfg
    assert "backend kube-apiservers" in cfg


def test_reloads_on_sighup_reads_the_masters_caught_signals() -> None:
    starting = b"Name:\thaproxy\nSigIgn:\t0000000000000000\nSigCgt:\t0000000000000000\n"
    running = b"Name:\thaproxy\nSigIgn:\t0000000000001000\nSigCgt:\t0000000000014003\n"  # HUP, INT, USR2, TERM
    assert not haproxy.reloads_on_sighup(starting)
    assert haproxy.reloads_on_sighup(running)
    assert not haproxy.reloads_on_sighup(b"SigCgt:\t0000000000004002\n")  # INT and TERM only
    # a runtime that cannot show the status: the reload is sent
    assert haproxy.reloads_on_sighup(None) and haproxy.reloads_on_sighup(b"Name:\tx\n")
