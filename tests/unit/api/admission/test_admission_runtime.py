"""ExtensionConfig admission: upstream's webhook (internal/webhooks/extensionconfig.go), its defaults and rules."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.admission import admit
from capd_py.api.admission.runtime import default_extensionconfig, validate_extensionconfig

pytestmark = pytest.mark.unit
ON = {"RuntimeSDK": True}


def ec(name: str = "ext", **client: Any) -> dict[str, Any]:
    return {"apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig", "metadata": {"name": name},
            "spec": {"clientConfig": client or {"url": "https://ext.example:8443"}, "namespaceSelector": {}}}


def fields(obj: dict[str, Any], gates: dict[str, bool] = ON) -> list[str]:
    return [str(e) for e in validate_extensionconfig(None, obj, gates)]


def test_defaults() -> None:
    obj = ec(service={"name": "ext", "namespace": "sys"})
    del obj["spec"]["namespaceSelector"]
    out = default_extensionconfig(obj)
    assert out["spec"]["namespaceSelector"] == {} and out["spec"]["clientConfig"]["service"]["port"] == 443
    kept = default_extensionconfig(ec(service={"name": "ext", "namespace": "sys", "port": 8443}))
    assert kept["spec"]["clientConfig"]["service"]["port"] == 8443
    assert "service" not in default_extensionconfig(ec())["spec"]["clientConfig"]


def test_refused_while_the_gate_is_off() -> None:
    assert fields(ec(), {}) == ["spec: Forbidden: can be set only if the RuntimeSDK feature flag is enabled"]
    assert fields(ec()) == []


@pytest.mark.parametrize(("obj", "says"), [
    (ec(caBundle="eA=="), "spec.clientConfig: Required value: either url or service must be defined"),
    (ec(url="https://h", service={"name": "s", "namespace": "n"}),
     "spec.clientConfig: Forbidden: only one of url or service can be defined"),
    (ec(url="http://h"), "spec.clientConfig.url: Invalid value: \"http://h\": 'https' is the only allowed URL scheme"),
    (ec(url="no-scheme"), "spec.clientConfig.url: Invalid value: \"no-scheme\": must be a valid URL"),
    (ec(service={"name": "1bad", "namespace": "n"}), "spec.clientConfig.service.name: Invalid value: \"1bad\": a "
                                                     "DNS-1035 label"),
    (ec(service={"name": "s"}), "spec.clientConfig.service.namespace: Required value: must not be empty"),
    (ec(service={"name": "s", "namespace": "n", "path": "rel"}),
     "spec.clientConfig.service.path: Invalid value: \"rel\": must start with \"/\""),
    (ec(service={"name": "s", "namespace": "n", "port": 70000}),
     "spec.clientConfig.service.port: Invalid value: 70000: must be between 1 and 65535, inclusive"),
    (ec("Bad_Name"), "metadata.name: Invalid value: \"Bad_Name\": ExtensionConfig name should be a valid DNS1123 "
                     "label name"),
])
def test_refusals(obj: dict[str, Any], says: str) -> None:
    assert any(f.startswith(says) for f in fields(obj)), fields(obj)


def test_namespace_selector_must_be_there_and_parse() -> None:
    obj = ec()
    del obj["spec"]["namespaceSelector"]
    assert "spec.namespaceSelector: Required value: must be defined" in fields(obj)
    obj["spec"]["namespaceSelector"] = {"matchExpressions": [{"key": "a", "operator": "In"}]}
    assert any(f.startswith("spec.namespaceSelector: Invalid value") for f in fields(obj))


def test_review_defaults_then_refuses_with_upstreams_status() -> None:
    def review(obj: dict[str, Any]) -> dict[str, Any]:
        return {"request": {"uid": "u", "operation": "CREATE", "object": obj, "name": obj["metadata"]["name"],
                            "resource": {"group": "runtime.cluster.x-k8s.io", "version": "v1beta2",
                                         "resource": "extensionconfigs"}}}
    obj = ec(service={"name": "ext", "namespace": "sys"})
    patched = admit(review(obj), mutate=True, gates=ON)["response"]
    assert patched["allowed"] and patched["patchType"] == "JSONPatch"
    refused = admit(review(ec(url="http://h")), mutate=False, gates=ON)["response"]
    assert not refused["allowed"] and refused["status"]["code"] == 422
    assert refused["status"]["message"].startswith('ExtensionConfig.runtime.cluster.x-k8s.io "ext" is invalid: '
                                                   "spec.clientConfig.url")
    assert not admit(review(ec()), mutate=False, gates={})["response"]["allowed"]
