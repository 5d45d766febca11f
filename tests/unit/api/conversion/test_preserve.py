"""The conversion-data annotation: a round trip is exact, and an edit made through v1beta1 still wins."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.api.conversion import DATA_ANNOTATION, ConversionError, from_hub, to_hub
from capd_py.api.conversion.preserve import merge, restore

try:
    from conversion_fixtures import ROOT, Obj, load
except ImportError:  # pragma: no cover - package-style collection
    from .conversion_fixtures import ROOT, Obj, load  # type: ignore[no-redef]

pytestmark = pytest.mark.unit

POPULATED = {f"{o['kind']}/{o['metadata']['name']}": o
             for o in load(ROOT / "tests" / "fixtures" / "conversion" / "populated-v1beta2.yaml")}


def _hub(name: str) -> Obj:
    return copy.deepcopy(POPULATED[name])


def test_merge_takes_the_stored_value_where_v1beta1_did_not_change_it() -> None:
    stored = {"a": 1, "lost": {"x": True}, "list": [{"n": 1, "extra": 2}]}
    baseline = {"a": 1, "list": [{"n": 1}]}
    assert merge(stored, baseline, {"a": 1, "list": [{"n": 1}]}) == stored
    assert merge(stored, baseline, {"a": 5, "list": [{"n": 1}]}) == {"a": 5, "lost": {"x": True},
                                                                     "list": [{"n": 1, "extra": 2}]}
    # A list element edited: merged element by element; a list of another length: the v1beta1 one.
    assert merge(stored, baseline, {"a": 1, "list": [{"n": 7}]})["list"] == [{"n": 7, "extra": 2}]
    assert merge(stored, baseline, {"a": 1, "list": []})["list"] == []


def test_restore_keeps_the_live_metadata() -> None:
    stored = {"apiVersion": "x/v1beta2", "kind": "K", "spec": {"a": 1}}
    live = {"apiVersion": "x/v1beta2", "kind": "K", "metadata": {"name": "n", "resourceVersion": "9"},
            "spec": {"a": 1}}
    assert restore(stored, live, live)["metadata"] == {"name": "n", "resourceVersion": "9"}


def test_the_annotation_is_consumed_and_other_annotations_stay() -> None:
    hub = _hub("Cluster/c1")
    spoke = from_hub(hub)
    assert set(spoke["metadata"]["annotations"]) == {"keep", DATA_ANNOTATION}
    back = to_hub(spoke)
    assert back["metadata"]["annotations"] == {"keep": "yes"}


def test_an_edit_through_v1beta1_wins_and_v1beta2_only_fields_stay() -> None:
    hub = _hub("MachineDeployment/md1")
    spoke = from_hub(hub)
    spoke["spec"]["replicas"] = 5
    spoke["spec"]["strategy"]["rollingUpdate"]["maxSurge"] = 3
    back = to_hub(spoke)
    expected = _hub("MachineDeployment/md1")
    expected["spec"]["replicas"] = 5
    expected["spec"]["rollout"]["strategy"]["rollingUpdate"]["maxSurge"] = 3
    assert back == expected


def test_a_timeout_changed_through_v1beta1_wins_over_the_stored_one() -> None:
    hub = _hub("KubeadmConfig/kc1")
    spoke = from_hub(hub)
    assert spoke["spec"]["clusterConfiguration"]["apiServer"]["timeoutForControlPlane"] == "4m0s"
    assert spoke["spec"]["joinConfiguration"]["discovery"]["timeout"] == "5m0s"
    spoke["spec"]["clusterConfiguration"]["apiServer"]["timeoutForControlPlane"] = "10m"
    back = to_hub(spoke)
    timeouts = back["spec"]["initConfiguration"]["timeouts"]
    # Upstream sets the health check timeout from timeoutForControlPlane on init and join alike; the timeouts
    # v1beta1 has no field for come back from the annotation.
    assert timeouts == {"controlPlaneComponentHealthCheckSeconds": 600, "kubeletHealthCheckSeconds": 120,
                        "etcdAPICallSeconds": 30}
    assert back["spec"]["joinConfiguration"]["timeouts"] == {
        "controlPlaneComponentHealthCheckSeconds": 600, "tlsBootstrapSeconds": 300, "discoverySeconds": 60}


def test_a_field_removed_through_v1beta1_stays_removed() -> None:
    hub = _hub("Machine/m1")
    spoke = from_hub(hub)
    del spoke["spec"]["failureDomain"]
    del spoke["spec"]["nodeDrainTimeout"]
    back = to_hub(spoke)
    assert "failureDomain" not in back["spec"]
    assert back["spec"]["deletion"] == {"nodeVolumeDetachTimeoutSeconds": 3600, "nodeDeletionTimeoutSeconds": 10}
    # What v1beta1 cannot say comes back: the Updating phase, status.failureDomain, minReadySeconds.
    assert back["status"]["phase"] == "Updating" and back["status"]["failureDomain"] == "fd1"
    assert back["spec"]["minReadySeconds"] == 0


def test_v1beta1_conditions_written_by_a_v1beta1_client_land_in_deprecated() -> None:
    hub = _hub("DockerMachine/dm1")
    spoke = from_hub(hub)
    spoke["status"]["conditions"] = [{"type": "Ready", "status": "False", "severity": "Error",
                                      "lastTransitionTime": "2026-12-03T09:00:00Z", "reason": "Broken"}]
    back = to_hub(spoke)
    assert back["status"]["deprecated"]["v1beta1"]["conditions"] == spoke["status"]["conditions"]
    assert back["status"]["conditions"] == hub["status"]["conditions"]


def test_bool_intent_is_recovered() -> None:
    # v1beta1 bools cannot tell false from unset; the stored object can.
    hub = _hub("Cluster/c1")
    assert to_hub(from_hub(hub))["spec"]["paused"] is False
    assert to_hub(from_hub(hub))["status"]["initialization"] == {"infrastructureProvisioned": True,
                                                                 "controlPlaneInitialized": False}
    fresh: dict[str, Any] = from_hub(hub)
    del fresh["metadata"]["annotations"][DATA_ANNOTATION]
    assert "paused" not in to_hub(fresh)["spec"]


def test_a_broken_annotation_is_a_conversion_error() -> None:
    spoke = from_hub(_hub("Machine/m1"))
    spoke["metadata"]["annotations"][DATA_ANNOTATION] = "{not json"
    with pytest.raises(ConversionError, match=DATA_ANNOTATION):
        to_hub(spoke)
    spoke["metadata"]["annotations"][DATA_ANNOTATION] = "[1]"
    with pytest.raises(ConversionError):
        to_hub(spoke)
