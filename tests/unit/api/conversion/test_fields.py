from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.conversion.fields import (
    ConversionError,
    args_down,
    args_up,
    default_resolver,
    drop_empty,
    duration_to_seconds,
    failure_domains_down,
    failure_domains_up,
    move,
    ref_down,
    ref_up,
    seconds_to_duration,
    status_down,
    status_up,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("text", "seconds"), [
    ("0s", 0), ("0", 0), ("45s", 45), ("10m0s", 600), ("10m", 600), ("1h0m0s", 3600), ("1.5h", 5400),
    ("2h45m30s", 9930), ("300ms", 0), ("1500ms", 1), ("90000000000ns", 90), ("-5s", -5), ("+5s", 5),
    ("1h1m1.9s", 3661),  # upstream truncates: int32(d.Seconds())
])
def test_go_durations_become_whole_seconds(text: str, seconds: int) -> None:
    assert duration_to_seconds(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "5 m", "1d", "m", "1h-5m", "abc"])
def test_invalid_durations_are_refused(text: str) -> None:
    with pytest.raises(ConversionError):
        duration_to_seconds(text)


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0s"), (45, "45s"), (60, "1m0s"), (600, "10m0s"), (3600, "1h0m0s"), (3661, "1h1m1s"), (90000, "25h0m0s"),
    (-90, "-1m30s"),
])
def test_seconds_print_as_go_prints_durations(seconds: int, text: str) -> None:
    assert seconds_to_duration(seconds) == text
    assert duration_to_seconds(text) == seconds


def test_extra_args_map_becomes_a_sorted_list_and_back() -> None:
    assert args_up({"v": "4", "audit-log-maxage": 30}) == [
        {"name": "audit-log-maxage", "value": "30"}, {"name": "v", "value": "4"}]
    assert args_down([{"name": "a", "value": "1"}, {"name": "b", "value": "2"}, {"name": "a", "value": "3"}]) == {
        "a": "3", "b": "2"}


def test_failure_domains_map_becomes_a_list_sorted_by_name() -> None:
    up = failure_domains_up({"fd2": {}, "fd1": {"controlPlane": True, "attributes": {"zone": "a"}}})
    assert up == [{"name": "fd1", "controlPlane": True, "attributes": {"zone": "a"}},
                  {"name": "fd2", "controlPlane": False}]
    assert failure_domains_down(up) == {"fd1": {"controlPlane": True, "attributes": {"zone": "a"}},
                                        "fd2": {"controlPlane": False}}


def test_object_references_lose_their_version_and_namespace() -> None:
    ref = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "DockerCluster", "name": "c",
           "namespace": "ns", "uid": "u"}
    hub = ref_up(ref)
    assert hub == {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "DockerCluster", "name": "c"}
    # Down-conversion names the group's current version (upstream asks the CRD's contract label).
    assert ref_down(hub, "ns", default_resolver) == {
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster", "namespace": "ns",
        "name": "c"}


def test_a_reference_to_an_unknown_group_needs_a_resolver() -> None:
    with pytest.raises(ConversionError, match="example.com"):
        ref_down({"apiGroup": "example.com", "kind": "Thing", "name": "t"}, "ns", default_resolver)
    assert ref_down({"apiGroup": "example.com", "kind": "Thing", "name": "t"}, None,
                    lambda group, kind: "v1alpha3")["apiVersion"] == "example.com/v1alpha3"
    # A third-party provider of the Cluster API contract: its contract version.
    assert default_resolver("infrastructure.example.cluster.x-k8s.io", "FooCluster") == "v1beta2"


def test_status_layout_moves_both_ways() -> None:
    v1beta1: dict[str, Any] = {"status": {
        "ready": True, "failureReason": "r",
        "conditions": [{"type": "Ready", "status": "True", "severity": ""}],
        "v1beta2": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]},
    }}
    layout: dict[str, Any] = {"deprecated": ("conditions", "failureReason"), "lifted": ("conditions",),
                              "initialization": {"ready": "provisioned"}}
    status_up(v1beta1, **layout)
    assert v1beta1 == {"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}],
        "initialization": {"provisioned": True},
        "deprecated": {"v1beta1": {"failureReason": "r",
                                   "conditions": [{"type": "Ready", "status": "True", "severity": ""}]}},
    }}
    status_down(v1beta1, **layout)
    assert v1beta1["status"] == {"ready": True, "failureReason": "r",
                                 "conditions": [{"type": "Ready", "status": "True", "severity": ""}],
                                 "v1beta2": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready"}]}}


def test_false_initialization_is_not_carried_up() -> None:
    obj: dict[str, Any] = {"status": {"ready": False}}
    status_up(obj, initialization={"ready": "provisioned"})
    assert obj == {}


def test_move_drops_the_parents_it_empties() -> None:
    obj: dict[str, Any] = {"strategy": {"rollingUpdate": {"maxSurge": 1}}}
    move(obj, "strategy.rollingUpdate.maxSurge", "rollout.strategy.rollingUpdate.maxSurge")
    assert obj == {"rollout": {"strategy": {"rollingUpdate": {"maxSurge": 1}}}}


def test_drop_empty_keeps_raw_values_selectors_lists_and_kept_paths() -> None:
    value: dict[str, Any] = {"a": {}, "b": None, "value": {}, "selector": {}, "taints": [], "template": {"spec": {}},
             "deep": {"deeper": {"x": {}}}}
    assert drop_empty(value) == {"value": {}, "selector": {}, "taints": [], "template": {}}
    assert drop_empty(value, frozenset({"template.spec"})) == {
        "value": {}, "selector": {}, "taints": [], "template": {"spec": {}}}
