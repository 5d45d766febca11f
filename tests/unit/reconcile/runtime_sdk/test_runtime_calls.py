"""The pure parts of a hook call: URLs, settings, success, aggregation (upstream internal/runtime/client)."""

from __future__ import annotations

import pytest

from capd_py.api import runtime_hooks as rh
from capd_py.reconcile.runtime_sdk.calls import CallError, aggregate, status_error, url_for, with_settings

pytestmark = pytest.mark.unit


def test_url_from_url_and_service() -> None:
    assert url_for({"url": "https://ext.example:8443"}, "BeforeClusterCreate", "Create") == \
        "https://ext.example:8443/hooks.runtime.cluster.x-k8s.io/v1alpha1/beforeclustercreate/create"
    # a path in the URL is a prefix
    assert url_for({"url": "https://h/prefix/"}, "Discovery") == \
        "https://h/prefix/hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery"
    assert url_for({"service": {"name": "ext", "namespace": "sys", "port": 9443, "path": "/p"}},
                   "AfterControlPlaneInitialized", "after") == \
        "https://ext.sys.svc:9443/p/hooks.runtime.cluster.x-k8s.io/v1alpha1/aftercontrolplaneinitialized/after"
    assert url_for({"service": {"name": "ext", "namespace": "sys"}}) == "https://ext.sys.svc"
    with pytest.raises(CallError, match="expected https scheme, got http"):
        url_for({"url": "http://h"}, "Discovery")
    with pytest.raises(CallError, match="at least one of service and url"):
        url_for({}, "Discovery")


def test_settings_under_the_requests_own() -> None:
    req = {"kind": "BeforeClusterCreateRequest", "settings": {"a": "request"}}
    out = with_settings(req, {"a": "config", "b": "config"})
    assert out["settings"] == {"a": "request", "b": "config"}
    assert req == {"kind": "BeforeClusterCreateRequest", "settings": {"a": "request"}}  # not changed


def test_status_error_leaves_the_extensions_message_out() -> None:
    assert status_error({"status": "Success"}, "call extension handler", "h.e") is None
    assert status_error({"status": "Failure", "message": "unique 123"}, "call extension handler", "h.e") == (
        'failed to call extension handler "h.e": got failure response, please check controller logs for errors')
    assert "got unknown response status \"Maybe\"" in str(status_error({"status": "Maybe"}, "discover extension",
                                                                      "e"))


def test_aggregate_lowest_non_zero_retry_and_joined_messages() -> None:
    got = aggregate(rh.BEFORE_CLUSTER_UPGRADE, [
        ("a.e", {"status": "Success", "retryAfterSeconds": 0, "message": "a ok"}),
        ("b.e", {"status": "Success", "retryAfterSeconds": 30}),
        ("c.e", {"status": "Success", "retryAfterSeconds": 10, "message": "c waits"}),
    ])
    assert (got.status, got.retry_after_seconds, got.message, got.blocking) == ("Success", 10, "a ok, c waits", True)
    assert [n for n, _ in got.responses] == ["a.e", "b.e", "c.e"]
    # a non-blocking hook has no retryAfterSeconds to aggregate
    assert aggregate(rh.AFTER_CONTROL_PLANE_INITIALIZED, [("a.e", {"retryAfterSeconds": 5})]).retry_after_seconds == 0
    assert aggregate(rh.BEFORE_CLUSTER_CREATE, []).status == "Success"
