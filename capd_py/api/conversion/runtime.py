"""runtime.cluster.x-k8s.io: ExtensionConfig v1alpha1 <-> v1beta2 (upstream api/runtime/v1alpha1/conversion.go).

The spoke here is v1alpha1 (upstream serves runtime.cluster.x-k8s.io v1alpha1, deprecated, beside v1beta2; there is
no v1beta1). Same fields in both; the status layout moves as for the other kinds (v1alpha1's conditions are the
v1beta1-style ones, its status.v1beta2.conditions the new ones), and v1alpha1's pointers become values: a zero
timeoutSeconds and empty url / service.path are left out going down. No conversion data is stored (upstream's
ConvertTo/ConvertFrom store none)."""

from __future__ import annotations

from capd_py.api.conversion.fields import Obj, VersionResolver, get, items, status_down, status_up


def extensionconfig_up(obj: Obj) -> None:
    status_up(obj, deprecated=("conditions",), lifted=("conditions",))


def extensionconfig_down(obj: Obj, resolve: VersionResolver) -> None:
    status_down(obj, deprecated=("conditions",), lifted=("conditions",))
    for handler in items(obj, "status.handlers"):
        if handler.get("timeoutSeconds") == 0:
            del handler["timeoutSeconds"]
    client = get(obj, "spec.clientConfig")
    if isinstance(client, dict):
        if client.get("url") == "":
            del client["url"]
        service = client.get("service")
        if isinstance(service, dict) and service.get("path") == "":
            del service["path"]
