"""The apiextensions.k8s.io/v1 ConversionReview a conversion webhook answers (pure: dict in, dict out)."""

from __future__ import annotations

from typing import Any

from capd_py.api.conversion.dispatch import convert
from capd_py.api.conversion.fields import ConversionError, VersionResolver, default_resolver

REVIEW_API_VERSION = "apiextensions.k8s.io/v1"


def review(body: Any, resolve: VersionResolver = default_resolver) -> dict[str, Any]:
    """The response ConversionReview for a request one. Any object that cannot be converted fails the whole
    review (the API server then fails the request with our message), as controller-runtime's webhook does."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        raise ConversionError("not a ConversionReview request")
    uid = request.get("uid", "")
    desired = request.get("desiredAPIVersion", "")
    try:
        if not isinstance(desired, str) or "/" not in desired:
            raise ConversionError(f"invalid desiredAPIVersion {desired!r}")
        objects = request.get("objects") or []
        converted = [convert(obj, desired, resolve) for obj in objects]
        response: dict[str, Any] = {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
    except ConversionError as exc:
        response = {"uid": uid, "result": {"status": "Failure", "message": str(exc)}}
    return {"apiVersion": REVIEW_API_VERSION, "kind": "ConversionReview", "response": response}
