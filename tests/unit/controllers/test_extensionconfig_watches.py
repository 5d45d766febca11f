"""The ExtensionConfig controller's watches: a Secret reaches the ExtensionConfigs whose inject-ca annotation names
it; Namespaces are watched only to be cached (namespaceSelector reads their labels)."""

from __future__ import annotations

import pytest

from capd_py.api.gvk import EXTENSION_CONFIG, NAMESPACE, SECRET
from capd_py.api.runtime_hooks import INJECT_CA_FROM_SECRET_ANNOTATION
from capd_py.controllers import extensionconfig
from capd_py.kube.cache import Store

pytestmark = pytest.mark.unit


def test_secret_maps_to_the_extension_configs_naming_it() -> None:
    store = Store()
    store.serve(EXTENSION_CONFIG)
    for name, ann in (("a", "sys/ca"), ("b", "other/ca"), ("c", None), ("d", "not-namespaced")):
        md = {"name": name, "resourceVersion": "1", **({"annotations": {INJECT_CA_FROM_SECRET_ANNOTATION: ann}}
                                                        if ann else {})}
        store.observe(EXTENSION_CONFIG, {"apiVersion": EXTENSION_CONFIG.api_version, "kind": "ExtensionConfig",
                                         "metadata": md})
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "ca", "namespace": "sys"}}
    assert extensionconfig.secret_to_extension_configs(secret, store) == [("", "a")]


def test_controller_watches() -> None:
    c = extensionconfig.controller()
    assert c.gvk == EXTENSION_CONFIG and c.key == "ExtensionConfig"
    assert {g.kind for g, _ in c.watches} == {SECRET.kind, NAMESPACE.kind}
    ns_mapper = next(m for g, m in c.watches if g == NAMESPACE)
    assert list(ns_mapper({"metadata": {"name": "x"}}, Store())) == []
