"""Checks upstream's webhooks borrow from apimachinery (label values, qualified names, DNS subdomains, label
selectors, int-or-percent, CIDRs, Kubernetes semver), with apimachinery's messages. Pure."""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from capd_py.api.admission.fielderrors import FieldError, invalid

LABEL_VALUE_MAX = 63
_LABEL_VALUE_FMT = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
_LABEL_VALUE_RE = re.compile(f"^{_LABEL_VALUE_FMT}$")
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(f"^{_QUALIFIED_NAME_FMT}$")
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
DNS1123_SUBDOMAIN_MAX = 253
# upstream util/version.KubeSemver (format only; capd-py's CRDs also bound the range, api/versions.py)
KUBE_SEMVER = re.compile(r"^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)([-0-9a-zA-Z_\.+]*)?$")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """validation.RegexError: its examples joined as Go joins them ("'a',  or 'b', regex used ...")."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = ",  or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {shown}, regex used for validation is '{fmt}')"


def label_value_errors(value: str) -> list[str]:
    """validation.IsValidLabelValue."""
    errs = []
    if len(value) > LABEL_VALUE_MAX:
        errs.append(f"must be no more than {LABEL_VALUE_MAX} characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error("a valid label must be an empty string or consist of alphanumeric characters, '-', "
                                 "'_' or '.', and must start and end with an alphanumeric character",
                                 _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    """validation.IsDNS1123Subdomain."""
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(f"must be no more than {DNS1123_SUBDOMAIN_MAX} characters")
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                                 "'-' or '.', and must start and end with an alphanumeric character",
                                 _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


_DNS1123_LABEL_RE = re.compile(f"^{_DNS1123_LABEL_FMT}$")
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_RE = re.compile(f"^{_DNS1035_LABEL_FMT}$")
DNS_LABEL_MAX = 63


def _label_errors(value: str, pattern: re.Pattern[str], message: str) -> list[str]:
    out = []
    if len(value) > DNS_LABEL_MAX:
        out.append(f"must be no more than {DNS_LABEL_MAX} characters")
    if not pattern.fullmatch(value):
        out.append(message)
    return out


def dns1123_label_errors(value: str) -> list[str]:
    """validation.IsDNS1123Label."""
    return _label_errors(value, _DNS1123_LABEL_RE, regex_error(
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
        "end with an alphanumeric character", _DNS1123_LABEL_FMT, "my-name", "123-abc"))


def is_dns1123_label(value: str) -> bool:
    """A lowercase RFC 1123 label of at most 63 characters (a container, host or namespace name)."""
    return not dns1123_label_errors(value)


def dns1035_label_errors(value: str) -> list[str]:
    """validation.IsDNS1035Label."""
    return _label_errors(value, _DNS1035_LABEL_RE, regex_error(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
        "character, and end with an alphanumeric character", _DNS1035_LABEL_FMT, "my-name", "abc-123"))


def qualified_name_errors(value: str) -> list[str]:
    """validation.IsQualifiedName (label and annotation keys), message for message: an empty prefix or a bad one is
    reported and the name part is still checked; an empty name part is both empty and not matching."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += [f"prefix part {m}" for m in dns1123_subdomain_errors(prefix)]
    else:
        return ["a qualified name " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, *_QUALIFIED_NAME_EXAMPLES)
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > LABEL_VALUE_MAX:
        errs.append(f"name part must be no more than {LABEL_VALUE_MAX} characters")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, *_QUALIFIED_NAME_EXAMPLES))
    return errs


_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                       "alphanumeric character")
_QUALIFIED_NAME_EXAMPLES = ("MyName", "my.name", "123-abc")


TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024


def object_meta_errors(meta: dict[str, Any] | None, path: str) -> list[FieldError]:
    """Cluster API's ObjectMeta.Validate: label keys and values (metav1validation.ValidateLabels) and annotation
    keys and total size (apivalidation.ValidateAnnotations), for a template's metadata."""
    meta = meta or {}
    errs: list[FieldError] = []
    for key, value in sorted((meta.get("labels") or {}).items()):
        errs += [invalid(f"{path}.labels", key, m) for m in qualified_name_errors(key)]
        errs += [invalid(f"{path}.labels", value, m) for m in label_value_errors(str(value))]
    annotations = meta.get("annotations") or {}
    for key in sorted(annotations):
        errs += [invalid(f"{path}.annotations", key, m) for m in qualified_name_errors(key.lower())]
    size = sum(len(k) + len(str(v)) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(FieldError("FieldValueTooLong", f"{path}.annotations",
                               f"must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"))
    return errs


_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector_error(selector: dict[str, Any] | None) -> str | None:
    """metav1.LabelSelectorAsSelector's error for a malformed selector (None when it parses)."""
    sel = selector or {}
    for key, value in sorted((sel.get("matchLabels") or {}).items()):
        for m in qualified_name_errors(key):
            return f"key: Invalid value: {key!r}: {m}".replace("'", '"', 2)
        for m in label_value_errors(str(value)):
            return f"values[0][{key}]: Invalid value: {str(value)!r}: {m}".replace("'", '"', 2)
    for e in sel.get("matchExpressions") or []:
        op, values = e.get("operator"), e.get("values") or []
        if op not in _OPERATORS:
            return f"{str(op).lower()!r} is not a valid label selector operator".replace("'", '"')
        if op in ("In", "NotIn") and not values:
            return "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty"
        if op in ("Exists", "DoesNotExist") and values:
            return "values: Invalid value: " + str(values) + ": values set must be empty for exists and does not exist"
        for m in qualified_name_errors(str(e.get("key") or "")):
            return f"key: Invalid value: {e.get('key')!r}: {m}".replace("'", '"', 2)
    return None


def selector_string(selector: dict[str, Any] | None) -> str:
    """labels.Selector.String(): requirements sorted by key."""
    sel = selector or {}
    terms: list[tuple[str, str]] = [(k, f"{k}={v}") for k, v in (sel.get("matchLabels") or {}).items()]
    for e in sel.get("matchExpressions") or []:
        key, op, values = str(e.get("key")), e.get("operator"), sorted(e.get("values") or [])
        text = {"In": f"{key} in ({','.join(values)})", "NotIn": f"{key} notin ({','.join(values)})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(str(op), key)
        terms.append((key, text))
    return ",".join(t for _, t in sorted(terms, key=lambda t: t[0]))


_PERCENT = re.compile(r"^[0-9]+%$")


def int_or_percent_error(value: Any) -> str | None:
    """intstr.GetScaledValueFromIntOrPercent's error (None for an int or `N%`)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    if isinstance(value, str) and _PERCENT.match(value):
        return None
    if isinstance(value, str):
        return f"invalid value for IntOrString: invalid value {value!r}: must be an int or a percentage".replace(
            "'", '"')
    return "invalid type: neither int nor percentage"


def int_or_percent_text(value: Any) -> str:
    return str(value)


def cidr_error(cidr: str) -> str | None:
    """net.ParseCIDR's error."""
    try:
        if "/" not in cidr:
            raise ValueError
        ipaddress.ip_network(cidr, strict=False)
    except ValueError:
        return f"invalid CIDR address: {cidr}"
    return None


def int_value(value: Any) -> int:
    """intstr.IntOrString.IntValue(): an int as it is; a string through strconv.Atoi, 0 when it does not parse
    ("50%", "0\"", "" are all 0). Upstream's KCP validates and rolls out with it."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else 0
