"""ExtensionConfig v1alpha1 <-> v1beta2 (upstream api/runtime/v1alpha1/conversion.go): v1alpha1 is the spoke."""

from __future__ import annotations

import pytest

from capd_py.api.conversion import ConversionError, convert, from_hub, spoke_version, to_hub

pytestmark = pytest.mark.unit


def test_spoke_is_v1alpha1() -> None:
    assert spoke_version("runtime.cluster.x-k8s.io", "ExtensionConfig") == "v1alpha1"
    assert spoke_version("cluster.x-k8s.io", "Cluster") == "v1beta1"


def test_status_layout_and_pointers() -> None:
    spoke = {"apiVersion": "runtime.cluster.x-k8s.io/v1alpha1", "kind": "ExtensionConfig",
             "metadata": {"name": "ext"},
             "spec": {"clientConfig": {"url": "https://h"}, "namespaceSelector": {}},
             "status": {"handlers": [{"name": "a.ext", "requestHook": {"apiVersion": "v", "hook": "h"}}],
                        "conditions": [{"type": "Discovered", "status": "True", "lastTransitionTime": "t"}],
                        "v1beta2": {"conditions": [{"type": "Discovered", "status": "True", "reason": "Discovered",
                                                    "message": "", "lastTransitionTime": "t"}]}}}
    hub = to_hub(spoke)
    assert hub["apiVersion"] == "runtime.cluster.x-k8s.io/v1beta2"
    assert hub["spec"]["namespaceSelector"] == {}  # an empty selector is a set pointer: kept
    assert hub["status"]["conditions"][0]["reason"] == "Discovered"
    assert hub["status"]["deprecated"]["v1beta1"]["conditions"][0]["type"] == "Discovered"
    assert from_hub(hub) == spoke
    # v1beta2's zero values become absent pointers going down
    hub["status"]["handlers"][0]["timeoutSeconds"] = 0
    hub["spec"]["clientConfig"] = {"url": "", "service": {"name": "s", "namespace": "n", "path": ""}}
    down = from_hub(hub)
    assert "timeoutSeconds" not in down["status"]["handlers"][0]
    assert down["spec"]["clientConfig"] == {"service": {"name": "s", "namespace": "n"}}
    assert convert(hub, "runtime.cluster.x-k8s.io/v1alpha1")["apiVersion"].endswith("/v1alpha1")
    with pytest.raises(ConversionError):
        convert(hub, "runtime.cluster.x-k8s.io/v1beta1")
