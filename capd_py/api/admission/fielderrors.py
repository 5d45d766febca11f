"""Field errors and the Status an admission webhook refuses with, worded as Kubernetes' apimachinery words them
(`field.Error.Error()`, `apierrors.NewInvalid`), so a refusal reads as upstream Cluster API's does:
`MachineDeployment.cluster.x-k8s.io "md" is invalid: metadata.name: Invalid value: "...": must be a valid label
value: ...`.
Pure: no I/O."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

INVALID = "FieldValueInvalid"
REQUIRED = "FieldValueRequired"
FORBIDDEN = "FieldValueForbidden"
INTERNAL = "InternalError"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"

_TITLE = {INVALID: "Invalid value", REQUIRED: "Required value", FORBIDDEN: "Forbidden", INTERNAL: "Internal error",
          NOT_SUPPORTED: "Unsupported value", DUPLICATE: "Duplicate value", TOO_LONG: "Too long",
          TOO_MANY: "Too many"}
REASON_OF_TITLE = {title: reason for reason, title in _TITLE.items()}
_OMIT = object()


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), sort_keys=isinstance(value, dict))


@dataclass(frozen=True)
class FieldError:
    """One field's problem: `type` (INVALID ...), the field path as Go prints it (`spec.template.spec.taints[0]`),
    the bad value (INVALID only) and the detail."""

    type: str
    field: str
    detail: str
    value: Any = _OMIT
    text: str = ""  # the body as printed elsewhere (topology variables print values as Go does)

    def body(self) -> str:
        if self.text:
            return self.text
        out = _TITLE[self.type]
        if self.type == INVALID:
            out += f": {_value(None if self.value is _OMIT else self.value)}"
        return f"{out}: {self.detail}" if self.detail else out

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError(INVALID, field, detail, value)


def required(field: str, detail: str) -> FieldError:
    return FieldError(REQUIRED, field, detail)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, field, detail)


def internal(field: str, detail: str) -> FieldError:
    return FieldError(INTERNAL, field, detail)


def message(kind: str, group: str, name: str, errors: list[FieldError]) -> str:
    """apierrors.NewInvalid's message: one error as is, several as `[a, b]` (duplicates once, as Go's aggregate)."""
    texts = list(dict.fromkeys(str(e) for e in errors))
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return f"{kind}.{group} {json.dumps(name)} is invalid: {joined}"


def invalid_status(kind: str, group: str, name: str, errors: list[FieldError]) -> dict[str, Any]:
    """The metav1.Status (422 Invalid) apierrors.NewInvalid makes; the API server returns it to the client."""
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure",
            "message": message(kind, group, name, errors), "reason": "Invalid", "code": 422,
            "details": {"name": name, "group": group, "kind": kind,
                        "causes": [{"reason": e.type, "message": e.body(), "field": e.field} for e in errors]}}


def denied_status(msg: str, code: int = 403, reason: str = "Forbidden") -> dict[str, Any]:
    """admission.Denied(msg) (or, with code 400, admission.Errored): a plain refusal without field causes."""
    return {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": msg,
            "reason": reason, "code": code}
