"""The registry of discovered handlers (upstream internal/runtime/registry): cold until warmed up, all-or-nothing
per ExtensionConfig, lookup by hook and name, namespaceSelector."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import runtime_hooks as rh
from capd_py.reconcile.runtime_sdk.registry import Registry, RegistryError, namespace_selected, parse_group_version

pytestmark = pytest.mark.unit
API = rh.API_VERSION


def ec(name: str, *handlers: tuple[str, str], selector: dict[str, Any] | None = None, rv: str = "1",
       **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "runtime.cluster.x-k8s.io/v1beta2", "kind": "ExtensionConfig",
            "metadata": {"name": name, "resourceVersion": rv},
            "spec": {"clientConfig": {"url": f"https://{name}.example:8443"},
                     "namespaceSelector": selector or {}, "settings": {"k": "v"}},
            "status": {"handlers": [{"name": f"{h}.{name}", "requestHook": {"apiVersion": extra.get("api", API),
                                                                            "hook": hook},
                                     "timeoutSeconds": 5, "failurePolicy": "Ignore"} for h, hook in handlers]}}


def test_cold_registry_answers_nothing() -> None:
    r = Registry()
    assert not r.ready
    for call in (lambda: r.list("BeforeClusterCreate"), lambda: r.get("a.b"), lambda: r.add(ec("e")),
                 lambda: r.remove("e")):
        with pytest.raises(RegistryError, match="warmed up|not yet ready"):
            call()


def test_warm_up_then_lookup_by_hook_and_name() -> None:
    r = Registry()
    r.warm_up([ec("e1", ("create", "BeforeClusterCreate"), ("vars", "DiscoverVariables")),
               ec("e2", ("create", "BeforeClusterCreate"))])
    assert r.ready
    assert [x.name for x in r.list("BeforeClusterCreate")] == ["create.e1", "create.e2"]
    got = r.get("vars.e1")
    assert (got.handler, got.extension_config, got.hook, got.group, got.version) == (
        "vars", "e1", "DiscoverVariables", rh.GROUP, rh.VERSION)
    assert got.timeout == 5 and got.ignore_errors and dict(got.settings) == {"k": "v"}
    with pytest.raises(RegistryError, match='handler with name "nope.e1" has not been registered'):
        r.get("nope.e1")
    with pytest.raises(RegistryError, match="already been warmed up"):
        r.warm_up([])


def test_add_replaces_an_extension_configs_handlers_and_remove_drops_them() -> None:
    r = Registry()
    r.warm_up([ec("e1", ("a", "BeforeClusterCreate"), ("b", "BeforeClusterDelete"))])
    r.add(ec("e1", ("c", "BeforeClusterCreate")))
    assert r.names() == ["c.e1"]
    r.remove("e1")
    assert r.names() == []


def test_an_unparsable_api_version_keeps_the_whole_extension_config_out() -> None:
    r = Registry()
    r.warm_up([ec("good", ("a", "BeforeClusterCreate"))])
    bad = ec("bad", ("x", "BeforeClusterCreate"), api="a/b/c")
    with pytest.raises(RegistryError, match='failed to add ExtensionConfig "bad" to registry: failed to add '
                                            'extension handler "x.bad"'):
        r.add(bad)
    assert r.names() == ["a.good"]
    cold = Registry()
    with pytest.raises(RegistryError, match="failed to warm up registry"):
        cold.warm_up([ec("good", ("a", "BeforeClusterCreate")), bad])
    assert not cold.ready and cold.names() == []


def test_timeout_and_policy_defaults() -> None:
    r = Registry()
    e = ec("e", ("a", "BeforeClusterCreate"))
    e["status"]["handlers"][0].pop("timeoutSeconds")
    e["status"]["handlers"][0].pop("failurePolicy")
    r.warm_up([e])
    got = r.get("a.e")
    assert got.timeout == rh.DEFAULT_TIMEOUT_SECONDS and not got.ignore_errors


def test_namespace_selector() -> None:
    r = Registry()
    r.warm_up([ec("all", ("a", "BeforeClusterCreate")),
               ec("some", ("a", "BeforeClusterCreate"), selector={"matchLabels": {"team": "a"}})])
    everyone, some = r.get("a.all"), r.get("a.some")
    assert namespace_selected(everyone, "gone", None)  # an empty selector never reads the namespace
    assert namespace_selected(some, "ns", {"team": "a"})
    assert not namespace_selected(some, "ns", {"team": "b"})
    with pytest.raises(RegistryError, match='failed to get namespace gone'):
        namespace_selected(some, "gone", None)


def test_an_invalid_namespace_selector_is_refused() -> None:
    r = Registry()
    r.warm_up([])
    bad = ec("e", ("a", "BeforeClusterCreate"),
             selector={"matchExpressions": [{"key": "x", "operator": "In", "values": []}]})
    with pytest.raises(RegistryError, match="failed to create namespaceSelector"):
        r.add(bad)


def test_parse_group_version() -> None:
    assert parse_group_version("") == ("", "")
    assert parse_group_version("v1") == ("", "v1")
    assert parse_group_version("a.b/v1") == ("a.b", "v1")
    with pytest.raises(ValueError, match="unexpected GroupVersion string"):
        parse_group_version("a/b/c")
