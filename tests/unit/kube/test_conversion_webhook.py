from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from capd_py.kube.conversion_webhook import (
    CONVERT_PATH,
    crds_serving_v1beta1,
    v1beta1_schema,
    webhook_conversion,
    with_v1beta1,
)

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]


def test_conversion_by_url_or_by_service() -> None:
    by_url = webhook_conversion(b"PEM", url="https://172.18.0.1:9443/convert")
    assert by_url == {"strategy": "Webhook", "webhook": {"conversionReviewVersions": ["v1"], "clientConfig": {
        "caBundle": base64.b64encode(b"PEM").decode(), "url": "https://172.18.0.1:9443/convert"}}}
    by_service = webhook_conversion(b"PEM", service={"namespace": "capd-py-system", "name": "capd-py-webhook",
                                                     "port": 443})
    assert by_service["webhook"]["clientConfig"]["service"] == {
        "namespace": "capd-py-system", "name": "capd-py-webhook", "port": 443, "path": CONVERT_PATH}
    with pytest.raises(ValueError):
        webhook_conversion(b"PEM")


def test_the_crd_serves_v1beta1_without_storing_it() -> None:
    crd = yaml.safe_load((ROOT / "crds" / "cluster.x-k8s.io_machines.yaml").read_text())
    schema = v1beta1_schema(crd)
    assert schema["properties"]["spec"]["properties"]["nodeDrainTimeout"]["type"] == "string"
    conversion = webhook_conversion(b"PEM", url="https://127.0.0.1:9443/convert")
    out = with_v1beta1(crd, schema, conversion)
    assert [(v["name"], v["served"], v["storage"]) for v in out["spec"]["versions"]] == [
        ("v1beta2", True, True), ("v1beta1", True, False)]
    spoke = out["spec"]["versions"][1]
    assert spoke["schema"]["openAPIV3Schema"] == schema
    assert spoke["subresources"] == crd["spec"]["versions"][0]["subresources"]
    assert spoke["deprecated"] is True
    assert out["spec"]["conversion"] == conversion
    assert with_v1beta1(out, schema, conversion) == out, "idempotent"
    assert crd["spec"]["versions"][0]["name"] == "v1beta2" and len(crd["spec"]["versions"]) == 1


def test_every_crd_gets_a_v1beta1_version() -> None:
    conversion = webhook_conversion(b"PEM", url="https://127.0.0.1:9443/convert")
    crds = crds_serving_v1beta1(conversion)
    assert len(crds) == 19
    for crd in crds:
        assert [v["name"] for v in crd["spec"]["versions"]] == ["v1beta2", "v1beta1"], crd["metadata"]["name"]
        assert crd["spec"]["conversion"] == conversion
