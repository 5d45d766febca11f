"""An ExtensionConfig's decisions: the caBundle the inject-ca annotation asks for, the status after discovery."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from capd_py.api import conditions as cond
from capd_py.api.runtime_hooks import INJECT_CA_FROM_SECRET_ANNOTATION
from capd_py.reconcile.runtime_sdk import extensionconfig as rec

pytestmark = pytest.mark.unit


def ec(annotation: str | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    md: dict[str, Any] = {"name": "ext", "generation": 3}
    if annotation is not None:
        md["annotations"] = {INJECT_CA_FROM_SECRET_ANNOTATION: annotation}
    return {"metadata": md, "spec": {"clientConfig": {"url": "https://h"}}, "status": status or {}}


def test_the_annotation_is_upstreams() -> None:
    assert INJECT_CA_FROM_SECRET_ANNOTATION == "runtime.cluster.x-k8s.io/inject-ca-from-secret"


def test_ca_secret_and_bundle() -> None:
    assert rec.ca_secret(ec()) is None
    ref = rec.ca_secret(ec("sys/ext-cert"))
    assert ref is not None and (ref.namespace, ref.name) == ("sys", "ext-cert")
    for bad in ("just-a-name", "/name", "ns/"):
        with pytest.raises(rec.CABundleError, match="must be in the form <namespace>/<name>"):
            rec.ca_secret(ec(bad))
    pem = base64.b64encode(b"PEM").decode()
    assert rec.ca_bundle(ref, {"data": {"ca.crt": pem, "tls.crt": "x"}}) == pem
    with pytest.raises(rec.CABundleError, match='does not contain a "ca.crt" entry'):
        rec.ca_bundle(ref, {"data": {"tls.crt": "x"}})
    with pytest.raises(rec.CABundleError, match='failed to get secret "sys/ext-cert"'):
        rec.ca_bundle(ref, None)
    assert rec.ca_pem({"caBundle": pem}) == b"PEM" and rec.ca_pem({}) == b""


def test_discovered_status() -> None:
    handlers = [{"name": "a.ext", "requestHook": {"apiVersion": "v", "hook": "h"}}]
    ok = rec.discovered_status(ec(), handlers, None)
    assert ok["handlers"] == handlers
    c = cond.get({"status": ok}, "Discovered")
    assert c is not None and (c["status"], c["reason"], c["observedGeneration"]) == ("True", "Discovered", 3)
    # a failed discovery keeps the handlers it had and says why
    failed = rec.discovered_status(ec(status=ok), None, "failed to discover extension \"ext\": boom")
    assert failed["handlers"] == handlers
    c = cond.get({"status": failed}, "Discovered")
    assert c is not None and (c["status"], c["reason"]) == ("False", "NotDiscovered")
    assert c["message"] == "Error in discovery: failed to discover extension \"ext\": boom"
    # no handlers any more: the list goes
    assert "handlers" not in rec.discovered_status(ec(status=ok), [], None)
