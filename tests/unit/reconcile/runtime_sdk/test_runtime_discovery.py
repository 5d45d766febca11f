"""A Discovery answer: defaults and checks (upstream defaultAndValidateDiscoveryResponse) and status.handlers."""

from __future__ import annotations

from typing import Any

import pytest

from capd_py.api import runtime_hooks as rh
from capd_py.reconcile.runtime_sdk.discovery import DiscoveryError, status_handlers, validate

pytestmark = pytest.mark.unit


def handler(name: str, hook: str = "BeforeClusterCreate", **kw: Any) -> dict[str, Any]:
    return {"name": name, "requestHook": {"apiVersion": rh.API_VERSION, "hook": hook}, **kw}


def test_defaults_and_status_handlers() -> None:
    answer = {"status": "Success", "handlers": [handler("create"), handler("vars", "DiscoverVariables",
                                                                           timeoutSeconds=3, failurePolicy="Ignore")]}
    assert status_handlers("ext", answer) == [
        {"name": "create.ext", "requestHook": {"apiVersion": rh.API_VERSION, "hook": "BeforeClusterCreate"},
         "failurePolicy": "Fail", "timeoutSeconds": 10},
        {"name": "vars.ext", "requestHook": {"apiVersion": rh.API_VERSION, "hook": "DiscoverVariables"},
         "failurePolicy": "Ignore", "timeoutSeconds": 3},
    ]
    # timeoutSeconds 0 is allowed and stays unset (the CRD's minimum is 1; the client reads 0 as 10)
    assert "timeoutSeconds" not in status_handlers("ext", {"handlers": [handler("a", timeoutSeconds=0)]})[0]
    assert status_handlers("ext", {"status": "Success"}) == []


@pytest.mark.parametrize(("bad", "says"), [
    ([handler("a"), handler("a")], "duplicate name for handler a found"),
    ([handler("Not_A_Label")], "handler name Not_A_Label is not valid: [a lowercase RFC 1123 label"),
    ([handler("a", timeoutSeconds=31)], "handler a timeoutSeconds 31 must be between 0 and 30"),
    ([handler("a", failurePolicy="Maybe")], 'handler a failurePolicy Maybe must equal "Ignore" or "Fail"'),
    ([handler("a", "NoSuchHook")], "handler a requestHook hooks.runtime.cluster.x-k8s.io/v1alpha1/NoSuchHook is not "
                                   "in the Runtime SDK catalog"),
    ([{"name": "a", "requestHook": {"apiVersion": "x/y/z", "hook": "BeforeClusterCreate"}}],
     "handler a requestHook APIVersion x/y/z is not valid"),
])
def test_invalid_answers_are_refused(bad: list[dict[str, Any]], says: str) -> None:
    with pytest.raises(DiscoveryError) as e:
        validate({"handlers": bad})
    assert str(e.value).startswith("failed to validate discovery response: ") and says in str(e.value)


def test_several_problems_are_listed() -> None:
    with pytest.raises(DiscoveryError, match=r"response: \[duplicate name .*, handler a timeoutSeconds 99"):
        validate({"handlers": [handler("a"), handler("a", timeoutSeconds=99)]})
