"""YAML as Kubernetes reads it: what sigs.k8s.io/yaml (kubectl, client-go, the API machinery) makes of a manifest,
for every YAML capd-py reads (`apply -f`, templates and flavors, ClusterResourceSet resources, kubeconfigs, patches).

PyYAML's SafeLoader types plain scalars by YAML 1.1 its own way, and where it differs from go-yaml v2 (under
sigs.k8s.io/yaml) a manifest kubectl applies unchanged meant something else here: `released: 2024-01-01` became a
date (then "unmarshallable object"), `at: 12:30` the sexagesimal int 750, `y`/`n` stayed strings where Go reads
booleans, `1e3` stayed a string where Go reads 1000. This loader resolves plain scalars as go-yaml v2's resolve()
does and then gives what YAMLToJSON's JSON is: keys as strings (Go's conversion), numbers as the JSON text
encoding/json writes (an integral float is an int up to 1e21), timestamps as the strings they are, NaN and
infinities refused (JSON has none). tests/unit/api/test_kubeyaml.py checks it against Go's own output on the cases
where YAML 1.1 readers differ (tests/fixtures/parity/yaml.jsonl.gz, `make parity-corpus`)."""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import yaml

YAMLError = yaml.YAMLError

_GO_SCALAR = "tag:capd-py.dev,2026:go-scalar"
# go-yaml v2's resolve table: the plain scalars it looks up before trying numbers (resolve.go, resolveMapList)
_MAP: dict[str, Any] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), None),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# the first characters for which go-yaml v2 tries anything but a string (its resolveTable hints)
_HINTS = "+-0123456789yYnNtTfFoO~."
_YAML_STYLE_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_INT64 = (-(1 << 63), (1 << 63) - 1)
_UINT64 = (1 << 64) - 1


def _go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), then ParseUint: base prefixes 0x / 0o / 0b / a leading 0 (octal)."""
    sign, digits = (text[0], text[1:]) if text[:1] in ("+", "-") else ("", text)
    low = digits.lower()
    base, body = ((16, digits[2:]) if low.startswith("0x") else (8, digits[2:]) if low.startswith("0o")
                  else (2, digits[2:]) if low.startswith("0b") else (8, digits[1:]) if len(digits) > 1
                  and digits[0] == "0" else (10, digits))
    if not body or not all(c in "0123456789abcdef"[:base] for c in body.lower()):
        return None
    value = int(body, base) * (-1 if sign == "-" else 1)
    if _INT64[0] <= value <= _INT64[1] or (sign != "-" and value <= _UINT64):
        return value
    return None


def resolve(text: str) -> Any:
    """A plain scalar as go-yaml v2 resolves it (resolve.go): the table, then int (strconv's base prefixes), then
    float; else the string. (go-yaml v2 also tries timestamps, but decodes them into an interface{} as the string
    they are, and no timestamp reads as a number: nothing to do for them here.)"""
    if text == "":
        return None
    if text[0] not in _HINTS:
        return text
    if text in _MAP:
        return _MAP[text]
    if text[0] == ".":
        return float(text) if re.fullmatch(r"\.[0-9]+([eE][-+]?[0-9]+)?", text) else text
    if text[0] in "+-0123456789":
        plain = text.replace("_", "")
        value = _go_int(plain)
        if value is not None:
            return value
        if _YAML_STYLE_FLOAT.match(plain):
            number = float(plain)
            # strconv.ParseFloat refuses what does not fit a float64 (1e400): the scalar stays a string
            return text if math.isinf(number) else number
    return text


def _go_float_key(f: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 32), as sigs.k8s.io/yaml writes a float map key."""
    if math.isnan(f):
        return ".nan"
    if math.isinf(f):
        return ".inf" if f > 0 else "-.inf"
    f32 = struct.unpack("f", struct.pack("f", f))[0]
    for p in range(1, 10):  # the shortest digits that read back as the same float32
        s = f"{f32:.{p - 1}e}"
        if struct.unpack("f", struct.pack("f", float(s)))[0] == f32:
            break
    mantissa, _, exp_text = s.partition("e")
    exp = int(exp_text)
    digits = mantissa.replace(".", "").lstrip("-").rstrip("0") or "0"
    sign = "-" if f32 < 0 else ""
    if exp < -4 or exp >= 6:  # Go's %g with the shortest digits: an exponent from 6 on (or below -4)
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    return sign + _plain_digits(digits, exp)


def _plain_digits(digits: str, exp: int) -> str:
    """`digits` (d.ddd) times 10**exp written without an exponent."""
    point = exp + 1
    if point <= 0:
        return "0." + "0" * -point + digits
    if point >= len(digits):
        return digits + "0" * (point - len(digits))
    return digits[:point] + "." + digits[point:]


def _key(k: Any) -> str:
    if isinstance(k, str):
        return k
    if isinstance(k, bool):
        return "true" if k else "false"
    if isinstance(k, int) and _INT64[0] <= k <= _INT64[1]:
        return str(k)
    if isinstance(k, float):
        return _go_float_key(k)
    raise yaml.constructor.ConstructorError(None, None, f"unsupported map key {k!r} (sigs.k8s.io/yaml reads "
                                            f"string, integer, float and boolean keys only)")


def _json_value(v: Any) -> Any:
    """What encoding/json writes for `v` and Python's json reads back: an integral float below 1e21 is an int
    (Go writes it without a point), NaN and infinities are refused; through lists and maps (keys are strings by
    then: `_key`)."""
    if isinstance(v, dict):
        return {k: _json_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_value(x) for x in v]
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            raise yaml.constructor.ConstructorError(None, None, f"json: unsupported value: {v} (JSON has no NaN "
                                                    f"or infinity)")
        if v == int(v) and abs(v) < 1e21:
            return int(Decimal(repr(v)))
    return v


# libyaml's parser where PyYAML has it (a CRD directory: 0.1 s instead of 1-2 s of pure-Python scanning, on every
# `capd-py init`, clusterctl repository and API server a test starts); the resolution and construction below are
# the same Python either way
_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class KubeLoader(_BASE):  # type: ignore[valid-type,misc]
    """A safe loader with go-yaml v2's scalar resolution and sigs.k8s.io/yaml's JSON conversion."""


KubeLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag in ("tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
KubeLoader.add_implicit_resolver(_GO_SCALAR, re.compile(r"^.*$", re.S), [*_HINTS, ""])


def _construct_go_scalar(loader: KubeLoader, node: yaml.ScalarNode) -> Any:
    return resolve(str(loader.construct_scalar(node)))


def _construct_tagged(kind: str) -> Any:
    def construct(loader: KubeLoader, node: yaml.ScalarNode) -> Any:
        text = str(loader.construct_scalar(node))
        value = resolve(text)
        if kind == "timestamp":
            return text
        if kind == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        ok = {"int": isinstance(value, int) and not isinstance(value, bool), "float": isinstance(value, float),
              "bool": isinstance(value, bool), "null": value is None}[kind]
        if not ok:
            raise yaml.constructor.ConstructorError(None, None, f"cannot decode !!str `{text}` as a !!{kind}",
                                                    node.start_mark)
        return value
    return construct


def _construct_binary(loader: KubeLoader, node: yaml.ScalarNode) -> str | bytes:
    """`!!binary`: go-yaml v2 gives the decoded bytes as a string, so text is a str here too; bytes that are not
    UTF-8 (a gzip file in cloud-init's write_files) stay bytes, which JSON cannot carry (Go's JSON would replace
    them with U+FFFD)."""
    raw = base64.b64decode(str(loader.construct_scalar(node)).encode())
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def _construct_untagged(loader: KubeLoader, node: yaml.Node) -> Any:
    """A node whose tag go-yaml v2 cannot resolve (`!foo`, `!!str:`, `<<` outside a mapping's keys): a scalar's
    text, a sequence or a mapping as if it had no tag."""
    if isinstance(node, yaml.ScalarNode):
        return str(loader.construct_scalar(node))
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    build = _construct_mapping(loader, node)  # type: ignore[arg-type]
    data = next(build)
    for _ in build:  # the generator fills the mapping after handing it out (PyYAML's two-step construction)
        pass
    return data


def _construct_mapping(loader: KubeLoader, node: yaml.MappingNode) -> Iterator[dict[str, Any]]:
    data: dict[str, Any] = {}
    yield data
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        data[_key(key)] = loader.construct_object(value_node, deep=True)


KubeLoader.add_constructor(_GO_SCALAR, _construct_go_scalar)
for _kind in ("int", "float", "bool", "null", "timestamp"):
    KubeLoader.add_constructor(f"tag:yaml.org,2002:{_kind}", _construct_tagged(_kind))
KubeLoader.add_constructor("tag:yaml.org,2002:binary", _construct_binary)
KubeLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)
KubeLoader.add_constructor("tag:yaml.org,2002:merge", _construct_untagged)
KubeLoader.add_constructor(None, _construct_untagged)


def load(text: str | bytes) -> Any:
    """One YAML document as sigs.k8s.io/yaml reads it (yaml.YAMLError when it cannot)."""
    return _json_value(yaml.load(text, Loader=KubeLoader))  # noqa: S506 - KubeLoader is a SafeLoader


def load_all(text: str | bytes) -> Iterator[Any]:
    """Every document of a multi-document YAML stream, each as `load` reads it."""
    for doc in yaml.load_all(text, Loader=KubeLoader):  # noqa: S506 - KubeLoader is a SafeLoader
        yield _json_value(doc)
