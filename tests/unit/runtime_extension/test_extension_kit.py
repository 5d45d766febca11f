"""The kit's Extension: registration rules (upstream's discovery validation), discovery, dispatch of a body to a
handler (sync and async), and errors as Failure responses."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from capd_py.api import runtime_hooks
from capd_py.runtime_extension import Extension, ExtensionError
from capd_py.runtime_extension.types import BeforeClusterCreateRequest, BeforeClusterCreateResponse

pytestmark = pytest.mark.unit

API = "hooks.runtime.cluster.x-k8s.io/v1alpha1"


def test_discovery_lists_every_handler_in_registration_order_with_only_the_options_given() -> None:
    ext = Extension()
    ext.add("BeforeClusterCreate", "before-cluster-create", lambda r: None, timeout_seconds=5,
            failure_policy="Ignore")
    ext.add(runtime_hooks.GENERATE_PATCHES, "generate-patches", lambda r: None)
    assert ext.discovery() == {
        "apiVersion": API, "kind": "DiscoveryResponse", "status": "Success", "handlers": [
            {"name": "before-cluster-create", "requestHook": {"apiVersion": API, "hook": "BeforeClusterCreate"},
             "timeoutSeconds": 5, "failurePolicy": "Ignore"},
            {"name": "generate-patches", "requestHook": {"apiVersion": API, "hook": "GeneratePatches"}}]}
    assert [r.path for r in ext.registrations] == [
        f"/{API}/beforeclustercreate/before-cluster-create", f"/{API}/generatepatches/generate-patches"]


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    (("NoSuchHook", "x"), {}, "does not exist in the Runtime SDK catalog"),
    (("Discovery", "x"), {}, "answered by the extension itself"),
    (("BeforeClusterCreate", "Bad_Name"), {}, "is not valid: a DNS-1123 label"),
    (("BeforeClusterCreate", "a" * 64), {}, "is not valid"),
    (("BeforeClusterCreate", "x"), {"timeout_seconds": 31}, "timeoutSeconds 31 must be between 0 and 30"),
    (("BeforeClusterCreate", "x"), {"failure_policy": "Maybe"}, 'failurePolicy Maybe must equal "Ignore" or "Fail"'),
])
def test_registration_refuses_what_the_core_would_refuse_in_discovery(args: tuple[str, str], kwargs: dict[str, Any],
                                                                     message: str) -> None:
    with pytest.raises(ExtensionError, match=message):
        Extension().add(*args, lambda r: None, **kwargs)


def test_handler_names_are_unique_across_hooks() -> None:
    ext = Extension()
    ext.add("BeforeClusterCreate", "same", lambda r: None)
    with pytest.raises(ExtensionError, match="already a handler named 'same'"):
        ext.add("BeforeClusterDelete", "same", lambda r: None)


async def test_a_typed_sync_handler_gets_the_request_and_its_fields_complete_the_response() -> None:
    ext = Extension()
    seen: list[BeforeClusterCreateRequest] = []

    @ext.handler("BeforeClusterCreate", "gate")
    def gate(request: BeforeClusterCreateRequest) -> BeforeClusterCreateResponse:
        seen.append(request)
        return {"retryAfterSeconds": 7, "message": "not yet"}

    body = json.dumps({"apiVersion": API, "kind": "BeforeClusterCreateRequest", "settings": {"a": "b"},
                       "cluster": {"metadata": {"name": "c1", "namespace": "ns"}}})
    out = await ext.call(runtime_hooks.path("BeforeClusterCreate", "gate"), body.encode())
    assert out == {"apiVersion": API, "kind": "BeforeClusterCreateResponse", "status": "Success",
                   "message": "not yet", "retryAfterSeconds": 7}
    assert seen[0]["cluster"]["metadata"]["name"] == "c1" and seen[0]["settings"] == {"a": "b"}
    assert gate({"cluster": {}}) == {"retryAfterSeconds": 7, "message": "not yet"}  # still a plain function


async def test_an_async_handler_returning_nothing_is_a_success_with_retry_zero_on_blocking_hooks() -> None:
    ext = Extension()

    async def noop(_: dict[str, Any]) -> None:
        await asyncio.sleep(0)

    ext.add("BeforeClusterDelete", "noop", noop)
    ext.add("AfterControlPlaneInitialized", "noop-2", noop)
    assert await ext.call(runtime_hooks.path("BeforeClusterDelete", "noop"), b"{}") == {
        "apiVersion": API, "kind": "BeforeClusterDeleteResponse", "status": "Success", "retryAfterSeconds": 0}
    assert await ext.call(runtime_hooks.path("AfterControlPlaneInitialized", "noop-2"), b"{}") == {
        "apiVersion": API, "kind": "AfterControlPlaneInitializedResponse", "status": "Success"}


async def test_handler_errors_and_bad_bodies_are_failure_responses_with_the_message() -> None:
    ext = Extension()

    def broken(_: dict[str, Any]) -> None:
        raise RuntimeError("the database is gone")

    ext.add("ValidateTopology", "broken", broken)
    ext.add("DiscoverVariables", "wrong", lambda r: ["not", "a", "mapping"])
    path = runtime_hooks.path("ValidateTopology", "broken")
    assert await ext.call(path, b"{}") == {"apiVersion": API, "kind": "ValidateTopologyResponse",
                                           "status": "Failure", "message": "the database is gone"}
    bad = await ext.call(path, b"{not json")
    assert bad is not None and bad["status"] == "Failure"
    assert bad["message"].startswith("error unmarshalling request: ")
    not_object = await ext.call(path, b"[1]")
    assert not_object is not None and "expected a JSON object, got list" in not_object["message"]
    wrong = await ext.call(runtime_hooks.path("DiscoverVariables", "wrong"), b"{}")
    assert wrong is not None and wrong["status"] == "Failure" and "returned list" in wrong["message"]


async def test_discovery_is_answered_at_its_path_and_unknown_paths_are_none() -> None:
    ext = Extension()
    ext.add("BeforeClusterCreate", "x", lambda r: None)
    out = await ext.call(runtime_hooks.path("Discovery"), b"{}")
    assert out is not None and [h["name"] for h in out["handlers"]] == ["x"]
    assert await ext.call(runtime_hooks.path("BeforeClusterCreate", "y"), b"{}") is None


def test_manifest_settings_name_the_extension_config() -> None:
    ext = Extension(name="n", settings={"extensionConfigName": "{name}", "other": "v"})
    assert ext.manifest_settings("registered") == {"extensionConfigName": "registered", "other": "v"}
