from __future__ import annotations

from typing import Any

import pytest

from capd_py.api.conversion import ConversionError, from_hub
from capd_py.api.conversion.review import review

pytestmark = pytest.mark.unit

HUB = {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta2", "kind": "DockerCluster",
       "metadata": {"name": "c", "namespace": "ns"},
       "spec": {"failureDomains": [{"name": "fd1", "controlPlane": True}]}}


def _request(desired: str, *objects: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "desiredAPIVersion": desired,
                        "objects": list(objects)}}


def test_a_review_converts_every_object_and_echoes_the_uid() -> None:
    spoke = from_hub(HUB)
    answer = review(_request("infrastructure.cluster.x-k8s.io/v1beta2", spoke, HUB))
    assert answer["apiVersion"] == "apiextensions.k8s.io/v1" and answer["kind"] == "ConversionReview"
    response = answer["response"]
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert response["result"] == {"status": "Success"}
    assert response["convertedObjects"] == [HUB, HUB]


def test_one_failing_object_fails_the_review_with_its_reason() -> None:
    bad = {**HUB, "kind": "DevMachinePool"}  # served at v1beta2 only, as upstream v1.14
    response = review(_request("infrastructure.cluster.x-k8s.io/v1beta1", HUB, bad))["response"]
    assert response["result"]["status"] == "Failure"
    assert "DevMachinePool" in response["result"]["message"]
    assert "convertedObjects" not in response


def test_an_empty_review_succeeds() -> None:
    assert review(_request("cluster.x-k8s.io/v1beta1"))["response"]["convertedObjects"] == []


@pytest.mark.parametrize("body", [None, [], {"request": None}, {"kind": "ConversionReview"}])
def test_what_is_not_a_review_is_refused(body: Any) -> None:
    with pytest.raises(ConversionError):
        review(body)


def test_an_invalid_desired_version_is_a_failure() -> None:
    response = review(_request("v1beta1", HUB))["response"]
    assert response["result"]["status"] == "Failure"
