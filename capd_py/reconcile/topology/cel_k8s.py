"""The Kubernetes CEL libraries ClusterClass variable rules may call (k8s.io/apiserver pkg/cel/library v0.35, what
upstream's apiextensions validator links): IP and CIDR (over Go's net/netip parsing), URL (Go's net/url), quantity
(apimachinery's resource.Quantity) and semver (blang/semver v4), with their conversion errors worded as Go's.
Written from those libraries' behaviour; checked against upstream's own output by
tests/unit/reconcile/topology/test_variables_parity.py. Pure."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import ROUND_UP, Decimal, localcontext
from typing import Any

from celpy import celtypes

from capd_py.reconcile.topology.gostrconv import go_quote
from capd_py.reconcile.topology.gotemplate import go_sprint
from capd_py.reconcile.topology.sprig_url import URLError, parse_request_uri, parse_url


class LibraryError(Exception):
    """A conversion that fails (`ip("x")`): the evaluation error's text, as cel-go reports the library's error."""


class NoOverload(Exception):
    """A call with arguments of other types (cel-go: no such overload)."""


# -- net/netip ----------------------------------------------------------------------------------------------------

class _AddrError(ValueError):
    def __init__(self, given: str, msg: str, at: str | None = None) -> None:
        text = f"ParseAddr({go_quote(given)}): {msg}"
        super().__init__(text + (f" (at {go_quote(at)})" if at is not None else ""))


@dataclass(frozen=True)
class Addr:
    """A netip.Addr: 4 or 16 bytes and a zone."""
    raw: bytes
    zone: str = ""

    @property
    def is4(self) -> bool:
        return len(self.raw) == 4

    @property
    def is4in6(self) -> bool:
        return len(self.raw) == 16 and self.raw[:12] == b"\x00" * 10 + b"\xff\xff"


def _ipv4_fields(given: str, s: str) -> bytes:
    fields: list[int] = []
    val = digits = 0
    for i, c in enumerate(s):
        if "0" <= c <= "9":
            if digits == 1 and val == 0:
                raise _AddrError(given, "IPv4 field has octet with leading zero")
            val = val * 10 + ord(c) - 48
            digits += 1
            if val > 255:
                raise _AddrError(given, "IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _AddrError(given, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise _AddrError(given, "IPv4 address too long")
            fields.append(val)
            val = digits = 0
        else:
            raise _AddrError(given, "unexpected character", s[i:])
    if len(fields) < 3:
        raise _AddrError(given, "IPv4 address too short")
    return bytes([*fields, val])


def _ipv6(given: str) -> Addr:
    s, zone = given, ""
    if "%" in s:
        s, zone = s.split("%", 1)
        if not zone:
            raise _AddrError(given, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return Addr(bytes(ip), zone)
    i = 0
    while i < 16:
        off, acc = 0, 0
        while off < len(s):
            c = s[off]
            if c in "0123456789abcdefABCDEF":
                acc = (acc << 4) + int(c, 16)
            else:
                break
            if off > 3:
                raise _AddrError(given, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _AddrError(given, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _AddrError(given, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _AddrError(given, "embedded IPv4 address must replace the final 2 fields of the address", s)
            if i + 4 > 16:
                raise _AddrError(given, "too many hex fields to fit an embedded IPv4 at the end of the address", s)
            ip[i:i + 4] = _ipv4_fields(given, s)
            s, i = "", i + 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _AddrError(given, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _AddrError(given, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _AddrError(given, "multiple :: in address", s)
            ellipsis, s = i, s[1:]
            if not s:
                break
    if s:
        raise _AddrError(given, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _AddrError(given, "address string too short")
        n = 16 - i
        ip[ellipsis + n:16] = ip[ellipsis:i]
        ip[ellipsis:ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _AddrError(given, "the :: must expand to at least one field of zeros")
    return Addr(bytes(ip), zone)


def parse_addr(s: str) -> Addr:
    """netip.ParseAddr; ValueError with its message."""
    for c in s:
        if c == ".":
            return Addr(_ipv4_fields(s, s))
        if c == ":":
            return _ipv6(s)
        if c == "%":
            raise _AddrError(s, "missing IPv6 address")
    raise _AddrError(s, "unable to parse IP")


def _ip(s: str) -> Addr:
    """The library's parseIPAddr: no zone, no IPv4-mapped IPv6."""
    try:
        addr = parse_addr(s)
    except ValueError as e:
        raise LibraryError(f"IP Address {go_quote(s)} parse error during conversion from string: {e}") from None
    if addr.zone:
        raise LibraryError(f"IP address {go_quote(s)} with zone value is not allowed")
    if addr.is4in6:
        raise LibraryError(f"IPv4-mapped IPv6 address {go_quote(s)} is not allowed")
    return addr


@dataclass(frozen=True)
class Prefix:
    addr: Addr
    bits: int


def _cidr(s: str) -> Prefix:
    def fail(msg: str) -> LibraryError:
        return LibraryError("network address parse error during conversion from string: network address parse "
                             f"error during conversion from string: netip.ParsePrefix({go_quote(s)}): {msg}")
    slash = s.rfind("/")
    if slash < 0:
        raise fail("no '/'")
    try:
        addr = parse_addr(s[:slash])
    except ValueError as e:
        raise fail(str(e)) from None
    if not addr.is4 and addr.zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    bits_text = s[slash + 1:]
    if len(bits_text) > 1 and not "1" <= bits_text[0] <= "9" or not re.fullmatch(r"[+-]?[0-9]+", bits_text):
        raise fail(f"bad bits after slash: {go_quote(bits_text)}")
    bits = int(bits_text)
    if not 0 <= bits <= (32 if addr.is4 else 128):
        raise fail("prefix length out of range")
    if addr.is4in6:
        raise LibraryError(f"network address parse error during conversion from string: IPv4-mapped IPv6 address "
                           f"{go_quote(s)} is not allowed")
    return Prefix(addr, bits)


# -- resource.Quantity --------------------------------------------------------------------------------------------

_QUANTITY_FORMAT = ("quantities must match the regular expression "
                    "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
_DECIMAL_SUFFIXES = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_MAX_INT64 = Decimal((1 << 63) - 1)


@dataclass(frozen=True)
class Quantity:
    value: Decimal


def _split_quantity(s: str) -> tuple[str, str]:
    """parseQuantityString: the numeric part and the suffix (ValueError with ErrFormatWrong's text)."""
    pos, end = 0, len(s)
    if s[:1] in ("-", "+"):
        pos = 1
    i = pos
    while i < end and s[i].isascii() and s[i].isdigit():
        i += 1
    if i >= end:
        return s, ""
    if s[i] == ".":
        i += 1
        while i < end and s[i].isascii() and s[i].isdigit():
            i += 1
        if i >= end:
            return s, ""
    number, start = s[:i], i
    while i < end and s[i] in "eEinumkKMGTP":
        i += 1
    if i < end and s[i] in "-+":
        i += 1
    while i < end and s[i].isascii() and s[i].isdigit():
        i += 1
    if i < end:
        raise ValueError(_QUANTITY_FORMAT)
    return number, s[start:]


def parse_quantity(s: str) -> Quantity:
    """resource.ParseQuantity's value (ValueError with its message): rounded up to a nanounit, as it does."""
    if not s:
        raise ValueError(_QUANTITY_FORMAT)
    number, suffix = _split_quantity(s)
    binary = suffix in _BINARY_SUFFIXES
    if suffix in _DECIMAL_SUFFIXES:
        factor = Decimal(10) ** _DECIMAL_SUFFIXES[suffix]
    elif binary:
        factor = Decimal(2 ** _BINARY_SUFFIXES[suffix])
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        factor = Decimal(10) ** int(suffix[1:])
    else:
        raise ValueError("unable to parse quantity's suffix")
    digits = number.lstrip("+-")
    if digits in ("", "."):
        if digits == "." or not number:
            raise ValueError("unable to parse numeric part of quantity")
        digits = "0"
    with localcontext() as ctx:
        ctx.prec = 200
        value = Decimal(digits if not digits.startswith(".") else "0" + digits) * factor
        value = value.quantize(Decimal("1e-9"), rounding=ROUND_UP) if value else value
        if binary and value > _MAX_INT64:
            value = _MAX_INT64
    return Quantity(-value if number.startswith("-") else value)


# -- semver -------------------------------------------------------------------------------------------------------

_IDENT = r"(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_SEMVER = re.compile(rf"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-({_IDENT}(?:\.{_IDENT})*))?"
                     r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?")


def is_semver(s: str) -> bool:
    """blang/semver v4's Parse accepts it: strict semver 2.0, no `v`."""
    return _SEMVER.fullmatch(s) is not None


# -- the CEL functions --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class URL:
    host: str


def _string(v: Any) -> str:
    if not isinstance(v, str):
        raise NoOverload
    return str(v)


def _url(s: str) -> URL:
    try:
        parse_request_uri(s)
        u = parse_url(s)
    except URLError as e:
        raise LibraryError(f"URL parse error during conversion from string: {e}") from None
    return URL(u.host.decode("utf-8", "replace"))


def _is(convert: Callable[[str], Any]) -> Callable[[Any], Any]:
    def check(v: Any) -> Any:
        try:
            convert(_string(v))
        except (LibraryError, ValueError):
            return celtypes.BoolType(False)
        return celtypes.BoolType(True)
    return check


def _quantity(v: Any) -> Quantity:
    try:
        return parse_quantity(_string(v))
    except ValueError as e:
        raise LibraryError(str(e)) from None


def _compare(a: Any, b: Any) -> int:
    if not (isinstance(a, Quantity) and isinstance(b, Quantity)):
        raise NoOverload
    return (a.value > b.value) - (a.value < b.value)


def _family(v: Any) -> Any:
    if not isinstance(v, Addr):
        raise NoOverload
    return celtypes.IntType(4 if v.is4 else 6)


def _prefix_length(v: Any) -> Any:
    if not isinstance(v, Prefix):
        raise NoOverload
    return celtypes.IntType(v.bits)


def _get_host(v: Any) -> Any:
    if not isinstance(v, URL):
        raise NoOverload
    return celtypes.StringType(v.host)


def _format_string(v: Any) -> str:
    """cel-go's FormatString (%s): lists and maps element-wise, scalars as CEL's string()."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, celtypes.DoubleType | float):
        return go_sprint(float(v))  # CEL's string() of a double: Go's %g
    if isinstance(v, list):
        return "[" + ", ".join(_format_string(x) for x in v) + "]"
    if isinstance(v, dict):
        items = sorted((_format_string(k), _format_string(x)) for k, x in v.items())
        return "{" + ", ".join(f"{k}: {x}" for k, x in items) + "}"
    if isinstance(v, int | str):
        return str(v)
    raise LibraryError(f"error during formatting: string clause can only be used on strings, bools, bytes, ints, "
                       f"doubles, maps, lists, types, durations, and timestamps, was given {type(v).__name__}")


def _format(template: Any, args: Any) -> Any:
    """cel-go's ext strings `format` (StringsVersion 2, as the apiserver): %s, %d and %%; the other clauses
    (%f, %e, %b, %x, %o) are refused as not implemented here."""
    if not isinstance(template, str) or not isinstance(args, list):
        raise NoOverload
    out, i, n = [], 0, 0
    while i < len(template):
        c = template[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        if template[i + 1:i + 2] == "%":
            out.append("%")
            i += 2
            continue
        clause = template[i + 1:i + 2]
        if n >= len(args):
            raise LibraryError(f"index {n} out of range")
        arg = args[n]
        if clause == "s":
            out.append(_format_string(arg))
        elif clause == "d":
            if isinstance(arg, bool) or not isinstance(arg, int):
                raise LibraryError("error during formatting: decimal clause can only be used on integers, was given "
                                   f"{type(arg).__name__}")
            out.append(str(int(arg)))
        else:
            raise LibraryError(f"format clause %{clause} is not implemented by capd-py")
        n += 1
        i += 2
    return celtypes.StringType("".join(out))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "format": _format,
    "isIP": _is(_ip), "ip": lambda v: _ip(_string(v)), "family": _family,
    "isCIDR": _is(_cidr), "cidr": lambda v: _cidr(_string(v)), "prefixLength": _prefix_length,
    "isURL": _is(parse_request_uri), "url": lambda v: _url(_string(v)), "getHost": _get_host,
    "isQuantity": _is(parse_quantity), "quantity": _quantity,
    "compareTo": lambda a, b: celtypes.IntType(_compare(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_compare(a, b) == 1),
    "isLessThan": lambda a, b: celtypes.BoolType(_compare(a, b) == -1),
    "isSemver": lambda v: celtypes.BoolType(is_semver(_string(v))),
}
