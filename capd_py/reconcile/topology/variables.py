"""ClusterClass variables: schema validation, defaulting, and validation of a Cluster's values.

Upstream (release-1.13, internal/topology/variables) validates these with the apiextensions machinery a CRD uses:
structural-schema rules, kube-openapi value validation, structural defaulting and pruning. A ClusterClass or Cluster
accepted (or refused) upstream must be accepted (or refused) here, with the same field paths and messages, so this
module ports those parts instead of using a generic JSON-schema library:

- `validate_class_variables` = ValidateClusterClassVariables (names, metadata, schema conversion, structural
  schema, defaults, examples and enums against their own schema, the static x-kubernetes-validations checks).
- `default_values` = DefaultClusterVariables / DefaultMachineVariables (structural defaulting: missing top-level
  variables get their default; nested defaults fill missing or null fields, in arrays and maps too).
- `validate_values` = ValidateClusterVariables / ValidateMachineVariables (unknown, duplicate, missing required,
  the value against its schema, then fields the schema does not declare).
- `values_map` = the variables a patch template sees (overrides replacing the Cluster's values).

Schemas are v1beta2 `ClusterClass.spec.variables[].schema.openAPIV3Schema` dicts: type, format, properties,
additionalProperties, required, items, enum, default, example, minimum/maximum (integers) with exclusive flags,
minLength/maxLength, pattern, minItems/maxItems/uniqueItems, minProperties/maxProperties, allOf/oneOf/anyOf/not,
x-kubernetes-preserve-unknown-fields, x-kubernetes-int-or-string, x-kubernetes-validations, x-metadata.

Deliberate limits, all visible to callers:

- CEL (`x-kubernetes-validations` rules) is evaluated on values (`cel.py`, cel-python plus the Kubernetes library
  functions ClusterClass rules use), with upstream's messages, reasons, field paths and transition rules. On the
  ClusterClass side the static checks upstream does on the rules themselves (empty rule, message rules, reason,
  fieldPath) are done and rules and messageExpressions are type-checked against their node's type (`celcheck.py`),
  but their cost is not estimated as the apiserver does. Measured against upstream:
  tests/unit/reconcile/topology/test_variables_parity.py.
- Upstream's JSONSchemaProps has no `multipleOf`, `nullable`, `title`, `patternProperties`, `$ref`, ...: Cluster API
  drops them when it decodes a ClusterClass, so they have no effect here either (honouring them would refuse
  Clusters upstream accepts). `unsupported_keywords(defs)` lists where they appear so a caller can warn.
- A boolean `additionalProperties` cannot be decoded upstream (the field is a schema): `validate_class_variables`
  refuses it; the value functions still treat `true` as "any extra keys" and `false` as "no extra keys".
- Formats follow kube-openapi's registry (uri, email, hostname, ipv4, ipv6, cidr, mac, uuid*, date, date-time,
  duration, byte, k8s-short-name, ...; others, int32 and double included, are ignored as upstream strips them).
  `uri`, `email` and `hostname` are close approximations of Go's parsers, not ports.
- Error messages keep upstream's wording (`Invalid value: "{\\"a\\":1}": ...` quotes the whole variable value, as
  upstream does, in canonical JSON since the original bytes are gone). One cosmetic difference: an unknown field
  under a top-level array reads `[1].x`, not upstream's internal `variableValue[1].x`.

Nothing here mutates its inputs.
"""

from __future__ import annotations

import copy
import datetime
import ipaddress
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from capd_py.api.admission import checks, fielderrors
from capd_py.api.admission.fielderrors import FieldError
from capd_py.reconcile.topology import cel, celcheck
from capd_py.reconcile.topology.gotemplate import go_json, go_quote, go_regexp, go_sprint

BUILTIN: Final = "builtin"
VALID_TYPES: Final = ("array", "boolean", "integer", "number", "object", "string")
_SUPPORTED_REASONS: Final = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired")

# ---------------------------------------------------------------------------------------------------------------
# field.Error (k8s.io/apimachinery/pkg/util/validation/field): "<path>: <Type>[: <value>][: <detail>]".
# ---------------------------------------------------------------------------------------------------------------

_REQUIRED = "Required value"
_INVALID = "Invalid value"
_NOT_SUPPORTED = "Unsupported value"
_FORBIDDEN = "Forbidden"
_TOO_LONG = "Too long"
_TOO_MANY = "Too many"
_INTERNAL = "Internal error"
_DUPLICATE = "Duplicate value"


class _Omit:
    pass


_OMIT: Final = _Omit()


class _GoText(str):
    """A value already printed as upstream prints it (a Go struct's JSON)."""


def _rule_struct(r: Mapping[str, Any]) -> _GoText:
    """apiextensions' internal ValidationRule as field.Invalid prints it: json.Marshal of the struct (its field
    names, their order, `<>&` escaped; null for an unset reason or optionalOldSelf)."""
    fields = (("Rule", r.get("rule") or ""), ("Message", r.get("message") or ""),
              ("MessageExpression", r.get("messageExpression") or ""), ("Reason", r.get("reason")),
              ("FieldPath", r.get("fieldPath") or ""), ("OptionalOldSelf", r.get("optionalOldSelf")))
    return _GoText("{" + ",".join(f'"{k}":{go_json(v)}' for k, v in fields) + "}")


def _value_str(v: Any) -> str:
    if isinstance(v, _GoText):
        return str(v)
    if v is None:
        return "null"
    if isinstance(v, bool | int | float):
        return go_sprint(v)
    if isinstance(v, str):
        return go_quote(v)
    return _raw(v)


@dataclass(frozen=True)
class _FieldError:
    kind: str
    field: str
    bad_value: Any = _OMIT
    detail: str = ""

    def body(self) -> str:
        if self.kind in (_REQUIRED, _FORBIDDEN, _TOO_LONG, _INTERNAL) or isinstance(self.bad_value, _Omit):
            body = self.kind
        else:
            body = f"{self.kind}: {_value_str(self.bad_value)}"
        if self.detail:
            body += f": {self.detail}"
        return body

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    def as_field_error(self) -> FieldError:
        """The admission form: a cause's reason and field, the message as printed here."""
        return FieldError(fielderrors.REASON_OF_TITLE[self.kind], self.field, self.detail, text=self.body())


def _not_supported(path: str, value: Any, valid: Sequence[str]) -> _FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in valid) if valid else ""
    return _FieldError(_NOT_SUPPORTED, path, value, detail)


def _too_long(path: str, max_len: int) -> _FieldError:
    unit = "byte" if max_len == 1 else "bytes"
    return _FieldError(_TOO_LONG, path, _OMIT, f"may not be more than {max_len} {unit}" if max_len >= 0
                       else "value is too long")


def _too_many(path: str, actual: Any, max_items: int) -> _FieldError:
    unit = "item" if max_items == 1 else "items"
    return _FieldError(_TOO_MANY, path, actual, f"must have at most {max_items} {unit}" if max_items >= 0
                       else "has too many items")


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _key(path: str, key: Any) -> str:
    return f"{path}[{key}]"


def _raw(v: Any) -> str:
    """The JSON text of a value, as upstream's error messages show `value.Raw` (empty for null: Raw is nil)."""
    if v is None:
        return ""
    try:
        return go_json(v, escape_html=False)
    except ValueError:
        return repr(v)


def _json_problem(v: Any) -> str | None:
    """Why `v` is not a JSON value (what upstream would have failed to unmarshal), or None."""
    if v is None or isinstance(v, bool | int | str):
        return None
    if isinstance(v, float):
        return None if math.isfinite(v) else f"{v} is not a JSON number"
    if isinstance(v, list):
        return next((p for p in map(_json_problem, v) if p), None)
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                return f"object key {k!r} is not a string"
            p = _json_problem(x)
            if p:
                return p
        return None
    return f"a {type(v).__name__} is not a JSON value"


# ---------------------------------------------------------------------------------------------------------------
# Schema shape (the v1beta2 JSONSchemaProps fields and their Go types).
# ---------------------------------------------------------------------------------------------------------------

_INT_KEYS: Final = ("maxProperties", "minProperties", "maxItems", "minItems", "maxLength", "minLength", "maximum",
                    "minimum")
_BOOL_KEYS: Final = ("uniqueItems", "exclusiveMaximum", "exclusiveMinimum", "x-kubernetes-preserve-unknown-fields",
                     "x-kubernetes-int-or-string")
_STR_KEYS: Final = ("description", "type", "format", "pattern")
_SCHEMA_KEYS: Final = frozenset({*_INT_KEYS, *_BOOL_KEYS, *_STR_KEYS, "example", "properties",
                                 "additionalProperties", "required", "items", "enum", "default",
                                 "x-kubernetes-validations", "x-metadata", "allOf", "oneOf", "anyOf", "not"})
_RULE_KEYS: Final = ("rule", "message", "messageExpression", "reason", "fieldPath")


def _props(s: Mapping[str, Any]) -> Mapping[str, Any]:
    p = s.get("properties")
    return p if isinstance(p, Mapping) else {}


def _sub(s: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    v = s.get(key)
    return v if isinstance(v, Mapping) else None


def _subs(s: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    v = s.get(key)
    return [x for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []


def _enum(s: Mapping[str, Any]) -> list[Any]:
    """Upstream drops null enum entries (their Raw is empty after decoding)."""
    v = s.get("enum")
    return [e for e in v if e is not None] if isinstance(v, list) else []


def _bool(s: Mapping[str, Any], key: str) -> bool:
    return s.get(key) is True


def _list_at(s: Mapping[str, Any], key: str, path: str, what: str, errs: list[_FieldError]) -> list[Any]:
    """`s[key]` as a list (empty when it is absent); anything else is reported in `errs` as `what`."""
    v = s.get(key)
    if v is None:
        return []
    if not isinstance(v, list):
        errs.append(_FieldError(_INVALID, _child(path, key), v, what))
        return []
    return v


def _check_schema(s: Any, path: str, var: str) -> list[_FieldError]:
    """convertToAPIExtensionsJSONSchemaProps: default/example/enum must be JSON; plus what Go's decoding of the
    ClusterClass would refuse (a wrongly typed keyword), reported here as a clear field error."""
    if not isinstance(s, Mapping):
        return [_FieldError(_INVALID, path, s, "must be a schema object")]
    errs: list[_FieldError] = []
    prefix = f"failed to convert schema definition for variable {go_quote(var)}; ClusterClass should be checked: "
    for key in ("default", "example"):
        if s.get(key) is not None and (p := _json_problem(s[key])):
            errs.append(_FieldError(_INVALID, _child(path, key), _OMIT, f"{prefix}{key} is not valid JSON: {p}"))
    for key in _INT_KEYS:
        v = s.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            errs.append(_FieldError(_INVALID, _child(path, key), v, "must be an integer"))
    for key in _BOOL_KEYS:
        if s.get(key) is not None and not isinstance(s[key], bool):
            errs.append(_FieldError(_INVALID, _child(path, key), s[key], "must be a boolean"))
    for key in _STR_KEYS:
        if s.get(key) is not None and not isinstance(s[key], str):
            errs.append(_FieldError(_INVALID, _child(path, key), s[key], "must be a string"))
    req = s.get("required")
    if req is not None and not (isinstance(req, list) and all(isinstance(r, str) for r in req)):
        errs.append(_FieldError(_INVALID, _child(path, "required"), req, "must be a list of strings"))
    for i, e in enumerate(_list_at(s, "enum", path, "must be a list", errs)):
        if e is not None and (p := _json_problem(e)):
            errs.append(_FieldError(_INVALID, _key(_child(path, "enum"), i), _OMIT,
                                    f"{prefix}enum value is not valid JSON: {p}"))
    props = s.get("properties")
    if props is not None:
        if not isinstance(props, Mapping):
            errs.append(_FieldError(_INVALID, _child(path, "properties"), props, "must be a map of schemas"))
        else:
            for k, v in props.items():
                errs += _check_schema(v, _key(_child(path, "properties"), k), var)
    ap = s.get("additionalProperties")
    if isinstance(ap, bool):
        errs.append(_FieldError(_INVALID, _child(path, "additionalProperties"), ap,
                                "must be a schema: ClusterClass variables do not support a boolean here"))
    elif ap is not None:
        errs += _check_schema(ap, _child(path, "additionalProperties"), var)
    for key in ("items", "not"):
        if s.get(key) is not None:
            errs += _check_schema(s[key], _child(path, key), var)
    for key in ("allOf", "oneOf", "anyOf"):
        for i, sub in enumerate(_list_at(s, key, path, "must be a list of schemas", errs)):
            errs += _check_schema(sub, _key(_child(path, key), i), var)
    for i, r in enumerate(_list_at(s, "x-kubernetes-validations", path, "must be a list", errs)):
        rp = _key(_child(path, "x-kubernetes-validations"), i)
        if not isinstance(r, Mapping):
            errs.append(_FieldError(_INVALID, rp, r, "must be an object"))
            continue
        for k in _RULE_KEYS:
            if r.get(k) is not None and not isinstance(r[k], str):
                errs.append(_FieldError(_INVALID, _child(rp, k), r[k], "must be a string"))
    xm = s.get("x-metadata")
    if xm is not None and not isinstance(xm, Mapping):
        errs.append(_FieldError(_INVALID, _child(path, "x-metadata"), xm, "must be an object"))
    elif xm is not None:
        for k in ("labels", "annotations"):
            m = xm.get(k)
            if m is not None and not (isinstance(m, Mapping) and all(isinstance(x, str) for x in m.values())):
                errs.append(_FieldError(_INVALID, _child(_child(path, "x-metadata"), k), m,
                                        "must be a map of strings"))
    return errs


def _walk_schemas(s: Mapping[str, Any], path: str, nested: bool = True) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every schema node with its path; `nested` also visits allOf/oneOf/anyOf/not."""
    yield s, path
    for k, v in _props(s).items():
        if isinstance(v, Mapping):
            yield from _walk_schemas(v, _key(_child(path, "properties"), k), nested)
    for key in ("additionalProperties", "items") + (("not",) if nested else ()):
        sub = _sub(s, key)
        if sub is not None:
            yield from _walk_schemas(sub, _child(path, key), nested)
    if nested:
        for key in ("allOf", "oneOf", "anyOf"):
            for i, sub in enumerate(_subs(s, key)):
                yield from _walk_schemas(sub, _key(_child(path, key), i), nested)


# ---------------------------------------------------------------------------------------------------------------
# Labels and annotations (metav1validation.ValidateLabels, apivalidation.ValidateAnnotations).
# ---------------------------------------------------------------------------------------------------------------

# label keys, values and annotation keys as apimachinery checks them: api/admission/checks.py (one home; upstream's
# webhooks and the variables' metadata validation call the same apimachinery functions)


def _validate_map(m: Any, path: str, what: str,
                  check: Callable[[Mapping[Any, Any], str], list[_FieldError]]) -> list[_FieldError]:
    """Nothing for None, the error `what` for anything but a map, else `check`'s errors."""
    if m is None:
        return []
    if not isinstance(m, Mapping):
        return [_FieldError(_INVALID, path, m, what)]
    return check(m, path)


def _validate_labels(labels: Any, path: str) -> list[_FieldError]:
    return _validate_map(labels, path, "must be a map of strings", _label_errors)


def _label_errors(labels: Mapping[Any, Any], path: str) -> list[_FieldError]:
    errs: list[_FieldError] = []
    for k, v in labels.items():
        errs += [_FieldError(_INVALID, path, k, m) for m in checks.qualified_name_errors(str(k))]
        value = v if isinstance(v, str) else str(v)
        errs += [_FieldError(_INVALID, _key(path, k), value, m) for m in checks.label_value_errors(value)]
    return errs


def _validate_annotations(annotations: Any, path: str) -> list[_FieldError]:
    return _validate_map(annotations, path, "must be a map of strings", _annotation_errors)


def _annotation_errors(annotations: Mapping[Any, Any], path: str) -> list[_FieldError]:
    errs: list[_FieldError] = []
    total = 0
    for k, v in annotations.items():
        msgs = checks.qualified_name_errors(str(k).lower())
        if msgs:
            errs.append(_FieldError(_INVALID, path, k, "; ".join(msgs)))
        total += len(str(k)) + len(str(v))
    if total > 256 * 1024:
        errs.append(_too_long(path, 256 * 1024))
    return errs


def _validate_metadata(md: Any, path: str) -> list[_FieldError]:
    return _validate_map(md, path, "must be an object", _metadata_errors)


def _metadata_errors(md: Mapping[Any, Any], path: str) -> list[_FieldError]:
    return (_validate_labels(md.get("labels"), _child(path, "labels"))
            + _validate_annotations(md.get("annotations"), _child(path, "annotations")))


# ---------------------------------------------------------------------------------------------------------------
# String formats (kube-openapi's strfmt registry, as CRD validation strips the ones it does not support).
# ---------------------------------------------------------------------------------------------------------------


def _ipv4(s: str, sloppy: bool) -> bool:
    parts = s.split(".")
    if len(parts) != 4:
        return False
    for p in parts:
        if not (1 <= len(p) <= 3 and p.isascii() and p.isdigit()) or int(p) > 255:
            return False
        if not sloppy and len(p) > 1 and p[0] == "0":
            return False
    return True


def _parse_ip(s: str, sloppy: bool = False) -> bool:
    """net.ParseIP (k8s' ParseIPSloppy also takes leading zeros in IPv4); zones are not IPs."""
    if ":" not in s:
        return _ipv4(s, sloppy)
    if "%" in s:
        return False
    try:
        ipaddress.IPv6Address(s)
        return True
    except ValueError:
        return False


def _is_cidr(s: str) -> bool:
    ip, sep, bits = s.rpartition("/")
    if not sep or not bits.isascii() or not bits.isdigit() or not _parse_ip(ip, sloppy=True):
        return False
    return int(bits) <= (128 if ":" in ip else 32)


_MAC_RES: Final = [re.compile(rf"[0-9A-Fa-f]{{2}}([:-])[0-9A-Fa-f]{{2}}(\1[0-9A-Fa-f]{{2}}){{{n - 2}}}")
                   for n in (6, 8, 20)] + [re.compile(rf"[0-9A-Fa-f]{{4}}(\.[0-9A-Fa-f]{{4}}){{{n - 1}}}")
                                           for n in (3, 4, 10)]


def _is_request_uri(s: str) -> bool:
    """url.ParseRequestURI: an absolute URI or an absolute path, no control bytes, valid escapes and host."""
    if s == "" or any(ord(c) < 0x20 or ord(c) == 0x7F for c in s):
        return False
    if s == "*":
        return True
    m = re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", s)
    if s.startswith(":"):
        return False
    scheme = m.group(0)[:-1] if m else ""
    rest = s[m.end():] if m else s
    rest = rest.split("?", 1)[0]
    if not rest.startswith("/"):
        return bool(scheme)  # rootless paths are opaque when there is a scheme
    if scheme and rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        host = authority.rpartition("@")[2]
        if re.search(r"[\s\"<>\\^`{|}]", host):
            return False
        if host.startswith("["):
            end = host.find("]")
            if end < 0 or not re.fullmatch(r"(:[0-9]*)?", host[end + 1:]):
                return False
        elif ":" in host and not re.fullmatch(r"[0-9]*", host.rpartition(":")[2]):
            return False
        if not _valid_escapes(host):
            return False
    return _valid_escapes(rest)


def _valid_escapes(s: str) -> bool:
    return all(re.fullmatch(r"[0-9A-Fa-f]{2}", s[i + 1:i + 3]) for i, c in enumerate(s) if c == "%")


_ATEXT: Final = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]+"
_ADDR_RE: Final = re.compile(rf"(?:{_ATEXT}(?:\.{_ATEXT})*|\"(?:[^\"\\]|\\.)*\")"
                             rf"@(?:{_ATEXT}(?:\.{_ATEXT})*|\[[^\]]*\])")


def _is_email(s: str) -> bool:
    """net/mail.ParseAddress, approximately: `addr@domain` or `Display Name <addr@domain>`."""
    s = s.strip()
    m = re.fullmatch(r"(?:[^<>]*?)\s*<([^<>]*)>", s)
    return bool(_ADDR_RE.fullmatch(m.group(1) if m else s))


_HN_CH: Final = r"(?:[a-zA-Z0-9]|[^\x00-\x7f])"  # kube-openapi: [a-zA-Z0-9\p{S}\p{L}]
_HOSTNAME_RE: Final = re.compile(
    rf"({_HN_CH}((-?{_HN_CH}{{0,62}})?)|({_HN_CH}((({_HN_CH}|-){{0,61}}{_HN_CH})?)(\.)){{1,}}"
    r"([a-zA-Z]|[^\x00-\x7f]){2,63})")


def _is_hostname(s: str) -> bool:
    return bool(_HOSTNAME_RE.fullmatch(s)) and len(s) <= 255 and all(len(p) <= 63 for p in s.split("."))


def _is_date(s: str) -> bool:
    if not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", s):
        return False
    try:
        datetime.date(int(s[:4]), int(s[5:7]), int(s[8:]))
        return True
    except ValueError:
        return False


def _is_datetime(s: str) -> bool:
    parts = s.lower().split("t")
    if len(s) < 4 or len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = re.fullmatch(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))", parts[1])
    return m is not None and m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


_DURATION_UNITS: Final = (("ns", "nano"), ("us", "µs", "micro"), ("ms", "milli"), ("s", "sec"), ("m", "min"),
                          ("h", "hr", "hour"), ("d", "day"), ("w", "wk", "week"))


def _is_duration(s: str) -> bool:
    """strfmt.ParseDuration: Go's time.ParseDuration, else any "<n> <unit>" it recognises (e.g. "3 days")."""
    if re.fullmatch(r"[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)", s):
        return True
    for m in re.finditer(r"([0-9]+)\s*([A-Za-zµ]+)", s):
        unit = m.group(2).strip().lower()
        for variants in _DURATION_UNITS:
            if any(unit == v or (i == len(variants) - 1 and unit.startswith(v)) for i, v in enumerate(variants)):
                return True
    return False


def _luhn(digits: str) -> bool:
    total, double = 0, False
    for c in reversed(digits):
        n = int(c) * (2 if double else 1)
        total += n - 9 if n > 9 else n
        double = not double
    return total % 10 == 0


def _is_isbn(s: str, version: int) -> bool:
    d = re.sub(r"[\s-]+", "", s)
    if version == 10:
        if not re.fullmatch(r"[0-9]{9}X|[0-9]{10}", d):
            return False
        total = sum((i + 1) * int(d[i]) for i in range(9)) + 10 * (10 if d[9] == "X" else int(d[9]))
        return total % 11 == 0
    if not re.fullmatch(r"[0-9]{13}", d):
        return False
    total = sum((1, 3)[i % 2] * int(d[i]) for i in range(12))
    return int(d[12]) == (10 - total % 10) % 10


_CREDIT_CARD_RE: Final = re.compile(r"(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|"
                                    r"3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})")
_UUID_RE: Final = {v: re.compile(rf"(?i)[0-9a-f]{{8}}-?[0-9a-f]{{4}}-?{p}-?{q}-?[0-9a-f]{{12}}")
                   for v, p, q in (("uuid", "[0-9a-f]{4}", "[0-9a-f]{4}"), ("uuid3", "3[0-9a-f]{3}", "[0-9a-f]{4}"),
                                   ("uuid4", "4[0-9a-f]{3}", "[89ab][0-9a-f]{3}"),
                                   ("uuid5", "5[0-9a-f]{3}", "[89ab][0-9a-f]{3}"))}
_RGB_N: Final = r"\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*"

_FORMATS: Final[dict[str, Callable[[str], bool]]] = {
    "bsonobjectid": lambda s: bool(re.fullmatch(r"[0-9a-fA-F]{24}", s)),
    "uri": _is_request_uri,
    "email": _is_email,
    "hostname": _is_hostname,
    "ipv4": lambda s: _parse_ip(s, sloppy=True) and "." in s,
    "ipv6": lambda s: _parse_ip(s) and ":" in s,
    "cidr": _is_cidr,
    "mac": lambda s: any(r.fullmatch(s) for r in _MAC_RES),
    **{k: (lambda rx: lambda s: bool(rx.fullmatch(s)))(r) for k, r in _UUID_RE.items()},
    "isbn": lambda s: _is_isbn(s, 10) or _is_isbn(s, 13),
    "isbn10": lambda s: _is_isbn(s, 10),
    "isbn13": lambda s: _is_isbn(s, 13),
    "creditcard": lambda s: bool(_CREDIT_CARD_RE.fullmatch(re.sub(r"[^0-9]+", "", s)))
    and _luhn(re.sub(r"[^0-9]+", "", s)),
    "ssn": lambda s: len(s) == 11 and bool(re.fullmatch(r"[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}", s)),
    "hexcolor": lambda s: bool(re.fullmatch(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})", s)),
    "rgbcolor": lambda s: bool(re.fullmatch(rf"rgb\({_RGB_N},{_RGB_N},{_RGB_N}\)", s)),
    "byte": lambda s: bool(re.fullmatch(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|"
                                        r"[A-Za-z0-9+/]{4})", s)),
    "password": lambda s: True,
    "date": _is_date,
    "datetime": _is_datetime,
    "duration": _is_duration,
    "k8sshortname": lambda s: len(s) <= 63 and bool(re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", s)),
    "k8slongname": lambda s: len(s) <= 253 and bool(
        re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", s)),
}


# ---------------------------------------------------------------------------------------------------------------
# kube-openapi's SchemaValidator (what apiextensions' ValidateCustomResource runs), on our schema dicts.
# Errors keep kube-openapi's shape (code, name, message, value); _to_field_errors converts them as upstream does.
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class _OAErr:
    code: str  # type | required | enum | too_long | max_items | too_many_props | other | composite
    name: str
    message: str
    value: Any = None
    valid: Any = None
    values: list[Any] | None = None


class _Result:
    """kube-openapi's Result: errors with the same message are reported once."""

    __slots__ = ("errors", "matches")

    def __init__(self) -> None:
        self.errors: list[_OAErr] = []
        self.matches = 0

    def add(self, err: _OAErr) -> None:
        if all(e.message != err.message for e in self.errors):
            self.errors.append(err)

    def merge(self, other: _Result) -> None:
        for e in other.errors:
            self.add(e)
        self.matches += other.matches


def _json_type(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _types(s: Mapping[str, Any]) -> list[str]:
    if _bool(s, "x-kubernetes-int-or-string"):
        return ["integer", "string"]
    t = s.get("type")
    return [t] if isinstance(t, str) and t else []


def _format(s: Mapping[str, Any], strip: bool) -> str:
    """The format kube-openapi sees: apiextensions (v0.35) strips every format outside its registry, numeric ones
    (int32, double, ...) included, whatever the type; schema defaults are validated without that stripping."""
    f = s.get("format")
    if not isinstance(f, str):
        return ""
    return f if not strip or f.replace("-", "") in _FORMATS else ""


def _in_body(name: str, text: str) -> str:
    return f"{name} in body {text}"


def _invalid_type(name: str, type_name: str, value: str) -> _OAErr:
    return _OAErr("type", name, _in_body(name, f"must be of type {type_name}: {go_quote(value)}"), value)


def _is_json_integer(f: float) -> bool:
    return math.isfinite(f) and f == int(f) and abs(f) <= 2 ** 53


def _num_str(v: Any) -> str:
    return go_sprint(float(v)) if isinstance(v, float) else str(v)


def _oa_validate(s: Mapping[str, Any], data: Any, path: str, strip: bool = True) -> _Result:
    res = _Result()
    types = _types(s)
    fmt = _format(s, strip)
    if data is None:
        if types and "null" not in types:
            res.add(_invalid_type(path, ",".join(types), "null"))
        res.merge(_check_enum(s, data, path))
        return res
    kind = _json_type(data)
    if types or fmt:
        res.merge(_check_type(types, fmt, data, kind, path))
        res.matches += 1
    res.merge(_check_composition(s, data, path, strip))
    res.matches += 1
    if kind == "string":
        res.merge(_check_string(s, data, path))
        res.matches += 1
        if fmt and fmt.replace("-", "") in _FORMATS:
            if not _FORMATS[fmt.replace("-", "")](data):
                res.add(_invalid_type(path, fmt, data))
            res.matches += 1
    if kind in ("integer", "number"):
        res.merge(_check_number(s, data, path))
        res.matches += 1
    if kind == "array":
        res.merge(_check_array(s, data, path, strip))
        res.matches += 1
    res.merge(_check_enum(s, data, path))
    res.matches += 1
    if kind == "object":
        res.merge(_check_object(s, data, path, strip))
        res.matches += 1
    res.matches += 1
    return res


def _check_type(types: list[str], fmt: str, data: Any, kind: str, path: str) -> _Result:
    res = _Result()
    data_format = {"integer": "int64", "number": "float64"}.get(kind, "")
    float_int = kind == "number" and _is_json_integer(data) and "integer" in types
    int_float = kind == "integer" and "number" in types
    if kind not in ("string", "array") and fmt and not (kind in types or fmt == data_format or float_int or int_float):
        res.add(_invalid_type(path, fmt, data_format))
    elif not ("number" in types or "integer" in types) and fmt and kind in ("string", "array"):
        pass  # kube-openapi leaves strings with a format to the format validator
    elif not (kind in types or float_int or int_float):
        res.add(_invalid_type(path, ",".join(types), kind))
    return res


def _check_composition(s: Mapping[str, Any], data: Any, path: str, strip: bool) -> _Result:
    """allOf / anyOf / oneOf / not, reporting the closest failing alternative as kube-openapi does."""
    res = _Result()
    any_of = _subs(s, "anyOf")
    if any_of:
        best: _Result | None = None
        first_ok: _Result | None = None
        for sub in any_of:
            r = _oa_validate(sub, data, path, strip)
            if not r.errors:
                first_ok, best = r, None
                break
            if best is None or r.matches > best.matches:
                best = r
        if first_ok is None:
            res.add(_OAErr("composite", path, f"{go_quote(path)} must validate at least one schema (anyOf)"))
        res.merge(best or first_ok or _Result())
    one_of = _subs(s, "oneOf")
    if one_of:
        best, first_ok, valid = None, None, 0
        for sub in one_of:
            r = _oa_validate(sub, data, path, strip)
            if not r.errors:
                valid += 1
                best = None
                first_ok = first_ok or r
                continue
            if valid == 0 and (best is None or r.matches > best.matches):
                best = r
        if valid != 1:
            extra = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            res.add(_OAErr("composite", path,
                                     f"{go_quote(path)} must validate one and only one schema (oneOf). {extra}"))
            if best is not None:
                res.merge(best)
        elif first_ok is not None:
            res.merge(first_ok)
    all_of = _subs(s, "allOf")
    if all_of:
        valid = 0
        for sub in all_of:
            r = _oa_validate(sub, data, path, strip)
            valid += not r.errors
            res.merge(r)
        if valid != len(all_of):
            extra = ". None validated" if valid == 0 else ""
            res.add(_OAErr("composite", path,
                                     f"{go_quote(path)} must validate all the schemas (allOf){extra}"))
    not_ = _sub(s, "not")
    if not_ is not None and not _oa_validate(not_, data, path, strip).errors:
        res.add(_OAErr("composite", path, f"{go_quote(path)} must not validate the schema (not)"))
    res.matches += 1
    return res


def _check_string(s: Mapping[str, Any], data: str, path: str) -> _Result:
    res = _Result()
    max_len, min_len, pattern = s.get("maxLength"), s.get("minLength"), s.get("pattern")
    if isinstance(max_len, int) and len(data) > max_len:
        res.add(_OAErr("too_long", path, _in_body(path, f"should be at most {max_len} chars long"), data,
                                 max_len))
    elif isinstance(min_len, int) and len(data) < min_len:
        res.add(_OAErr("other", path, _in_body(path, f"should be at least {min_len} chars long"), data))
    elif isinstance(pattern, str) and pattern:
        try:
            if not go_regexp(pattern).search(data):
                res.add(_OAErr("other", path, _in_body(path, f"should match '{pattern}'"), data))
        except ValueError as e:
            res.add(_OAErr("other", path,
                                     _in_body(path, f"should match '{pattern}, but pattern is invalid: {e}'"), data))
    return res


def _check_number(s: Mapping[str, Any], data: Any, path: str) -> _Result:
    res = _Result()
    for key, excl_key, cmp, incl, excl in (
            ("maximum", "exclusiveMaximum", lambda a, b, x: a >= b if x else a > b,
             "should be less than or equal to", "should be less than"),
            ("minimum", "exclusiveMinimum", lambda a, b, x: a <= b if x else a < b,
             "should be greater than or equal to", "should be greater than")):
        bound = s.get(key)
        if not isinstance(bound, int | float) or isinstance(bound, bool):
            continue
        exclusive = _bool(s, excl_key)
        if cmp(data, bound, exclusive):
            shown = _num_str(bound if isinstance(data, int) else float(bound))
            res.add(_OAErr("other", path, _in_body(path, f"{excl if exclusive else incl} {shown}"), data,
                                     bound))
    return res


def _strict_equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual on decoded JSON: integers (int64) and floats (float64) are different types."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_strict_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _enum_equal(data: Any, e: Any) -> bool:
    """kube-openapi converts the value to the enum entry's Go type first: a float64 value meets an int64 entry
    truncated (2.5 "is" 2), an int64 one meets a float64 entry by value."""
    if isinstance(data, bool) or isinstance(e, bool):
        return isinstance(data, bool) and isinstance(e, bool) and data == e
    if isinstance(data, float) and isinstance(e, int):
        return math.isfinite(data) and int(data) == e
    if isinstance(data, int | float) and isinstance(e, int | float):
        return bool(data == e)
    return _strict_equal(data, e)


def _check_enum(s: Mapping[str, Any], data: Any, path: str) -> _Result:
    res = _Result()
    enum = _enum(s)
    if enum and not (data is not None and any(_enum_equal(data, e) for e in enum)):
        shown = ", ".join(_raw(e) if not isinstance(e, str) else e for e in enum)
        res.add(_OAErr("enum", path, _in_body(path, f"should be one of [{shown}]"), data, values=enum))
    return res


def _check_array(s: Mapping[str, Any], data: list[Any], path: str, strip: bool) -> _Result:
    res = _Result()
    items = _sub(s, "items")
    if items is not None:
        for i, v in enumerate(data):
            res.merge(_oa_validate(items, v, f"{path}[{i}]", strip))
    min_items, max_items = s.get("minItems"), s.get("maxItems")
    if isinstance(min_items, int) and len(data) < min_items:
        res.add(_OAErr("other", path, _in_body(path, f"should have at least {min_items} items"), len(data)))
    if isinstance(max_items, int) and len(data) > max_items:
        res.add(_OAErr("max_items", path, _in_body(path, f"should have at most {max_items} items"),
                                 len(data), max_items))
    if _bool(s, "uniqueItems"):
        seen: list[Any] = []
        for v in data:
            if any(_strict_equal(v, u) for u in seen):
                res.add(_OAErr("other", path, _in_body(path, "shouldn't contain duplicates")))
                break
            seen.append(v)
    return res


def _check_object(s: Mapping[str, Any], data: Mapping[str, Any], path: str, strip: bool) -> _Result:
    res = _Result()
    n = len(data)
    min_p, max_p = s.get("minProperties"), s.get("maxProperties")
    if isinstance(min_p, int) and n < min_p:
        res.add(_OAErr("other", path, _in_body(path, f"should have at least {min_p} properties"), n))
    if isinstance(max_p, int) and n > max_p:
        res.add(_OAErr("too_many_props", path, _in_body(path, f"should have at most {max_p} properties"),
                                 n, max_p))
    props = _props(s)
    ap = s.get("additionalProperties")
    if ap is False:
        for k in data:
            if k not in props:
                res.add(_OAErr("other", path, f"{path}.{k} in body is a forbidden property", k))
    elif isinstance(ap, Mapping):
        for k, v in data.items():
            if k not in props:
                res.merge(_oa_validate(ap, v, f"{path}.{k}", strip))
    for name, sub in props.items():
        if name in data and isinstance(sub, Mapping):
            res.merge(_oa_validate(sub, data[name], f"{path}.{name}" if path else name, strip))
    req = s.get("required")
    for k in req if isinstance(req, list) else []:
        if k not in data:
            res.add(_OAErr("required", f"{path}.{k}", _in_body(f"{path}.{k}", "is required")))
    return res


def _to_field_errors(fld: str, errs: Sequence[_OAErr], raw: str | None = None) -> list[_FieldError]:
    """apiextensions' kubeOpenAPIResultToFieldErrors; with `raw` (a variable's value), upstream's ClusterClass
    variable fix-ups: the bad value is the whole variable's JSON and the detail loses its " in body " prefix
    (defaults, examples and enums of the ClusterClass keep it, as upstream's)."""
    out: list[_FieldError] = []
    for e in errs:
        if e.code == "composite":
            err = _FieldError(_INVALID, fld, "", e.message)
        else:
            path = _child(fld, e.name[1:] if e.name.startswith(".") else e.name) if e.name not in ("", ".") else fld
            value = "" if e.value is None else e.value
            if e.code == "required":
                err = _FieldError(_REQUIRED, path)
            elif e.code == "enum":
                err = _not_supported(path, e.value, [v if isinstance(v, str) else _raw(v) for v in e.values or []])
            elif e.code == "too_long":
                err = _too_long(path, e.valid if isinstance(e.valid, int) else -1)
            elif e.code in ("max_items", "too_many_props"):
                err = _too_many(path, e.value, e.valid if isinstance(e.valid, int) else -1)
            else:
                err = _FieldError(_INVALID, path, value, e.message)
        detail = err.detail.removeprefix(" in body ") if raw is not None else err.detail  # as upstream: values only
        out.append(_FieldError(err.kind, err.field, raw if raw is not None else err.bad_value, detail))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Structural schemas: validation (apiserver/schema ValidateStructural), pruning, defaulting, default validation.
# ---------------------------------------------------------------------------------------------------------------

_ITEM_LEVEL, _FIELD_LEVEL = "item", "field"


def _is_int_or_string_any_of(any_of: Any) -> bool:
    return any_of == [{"type": "integer"}, {"type": "string"}]


def _structural_errors(s: Mapping[str, Any], lvl: str, path: str) -> list[_FieldError]:
    """validateStructuralInvariants for a variable schema (it sits one level below upstream's wrapper object)."""
    errs: list[_FieldError] = []
    t = s.get("type") or ""
    ios, preserve = _bool(s, "x-kubernetes-int-or-string"), _bool(s, "x-kubernetes-preserve-unknown-fields")
    items = _sub(s, "items")
    if t == "array" and items is None:
        errs.append(_FieldError(_REQUIRED, _child(path, "items"), _OMIT, "must be specified"))
    if items is not None:
        errs += _structural_errors(items, _ITEM_LEVEL, _child(path, "items"))
    for k, p in _props(s).items():
        errs += _structural_errors(p, _FIELD_LEVEL, _key(_child(path, "properties"), k))
    ap = _sub(s, "additionalProperties")
    if ap is not None:
        errs += _structural_errors(ap, _FIELD_LEVEL, _child(path, "additionalProperties"))
    if ios and preserve:
        errs.append(_FieldError(_INVALID, _child(path, "x-kubernetes-preserve-unknown-fields"), True,
                                "must be false if x-kubernetes-int-or-string is true"))
    all_of = _subs(s, "allOf")
    errs += _value_validation_errors(s, _is_int_or_string_any_of(s.get("anyOf")),
                                     bool(all_of) and _is_int_or_string_any_of(all_of[0].get("anyOf")), path)
    if not t and not ios and not preserve:
        what = "array items" if lvl == _ITEM_LEVEL else "object fields"
        errs.append(_FieldError(_REQUIRED, _child(path, "type"), _OMIT, f"must not be empty for specified {what}"))
    if ios and t:
        errs.append(_FieldError(_INVALID, _child(path, "type"), t,
                                "must be empty if x-kubernetes-int-or-string is true"))
    return errs


def _value_validation_errors(s: Mapping[str, Any], skip_any_of: bool, skip_first_all_of_any_of: bool,
                             path: str) -> list[_FieldError]:
    errs: list[_FieldError] = []
    if not skip_any_of:
        for i, sub in enumerate(_subs(s, "anyOf")):
            errs += _nested_errors(sub, False, False, _key(_child(path, "anyOf"), i))
    for i, sub in enumerate(_subs(s, "allOf")):
        errs += _nested_errors(sub, skip_first_all_of_any_of and i == 0, False, _key(_child(path, "allOf"), i))
    for i, sub in enumerate(_subs(s, "oneOf")):
        errs += _nested_errors(sub, False, False, _key(_child(path, "oneOf"), i))
    not_ = _sub(s, "not")
    if not_ is not None:
        errs += _nested_errors(not_, False, False, _child(path, "not"))
    pattern = s.get("pattern")
    if isinstance(pattern, str) and pattern:
        try:
            go_regexp(pattern)
        except ValueError as e:
            errs.append(_FieldError(_INVALID, _child(path, "pattern"), pattern,
                                    f"must be a valid regular expression, but isn't: {e}"))
    return errs


def _nested_errors(v: Mapping[str, Any], skip_any_of: bool, skip_all_of_any_of: bool, path: str) -> list[_FieldError]:
    """A schema inside allOf/anyOf/oneOf/not may only validate values: it must not declare structure."""
    errs = _value_validation_errors(v, skip_any_of, skip_all_of_any_of, path)
    items = _sub(v, "items")
    if items is not None:
        errs += _nested_errors(items, False, False, _child(path, "items"))
    for k, p in _props(v).items():
        if isinstance(p, Mapping):
            errs += _nested_errors(p, False, False, _key(_child(path, "properties"), k))
    # (no `description` check: upstream's conversion to apiextensions drops descriptions)
    forbidden = (("type", "must be empty to be structural"), ("additionalProperties", "must be undefined to be "
                 "structural"), ("default", "must be undefined to be structural"))
    for key, msg in forbidden:
        if v.get(key) not in (None, ""):
            errs.append(_FieldError(_FORBIDDEN, _child(path, key), _OMIT, msg))
    for key in ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string"):
        if _bool(v, key):
            errs.append(_FieldError(_FORBIDDEN, _child(path, key), _OMIT, "must be false to be structural"))
    if v.get("x-kubernetes-validations"):
        errs.append(_FieldError(_FORBIDDEN, _child(path, "x-kubernetes-validations"), _OMIT,
                                "must be empty to be structural"))
    if "metadata" in _props(v):
        errs.append(_FieldError(_FORBIDDEN, _key(_child(path, "properties"), "metadata"), _OMIT,
                                "must not be specified in a nested context"))
    return errs


def _prune(x: Any, s: Mapping[str, Any] | None, parent: str, unknown: list[str], delete: bool) -> None:
    """structural pruning: record (and optionally drop) object fields the schema does not declare."""
    if s is not None and _bool(s, "x-kubernetes-preserve-unknown-fields"):
        _skip_prune(x, s, parent, unknown, delete)
        return
    if isinstance(x, dict):
        if s is None:
            for k in list(x):
                unknown.append(_child(parent, k))
                if delete:
                    del x[k]
            return
        props = _props(s)
        ap = s.get("additionalProperties")
        for k in list(x):
            if k in props:
                _prune(x[k], props[k], _child(parent, k), unknown, delete)
            elif isinstance(ap, Mapping):
                _prune(x[k], ap, _child(parent, k), unknown, delete)
            elif ap is True:
                pass  # not upstream (validate_class_variables refuses it): anything goes below
            else:
                unknown.append(_child(parent, k))
                if delete:
                    del x[k]
    elif isinstance(x, list):
        items = _sub(s, "items") if s is not None else None
        for i, v in enumerate(x):
            _prune(v, items, f"{parent}[{i}]", unknown, delete)


def _skip_prune(x: Any, s: Mapping[str, Any], parent: str, unknown: list[str], delete: bool) -> None:
    if isinstance(x, dict):
        props = _props(s)
        ap = _sub(s, "additionalProperties")
        for k, v in x.items():
            if k in props:
                _prune(v, props[k], _child(parent, k), unknown, delete)
            elif ap is not None:
                _prune(v, ap, _child(parent, k), unknown, delete)
    elif isinstance(x, list):
        items = _sub(s, "items")
        if items is not None:
            for i, v in enumerate(x):
                _skip_prune(v, items, f"{parent}[{i}]", unknown, delete)


def _default(x: Any, s: Mapping[str, Any] | None) -> None:
    """structuraldefaulting.Default: missing or null fields get their default, recursively (in place)."""
    if s is None:
        return
    if isinstance(x, dict):
        props = _props(s)
        for k, p in props.items():
            if isinstance(p, Mapping) and p.get("default") is not None and x.get(k) is None:
                x[k] = copy.deepcopy(p["default"])
        ap = _sub(s, "additionalProperties")
        for k in list(x):
            if k in props:
                _default(x[k], props[k])
            elif ap is not None:
                if x[k] is None and ap.get("default") is not None:
                    x[k] = copy.deepcopy(ap["default"])
                _default(x[k], ap)
    elif isinstance(x, list):
        items = _sub(s, "items")
        for i in range(len(x)):
            if x[i] is None and items is not None and items.get("default") is not None:
                x[i] = copy.deepcopy(items["default"])
            _default(x[i], items)


# An array at the root of a variable's schema has no CEL type: the apiserver types a root schema as a resource
# (it adds kind, apiVersion and metadata) and that copy drops `items`, so rules cannot be compiled. Measured on
# the corpus: only when the root itself has rules (then every node with rules is refused so).
_NO_TYPE_INFO = ("internal error: failed to construct type information for x-kubernetes-validations rules: unable "
                 "to convert structural schema to CEL declarations")
_NO_DECL_TYPE = "rule compiler initialization error: failed to convert to declType for CEL validation rules"


def _default_errors(s: Mapping[str, Any], path: str, root: bool = False) -> list[_FieldError]:
    """structuraldefaulting.ValidateDefaults: every default (root, items, properties) is pruned-clean and valid."""
    errs: list[_FieldError] = []
    d = s.get("default")
    if d is not None:
        dp = _child(path, "default")
        pruned = copy.deepcopy(d)
        _prune(pruned, s, "", [], delete=True)
        if not _strict_equal(pruned, d):
            errs.append(_FieldError(_INVALID, dp, d, "must not have unknown fields"))
        found = _to_field_errors(dp, _oa_validate(s, d, "", strip=False).errors)
        if found:
            errs += found
        else:
            # the apiserver validates a default as an update of itself: transition rules compare it with itself
            errs += _cel_errors(s, d, d, dp, _SCHEMA_VALUES, root=root)
    items = _sub(s, "items")
    if items is not None:
        errs += _default_errors(items, _child(path, "items"))
    for k, p in _props(s).items():
        errs += _default_errors(p, _key(_child(path, "properties"), k))
    return errs


def _has_newlines(s: str) -> bool:
    return "\n" in s or "\r" in s


def _field_path_error(field_path: str, s: Mapping[str, Any]) -> str | None:
    """cel.ValidFieldPath: `.a.b` / `['a']` steps must name declared fields (or map keys)."""
    tokens = [t for t in re.split(r"([.\[\]])", field_path) if t != ""]
    i = 0
    schema = s
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok not in ("[", "."):
            return f"expected [ or . but got: {tok}"
        if i >= len(tokens):
            return "unexpected end of JSON path"
        name = tokens[i]
        i += 1
        if tok == "[":
            if len(name) < 2 or name[0] != "'" or name[-1] != "'":
                return f"expected single quoted string but got {name}"
            name = name[1:-1].replace("\\'", "'").replace("\\\\", "\\")
            if i >= len(tokens):
                return "unexpected end of JSON path"
            if tokens[i] != "]":
                return f"expected ] but got {tokens[i]}"
            i += 1
        if "properties" in schema:
            nxt = _props(schema).get(name)
            if not isinstance(nxt, Mapping):
                return "does not refer to a valid field"
            schema = nxt
        elif (ap := _sub(schema, "additionalProperties")) is not None:
            schema = ap
        else:
            return "does not refer to a valid field"
    return None


def _rule_errors(s: Mapping[str, Any], path: str) -> list[_FieldError]:
    """The checks upstream runs on x-kubernetes-validations before compiling them (compiling needs CEL)."""
    errs: list[_FieldError] = []
    rules = s.get("x-kubernetes-validations")
    for i, r in enumerate(rules if isinstance(rules, list) else []):
        rp = _key(_child(path, "x-kubernetes-validations"), i)
        rule, msg = r.get("rule") or "", r.get("message") or ""
        mexpr, reason, fp = r.get("messageExpression") or "", r.get("reason") or "", r.get("fieldPath") or ""
        if not rule.strip():
            errs.append(_FieldError(_REQUIRED, _child(rp, "rule"), _OMIT, "rule is not specified"))
        elif msg and not msg.strip():
            errs.append(_FieldError(_INVALID, _child(rp, "message"), msg, "message must be non-empty if specified"))
        elif len(msg) > 2048:
            errs.append(_FieldError(_INVALID, _child(rp, "message"), msg[:10] + "...",
                                    "message must have a maximum length of 2048 characters"))
        elif _has_newlines(msg.strip()):
            errs.append(_FieldError(_INVALID, _child(rp, "message"), msg, "message must not contain line breaks"))
        elif _has_newlines(rule.strip()) and not msg.strip():
            errs.append(_FieldError(_REQUIRED, _child(rp, "message"), _OMIT,
                                    "message must be specified if rule contains line breaks"))
        if mexpr and not mexpr.strip():
            errs.append(_FieldError(_REQUIRED, _child(rp, "messageExpression"), _OMIT,
                                    "messageExpression must be non-empty if specified"))
        if reason and reason not in _SUPPORTED_REASONS:
            errs.append(_not_supported(_child(rp, "reason"), reason, _SUPPORTED_REASONS))
        if fp and not fp.strip():
            errs.append(_FieldError(_INVALID, _child(rp, "fieldPath"), fp, "fieldPath must be non-empty if specified"))
        if _has_newlines(fp):
            errs.append(_FieldError(_INVALID, _child(rp, "fieldPath"), fp, "fieldPath must not contain line breaks"))
        if fp and (why := _field_path_error(fp, s)):
            errs.append(_FieldError(_INVALID, _child(rp, "fieldPath"), fp, f"fieldPath must be a valid path: {why}"))
    return errs


def _schema_errors(s: Mapping[str, Any], path: str, array_root: bool = False) -> list[_FieldError]:
    """validateSchema: types, example and enum values against the schema, properties XOR additionalProperties,
    recursively; then, on a node with x-kubernetes-validations, the static rule checks, the rules' typing, and when
    nothing at or under the node was found, its example and enum values against its rules and those under it."""
    schema, cel_errs = _schema_and_cel_errors(s, path, array_root, typed=True, uncorrelatable=None, root=True)
    return schema + cel_errs


def _schema_and_cel_errors(s: Mapping[str, Any], path: str, array_root: bool, typed: bool,
                           uncorrelatable: str | None, root: bool = False) -> tuple[list[_FieldError],
                                                                                    list[_FieldError]]:
    """(schema errors, CEL errors) as upstream's OpenAPISchemaErrorList keeps them apart: only schema errors keep a
    node's rules from being typed; any error keeps its example and enums from being evaluated. `typed`: the node
    has a CEL context (not under not/allOf/oneOf/anyOf). `uncorrelatable`: the path of the first list's `items`
    above the node (ClusterClass variable lists are atomic: old and new items cannot be matched), where a rule
    using oldSelf is refused once its node's rules are typed."""
    t = s.get("type") or ""
    if t and t not in VALID_TYPES:
        return [_not_supported(_child(path, "type"), t, VALID_TYPES)], []
    errs: list[_FieldError] = []
    cel_errs: list[_FieldError] = []
    if s.get("example") is not None:
        errs += _to_field_errors(_child(path, "example"), _oa_validate(s, s["example"], "").errors)
    raw_enum = s.get("enum")
    enum = [(i, e) for i, e in enumerate(raw_enum if isinstance(raw_enum, list) else []) if e is not None]
    for i, e in enum:
        errs += _to_field_errors(_key(_child(path, "enum"), i), _oa_validate(s, e, "").errors)
    children: list[tuple[Mapping[str, Any], str, bool]] = []
    ap = _sub(s, "additionalProperties")
    if ap is not None:
        if _props(s):
            errs.append(_FieldError(_FORBIDDEN, path, _OMIT, "additionalProperties and properties are mutually "
                                                             "exclusive"))
        children.append((ap, _child(path, "additionalProperties"), typed))
    children += [(p, _key(_child(path, "properties"), k), typed) for k, p in _props(s).items()]
    for key in ("items", "not"):
        sub = _sub(s, key)
        if sub is not None:
            children.append((sub, _child(path, key), typed and key == "items"))
    for key in ("allOf", "oneOf", "anyOf"):
        children += [(sub, _key(_child(path, key), i), False) for i, sub in enumerate(_subs(s, key))]
    # a list's items cannot be correlated; upstream's validateSchema sets its uncorrelatablePath variable when it visits
    # the items and reads it again for the node's own rules, so a list's own oldSelf rules are refused so too
    items_path = _child(path, "items")
    listed = uncorrelatable or (items_path if _sub(s, "items") is not None else None)
    for sub, sub_path, sub_typed in children:
        schema_sub, cel_sub = _schema_and_cel_errors(sub, sub_path, array_root, sub_typed,
                                                     listed if sub_path == items_path else uncorrelatable)
        errs += schema_sub
        cel_errs += cel_sub
    uncorrelatable = listed
    if not s.get("x-kubernetes-validations"):
        return errs, cel_errs
    errs += _rule_errors(s, path)
    if not errs and typed and array_root:
        cel_errs.append(_FieldError(_INTERNAL, _child(path, "x-kubernetes-validations"), _OMIT, _NO_TYPE_INFO))
    elif not errs and typed:
        # cel.Compile: each rule and messageExpression type-checked against this node's type (celcheck.py)
        self_type = celcheck.node_type(s, root)
        rules = s.get("x-kubernetes-validations")
        for i, r in enumerate(rules if isinstance(rules, list) else []):
            if not isinstance(r, Mapping):
                continue
            rp = _key(_child(path, "x-kubernetes-validations"), i)
            rule = str(r.get("rule") or "")
            compiled = celcheck.compile_rule(r, self_type) if self_type is not None else \
                celcheck.RuleCompilation(uses_old_self=cel.uses_old_self(rule))
            if compiled.error:
                cel_errs.append(_FieldError(_INVALID, _child(rp, "rule"), _rule_struct(r), compiled.error))
            if compiled.message_error:
                cel_errs.append(_FieldError(_INVALID, _child(rp, "messageExpression"), _rule_struct(r),
                                            compiled.message_error))
            if compiled.uses_old_self and uncorrelatable is not None:
                cel_errs.append(_FieldError(
                    _INVALID, _child(rp, "rule"), rule,
                    f"oldSelf cannot be used on the uncorrelatable portion of the schema within {uncorrelatable}"))
    if errs or cel_errs:
        return errs, cel_errs
    if s.get("example") is not None:
        cel_errs += _cel_errors(s, s["example"], _OMIT, _child(path, "example"), _SCHEMA_VALUES)
    for i, e in enum:
        cel_errs += _cel_errors(s, e, _OMIT, _key(_child(path, "enum"), i), _SCHEMA_VALUES)
    return errs, cel_errs


def _root_schema_errors(var: str, s: Any, path: str) -> list[_FieldError]:
    """validateRootSchema: each stage only runs when the previous one found nothing, as upstream."""
    errs = _check_schema(s, path, var)
    if errs:
        return errs
    errs = sorted(_structural_errors(s, _FIELD_LEVEL, path), key=str)
    if errs:
        return errs
    errs = _default_errors(s, path, root=True)
    if errs:
        return errs
    return _schema_errors(s, path, array_root=s.get("type") == "array" and bool(s.get("x-kubernetes-validations")))


def _x_metadata_errors(s: Mapping[str, Any], path: str) -> list[_FieldError]:
    errs: list[_FieldError] = []
    for node, p in _walk_schemas(s, path, nested=False):
        xm = node.get("x-metadata")
        if isinstance(xm, Mapping):
            errs += _validate_metadata(xm, _child(p, "x-metadata"))
    return errs


# ---------------------------------------------------------------------------------------------------------------
# Public API.
# ---------------------------------------------------------------------------------------------------------------


def _schema_of(d: Any) -> Any:
    schema = d.get("schema") if isinstance(d, Mapping) else None
    return schema.get("openAPIV3Schema") if isinstance(schema, Mapping) else None


def validate_class_variables(defs: Sequence[Mapping[str, Any]], path: str = "spec.variables") -> list[str]:
    """ClusterClass `spec.variables` problems, one message per problem, prefixed by the field path
    (e.g. `spec.variables[podSecurityStandard].schema.openAPIV3Schema.properties[enabled].default: ...`)."""
    return [str(e) for e in class_variable_errors(defs, path)]


def class_variable_errors(defs: Sequence[Mapping[str, Any]], path: str = "spec.variables") -> list[FieldError]:
    """`validate_class_variables` as admission causes (upstream's ClusterClass webhook refuses them)."""
    if not isinstance(defs, list):
        return [_FieldError(_INVALID, path, _OMIT, "must be a list of variables").as_field_error()]
    errs: list[_FieldError] = []
    seen: set[str] = set()
    for d in defs:
        name = d.get("name") if isinstance(d, Mapping) else None
        if isinstance(name, str):
            if name in seen:
                errs.append(_FieldError(_INVALID, _child(_key(path, name), "name"), name,
                                        f"variable name must be unique. Variable with name {go_quote(name)} is "
                                        "defined more than once"))
            seen.add(name)
    for i, d in enumerate(defs):
        if not isinstance(d, Mapping):
            errs.append(_FieldError(_INVALID, _key(path, i), _OMIT, "must be an object"))
            continue
        name = d.get("name")
        if not isinstance(name, str):
            name = "" if name is None else str(name)
        p = _key(path, name)
        if not name:
            errs.append(_FieldError(_REQUIRED, _child(p, "name"), _OMIT, "variable name must be defined"))
        if name == BUILTIN:
            errs.append(_FieldError(_INVALID, _child(p, "name"), name, f'"{BUILTIN}" is a reserved variable name'))
        if "." in name:
            errs.append(_FieldError(_INVALID, _child(p, "name"), name, 'variable name cannot contain "."'))
        if d.get("required") is not None and not isinstance(d["required"], bool):
            errs.append(_FieldError(_INVALID, _child(p, "required"), d["required"], "must be a boolean"))
        errs += _validate_metadata(d.get("deprecatedV1Beta1Metadata"), _child(p, "deprecatedV1Beta1Metadata"))
        schema = _schema_of(d)
        sp = _child(_child(p, "schema"), "openAPIV3Schema")
        if not isinstance(schema, Mapping) or not schema:
            errs.append(_FieldError(_REQUIRED, sp, _OMIT, "a variable needs a schema"))
            continue
        errs += _x_metadata_errors(schema, sp)
        errs += _root_schema_errors(name, schema, sp)
    return [e.as_field_error() for e in errs]


def _definitions(defs: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Mapping[str, Any]], set[str]]:
    """name -> definition (the first one), and the names defined more than once (upstream: a conflict)."""
    index: dict[str, Mapping[str, Any]] = {}
    dup: set[str] = set()
    for d in defs:
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            continue
        if d["name"] in index:
            dup.add(d["name"])
        else:
            index[d["name"]] = d
    return index, dup


def _usable_schema(d: Mapping[str, Any]) -> Mapping[str, Any] | None:
    s = _schema_of(d)
    return s if isinstance(s, Mapping) and not _check_schema(s, "", str(d.get("name"))) else None


def _default_value(value: Any, schema: Mapping[str, Any], name: str) -> Any:
    wrapped = {name: copy.deepcopy(value)}
    _default(wrapped, {"type": "object", "properties": {name: schema}})
    return wrapped[name]


def default_values(defs: Sequence[Mapping[str, Any]], values: Sequence[Mapping[str, Any]],
                   top_level_missing: bool = True) -> list[dict[str, Any]]:
    """Defaulted copies of `values` ({name, value} entries), as upstream's variable defaulting.

    Existing entries keep their order and get nested defaults (missing or null fields, in arrays and maps too; a
    null value takes the variable's default). With `top_level_missing` (Cluster variables; False for MachineDeployment
    / MachinePool overrides), variables the Cluster does not set and whose schema has a top-level default are
    appended in definition order. Entries that are not defined, duplicated or whose schema is broken are returned
    unchanged: `validate_values` / `validate_class_variables` report them."""
    index, dup = _definitions(defs)
    present = {v.get("name") for v in values if isinstance(v, Mapping)}
    counts: dict[Any, int] = {}
    for v in values:
        if isinstance(v, Mapping):
            counts[v.get("name")] = counts.get(v.get("name"), 0) + 1
    out: list[dict[str, Any]] = []
    for v in values:
        entry = copy.deepcopy(dict(v)) if isinstance(v, Mapping) else v
        name = entry.get("name") if isinstance(entry, dict) else None
        d = index.get(name) if isinstance(name, str) else None
        schema = _usable_schema(d) if d is not None and name not in dup and counts.get(name) == 1 else None
        if isinstance(entry, dict) and schema is not None and isinstance(name, str):
            entry["value"] = _default_value(entry.get("value"), schema, name)
        out.append(entry)
    if top_level_missing:
        for name, d in index.items():
            schema = _usable_schema(d)
            if name in present or name in dup or schema is None or schema.get("default") is None:
                continue
            out.append({"name": name, "value": _default_value(None, schema, name)})
    return out


def validate_values(defs: Sequence[Mapping[str, Any]], values: Sequence[Mapping[str, Any]],
                    path: str = "spec.topology.variables", overrides: bool = False,
                    old_values: Sequence[Mapping[str, Any]] | None = None) -> list[str]:
    """`value_errors` as upstream prints them."""
    return [str(e) for e in value_errors(defs, values, path, overrides, old_values)]


def value_errors(defs: Sequence[Mapping[str, Any]], values: Sequence[Mapping[str, Any]],
                 path: str = "spec.topology.variables", overrides: bool = False,
                 old_values: Sequence[Mapping[str, Any]] | None = None) -> list[FieldError]:
    """Problems with a Cluster's variable values (or, with `overrides`, a MachineDeployment / MachinePool /
    control plane's `variables.overrides`, where nothing is required), as upstream's messages under `path`.

    The schemas' CEL rules (`x-kubernetes-validations`) are evaluated (`cel.py`); transition rules (those using
    `oldSelf`) only against `old_values`, the values before an update. Validate defaulted values
    (`default_values`), as upstream's webhook does."""
    old_index = {v.get("name"): v.get("value") for v in old_values or [] if isinstance(v, Mapping)}
    errs: list[_FieldError] = []
    seen: set[str] = set()
    for v in values:
        name = str(v.get("name", "")) if isinstance(v, Mapping) else ""
        if name in seen:
            errs.append(_FieldError(_INVALID, _key(path, name), _raw(v.get("value")),
                                    f"variable {go_quote(name)} is set more than once"))
        seen.add(name)
    if errs:
        return [e.as_field_error() for e in errs]
    index, dup = _definitions(defs)
    if dup:
        listed = "[" + ",".join(f"Name: {d.get('name')}" for d in defs if isinstance(d, Mapping)) + "]"
        causes = ", ".join(f"variable {go_quote(n)} has conflicting definitions" for n in sorted(dup))
        return [_FieldError(_INVALID, path, listed, "variable definitions in the ClusterClass not valid: "
                            + (causes if len(dup) == 1 else f"[{causes}]")).as_field_error()]
    if not overrides:
        for name, d in index.items():
            if d.get("required") is True and name not in seen:
                errs.append(_FieldError(_REQUIRED, path, _OMIT, f"required variable {go_quote(name)} must be set"))
    for v in values:
        name = str(v.get("name", "")) if isinstance(v, Mapping) else ""
        value = v.get("value") if isinstance(v, Mapping) else None
        fld = _key(path, name)
        definition = index.get(name)
        if definition is None:
            errs.append(_FieldError(_INVALID, fld, _raw(value), "variable is not defined"))
            continue
        errs += _value_errors(name, value, _schema_of(definition), fld, old_index.get(name, _OMIT))
    return [e.as_field_error() for e in errs]


def _value_errors(name: str, value: Any, schema: Any, fld: str, old: Any = _OMIT) -> list[_FieldError]:
    """ValidateClusterVariable: the value against its schema, then fields the schema does not declare, then the
    CEL rules (`old`: the value before an update, for transition rules)."""
    raw = _raw(value)
    problem = _json_problem(value)
    if problem:
        return [_FieldError(_INVALID, _child(fld, "value"), raw, f"variable {go_quote(name)} could not be parsed: "
                                                                 f"{problem}")]
    conv = _check_schema(schema, "schema", name) if isinstance(schema, Mapping) and schema else \
        [_FieldError(_REQUIRED, "schema.openAPIV3Schema")]
    if conv:
        return [_FieldError(_INTERNAL, fld, _OMIT, f"failed to convert schema definition for variable "
                                                   f"{go_quote(name)}; ClusterClass should be checked: "
                                                   f"[{', '.join(map(str, conv))}]")]
    result = _oa_validate(schema, value, "")
    if result.errors:
        return _to_field_errors(_child(fld, "value"), result.errors, raw)
    unknown: list[str] = []
    _prune(copy.deepcopy(value), schema, "", unknown, delete=True)
    if unknown:
        # upstream prunes the value wrapped as `variableValue` and strips "variableValue." from the paths: one that
        # starts at a list index keeps the wrapper's name
        fields = ",".join(sorted(f"variableValue{u}" if u.startswith("[") else u for u in unknown))
        return [_FieldError(_INVALID, fld, raw, f"failed validation: {go_quote(fields)} field(s) are not specified "
                                                f"in the variable schema of variable {go_quote(name)}")]
    return _cel_errors(schema, value, old, _child(fld, "value"), raw)


def _cel_errors(s: Mapping[str, Any], value: Any, old: Any, path: str, raw: Any,
                root: bool = False, untyped: bool = False) -> list[_FieldError]:
    """apiextensions' CEL validator: this node's rules, then properties, map entries, items (null skipped).
    `raw` is the value errors show (a variable's whole value, as upstream's variable validation shows it), or
    _SCHEMA_VALUES: a default, example or enum value of a ClusterClass, where a failed rule shows the value at the
    node and an evaluation error the node's type, as the apiserver's validator does. `root`: `s` is typed as a
    resource root (the validator of a root default)."""
    if value is None:
        return []
    errs: list[_FieldError] = []
    rules = s.get("x-kubernetes-validations")
    if untyped or (root and s.get("type") == "array"):
        # a root array has no CEL type (_NO_TYPE_INFO), nor has anything under it: each value whose node has rules is
        # refused once with the compiler's error, nothing is evaluated (measured on the parity corpus)
        untyped = True
        if isinstance(rules, list) and rules:
            errs.append(_FieldError(_INVALID, path, s.get("type") or "", _NO_DECL_TYPE))
    elif isinstance(rules, list) and rules:
        has_old = not isinstance(old, _Omit) and old is not None
        self_v = cel.to_cel(value, s)
        old_v = cel.to_cel(old, s) if has_old else None
        self_type = celcheck.node_type(s, root)  # once per value node, for each of its rules
        for rule in rules:
            if isinstance(rule, Mapping):
                # a list or an object is not shown (the apiserver omits its value from the error)
                shown = _OMIT if isinstance(value, list | Mapping) else value
                failed, error = (shown, s.get("type") or "") if raw is _SCHEMA_VALUES else (raw, raw)
                errs += _rule_outcome(rule, self_type, self_v, old_v, has_old, path, failed, error)
    # without a type, a property has no field type to validate with: the apiserver leaves it out (items and map
    # values are still visited, with no type either)
    props = _props(s) if not untyped else {}
    if isinstance(value, Mapping):
        old_map = old if isinstance(old, Mapping) else {}
        extra = _sub(s, "additionalProperties")
        for k in sorted(value):
            if k in props:
                errs += _cel_errors(props[k], value[k], old_map.get(k, _OMIT), _child(path, k), raw,
                                    untyped=untyped)
            elif extra is not None:
                errs += _cel_errors(extra, value[k], old_map.get(k, _OMIT), _key(path, k), raw, untyped=untyped)
    items = _sub(s, "items")
    if isinstance(value, list) and items is not None:
        for i, v in enumerate(value):  # atomic lists: items have no old value to correlate with
            errs += _cel_errors(items, v, _OMIT, _key(path, i), raw, untyped=untyped)
    return errs


_SCHEMA_VALUES: Final = object()


def _rule_outcome(rule: Mapping[str, Any], self_type: celcheck.CelType | None, self_v: Any, old_v: Any,
                  has_old: bool, path: str, raw: Any, error_raw: Any) -> list[_FieldError]:
    text = str(rule.get("rule") or "").strip()
    if not text:
        return []
    compiled = celcheck.compile_rule(rule, self_type) if self_type is not None else celcheck.RuleCompilation()
    if compiled.error:  # the validator compiles every rule first: one that does not compile is not run
        return [_FieldError(_INVALID, path, error_raw, f"rule compile error: {compiled.error}")]
    message = str(rule.get("message") or "").strip()
    rule_str = message or text
    if cel.uses_old_self(text) and not has_old:
        return []  # a transition rule runs only on updates
    try:
        ok = cel.evaluate(text, self_v, old_v, has_old)
    except cel.CELCompileError as e:
        return [_FieldError(_INVALID, path, error_raw, str(e))]
    except cel.CELError as e:
        detail = str(e)
        if detail == "no such overload":
            return [_FieldError(_INVALID, path, error_raw, f"'{detail}': call arguments did not match a supported "
                                                           f"operator, function or macro signature for rule: "
                                                           f"{rule_str}")]
        return [_FieldError(_INVALID, path, error_raw, f"{detail} evaluating rule: {rule_str}")]
    if ok is True or (not isinstance(ok, bool) and bool(ok) and type(ok).__name__ == "BoolType"):
        return []
    fp = str(rule.get("fieldPath") or "")
    here = _child(path, fp.lstrip(".")) if fp else path
    detail = ""
    expr = str(rule.get("messageExpression") or "")
    if expr:
        try:
            got = cel.evaluate(expr, self_v, old_v, has_old)
            if isinstance(got, str) and got.strip() and "\n" not in got.strip():
                detail = got.strip()
        except cel.CELError:
            detail = ""
    if not detail:
        detail = message or f"failed rule: {text}"
    reason = rule.get("reason")
    if reason == "FieldValueForbidden":
        return [_FieldError(_FORBIDDEN, here, _OMIT, detail)]
    if reason == "FieldValueRequired":
        return [_FieldError(_REQUIRED, here, _OMIT, detail)]
    if reason == "FieldValueDuplicate":
        return [_FieldError(_DUPLICATE, here, raw)]
    return [_FieldError(_INVALID, here, raw, detail)]


def values_map(defs: Sequence[Mapping[str, Any]], values: Sequence[Mapping[str, Any]],
               overrides: Sequence[Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """name -> defaulted value, `overrides` (MachineDeployment / MachinePool / control plane) replacing the
    Cluster's values: the variables a patch template sees (besides `builtin`). Values are copies."""
    out = {v["name"]: v.get("value") for v in default_values(defs, values)
           if isinstance(v, dict) and isinstance(v.get("name"), str)}
    for v in default_values(defs, overrides or [], top_level_missing=False):
        if isinstance(v, dict) and isinstance(v.get("name"), str):
            out[v["name"]] = v.get("value")
    return out


def cel_rules(defs: Sequence[Mapping[str, Any]], path: str = "spec.variables") -> list[str]:
    """The x-kubernetes-validations rules in the variable schemas, as
    `spec.variables[v].schema.openAPIV3Schema....x-kubernetes-validations[i]` (evaluated on values: cel.py)."""
    out: list[str] = []
    for node, p in _variable_schema_nodes(defs, path):
        rules = node.get("x-kubernetes-validations")
        for i in range(len(rules) if isinstance(rules, list) else 0):
            out.append(_key(_child(p, "x-kubernetes-validations"), i))
    return out


def unsupported_keywords(defs: Sequence[Mapping[str, Any]], path: str = "spec.variables") -> list[str]:
    """Schema keywords Cluster API's variable schema does not have (e.g. `multipleOf`, `nullable`, `title`): upstream
    drops them when it decodes the ClusterClass, and so they are ignored here too. One path per keyword."""
    out: list[str] = []
    for node, p in _variable_schema_nodes(defs, path):
        out += [_child(p, k) for k in node if k not in _SCHEMA_KEYS]
    return out


def _variable_schema_nodes(defs: Sequence[Mapping[str, Any]], path: str) -> Iterator[tuple[Mapping[str, Any], str]]:
    """Every node of every variable's schema, with its path
    (`<path>[v].schema.openAPIV3Schema...`)."""
    for d in defs:
        schema = _schema_of(d)
        if not isinstance(schema, Mapping):
            continue
        yield from _walk_schemas(schema, _child(_child(_key(path, d.get("name", "")), "schema"), "openAPIV3Schema"))
