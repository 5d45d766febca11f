"""Go `text/template` with sprig's hermetic functions, as Cluster API renders ClusterClass patch templates.

Upstream (release-1.13, internal/controllers/topology/cluster/patches/inline/json_patch_generator.go) renders
`valueFrom.template` and `enabledIf` with::

    tpl, err := template.New("tpl").Funcs(sprig.HermeticTxtFuncMap()).Parse(text)   // missingkey: default
    data := json.Unmarshal(json.Marshal(variables)) into map[string]interface{}
    tpl.Execute(&buf, data)

A ClusterClass written for upstream must render the same bytes here, so this is a port of Go's lexer, parser and
executor and of sprig v3.3.0 (Masterminds/semver v3.4.0), not a look-alike. What that means in practice:

- Every number in the data is a float64 (the JSON round trip): `render` turns ints in `data` into floats, so
  `{{ .replicas }}` prints `3`, `1000000` prints `1e+06`, and `printf "%d" .replicas` prints `%!d(float64=3)`,
  all as upstream does.
- A missing map key, and a JSON null, print `<no value>` (Go's default `missingkey` option, which upstream keeps).
  `.a.b` where `a` is missing is `<no value>` too; where `a` is null it is an error ("nil pointer evaluating").
- Only the functions upstream has: Go's builtins and sprig's hermetic map. Helm's `toYaml`/`fromYaml`/`include`
  are not sprig functions, so upstream fails to parse a template using them ("function "toYaml" not defined")
  and so does this. A few sprig functions are not implemented here (dates, crypto key generation, `randInt`, ...):
  using one is a parse error that says so, never a silent difference.
- Typed function parameters behave as in Go: `{{ .missing | replace "+" "_" }}` is "invalid value; expected
  string", `{{ repeat .n "x" }}` with a float64 `n` is "wrong type for value; expected int; got float64".

Regular expressions (regexMatch, regexReplaceAll, ...) are Go RE2 patterns run by Python's `re` after a
translation that keeps Go's meaning (ASCII \\d \\w \\s, `$` = end of text, `\\z`, `\\Q..\\E`, octal escapes,
`[[:digit:]]`, Go's leftmost-first matching and empty-match rules); what Go refuses is refused with Go's message,
and the few RE2 features Python lacks (`\\p{...}` classes, `(?U)`, negated POSIX classes) are errors that say so.

Errors are `TemplateError` with Go's messages and positions: parse errors "template: tpl:LINE: ...", execution
errors "template: tpl:LINE:COL: executing "tpl" at <node>: ...".
"""

from __future__ import annotations

import base64
import binascii
import bisect
import copy
import decimal
import hashlib
import json
import math
import re
import urllib.parse
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NoReturn

from capd_py.api import godur
from capd_py.reconcile.topology import gotime, sprig_text, sprig_url
from capd_py.reconcile.topology.gostrconv import go_quote


class TemplateError(ValueError):
    """A template that does not parse or does not execute; the message is Go's (with a short position)."""


# ---------------------------------------------------------------------------------------------------------------
# Values. Python values stand for Go values: str=string, bool=bool, int=int, float=float64, list=[]interface{},
# dict=map[string]interface{}, None=a nil interface{}. NO_VALUE is Go's invalid reflect.Value (what a missing map
# key evaluates to); the executor turns a nil interface into it at the end of every pipeline command, as Go does.
# ---------------------------------------------------------------------------------------------------------------


class _NoValue:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<no value>"


NO_VALUE: Final = _NoValue()


class _Missing:
    """Go's `missingVal`: "no piped value" (distinct from a piped invalid value)."""

    __slots__ = ()


_MISSING: Final = _Missing()


class Int64(int):
    """A Go int64 (what sprig's arithmetic returns): prints like an int, but is not assignable to `int`."""


class _Uint8(int):
    """A byte (`index "abc" 0`)."""


class _StrList(list[str]):
    """A Go []string (splitList, sortAlpha, keys, ...)."""


class _IntList(list[int]):
    """A Go []int (until, untilStep)."""


class _StrMap(dict[str, str]):
    """A Go map[string]string (split, splitn)."""


class _GoObject:
    """A Go value with methods (only sprig's `semver` result): fields are zero-argument methods."""

    go_type = "object"

    def go_method(self, name: str) -> Callable[[], Any] | None:
        return None


def go_type_name(v: Any) -> str:
    """`fmt.Sprintf("%T", v)` for the values templates produce."""
    if v is None or v is NO_VALUE:
        return "<nil>"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, Int64):
        return "int64"
    if isinstance(v, _Uint8):
        return "uint8"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float64"
    if isinstance(v, complex):
        return "complex128"
    if isinstance(v, str):
        return "string"
    if isinstance(v, _StrList):
        return "[]string"
    if isinstance(v, _IntList):
        return "[]int"
    if isinstance(v, list):
        return "[]interface {}"
    if isinstance(v, _StrMap):
        return "map[string]string"
    if isinstance(v, dict):
        return "map[string]interface {}"
    if isinstance(v, _GoObject):
        return v.go_type
    if isinstance(v, gotime.GoTime):
        return "time.Time"
    return type(v).__name__


def _go_kind(v: Any) -> str:
    """`reflect.Value.Kind().String()` (sprig's kindOf)."""
    if v is None or v is NO_VALUE:
        return "invalid"
    if isinstance(v, list):
        return "slice"
    if isinstance(v, dict):
        return "map"
    if isinstance(v, _GoObject):
        return "ptr"
    if isinstance(v, gotime.GoTime):
        return "struct"
    return go_type_name(v)


# ---------------------------------------------------------------------------------------------------------------
# Go formatting: strconv.Quote, fmt's %v / Sprint / Sprintf, encoding/json.
# ---------------------------------------------------------------------------------------------------------------


def _quote_rune(c: int, ascii_only: bool = False) -> str:
    """strconv.QuoteRune (`%q` of an integer)."""
    if c < 0 or c > 0x10FFFF or 0xD800 <= c <= 0xDFFF:
        c = 0xFFFD
    ch = chr(c)
    if ch == "'":
        return "'\\''"
    if ch == "\\":
        return "'\\\\'"
    body = go_quote(ch, ascii_only)[1:-1]
    return "'" + body.replace('\\"', '"') + "'"


def _float_digits(f: float) -> tuple[str, int]:
    """The shortest decimal digits that round-trip `abs(f)` (Go's and Python's are the same), and the decimal
    point position: value = 0.DIGITS * 10**dp."""
    d = decimal.Decimal(repr(abs(f))).normalize()
    _, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits))
    assert isinstance(exp, int)
    return ds, len(ds) + exp


def _fmt_e_digits(neg: bool, digits: str, exp10: int, upper: bool = False, min_exp_digits: int = 2) -> str:
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    e = f"{abs(exp10):0{min_exp_digits}d}"
    return ("-" if neg else "") + mant + ("E" if upper else "e") + ("-" if exp10 < 0 else "+") + e


def _fmt_f_digits(neg: bool, digits: str, dp: int) -> str:
    if dp <= 0:
        s = "0." + "0" * (-dp) + digits
    elif dp >= len(digits):
        s = digits + "0" * (dp - len(digits))
    else:
        s = digits[:dp] + "." + digits[dp:]
    return ("-" if neg else "") + s


def _fmt_float_shortest_g(f: float, upper: bool = False) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64), which is fmt's %v for a float64: `3`, `2.5`, `1e+06`, `1e-05`."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    neg = math.copysign(1.0, f) < 0
    if f == 0:
        return "-0" if neg else "0"
    digits, dp = _float_digits(f)
    exp10 = dp - 1
    # Go: with the shortest representation, %e is used when the exponent is < -4 or >= 6 (eprec = 6).
    if exp10 < -4 or exp10 >= 6:
        return _fmt_e_digits(neg, digits, exp10, upper)
    return _fmt_f_digits(neg, digits, dp)


def _fmt_v(v: Any) -> str:
    """fmt's %v."""
    if v is None or v is NO_VALUE:
        return "<nil>"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return _fmt_float_shortest_g(v)
    if isinstance(v, complex):
        imag = _fmt_float_shortest_g(v.imag)
        return f"({_fmt_float_shortest_g(v.real)}{'' if imag[0] in '+-' else '+'}{imag}i)"
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        return "[" + " ".join(_fmt_v(e) for e in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{_fmt_v(k)}:{_fmt_v(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, gotime.GoTime):
        return v.string()
    return str(v)


def _sprint(args: Sequence[Any]) -> str:
    """fmt.Sprint: spaces between operands when neither side is a string."""
    out: list[str] = []
    prev_string = True
    for i, a in enumerate(args):
        is_string = isinstance(a, str)
        if i > 0 and not is_string and not prev_string:
            out.append(" ")
        out.append(_fmt_v(a))
        prev_string = is_string
    return "".join(out)


def _sprintln(args: Sequence[Any]) -> str:
    return " ".join(_fmt_v(a) for a in args) + "\n"


def _bad_verb(verb: str, arg: Any, flags: str = "", width: int | None = None, prec: int | None = None) -> str:
    """`%!d(string=x)`: Go prints the value with %v and the directive's flags and width."""
    if arg is None or arg is NO_VALUE:
        return f"%!{verb}(<nil>)"
    return f"%!{verb}({go_type_name(arg)}={_fmt_arg(arg, 'v', flags, width, prec)})"


def _pad(s: str, width: int | None, flags: str, zero_ok: bool = False) -> str:
    if width is None or len(s) >= width:
        return s
    if "-" in flags:
        return s + " " * (width - len(s))
    if zero_ok and "0" in flags:
        sign = s[0] if s[:1] in "+- " else ""
        return sign + "0" * (width - len(s)) + s[len(sign):]
    return " " * (width - len(s)) + s


def _sign(neg: bool, flags: str) -> str:
    if neg:
        return "-"
    if "+" in flags:
        return "+"
    return " " if " " in flags else ""


def _fmt_int(v: int, verb: str, flags: str, width: int | None, prec: int | None) -> str:
    n = int(v)
    if verb == "c":
        return _pad(chr(n) if 0 <= n <= 0x10FFFF else "\ufffd", width, flags)
    if verb == "q":
        return _pad(_quote_rune(n, "+" in flags), width, flags)
    if verb == "U":
        s = f"U+{n:04X}"
        if "#" in flags and 0 <= n <= 0x10FFFF and chr(n).isprintable():
            s += f" '{chr(n)}'"
        return _pad(s, width, flags)
    bases = {"v": 10, "d": 10, "b": 2, "o": 8, "O": 8, "x": 16, "X": 16}
    if verb not in bases:
        return _bad_verb(verb, v, flags, width, prec)
    a = abs(n)
    digits = {10: str(a), 2: format(a, "b"), 8: format(a, "o"), 16: format(a, "x")}[bases[verb]]
    if verb == "X":
        digits = digits.upper()
    if prec is not None:
        digits = "" if prec == 0 and a == 0 else digits.zfill(prec)
    prefix = ""
    if verb == "O":
        prefix = "0o"
    elif "#" in flags:
        prefix = {"b": "0b", "o": "0" if not digits.startswith("0") else "", "x": "0x", "X": "0X"}.get(verb, "")
    sign = _sign(n < 0, flags)
    if "0" in flags and "-" not in flags and prec is None and width is not None:
        digits = digits.zfill(width - len(sign) - len(prefix))
    return _pad(sign + prefix + digits, width, flags)


def _fmt_float(f: float, verb: str, flags: str, width: int | None, prec: int | None) -> str:
    if verb in "xX" and math.isfinite(f):
        mant, _, exp = float.hex(abs(f)).partition("p")
        mant = mant.rstrip("0").rstrip(".") if "." in mant else mant
        e = int(exp)
        body = f"{mant}p{'-' if e < 0 else '+'}{abs(e):02d}"
        return _pad(_sign(math.copysign(1.0, f) < 0, flags) + (body.upper().replace("0X", "0X") if verb == "X"
                                                                else body), width, flags)
    if verb not in "vgGeEfF":
        return _bad_verb(verb, f, flags, width, prec)
    if math.isnan(f) or math.isinf(f):  # Go keeps Inf's sign, drops NaN's unless asked; never zero-pads
        s = "NaN" if math.isnan(f) else ("+Inf" if f > 0 else "-Inf")
        if s[0] == "+" and " " in flags and "+" not in flags:
            s = " Inf"
        elif s == "NaN" and ("+" in flags or " " in flags):
            s = ("+" if "+" in flags else " ") + s
        return _pad(s, width, flags)
    neg = math.copysign(1.0, f) < 0
    a = abs(f)
    if verb in "vgG":
        if prec is None:
            body = _fmt_float_shortest_g(a, upper=verb == "G")
        else:  # Python's %g agrees with Go's for an explicit precision (two-digit exponent, no trailing zeros)
            body = format(a, f".{max(prec, 1)}{'G' if verb == 'G' else 'g'}")
    elif verb in "eE":
        body = format(a, f".{6 if prec is None else prec}{verb}")
    else:
        body = format(a, f".{6 if prec is None else prec}f")
    return _pad(_sign(neg, flags) + body, width, flags, zero_ok=True)


def _fmt_str(s: str, verb: str, flags: str, width: int | None, prec: int | None) -> str:
    if verb in "vs":
        return _pad(s if prec is None else s[:prec], width, flags)
    if verb == "q":
        if prec is not None:
            s = s[:prec]
        if "#" in flags and "`" not in s and all(c == "\t" or (c.isprintable() and c != "\ufeff") for c in s):
            return _pad("`" + s + "`", width, flags)
        return _pad(go_quote(s, "+" in flags), width, flags)
    if verb in "xX":
        data = s.encode()
        if prec is not None:
            data = data[:prec]
        h = data.hex() if verb == "x" else data.hex().upper()
        if " " in flags:
            pre = ("0x" if verb == "x" else "0X") if "#" in flags else ""
            h = " ".join(pre + h[i:i + 2] for i in range(0, len(h), 2))
        elif "#" in flags and h:
            h = ("0x" if verb == "x" else "0X") + h
        return _pad(h, width, flags)
    return _bad_verb(verb, s, flags, width, prec)


def _go_syntax(v: Any, top: bool = True) -> str:
    """fmt's %#v of a JSON-like value (`[]interface {}{3, "a"}`, `map[string]interface {}{"k":1}`)."""
    if _invalid(v):
        return "<nil>" if top else "interface {}(nil)"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return go_quote(v)
    if isinstance(v, list):
        return go_type_name(v) + "{" + ", ".join(_go_syntax(e, False) for e in v) + "}"
    if isinstance(v, dict):
        return go_type_name(v) + "{" + ", ".join(f"{go_quote(str(k))}:{_go_syntax(v[k], False)}"
                                                 for k in sorted(v)) + "}"
    return _fmt_v(v)


def _fmt_arg(arg: Any, verb: str, flags: str, width: int | None, prec: int | None) -> str:
    if verb == "T":
        return _pad(go_type_name(arg), width, flags)
    if arg is None or arg is NO_VALUE:
        return _pad("<nil>", width, flags) if verb == "v" else _bad_verb(verb, arg)
    if isinstance(arg, bool):
        return _pad("true" if arg else "false", width, flags) if verb in "tv" else _bad_verb(verb, arg, flags, width,
                                                                                            prec)
    if isinstance(arg, int):
        return _fmt_int(arg, verb, flags, width, prec)
    if isinstance(arg, float):
        return _fmt_float(arg, verb, flags, width, prec)
    if isinstance(arg, complex):
        return _pad(_fmt_v(arg), width, flags) if verb in "vgG" else _bad_verb(verb, arg, flags, width, prec)
    if isinstance(arg, str):
        return _fmt_str(arg, verb, flags, width, prec)
    if isinstance(arg, list):  # fmt applies the verb (and width) to every element; nil elements print <nil>
        return "[" + " ".join(_fmt_elem(e, verb, flags, width, prec) for e in arg) + "]"
    if isinstance(arg, dict):
        return "map[" + " ".join(f"{_fmt_elem(k, verb, flags, width, prec)}:"
                                 f"{_fmt_elem(arg[k], verb, flags, width, prec)}" for k in sorted(arg)) + "]"
    return _fmt_str(str(arg), verb, flags, width, prec) if verb in "vsq" else _bad_verb(verb, arg, flags, width,
                                                                                         prec)


def _fmt_elem(e: Any, verb: str, flags: str, width: int | None, prec: int | None) -> str:
    if _invalid(e) and verb != "T":
        return _pad("<nil>", width, flags)
    return _fmt_arg(e, verb, flags, width, prec)


def _invalid(v: Any) -> bool:
    """reflect.Value.IsValid() is false: nil or a missing value."""
    return v is None or v is NO_VALUE


def _sprintf(fmt: str, args: Sequence[Any]) -> str:
    """fmt.Sprintf for the verbs templates use (v s d q t f F e E g G x X o O b c U T %), flags `+-# 0`, width and
    precision (incl. `*`); Go's `%!d(float64=3)`, `%!s(MISSING)` and `%!(EXTRA ...)` markers."""
    out: list[str] = []
    argi = 0
    reordered = False
    i, n = 0, len(fmt)

    def int_arg() -> int | None:  # intFromArg: the argument a `*` takes, None when it is not an int
        nonlocal argi
        a = args[argi] if argi < len(args) else None
        argi += 1
        return int(a) if isinstance(a, int) and not isinstance(a, bool) else None

    def number() -> int | None:  # parsenum: the digits at i, None when there are none
        nonlocal i
        k = i
        while i < n and fmt[i].isdigit():
            i += 1
        return int(fmt[k:i]) if i > k else None

    def arg_index() -> None:  # "[n]" picks the argument explicitly (then no EXTRA report, as Go)
        nonlocal i, argi, reordered
        if i < n and fmt[i] == "[":
            close = fmt.find("]", i)
            if close > i + 1 and fmt[i + 1:close].isdigit() and 1 <= int(fmt[i + 1:close]) <= len(args):
                argi, reordered = int(fmt[i + 1:close]) - 1, True
                i = close + 1

    while i < n:
        j = fmt.find("%", i)
        if j < 0:
            out.append(fmt[i:])
            break
        out.append(fmt[i:j])
        i = j + 1
        flags = ""
        while i < n and fmt[i] in "+-# 0":
            flags += fmt[i]
            i += 1
        arg_index()
        width: int | None = None
        if i < n and fmt[i] == "*":
            i += 1
            width = int_arg()
            if width is None:
                out.append("%!(BADWIDTH)")
            elif width < 0:
                flags += "-"
                width = -width
        else:
            width = number()
        prec: int | None = None
        if i < n and fmt[i] == ".":
            i += 1
            if i < n and fmt[i] == "*":
                i += 1
                prec = int_arg()
                if prec is None:
                    out.append("%!(BADPREC)")
                else:
                    prec = max(prec, 0)
            else:
                prec = number() or 0
        arg_index()
        if i >= n:
            out.append("%!(NOVERB)")
            break
        verb = fmt[i]
        i += 1
        if verb == "%":
            out.append("%")
            continue
        if argi >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        if verb == "v" and "#" in flags:  # Go's sharpV: Go syntax
            out.append(_pad(_go_syntax(args[argi]), width, flags.replace("#", "")))
        else:  # Go's plusV only adds struct field names: no sign
            out.append(_fmt_arg(args[argi], verb, flags.replace("+", "") if verb == "v" else flags, width, prec))
        argi += 1
    if argi < len(args) and not reordered:
        extra = ", ".join("<nil>" if a is None or a is NO_VALUE else f"{go_type_name(a)}={_fmt_v(a)}"
                          for a in args[argi:])
        out.append(f"%!(EXTRA {extra})")
    return "".join(out)


class _JSONError(Exception):
    pass


def _json_str(s: str, escape_html: bool) -> str:
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif c < 0x20:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(ch, f"\\u{c:04x}"))
        elif (escape_html and ch in "<>&") or c in (0x2028, 0x2029):
            out.append(f"\\u{c:04x}")
        elif 0xD800 <= c <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _json_float(f: float) -> str:
    """encoding/json's float64: shortest digits, exponent form only below 1e-6 or from 1e21 (`e-07` -> `e-7`)."""
    if math.isnan(f) or math.isinf(f):
        raise _JSONError(f"json: unsupported value: {_fmt_float_shortest_g(f)}")
    neg = math.copysign(1.0, f) < 0
    if f == 0:
        return "-0" if neg else "0"
    digits, dp = _float_digits(f)
    a = abs(f)
    if a < 1e-6 or a >= 1e21:
        s = _fmt_e_digits(neg, digits, dp - 1)
        return re.sub(r"e-0(\d)$", r"e-\1", s)
    return _fmt_f_digits(neg, digits, dp)


def _json_encode(v: Any, indent: str | None = None, escape_html: bool = True, level: int = 0) -> str:
    """encoding/json.Marshal / MarshalIndent(v, "", indent) of template values (map keys sorted, as Go)."""
    if v is None or v is NO_VALUE:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(int(v))
    if isinstance(v, float):
        return _json_float(v)
    if isinstance(v, str):
        return _json_str(v, escape_html)
    if isinstance(v, _GoObject):
        return _json_str(str(v), escape_html)
    if isinstance(v, gotime.GoTime):
        return _json_str(v.rfc3339(), escape_html)
    if isinstance(v, list | dict):
        if not v:
            return "[]" if isinstance(v, list) else "{}"
        if isinstance(v, list):
            items = [_json_encode(e, indent, escape_html, level + 1) for e in v]
            open_, close_ = "[", "]"
        else:
            sep = ": " if indent is not None else ":"
            items = [_json_str(str(k), escape_html) + sep + _json_encode(v[k], indent, escape_html, level + 1)
                     for k in sorted(v)]
            open_, close_ = "{", "}"
        if indent is None:
            return open_ + ",".join(items) + close_
        inner = "\n" + indent * (level + 1)
        return open_ + inner + ("," + inner).join(items) + "\n" + indent * level + close_
    raise _JSONError(f"json: unsupported type: {go_type_name(v)}")


# ---------------------------------------------------------------------------------------------------------------
# Masterminds/semver v3.4.0: NewVersion (coercing) and NewConstraint/Check, which sprig's semverCompare uses.
# ---------------------------------------------------------------------------------------------------------------

_S = r"[\t\n\f\r ]"  # Go's \s
_LOOSE_SEMVER: Final = re.compile(r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
                                  r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?")
_CV: Final = (r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
              r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?")
_OPS: Final = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^"
_CONSTRAINT: Final = re.compile(rf"{_S}*({_OPS}){_S}*({_CV}){_S}*")
_CONSTRAINT_RANGE: Final = re.compile(rf"{_S}*({_CV}){_S}+-{_S}+({_CV}){_S}*")
_FIND_CONSTRAINT: Final = re.compile(rf"({_OPS}){_S}*({_CV})")
_VALID_CONSTRAINT: Final = re.compile(rf"({_S}*({_OPS}){_S}*({_CV}){_S}*)((?:{_S}+|,{_S}*)({_OPS}){_S}*({_CV}){_S}*)*")
_SEMVER_ALLOWED: Final = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-0123456789")


class _SemverError(Exception):
    pass


def _parse_uint64(s: str) -> int:
    v = int(s)
    if v >= 1 << 64:
        raise _SemverError(f'error parsing version segment: strconv.ParseUint: parsing "{s}": value out of range')
    return v


def _validate_prerelease(p: str) -> None:
    for part in p.split("."):
        if part == "":
            raise _SemverError("invalid prerelease string")
        if part.isdigit() and part.isascii():
            if len(part) > 1 and part[0] == "0":
                raise _SemverError("version segment starts with 0")
        elif not set(part) <= _SEMVER_ALLOWED:
            raise _SemverError("invalid prerelease string")


def _validate_metadata(m: str) -> None:
    for part in m.split("."):
        if part == "" or not set(part) <= _SEMVER_ALLOWED:
            raise _SemverError("invalid metadata string")


def _compare_pre_part(s: str, o: str) -> int:
    if s == o:
        return 0
    if s == "":
        return -1 if o != "" else 1
    if o == "":
        return 1
    s_num, o_num = s.isdigit() and s.isascii(), o.isdigit() and o.isascii()
    if not s_num and not o_num:
        return 1 if s > o else -1
    if not o_num:
        return -1
    if not s_num:
        return 1
    return 1 if int(s) > int(o) else -1


def _compare_prerelease(v: str, o: str) -> int:
    sp, op = v.split("."), o.split(".")
    for i in range(max(len(sp), len(op))):
        d = _compare_pre_part(sp[i] if i < len(sp) else "", op[i] if i < len(op) else "")
        if d:
            return d
    return 0


class _SemverVersion(_GoObject):
    go_type = "*semver.Version"

    def __init__(self, major: int, minor: int, patch: int, pre: str, metadata: str, original: str) -> None:
        self.major, self.minor, self.patch = major, minor, patch
        self.pre, self.metadata, self.original = pre, metadata, original

    @classmethod
    def parse(cls, v: str) -> _SemverVersion:
        m = _LOOSE_SEMVER.fullmatch(v)
        if m is None:
            raise _SemverError("invalid semantic version")
        sv = cls(_parse_uint64(m.group(1)), _parse_uint64(m.group(2)[1:]) if m.group(2) else 0,
                 _parse_uint64(m.group(3)[1:]) if m.group(3) else 0, m.group(5) or "", m.group(8) or "", v)
        if sv.pre:
            _validate_prerelease(sv.pre)
        if sv.metadata:
            _validate_metadata(sv.metadata)
        return sv

    def __str__(self) -> str:
        return (f"{self.major}.{self.minor}.{self.patch}" + (f"-{self.pre}" if self.pre else "")
                + (f"+{self.metadata}" if self.metadata else ""))

    def compare(self, o: _SemverVersion) -> int:
        for a, b in ((self.major, o.major), (self.minor, o.minor), (self.patch, o.patch)):
            if a != b:
                return -1 if a < b else 1
        if self.pre == "" and o.pre == "":
            return 0
        if self.pre == "":
            return 1
        if o.pre == "":
            return -1
        return _compare_prerelease(self.pre, o.pre)

    def go_method(self, name: str) -> Callable[[], Any] | None:
        methods: dict[str, Callable[[], Any]] = {
            "Major": lambda: self.major, "Minor": lambda: self.minor, "Patch": lambda: self.patch,
            "Prerelease": lambda: self.pre, "Metadata": lambda: self.metadata, "Original": lambda: self.original,
            "String": lambda: str(self)}
        return methods.get(name)


@dataclass
class _SemverConstraint:
    con: _SemverVersion
    orig: str
    op: str
    minor_dirty: bool = False
    patch_dirty: bool = False
    dirty: bool = False

    def check(self, v: _SemverVersion, include_pre: bool) -> bool:
        if v.pre and not include_pre:
            return False
        c = self.con
        op = self.op
        if op in ("", "="):
            if self.dirty:
                return self._tilde(v)
            return v.compare(c) == 0
        if op == "!=":
            if self.dirty:
                if c.major != v.major:
                    return True
                if c.minor != v.minor and not self.minor_dirty:
                    return True
                if self.minor_dirty:
                    return False
                if c.patch != v.patch and not self.patch_dirty:
                    return True
                if self.patch_dirty:
                    if v.pre or c.pre:
                        return _compare_prerelease(v.pre, c.pre) != 0
                    return False
            return v.compare(c) != 0
        if op == ">":
            if not self.dirty:
                return v.compare(c) == 1
            if v.major != c.major:
                return v.major > c.major
            if self.minor_dirty:
                return False
            if self.patch_dirty:
                return v.minor > c.minor
            return v.compare(c) == 1
        if op == "<":
            return v.compare(c) < 0
        if op in (">=", "=>"):
            return v.compare(c) >= 0
        if op in ("<=", "=<"):
            if not self.dirty:
                return v.compare(c) <= 0
            if v.major > c.major:
                return False
            return not (v.major == c.major and v.minor > c.minor and not self.minor_dirty)
        if op in ("~", "~>"):
            return self._tilde(v)
        return self._caret(v)  # "^"

    def _tilde(self, v: _SemverVersion) -> bool:
        c = self.con
        if v.compare(c) < 0:
            return False
        if c.major == 0 and c.minor == 0 and c.patch == 0 and not self.minor_dirty and not self.patch_dirty:
            return True
        if v.major != c.major:
            return False
        return not (v.minor != c.minor and not self.minor_dirty)

    def _caret(self, v: _SemverVersion) -> bool:
        c = self.con
        if v.compare(c) < 0:
            return False
        if c.major > 0 or self.minor_dirty:
            return v.major == c.major
        if c.major == 0 and v.major > 0:
            return False
        if c.minor > 0 or self.patch_dirty:
            return v.minor == c.minor
        if c.minor == 0 and v.minor > 0:
            return False
        return c.patch == v.patch


def _is_x(s: str) -> bool:
    return s in ("x", "*", "X")


def _parse_constraint(s: str) -> _SemverConstraint:
    m = _CONSTRAINT.fullmatch(s)
    if m is None:
        raise _SemverError(f"improper constraint: {s}")
    ver = m.group(2)
    major, minor, patch, pre = m.group(3), m.group(4) or "", m.group(5) or "", m.group(6) or ""
    minor_dirty = patch_dirty = dirty = False
    if _is_x(major):
        ver, dirty = f"0.0.0{pre}", True
    elif _is_x(minor[1:]) or minor == "":
        minor_dirty = dirty = True
        ver = f"{major}.0.0{pre}"
    elif _is_x(patch[1:]) or patch == "":
        dirty = patch_dirty = True
        ver = f"{major}{minor}.0{pre}"
    try:
        con = _SemverVersion.parse(ver)
    except _SemverError:
        raise _SemverError("constraint parser error") from None
    return _SemverConstraint(con, m.group(2), m.group(1), minor_dirty, patch_dirty, dirty)


def _semver_check(constraint: str, version: str) -> bool:
    """semver.NewConstraint(constraint).Check(semver.NewVersion(version)) (sprig's semverCompare)."""
    for m in _CONSTRAINT_RANGE.finditer(constraint):  # "1.2 - 1.4" -> ">= 1.2, <= 1.4"
        constraint = constraint.replace(m.group(0), f">= {m.group(1)}, <= {m.group(11)} ", 1)
    groups: list[tuple[list[_SemverConstraint], bool]] = []
    for part in constraint.split("||"):
        if not _VALID_CONSTRAINT.fullmatch(part):
            raise _SemverError(f"improper constraint: {part}")
        found = [m.group(0) for m in _FIND_CONSTRAINT.finditer(part)] or [part]
        cs = [_parse_constraint(s) for s in found]
        groups.append((cs, any(c.con.pre for c in cs)))
    v = _SemverVersion.parse(version)
    return any(all(c.check(v, has_pre) for c in cs) for cs, has_pre in groups)


# ---------------------------------------------------------------------------------------------------------------
# Lexer (text/template/parse/lex.go).
# ---------------------------------------------------------------------------------------------------------------

_SPACE_CHARS: Final = " \t\r\n"
_KEYWORDS: Final = frozenset({"block", "break", "continue", "define", "else", "end", "if", "range", "template",
                              "with"})
# Item types printed as <val> by Go's item.String() (the keywords, plus "." and nil).
_KEYWORD_ITEMS: Final = _KEYWORDS | {"dot", "nil"}


@dataclass(frozen=True)
class _Item:
    typ: str
    val: str
    pos: int
    line: int

    def __str__(self) -> str:
        if self.typ == "eof":
            return "EOF"
        if self.typ == "error":
            return self.val
        if self.typ in _KEYWORD_ITEMS:
            return f"<{self.val}>"
        if len(self.val) > 10:
            return go_quote(self.val[:10]) + "..."
        return go_quote(self.val)


def _is_alnum(c: str) -> bool:
    return c == "_" or c.isalpha() or c.isdigit()


def _fmt_U(c: str) -> str:  # %#U
    return f"U+{ord(c):04X} '{c}'" if c.isprintable() else f"U+{ord(c):04X}"


def _has_left_trim(text: str, pos: int) -> bool:
    return text[pos:pos + 1] == "-" and text[pos + 1:pos + 2] != "" and text[pos + 1] in _SPACE_CHARS


def _has_right_trim(text: str, pos: int) -> bool:
    return text[pos:pos + 1] != "" and text[pos] in _SPACE_CHARS and text[pos + 1:pos + 2] == "-"


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.start = 0
        self.paren_depth = 0
        self.items: list[_Item] = []
        self._newlines = [i for i, c in enumerate(text) if c == "\n"]

    def line_at(self, pos: int) -> int:
        return 1 + bisect.bisect_left(self._newlines, pos)

    def run(self) -> list[_Item]:
        state: Callable[[], Any] | None = self.lex_text
        while state is not None:
            state = state()
        return self.items

    def emit(self, typ: str) -> None:
        self.items.append(_Item(typ, self.text[self.start:self.pos], self.start, self.line_at(self.start)))
        self.start = self.pos

    def errorf(self, msg: str) -> Callable[[], Any] | None:
        """Emit an error item and stop lexing (the parser raises it when it gets there)."""
        self.items.append(_Item("error", msg, self.start, self.line_at(self.start)))
        return None

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def accept(self, valid: str) -> bool:
        if self.pos < len(self.text) and self.text[self.pos] in valid:
            self.pos += 1
            return True
        return False

    def accept_run(self, valid: str) -> None:
        while self.accept(valid):
            pass

    def at_right_delim(self) -> tuple[bool, bool]:
        if _has_right_trim(self.text, self.pos) and self.text.startswith("}}", self.pos + 2):
            return True, True
        return self.text.startswith("}}", self.pos), False

    def at_terminator(self) -> bool:
        r = self.peek()
        return r == "" or r in _SPACE_CHARS or r in ".,|:()" or self.text.startswith("}}", self.pos)

    def lex_text(self) -> Callable[[], Any] | None:
        x = self.text.find("{{", self.pos)
        if x >= 0:
            if x > self.pos:
                self.pos = x
                trim = 0
                if _has_left_trim(self.text, x + 2):
                    seg = self.text[self.start:self.pos]
                    trim = len(seg) - len(seg.rstrip(_SPACE_CHARS))
                self.pos -= trim
                if self.pos > self.start:
                    self.emit("text")
                self.pos += trim
                self.start = self.pos
            return self.lex_left_delim
        self.pos = len(self.text)
        if self.pos > self.start:
            self.emit("text")
        self.emit("eof")
        return None

    def lex_left_delim(self) -> Callable[[], Any] | None:
        self.pos += 2
        after = 2 if _has_left_trim(self.text, self.pos) else 0
        if self.text.startswith("/*", self.pos + after):
            self.pos += after
            self.start = self.pos
            return self.lex_comment
        item = _Item("ldelim", "{{", self.start, self.line_at(self.start))
        self.pos += after
        self.start = self.pos
        self.paren_depth = 0
        self.items.append(item)
        return self.lex_inside_action

    def lex_comment(self) -> Callable[[], Any] | None:
        self.pos += 2
        x = self.text.find("*/", self.pos)
        if x < 0:
            return self.errorf("unclosed comment")
        self.pos = x + 2
        delim, trim = self.at_right_delim()
        if not delim:
            return self.errorf("comment ends before closing delimiter")
        self.pos += (2 if trim else 0) + 2
        if trim:
            self.pos = len(self.text) - len(self.text[self.pos:].lstrip(_SPACE_CHARS))
        self.start = self.pos
        return self.lex_text

    def lex_right_delim(self) -> Callable[[], Any] | None:
        _, trim = self.at_right_delim()
        if trim:
            self.pos += 2
            self.start = self.pos
        self.pos += 2
        item = _Item("rdelim", "}}", self.start, self.line_at(self.start))
        if trim:
            self.pos = len(self.text) - len(self.text[self.pos:].lstrip(_SPACE_CHARS))
        self.start = self.pos
        self.items.append(item)
        return self.lex_text

    def lex_inside_action(self) -> Callable[[], Any] | None:
        delim, _ = self.at_right_delim()
        if delim:
            if self.paren_depth == 0:
                return self.lex_right_delim
            return self.errorf("unclosed left paren")
        r = self.peek()
        if r == "":
            return self.errorf("unclosed action")
        self.pos += 1
        if r in _SPACE_CHARS:
            self.pos -= 1
            return self.lex_space
        if r == "=":
            self.emit("assign")
        elif r == ":":
            if self.peek() != "=":
                return self.errorf("expected :=")
            self.pos += 1
            self.emit("declare")
        elif r == "|":
            self.emit("pipe")
        elif r == '"':
            return self.lex_quote
        elif r == "`":
            return self.lex_raw_quote
        elif r == "$":
            return self.lex_variable
        elif r == "'":
            return self.lex_char
        elif r == "." and self.pos < len(self.text) and not "0" <= self.text[self.pos] <= "9":
            return self.lex_field
        elif r in "+-." or "0" <= r <= "9":
            self.pos -= 1
            return self.lex_number
        elif _is_alnum(r):
            self.pos -= 1
            return self.lex_identifier
        elif r == "(":
            self.emit("lparen")
            self.paren_depth += 1
        elif r == ")":
            self.paren_depth -= 1
            if self.paren_depth < 0:
                return self.errorf("unexpected right paren")
            self.emit("rparen")
        elif ord(r) < 0x80 and r.isprintable():
            self.emit("char")
        else:
            return self.errorf(f"unrecognized character in action: {_fmt_U(r)}")
        return self.lex_inside_action

    def lex_space(self) -> Callable[[], Any] | None:
        n = 0
        while self.peek() != "" and self.peek() in _SPACE_CHARS:
            self.pos += 1
            n += 1
        # A trim-marked closing delimiter (" -}}") starts with a space: leave that space to it.
        if _has_right_trim(self.text, self.pos - 1) and self.text.startswith("}}", self.pos + 1):
            self.pos -= 1
            if n == 1:
                return self.lex_inside_action
        self.emit("space")
        return self.lex_inside_action

    def lex_quote(self) -> Callable[[], Any] | None:
        return self.lex_escaped('"', "string", "unterminated quoted string")

    def lex_raw_quote(self) -> Callable[[], Any] | None:
        x = self.text.find("`", self.pos)
        if x < 0:
            return self.errorf("unterminated raw quoted string")
        self.pos = x + 1
        self.emit("rawstring")
        return self.lex_inside_action

    def lex_char(self) -> Callable[[], Any] | None:
        return self.lex_escaped("'", "charconst", "unterminated character constant")

    def lex_escaped(self, quote: str, typ: str, unterminated: str) -> Callable[[], Any] | None:
        """lexQuote / lexChar: up to the closing `quote` on this line, backslash escapes skipped."""
        while True:
            r = self.peek()
            self.pos += 1
            if r == "\\":
                if self.peek() not in ("", "\n"):
                    self.pos += 1
                    continue
                return self.errorf(unterminated)
            if r in ("", "\n"):
                return self.errorf(unterminated)
            if r == quote:
                break
        self.emit(typ)
        return self.lex_inside_action

    def lex_variable(self) -> Callable[[], Any] | None:
        if self.at_terminator():
            self.emit("variable")
            return self.lex_inside_action
        return self.lex_field_or_variable("variable")

    def lex_field(self) -> Callable[[], Any] | None:
        return self.lex_field_or_variable("field")

    def lex_field_or_variable(self, typ: str) -> Callable[[], Any] | None:
        if self.at_terminator():
            self.emit("variable" if typ == "variable" else "dot")
            return self.lex_inside_action
        while self.peek() != "" and _is_alnum(self.peek()):
            self.pos += 1
        if not self.at_terminator():
            return self.errorf(f"bad character {_fmt_U(self.peek())}")
        self.emit(typ)
        return self.lex_inside_action

    def lex_identifier(self) -> Callable[[], Any] | None:
        while self.peek() != "" and _is_alnum(self.peek()):
            self.pos += 1
        word = self.text[self.start:self.pos]
        if not self.at_terminator():
            return self.errorf(f"bad character {_fmt_U(self.peek())}")
        if word in _KEYWORDS:
            self.emit(word)
        elif word in ("true", "false"):
            self.emit("bool")
        elif word == "nil":
            self.emit("nil")
        else:
            self.emit("ident")
        return self.lex_inside_action

    def scan_number(self) -> bool:
        self.accept("+-")
        digits = "0123456789_"
        if self.accept("0"):
            if self.accept("xX"):
                digits = "0123456789abcdefABCDEF_"
            elif self.accept("oO"):
                digits = "01234567_"
            elif self.accept("bB"):
                digits = "01_"
        self.accept_run(digits)
        if self.accept("."):
            self.accept_run(digits)
        if len(digits) == 11 and self.accept("eE"):
            self.accept("+-")
            self.accept_run("0123456789_")
        if len(digits) == 23 and self.accept("pP"):
            self.accept("+-")
            self.accept_run("0123456789_")
        self.accept("i")
        if self.peek() != "" and _is_alnum(self.peek()):
            self.pos += 1
            return False
        return True

    def lex_number(self) -> Callable[[], Any] | None:
        if not self.scan_number():
            return self.errorf(f"bad number syntax: {go_quote(self.text[self.start:self.pos])}")
        if self.peek() in ("+", "-"):  # complex: 1+2i
            if not self.scan_number() or self.text[self.pos - 1] != "i":
                return self.errorf(f"bad number syntax: {go_quote(self.text[self.start:self.pos])}")
            self.emit("complex")
        else:
            self.emit("number")
        return self.lex_inside_action


# ---------------------------------------------------------------------------------------------------------------
# Parse tree (text/template/parse/node.go); __str__ is Go's String(), used in execution error contexts.
# ---------------------------------------------------------------------------------------------------------------


class _Node:
    pos: int = 0
    line: int = 0


class _TextNode(_Node):
    def __init__(self, pos: int, text: str) -> None:
        self.pos, self.text = pos, text

    def __str__(self) -> str:
        return self.text


class _ListNode(_Node):
    def __init__(self, pos: int, nodes: list[_Node] | None = None) -> None:
        self.pos, self.nodes = pos, nodes or []

    def __str__(self) -> str:
        return "".join(str(n) for n in self.nodes)


class _IdentifierNode(_Node):
    def __init__(self, pos: int, name: str) -> None:
        self.pos, self.name = pos, name

    def __str__(self) -> str:
        return self.name


class _VariableNode(_Node):
    def __init__(self, pos: int, ident: list[str]) -> None:
        self.pos, self.ident = pos, ident

    def __str__(self) -> str:
        return ".".join(self.ident)


class _FieldNode(_Node):
    def __init__(self, pos: int, ident: list[str]) -> None:
        self.pos, self.ident = pos, ident

    def __str__(self) -> str:
        return "".join("." + i for i in self.ident)


class _FixedNode(_Node):
    """A node that carries nothing but its position: its String() is `text`."""

    text = ""

    def __init__(self, pos: int, line: int = 0) -> None:
        self.pos, self.line = pos, line

    def __str__(self) -> str:
        return self.text


class _DotNode(_FixedNode):
    text = "."


class _NilNode(_FixedNode):
    text = "nil"


class _BoolNode(_Node):
    def __init__(self, pos: int, val: bool) -> None:
        self.pos, self.val = pos, val

    def __str__(self) -> str:
        return "true" if self.val else "false"


class _NumberNode(_Node):
    def __init__(self, pos: int, text: str) -> None:
        self.pos, self.text = pos, text
        self.is_int = self.is_uint = self.is_float = self.is_complex = False
        self.int_val = 0
        self.float_val = 0.0
        self.complex_val = 0j

    def __str__(self) -> str:
        return self.text


class _StringNode(_Node):
    def __init__(self, pos: int, quoted: str, text: str) -> None:
        self.pos, self.quoted, self.text = pos, quoted, text

    def __str__(self) -> str:
        return self.quoted


class _CommandNode(_Node):
    def __init__(self, pos: int) -> None:
        self.pos = pos
        self.args: list[_Node] = []

    def __str__(self) -> str:
        return " ".join(f"({a})" if isinstance(a, _PipeNode) else str(a) for a in self.args)


class _PipeNode(_Node):
    def __init__(self, pos: int, line: int) -> None:
        self.pos, self.line = pos, line
        self.is_assign = False
        self.decl: list[_VariableNode] = []
        self.cmds: list[_CommandNode] = []

    def __str__(self) -> str:
        s = ""
        if self.decl:
            s = ", ".join(str(d) for d in self.decl) + (" = " if self.is_assign else " := ")
        return s + " | ".join(str(c) for c in self.cmds)


class _ChainNode(_Node):
    def __init__(self, pos: int, node: _Node) -> None:
        self.pos, self.node = pos, node
        self.fields: list[str] = []

    def __str__(self) -> str:
        s = f"({self.node})" if isinstance(self.node, _PipeNode) else str(self.node)
        return s + "".join("." + f for f in self.fields)


class _ActionNode(_Node):
    def __init__(self, pos: int, line: int, pipe: _PipeNode) -> None:
        self.pos, self.line, self.pipe = pos, line, pipe

    def __str__(self) -> str:
        return "{{" + str(self.pipe) + "}}"


class _BranchNode(_Node):
    keyword = ""

    def __init__(self, pos: int, line: int, pipe: _PipeNode, lst: _ListNode, else_list: _ListNode | None) -> None:
        self.pos, self.line, self.pipe, self.list, self.else_list = pos, line, pipe, lst, else_list

    def __str__(self) -> str:
        s = "{{" + self.keyword + " " + str(self.pipe) + "}}" + str(self.list)
        if self.else_list is not None:
            s += "{{else}}" + str(self.else_list)
        return s + "{{end}}"


class _IfNode(_BranchNode):
    keyword = "if"


class _RangeNode(_BranchNode):
    keyword = "range"


class _WithNode(_BranchNode):
    keyword = "with"


class _TemplateNode(_Node):
    def __init__(self, pos: int, line: int, name: str, pipe: _PipeNode | None) -> None:
        self.pos, self.line, self.name, self.pipe = pos, line, name, pipe

    def __str__(self) -> str:
        return "{{template " + go_quote(self.name) + (f" {self.pipe}" if self.pipe is not None else "") + "}}"


def _is_empty_tree(n: _Node) -> bool:
    """parse.IsEmptyTree: only blank text (a template that may be (re)defined)."""
    if isinstance(n, _ListNode):
        return all(_is_empty_tree(x) for x in n.nodes)
    return isinstance(n, _TextNode) and n.text.strip() == ""


class _BreakNode(_FixedNode):
    text = "{{break}}"


class _ContinueNode(_FixedNode):
    text = "{{continue}}"


class _EndNode(_FixedNode):
    text = "{{end}}"


class _ElseNode(_FixedNode):
    text = "{{else}}"


# ---------------------------------------------------------------------------------------------------------------
# Go literals: strconv.Unquote / UnquoteChar, ParseInt/ParseUint(base 0), ParseFloat.
# ---------------------------------------------------------------------------------------------------------------


class _SyntaxError(Exception):
    pass


def _unquote_escape(s: str, i: int, quote: str, out: bytearray) -> int:
    """Decode the escape at s[i] (just after the backslash) into `out`; return the index after it."""
    c = s[i:i + 1]
    simple = {"a": 7, "b": 8, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
    if c in simple:
        out.append(simple[c])
        return i + 1
    if c in ("'", '"'):
        if c != quote:
            raise _SyntaxError
        out.append(ord(c))
        return i + 1
    if c in ("x", "u", "U"):
        n = {"x": 2, "u": 4, "U": 8}[c]
        h = s[i + 1:i + 1 + n]
        if len(h) != n or not all(ch in "0123456789abcdefABCDEF" for ch in h):
            raise _SyntaxError
        v = int(h, 16)
        if c == "x":
            out.append(v)  # a byte, not a rune (may make the string invalid UTF-8)
        else:
            if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                raise _SyntaxError
            out.extend(chr(v).encode())
        return i + 1 + n
    if c != "" and c in "01234567":
        o = s[i:i + 3]
        if len(o) != 3 or not all(ch in "01234567" for ch in o) or int(o, 8) > 255:
            raise _SyntaxError
        out.append(int(o, 8))
        return i + 3
    raise _SyntaxError


def _go_unquote(q: str) -> str:
    if len(q) < 2 or q[0] != q[-1] or q[0] not in "\"`'":
        raise _SyntaxError
    body = q[1:-1]
    if q[0] == "`":
        if "`" in body:
            raise _SyntaxError
        return body.replace("\r", "")
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            i = _unquote_escape(body, i + 1, q[0], out)
        elif ch == q[0] or ch == "\n":
            raise _SyntaxError
        else:
            out.extend(ch.encode("utf-8", "surrogatepass"))
            i += 1
    return out.decode("utf-8", "replace")


def _unquote_char(q: str) -> tuple[int, str]:
    """strconv.UnquoteChar(q[1:], '\''): the rune and what follows it (_SyntaxError = Go's ErrSyntax)."""
    body = q[1:]
    if body == "" or body[0] == "'":
        raise _SyntaxError
    if body[0] != "\\":
        return ord(body[0]), body[1:]
    out = bytearray()
    end = _unquote_escape(body, 1, "'", out)
    return (out[0] if body[1] in "x01234567" else ord(out.decode())), body[end:]


_GO_INT_PREFIX: Final = {"0x": 16, "0X": 16, "0o": 8, "0O": 8, "0b": 2, "0B": 2}


def _parse_go_int(text: str, signed: bool = True, bits: int = 64) -> int | None:
    """strconv.ParseInt(text, 0, 64) / ParseUint: base prefixes, a leading-0 octal, `_` between digits."""
    s, neg = text, False
    if s[:1] in ("+", "-"):
        if not signed:
            return None
        neg, s = s[0] == "-", s[1:]
    base, body, prefixed = 10, s, False
    if s[:2] in _GO_INT_PREFIX:
        base, body, prefixed = _GO_INT_PREFIX[s[:2]], s[2:], True
    elif len(s) > 1 and s[0] == "0":
        base, body, prefixed = 8, s[1:], True
    if body == "" or body.endswith("_") or "__" in body or (body.startswith("_") and not prefixed):
        return None
    digits = body.replace("_", "")
    valid = "0123456789abcdefABCDEF"[:base if base <= 10 else 10 + (base - 10) * 2]
    if digits == "" or not all(c in valid for c in digits):
        return None
    v = -int(digits, base) if neg else int(digits, base)
    if signed and not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        return None
    if not signed and not 0 <= v < (1 << bits):
        return None
    return v


_FLOAT_RE: Final = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _parse_go_float(text: str) -> float | None:
    """strconv.ParseFloat(text, 64) for what the lexer can produce (decimal and hex floats)."""
    s = text
    if s[:1] in ("+", "-") and s[1:3] in ("0x", "0X"):
        sign, s = s[0], s[1:]
    else:
        sign = ""
    if s[:2] in ("0x", "0X"):
        try:
            return float.fromhex(sign + s.replace("_", ""))
        except ValueError:
            return None
    if "_" in text or not _FLOAT_RE.fullmatch(text):
        return None
    return float(text)


# ---------------------------------------------------------------------------------------------------------------
# Parser (text/template/parse/parse.go).
# ---------------------------------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, name: str, text: str, funcs: Mapping[str, _Func], sprig: bool) -> None:
        self.name = name
        self.funcs = funcs
        self.sprig = sprig
        self.items = _Lexer(text).run()
        self.i = 0
        self.cur: _Item = self.items[0]
        self.vars: list[str] = ["$"]
        self.range_depth = 0
        self.defines: dict[str, _ListNode] = {}  # {{define}} and {{block}} templates

    def errorf(self, msg: str) -> NoReturn:
        raise TemplateError(f"template: {self.name}:{self.cur.line}: {msg}")

    def next(self) -> _Item:
        it = self.items[min(self.i, len(self.items) - 1)]
        self.i += 1
        self.cur = it
        return it

    def backup(self, n: int = 1) -> None:
        self.i -= n

    def peek(self) -> _Item:
        it = self.next()
        self.backup()
        return it

    def next_non_space(self) -> _Item:
        while True:
            it = self.next()
            if it.typ != "space":
                return it

    def peek_non_space(self) -> _Item:
        it = self.next_non_space()
        self.backup()
        return it

    def expect(self, typ: str, context: str) -> _Item:
        it = self.next_non_space()
        if it.typ != typ:
            self.unexpected(it, context)
        return it

    def unexpected(self, it: _Item, context: str) -> NoReturn:
        if it.typ == "error":
            self.errorf(it.val)
        self.errorf(f"unexpected {it} in {context}")

    def parse(self) -> _ListNode:
        root = _ListNode(0)
        while self.peek().typ != "eof":
            if self.peek().typ == "ldelim":
                save = self.i
                self.next()
                if self.next_non_space().typ == "define":
                    self.definition()
                    continue
                self.i = save
            n = self.text_or_action()
            if isinstance(n, _EndNode | _ElseNode):
                self.errorf(f"unexpected {n}")
            root.nodes.append(n)
        return root

    def text_or_action(self) -> _Node:
        it = self.next_non_space()
        if it.typ == "text":
            return _TextNode(it.pos, it.val)
        if it.typ == "ldelim":
            return self.action()
        self.unexpected(it, "input")

    def item_list(self) -> tuple[_ListNode, _Node]:
        lst = _ListNode(self.peek_non_space().pos)
        while self.peek_non_space().typ != "eof":
            n = self.text_or_action()
            if isinstance(n, _EndNode | _ElseNode):
                return lst, n
            lst.nodes.append(n)
        self.errorf("unexpected EOF")

    def template_name(self, context: str) -> tuple[_Item, str]:
        """parseTemplateName: the quoted name's token and the name."""
        tok = self.next_non_space()
        if tok.typ not in ("string", "rawstring"):
            self.unexpected(tok, context)
        try:
            return tok, _go_unquote(tok.val)
        except _SyntaxError:
            self.errorf("invalid syntax")

    def sub_template(self, name: str, context: str) -> None:
        """The body of {{define}} / {{block}}: its own variable scope, up to {{end}}."""
        saved_vars, saved_depth = self.vars, self.range_depth
        self.vars, self.range_depth = ["$"], 0
        body, end = self.item_list()
        self.vars, self.range_depth = saved_vars, saved_depth
        if not isinstance(end, _EndNode):
            self.errorf(f"unexpected {end} in {context}")
        old = self.defines.get(name)
        if old is not None and not _is_empty_tree(old) and not _is_empty_tree(body):
            self.errorf(f"template: multiple definition of template {go_quote(name)}")
        if old is None or _is_empty_tree(old):
            self.defines[name] = body

    def definition(self) -> None:
        context = "define clause"
        _, name = self.template_name(context)
        self.expect("rdelim", context)
        self.sub_template(name, context)

    def action(self) -> _Node:
        it = self.next_non_space()
        if it.typ in ("template", "block"):
            context = f"{it.typ} clause"
            tok, name = self.template_name(context)
            pipe: _PipeNode | None = None
            if it.typ == "block" or self.next_non_space().typ != "rdelim":
                if it.typ == "template":
                    self.backup()
                pipe = self.pipeline(context, "rdelim")  # its variables persist, as Go's
            if it.typ == "block":
                self.sub_template(name, context)
            return _TemplateNode(tok.pos, tok.line, name, pipe)
        if it.typ in ("break", "continue"):
            tok = self.next_non_space()
            if tok.typ != "rdelim":
                self.unexpected(tok, f"{{{{{it.typ}}}}}")
            if self.range_depth == 0:
                self.errorf(f"{{{{{it.typ}}}}} outside {{{{range}}}}")
            return _BreakNode(it.pos, it.line) if it.typ == "break" else _ContinueNode(it.pos, it.line)
        if it.typ == "else":
            peek = self.peek_non_space()
            if peek.typ in ("if", "with"):  # "else if" / "else with": leave the keyword to parse_control
                return _ElseNode(peek.pos)
            return _ElseNode(self.expect("rdelim", "else").pos)
        if it.typ == "end":
            return _EndNode(self.expect("rdelim", "end").pos)
        if it.typ in ("if", "range", "with"):
            return self.control(it.typ)
        self.backup()
        tok = self.peek()
        return _ActionNode(tok.pos, tok.line, self.pipeline("command", "rdelim"))

    def control(self, context: str) -> _BranchNode:
        saved = len(self.vars)
        try:
            pipe = self.pipeline(context, "rdelim")
            if context == "range":
                self.range_depth += 1
            lst, nxt = self.item_list()
            if context == "range":
                self.range_depth -= 1
            else_list: _ListNode | None = None
            if isinstance(nxt, _ElseNode):
                if context in ("if", "with") and self.peek().typ == context:
                    # {{if a}}x{{else if b}}y{{end}} is {{if a}}x{{else}}{{if b}}y{{end}}{{end}}
                    self.next()
                    else_list = _ListNode(nxt.pos, [self.control(context)])
                else:
                    else_list, nxt = self.item_list()
                    if not isinstance(nxt, _EndNode):
                        self.errorf(f"expected end; found {nxt}")
            cls = {"if": _IfNode, "range": _RangeNode, "with": _WithNode}[context]
            return cls(pipe.pos, pipe.line, pipe, lst, else_list)
        finally:
            del self.vars[saved:]

    def pipeline(self, context: str, end: str) -> _PipeNode:
        tok = self.peek_non_space()
        pipe = _PipeNode(tok.pos, tok.line)
        while True:  # declarations: "$x :=", "$x =", "$i, $v :="
            save = self.i
            v = self.peek_non_space()
            if v.typ != "variable":
                self.i = save
                break
            self.next_non_space()
            nxt = self.peek_non_space()
            if nxt.typ in ("assign", "declare"):
                pipe.is_assign = nxt.typ == "assign"
                self.next_non_space()
                pipe.decl.append(_VariableNode(v.pos, [v.val]))
                self.vars.append(v.val)
                break
            if nxt.typ == "char" and nxt.val == ",":
                self.next_non_space()
                pipe.decl.append(_VariableNode(v.pos, [v.val]))
                self.vars.append(v.val)
                if context == "range" and len(pipe.decl) < 2:
                    if self.peek_non_space().typ in ("variable", "rdelim", "rparen"):
                        continue
                    self.errorf("range can only initialize variables")
                self.errorf(f"too many declarations in {context}")
            self.i = save
            break
        while True:
            it = self.next_non_space()
            if it.typ == end:
                self.check_pipeline(pipe, context)
                return pipe
            if it.typ in ("bool", "charconst", "complex", "dot", "field", "ident", "number", "nil", "rawstring",
                          "string", "variable", "lparen"):
                self.backup()
                pipe.cmds.append(self.command())
            else:
                self.unexpected(it, context)

    def check_pipeline(self, pipe: _PipeNode, context: str) -> None:
        if not pipe.cmds:
            self.errorf(f"missing value for {context}")
        for i, c in enumerate(pipe.cmds[1:]):
            if isinstance(c.args[0], _BoolNode | _DotNode | _NilNode | _NumberNode | _StringNode):
                self.errorf(f"non executable command in pipeline stage {i + 2}")

    def command(self) -> _CommandNode:
        cmd = _CommandNode(self.peek_non_space().pos)
        while True:
            self.peek_non_space()
            operand = self.operand()
            if operand is not None:
                cmd.args.append(operand)
            it = self.next()
            if it.typ == "space":
                continue
            if it.typ in ("rdelim", "rparen"):
                self.backup()
            elif it.typ != "pipe":
                self.unexpected(it, "operand")
            break
        if not cmd.args:
            self.errorf("empty command")
        return cmd

    def operand(self) -> _Node | None:
        node = self.term()
        if node is None:
            return None
        if self.peek().typ == "field":
            chain = _ChainNode(self.peek().pos, node)
            while self.peek().typ == "field":
                chain.fields.append(self.next().val[1:])
            if isinstance(node, _FieldNode):
                return _FieldNode(chain.pos, node.ident + chain.fields)
            if isinstance(node, _VariableNode):
                return _VariableNode(chain.pos, node.ident + chain.fields)
            if isinstance(node, _BoolNode | _StringNode | _NumberNode | _NilNode | _DotNode):
                self.errorf(f"unexpected . after term {go_quote(str(node))}")
            return chain
        return node

    def term(self) -> _Node | None:
        it = self.next_non_space()
        if it.typ == "ident":
            if it.val not in self.funcs:
                if it.val in _SPRIG_UNSUPPORTED and self.sprig:
                    self.errorf(f"function {go_quote(it.val)} is a sprig function capd-py does not implement")
                self.errorf(f"function {go_quote(it.val)} not defined")
            return _IdentifierNode(it.pos, it.val)
        if it.typ == "dot":
            return _DotNode(it.pos)
        if it.typ == "nil":
            return _NilNode(it.pos)
        if it.typ == "variable":
            if it.val not in self.vars:
                self.errorf(f"undefined variable {go_quote(it.val)}")
            return _VariableNode(it.pos, [it.val])
        if it.typ == "field":
            return _FieldNode(it.pos, [it.val[1:]])
        if it.typ == "bool":
            return _BoolNode(it.pos, it.val == "true")
        if it.typ in ("charconst", "complex", "number"):
            return self.number(it)
        if it.typ == "lparen":
            return self.pipeline("parenthesized pipeline", "rparen")
        if it.typ in ("string", "rawstring"):
            try:
                return _StringNode(it.pos, it.val, _go_unquote(it.val))
            except _SyntaxError:
                self.errorf("invalid syntax")
        self.backup()
        return None

    def number(self, it: _Item) -> _NumberNode:
        n = _NumberNode(it.pos, it.val)
        text = it.val
        if it.typ == "complex" or (text.endswith("i") and not text.startswith("0x")):
            try:
                c = complex(text[:-1].replace("_", "") + "j")
            except ValueError:
                self.errorf(f"illegal number syntax: {go_quote(text)}")
            n.is_complex, n.complex_val = True, c
            if c.imag == 0:  # simplifyComplex
                n.is_float, n.float_val = True, c.real
                if math.isfinite(c.real) and c.real == int(c.real):
                    n.is_int, n.int_val = True, int(c.real)
            return n
        if it.typ == "charconst":
            try:
                r, tail = _unquote_char(text)
            except _SyntaxError:
                self.errorf("invalid syntax")
            if tail != "'":
                self.errorf(f"malformed character constant: {text}")
            n.is_int = n.is_uint = n.is_float = True
            n.int_val, n.float_val = r, float(r)
            return n
        u = _parse_go_int(text, signed=False)
        i = _parse_go_int(text)
        if i is not None:
            n.is_int, n.int_val = True, i
        if u is not None:
            n.is_uint = True
        if i is not None:
            n.is_float, n.float_val = True, float(i)
        elif u is not None:
            n.is_float, n.float_val = True, float(u)
        else:
            f = _parse_go_float(text)
            if f is not None:
                if not any(c in text for c in ".eEpP"):
                    self.errorf(f"integer overflow: {go_quote(text)}")
                n.is_float, n.float_val = True, f
                if math.isfinite(f) and f == int(f) and -(1 << 63) <= int(f) < (1 << 63):
                    n.is_int, n.int_val = True, int(f)
                    n.is_uint = f >= 0
        if not (n.is_int or n.is_uint or n.is_float or n.is_complex):
            self.errorf(f"illegal number syntax: {go_quote(text)}")
        return n


# ---------------------------------------------------------------------------------------------------------------
# Functions: Go's builtins and sprig's. A parameter spec says what Go's reflection would accept.
# ---------------------------------------------------------------------------------------------------------------

_ANY = "interface {}"
_VALUE = "reflect.Value"  # builtins that take reflect.Value see nil and missing values as they are
_STR = "string"
_INT = "int"
_BOOL = "bool"
_MAP = "map[string]interface {}"
_TIME = "time.Time"
_CAN_BE_NIL: Final = frozenset({_ANY, _VALUE, _MAP})


class _CallError(Exception):
    """An error returned (or a panic raised) by a template function: "error calling NAME: ..."."""


@dataclass(frozen=True)
class _Func:
    impl: Callable[..., Any]
    params: tuple[str, ...]
    variadic: str | None = None
    # gets a field's value as Go passes it to a reflect.Value parameter, still an interface{} (_Interface): the
    # builtin slice's indexes
    sees_interfaces: bool = False


def _truth(v: Any) -> bool:
    """text/template's isTrue: the zero value of its type is false."""
    if v is None or v is NO_VALUE:
        return False
    if isinstance(v, bool):
        return v
    if isinstance(v, int | float | complex):
        return v != 0
    if isinstance(v, str | list | dict):
        return len(v) > 0
    return True


def _basic_kind(v: Any) -> str:
    if _invalid(v):
        return "invalid"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _Uint8):
        return "uint"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, complex):
        return "complex"
    if isinstance(v, str):
        return "string"
    return "other"


def _incompatible(a: Any, b: Any) -> _CallError:
    return _CallError(f"incompatible types for comparison: {go_type_name(a)} and {go_type_name(b)}")


def _b_eq(arg1: Any, *args: Any) -> bool:
    if not args:
        raise _CallError("missing argument for comparison")
    k1 = _basic_kind(arg1)
    for arg in args:
        k2 = _basic_kind(arg)
        if k1 != k2:
            if {k1, k2} == {"int", "uint"}:
                truth = int(arg1) == int(arg)
            elif not _invalid(arg1) and not _invalid(arg):
                raise _incompatible(arg1, arg)
            else:
                truth = False
        elif k1 in ("bool", "int", "uint", "float", "complex", "string"):
            truth = arg1 == arg
        elif _invalid(arg1) or _invalid(arg):
            truth = _invalid(arg1) and _invalid(arg)
        elif _go_kind(arg1) != _go_kind(arg):
            raise _CallError(f"non-comparable types {_fmt_arg(arg1, 's', '', None, None)}: {go_type_name(arg1)}, "
                             f"{go_type_name(arg)}: {_fmt_v(arg)}")
        else:  # slices and maps are not comparable in Go
            raise _CallError(f"non-comparable type {_fmt_arg(arg, 's', '', None, None)}: {go_type_name(arg)}")
        if truth:
            return True
    return False


def _b_ne(arg1: Any, arg2: Any) -> bool:
    return not _b_eq(arg1, arg2)


def _b_lt(arg1: Any, arg2: Any) -> bool:
    k1, k2 = _basic_kind(arg1), _basic_kind(arg2)
    if k1 in ("invalid", "other") or k2 in ("invalid", "other"):
        raise _CallError("invalid type for comparison")
    if k1 != k2:
        if {k1, k2} == {"int", "uint"}:
            return bool(int(arg1) < int(arg2))
        raise _incompatible(arg1, arg2)
    if k1 in ("bool", "complex"):
        raise _CallError("invalid type for comparison")
    return bool(arg1 < arg2)


def _b_le(arg1: Any, arg2: Any) -> bool:
    return _b_lt(arg1, arg2) or _b_eq(arg1, arg2)


def _b_gt(arg1: Any, arg2: Any) -> bool:
    return not _b_le(arg1, arg2)


def _b_ge(arg1: Any, arg2: Any) -> bool:
    return not _b_lt(arg1, arg2)


def _b_not(arg: Any) -> bool:
    return not _truth(arg)


def _b_and(arg0: Any, *args: Any) -> Any:  # short-circuiting is done by the executor
    for a in (arg0, *args):
        if not _truth(a):
            return a
    return args[-1] if args else arg0


def _b_or(arg0: Any, *args: Any) -> Any:
    for a in (arg0, *args):
        if _truth(a):
            return a
    return args[-1] if args else arg0


def _b_len(item: Any) -> int:
    if item is NO_VALUE:
        raise _CallError("reflect: call of reflect.Value.Type on zero Value")
    if item is None:
        raise _CallError("len of nil pointer")
    if isinstance(item, str):
        return len(item.encode())
    if isinstance(item, list | dict):
        return len(item)
    raise _CallError(f"len of type {go_type_name(item)}")


def _b_index(item: Any, *indexes: Any) -> Any:
    if _invalid(item):
        raise _CallError("index of untyped nil")
    for index in indexes:
        if item is None:
            raise _CallError("index of nil pointer")
        if isinstance(item, list | str):
            if _invalid(index):
                raise _CallError("cannot index slice/array with nil")
            if isinstance(index, bool) or not isinstance(index, int):
                raise _CallError(f"cannot index slice/array with type {go_type_name(index)}")
            x = int(index)
            size = len(item.encode()) if isinstance(item, str) else len(item)
            if x < 0 or x > size:
                raise _CallError(f"index out of range: {x}")
            if x == size:  # Go's indexArg lets this through and reflect panics
                raise _CallError(f"reflect: {'string' if isinstance(item, str) else 'slice'} index out of range")
            item = _Uint8(item.encode()[x]) if isinstance(item, str) else item[x]
        elif isinstance(item, dict):
            if _invalid(index):
                raise _CallError("value is nil; should be of type string")
            if not isinstance(index, str):
                raise _CallError(f"value has type {go_type_name(index)}; should be string")
            item = item[index] if index in item else ("" if isinstance(item, _StrMap) else None)
        else:
            raise _CallError(f"can't index item of type {go_type_name(item)}")
    return item


def _eval_args_text(args: Sequence[Any]) -> str:
    """text/template's evalArgs (html, js, urlquery): a nil argument prints as <no value>."""
    if len(args) == 1 and isinstance(args[0], str):
        return args[0]
    return _sprint(["<no value>" if _invalid(a) else a for a in args])


def _b_html(*args: Any) -> str:
    s = _eval_args_text(args)
    return "".join({'"': "&#34;", "'": "&#39;", "&": "&amp;", "<": "&lt;", ">": "&gt;", "\0": "\ufffd"}.get(c, c)
                   for c in s)


def _b_js(*args: Any) -> str:
    out = []
    for c in _eval_args_text(args):
        o = ord(c)
        if c in "\\'\"":
            out.append("\\" + c)
        elif c in "<>&=" or o < 0x20 or (o >= 0x80 and not c.isprintable()):
            out.append(f"\\u{o:04X}")
        else:
            out.append(c)
    return "".join(out)


def _b_urlquery(*args: Any) -> str:
    return urllib.parse.quote_plus(_eval_args_text(args), safe="")


def _b_call(fn: Any, *args: Any) -> Any:
    if _invalid(fn):
        raise _CallError("call of nil")
    raise _CallError(f"non-function of type {go_type_name(fn)}")


_BUILTINS: Final[dict[str, _Func]] = {
    "and": _Func(_b_and, (_VALUE,), _VALUE),
    "or": _Func(_b_or, (_VALUE,), _VALUE),
    "not": _Func(_b_not, (_VALUE,)),
    "call": _Func(_b_call, (_VALUE,), _VALUE),
    "html": _Func(_b_html, (), _ANY),
    "js": _Func(_b_js, (), _ANY),
    "urlquery": _Func(_b_urlquery, (), _ANY),
    "index": _Func(_b_index, (_VALUE,), _VALUE),
    "len": _Func(_b_len, (_VALUE,)),
    "print": _Func(lambda *a: _sprint(a), (), _ANY),
    "println": _Func(lambda *a: _sprintln(a), (), _ANY),
    "printf": _Func(lambda f, *a: _sprintf(f, a), (_STR,), _ANY),
    "eq": _Func(_b_eq, (_VALUE,), _VALUE),
    "ne": _Func(_b_ne, (_VALUE, _VALUE)),
    "lt": _Func(_b_lt, (_VALUE, _VALUE)),
    "le": _Func(_b_le, (_VALUE, _VALUE)),
    "gt": _Func(_b_gt, (_VALUE, _VALUE)),
    "ge": _Func(_b_ge, (_VALUE, _VALUE)),
    # With sprig's map, sprig's `slice` replaces this one (Funcs() take precedence over builtins).
    "slice": _Func(lambda item, *ix: _b_slice(item, *ix), (_VALUE,), _VALUE, sees_interfaces=True),
}


@dataclass(frozen=True)
class _Interface:
    """A value as Go holds a map[string]interface{} entry read by a field (`.a.b`): of kind interface. Only the
    builtin slice is given such values for its indexes (_Func.sees_interfaces); every other function, and slice's item,
    sees what is inside, as Go's indirectInterface and the pipeline's unwrapping do."""
    value: Any


def _b_slice(item: Any, *indexes: Any) -> Any:
    """text/template's builtin slice (upstream's naming templates have no sprig). A []interface{} decoded from
    JSON may have a capacity above its length in Go: this uses the length."""
    if _invalid(item):
        raise _CallError("slice of untyped nil")
    if len(indexes) > 3:
        raise _CallError(f"too many slice indexes: {len(indexes)}")
    if isinstance(item, str):
        if len(indexes) == 3:
            raise _CallError("cannot 3-index slice a string")
        size = len(item.encode())
    elif isinstance(item, list):
        size = len(item)
    else:
        raise _CallError(f"can't slice item of type {go_type_name(item)}")
    idx = [0, size, 0]
    for i, index in enumerate(indexes):
        if isinstance(index, _Interface):  # Go's slice does not look inside an interface{} index
            raise _CallError("cannot index slice/array with type interface {}")
        if _invalid(index):
            raise _CallError("cannot index slice/array with nil")
        if isinstance(index, bool) or not isinstance(index, int):
            raise _CallError(f"cannot index slice/array with type {go_type_name(index)}")
        if index < 0 or index > size:
            raise _CallError(f"index out of range: {int(index)}")
        idx[i] = int(index)
    if idx[0] > idx[1]:
        raise _CallError(f"invalid slice index: {idx[0]} > {idx[1]}")
    if len(indexes) == 3 and idx[1] > idx[2]:
        raise _CallError(f"invalid slice index: {idx[1]} > {idx[2]}")
    if isinstance(item, str):
        return item.encode()[idx[0]:idx[1]].decode(errors="replace")
    return type(item)(item[idx[0]:idx[1]]) if not isinstance(item, list) or type(item) is list else \
        type(item)(item[idx[0]:idx[1]])


# --- sprig v3.3.0 ---------------------------------------------------------------------------------------------

def _strval(v: Any) -> str:
    if isinstance(v, str):
        return v
    return _fmt_v(v)

def _reads_a_field(n: _Node) -> bool:
    """Whether the argument is a field read (`.a`, `$x.a`, `(...).a`): a map[string]interface{} entry."""
    return isinstance(n, _FieldNode) or isinstance(n, _VariableNode) and len(n.ident) > 1 or \
        isinstance(n, _ChainNode) and bool(n.fields)


def _strslice(v: Any) -> _StrList:
    if isinstance(v, list):
        return _StrList(_strval(e) for e in v if not _invalid(e))
    if _invalid(v):
        return _StrList()
    return _StrList([_strval(v)])


def _empty(v: Any) -> bool:
    if _invalid(v):
        return True
    if isinstance(v, str | list | dict):
        return len(v) == 0
    if isinstance(v, bool):
        return not v
    if isinstance(v, int | float):
        return v == 0
    return False


_STRING_NUMBER: Final = re.compile(r"([-+]?[0-9]*)(\.[0-9]*)?")


def _trim_decimal(s: str) -> str:
    """spf13/cast v1.10 (what upstream links): "2.5" parses as 2, "-.5" as -0, "." as 0."""
    if "." not in s:
        return s
    m = _STRING_NUMBER.fullmatch(s)
    if m is None:
        return s
    head = m.group(1)
    return head + "0" if head in ("-", "+") else head or "0"


def _wrap64(x: int) -> int:
    """Go's int64 arithmetic wraps around."""
    return ((x + (1 << 63)) % (1 << 64)) - (1 << 63)


def _cast_int(v: Any) -> int:
    """spf13/cast ToInt64 (errors are 0, as sprig ignores them)."""
    if _invalid(v):
        return 0
    if isinstance(v, bool):
        return 1 if v else 0
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        # int64(f) out of range (or NaN) is the "integer indefinite" value on amd64, where upstream runs
        if not math.isfinite(v) or not -(2.0 ** 63) <= v < 2.0 ** 63:
            return -(1 << 63)
        return int(v)
    if isinstance(v, str):
        return _parse_go_int(_trim_decimal(v)) or 0
    return 0


def _cast_float(v: Any) -> float:
    if _invalid(v):
        return 0.0
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan"):
            return float(low.replace("infinity", "inf"))
        f = _parse_go_float(v)
        return f if f is not None else 0.0
    return 0.0


def _dec(v: Any) -> decimal.Decimal:
    f = _cast_float(v)
    return decimal.Decimal(repr(f)) if math.isfinite(f) else decimal.Decimal(f)


def _decimal_op(a: Any, rest: Sequence[Any],
                op: Callable[[decimal.Decimal, decimal.Decimal], decimal.Decimal]) -> float:
    """sprig's addf/subf/mulf/divf: shopspring/decimal arithmetic on the float64 arguments."""
    acc = _dec(a)
    with decimal.localcontext() as ctx:
        ctx.prec = 34
        for x in rest:
            try:
                acc = op(acc, _dec(x))
            except (decimal.DivisionByZero, decimal.InvalidOperation) as e:
                raise _CallError("decimal division by 0") from e
    return float(acc) if acc != 0 else 0.0  # shopspring/decimal has no negative zero


def _go_div(a: int, b: int) -> int:
    if b == 0:
        raise _CallError("runtime error: integer divide by zero")
    q = abs(a) // abs(b)
    return _wrap64(q if (a >= 0) == (b >= 0) else -q)


def _go_mod(a: int, b: int) -> int:
    if b == 0:
        raise _CallError("runtime error: integer divide by zero")
    return a - b * _go_div(a, b)


def _list_of(v: Any, what: str) -> list[Any]:
    """sprig's list functions take interface{} and reflect on it; a nil one panics in reflect.TypeOf(nil).Kind()."""
    if isinstance(v, list):
        return list(v)
    if _invalid(v):
        raise _CallError("runtime error: invalid memory address or nil pointer dereference")
    kind = _go_kind(v)
    if what == "chunk":
        raise _CallError(f"Cannot chunk type {kind}")
    raise _CallError(f"Cannot {what} on type {kind}" if what in ("push", "prepend", "compact")
                     else f"Cannot find {what} on type {kind}")


def _go_deep_equal(a: Any, b: Any) -> bool:
    """reflect.DeepEqual: same Go types all the way down."""
    if _invalid(a) or _invalid(b):
        return _invalid(a) and _invalid(b)
    if go_type_name(a) != go_type_name(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(_go_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_go_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, _GoObject):
        return a is b or str(a) == str(b)
    return bool(a == b)


def _in_list(haystack: Sequence[Any], needle: Any) -> bool:
    return any(_go_deep_equal(needle, h) for h in haystack)


def _s_first(v: Any) -> Any:
    lst = _list_of(v, "first")
    return lst[0] if lst else None


def _s_last(v: Any) -> Any:
    lst = _list_of(v, "last")
    return lst[-1] if lst else None


def _s_rest(v: Any) -> list[Any]:
    return _list_of(v, "rest")[1:]


def _s_initial(v: Any) -> list[Any]:
    return _list_of(v, "initial")[:-1]


def _s_uniq(v: Any) -> list[Any]:
    out: list[Any] = []
    for e in _list_of(v, "uniq"):
        if not _in_list(out, e):
            out.append(e)
    return out


def _s_has(needle: Any, haystack: Any) -> bool:
    if haystack is None or haystack is NO_VALUE:
        return False
    return _in_list(_list_of(haystack, "has"), needle)


def _s_slice(lst: Any, *indices: Any) -> Any:
    if _invalid(lst):
        raise _CallError("runtime error: invalid memory address or nil pointer dereference")
    if not isinstance(lst, list):
        raise _CallError(f"list should be type of slice or array but {_go_kind(lst) if not _invalid(lst) else 'ptr'}")
    if not lst:
        return None
    start = _cast_int(indices[0]) if indices else 0
    end = _cast_int(indices[1]) if len(indices) > 1 else len(lst)
    if not 0 <= start <= end <= len(lst):
        raise _CallError("reflect.Value.Slice: slice index out of bounds")
    return type(lst)(lst[start:end]) if isinstance(lst, _StrList) else lst[start:end]


def _s_concat(*lists: Any) -> Any:
    out: list[Any] = []
    for lst in lists:
        if _invalid(lst):
            raise _CallError("runtime error: invalid memory address or nil pointer dereference")
        if not isinstance(lst, list):
            raise _CallError(f"Cannot concat type {_go_kind(lst) if not _invalid(lst) else 'ptr'} as list")
        out.extend(lst)
    return out  # a nil []interface{} when empty: typed, so it prints [] and is not "no value"


def _s_dict(*v: Any) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for i in range(0, len(v), 2):
        d[_strval(v[i])] = v[i + 1] if i + 1 < len(v) else ""
    return d


def _map_or_empty(d: Any) -> dict[str, Any]:
    return d if isinstance(d, dict) else {}


def _s_set(d: Any, key: str, value: Any) -> Any:
    if not isinstance(d, dict):
        raise _CallError("assignment to entry in nil map")
    d[key] = value
    return d


def _s_unset(d: Any, key: str) -> Any:
    if isinstance(d, dict):
        d.pop(key, None)
    return d


def _mergo(dst: dict[str, Any], src: dict[str, Any], overwrite: bool) -> None:
    """dario.cat/mergo Merge / MergeWithOverwrite for maps: fill (or overwrite with non-empty) keys, deeply."""
    for k, sv in src.items():
        if k in dst and isinstance(dst[k], dict) and isinstance(sv, dict):
            _mergo(dst[k], sv, overwrite)
        elif k not in dst or (_empty(dst[k]) and not overwrite) or (overwrite and not _empty(sv)):
            dst[k] = sv


def _s_merge(overwrite: bool) -> Callable[..., Any]:
    def merge(dst: Any, *srcs: Any) -> Any:
        if not isinstance(dst, dict):
            raise _CallError("src and dst must be of same type")
        for s in srcs:
            if isinstance(s, dict):
                _mergo(dst, s, overwrite)
        return dst
    return merge


def _assertion_error(v: Any, want: str) -> _CallError:
    """The panic of a failed Go type assertion on an interface{}."""
    got = "nil" if _invalid(v) else go_type_name(v)
    return _CallError(f"interface conversion: interface {{}} is {got}, not {want}")


def _s_dig(*ps: Any) -> Any:
    """sprig's dig: keys..., default, map (type assertions as sprig does them, in that order)."""
    if len(ps) < 3:
        raise _CallError("dig needs at least three arguments")
    d, default = ps[-1], ps[-2]
    if type(d) is not dict:
        raise _assertion_error(d, "map[string]interface {}")
    keys = ps[:-2]
    for k in keys:
        if not isinstance(k, str):
            raise _assertion_error(k, "string")
    for i, k in enumerate(keys):
        if k not in d:
            return default
        if i == len(keys) - 1:
            return d[k]
        if type(d[k]) is not dict:
            raise _assertion_error(d[k], "map[string]interface {}")
        d = d[k]
    return d


def _s_until_step(start: int, stop: int, step: int) -> _IntList:
    if stop < start:
        return _IntList(range(start, stop, step)) if step < 0 else _IntList()
    return _IntList(range(start, stop, step)) if step > 0 else _IntList()


def _s_seq(*params: int) -> str:
    if len(params) == 1:
        start, end, step = 1, params[0], 1
        inc = -1 if end < start else 1
        return " ".join(map(str, _s_until_step(start, end + inc, inc)))
    if len(params) == 2:
        start, end = params
        step = -1 if end < start else 1
        return " ".join(map(str, _s_until_step(start, end + step, step)))
    if len(params) == 3:
        start, step, end = params
        inc = 1
        if end < start:
            inc = -1
            if step > 0:
                return ""
        return " ".join(map(str, _s_until_step(start, end + inc, step)))
    return ""


def _b64_error(src: str) -> int | None:
    """Where encoding/base64's StdEncoding.DecodeString fails on `src` (its CorruptInputError offset), or None."""
    si, n = 0, len(src)
    while si < n:
        j = 0
        while j < 4:
            if si == n:
                return None if j == 0 else si - j
            c = src[si]
            si += 1
            if c in "\r\n":
                continue
            if c in _B64:
                j += 1
                continue
            if c != "=" or j in (0, 1):
                return si - 1
            if j == 2:  # "==" expected
                while si < n and src[si] in "\r\n":
                    si += 1
                if si == n:
                    return n
                if src[si] != "=":
                    return si - 1
                si += 1
            while si < n and src[si] in "\r\n":
                si += 1
            return si if si < n else None
    return None


def _b64dec(v: str) -> str:
    """sprig's b64dec: the decoded text, or Go's error text (sprig returns the error as the value)."""
    pos = _b64_error(v)
    if pos is not None:
        return f"illegal base64 data at input byte {pos}"
    return base64.b64decode(v.replace("\r", "").replace("\n", "")).decode("utf-8", "replace")


def _b32dec(v: str) -> str:
    s = v.replace("\r", "").replace("\n", "")
    for i, c in enumerate(s):
        if c not in _B32 and c != "=":
            return f"illegal base32 data at input byte {i}"
    try:
        return base64.b32decode(s).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return f"illegal base32 data at input byte {len(s)}"


_B64: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_B32: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
_GO_SPACE: Final = frozenset("\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                             "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")


def _go_trim_space(s: str) -> str:
    return s.strip("".join(_GO_SPACE))


def _go_upper(s: str) -> str:
    return "".join(c.upper() if len(c.upper()) == 1 else c for c in s)


def _go_lower(s: str) -> str:
    return "".join(c.lower() if len(c.lower()) == 1 else c for c in s)


def _go_title(s: str) -> str:
    """strings.Title: upper-case (title-case) the first letter of each word."""
    out, prev_sep = [], True
    for c in s:
        out.append((c.title() if len(c.title()) == 1 else c) if prev_sep else c)
        if ord(c) < 0x80:
            prev_sep = not (c.isalnum() or c == "_")
        else:
            prev_sep = not (c.isalpha() or c.isdigit()) and c in _GO_SPACE
    return "".join(out)


def _byte_slice(s: str, start: int | None, end: int | None) -> str:
    """s[start:end] on the UTF-8 bytes, with Go's runtime panic texts when out of range."""
    data = s.encode()
    n = len(data)
    lo = 0 if start is None else start
    hi = n if end is None else end
    if end is not None and not 0 <= hi <= n:
        raise _CallError(f"runtime error: slice bounds out of range [:{hi}] with length {n}")
    if lo < 0 or lo > hi:
        raise _CallError(f"runtime error: slice bounds out of range [{lo}:{hi}]")
    return data[lo:hi].decode("utf-8", "replace")


def _s_substr(start: int, end: int, s: str) -> str:
    if start < 0:
        return _byte_slice(s, None, end)
    n = len(s.encode())
    if end < 0 or end > n:
        return _byte_slice(s, start, None)
    return _byte_slice(s, start, end)


def _s_trunc(c: int, s: str) -> str:
    n = len(s.encode())
    if c < 0 and n + c > 0:
        return _byte_slice(s, n + c, None)
    if c >= 0 and n > c:
        return _byte_slice(s, None, c)
    return s


def _s_repeat(count: int, s: str) -> str:
    if count < 0:
        raise _CallError("strings: negative Repeat count")
    return s * count


def _go_split(sep: str, s: str, n: int = -1) -> list[str]:
    """strings.Split / SplitN (an empty separator splits into UTF-8 sequences)."""
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if 0 < n < len(chars):
            return chars[:n - 1] + ["".join(chars[n - 1:])]
        return chars
    return s.split(sep) if n < 0 else s.split(sep, n - 1)


def _s_split(sep: str, s: str) -> _StrMap:
    return _StrMap({f"_{i}": p for i, p in enumerate(_go_split(sep, s))})


def _s_splitn(sep: str, n: int, s: str) -> _StrMap:
    return _StrMap({f"_{i}": p for i, p in enumerate(_go_split(sep, s, n))})


def _s_indent(spaces: int, v: str) -> str:
    pad = _s_repeat(spaces, " ")
    return pad + v.replace("\n", "\n" + pad)


def _s_quote(*args: Any) -> str:
    return " ".join(go_quote(_strval(a)) for a in args if not _invalid(a))


def _s_squote(*args: Any) -> str:
    return " ".join(f"'{_fmt_v(a)}'" for a in args if not _invalid(a))


def _s_cat(*args: Any) -> str:
    return " ".join(_fmt_v(a) for a in args if not _invalid(a))


def _s_atoi(s: str) -> int:
    if re.fullmatch(r"[+-]?[0-9]+", s):
        v = int(s)
        if -(1 << 63) <= v < (1 << 63):
            return v
    return 0


def _s_typeof(v: Any) -> str:
    return go_type_name(v)


def _to_json(indent: str | None, escape_html: bool, must: bool) -> Callable[[Any], str]:
    def to_json(v: Any) -> str:
        try:
            return _json_encode(v, indent, escape_html)
        except _JSONError as e:
            if must:
                raise _CallError(str(e)) from e
            if not escape_html and indent is None:  # toRawJson panics
                raise _CallError(str(e)) from e
            return ""
    return to_json


def _from_json_value(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _from_json_value(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_from_json_value(x) for x in v]
    if isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v


def _json_error(doc: str, e: json.JSONDecodeError) -> str:
    """encoding/json's wording for the common syntax errors Python reports differently."""
    if e.pos >= len(doc.rstrip()):
        return "unexpected end of JSON input"
    ch = doc[e.pos]
    c = "'\\''" if ch == "'" else ("'\"'" if ch == '"' else _quote_rune(ord(ch)))
    where = {"Expecting value": "looking for beginning of value", "Extra data": "after top-level value",
             "Expecting property name enclosed in double quotes": "looking for beginning of object key string",
             "Expecting ':' delimiter": "after object key", "Expecting ',' delimiter": "after array element"}
    return f"invalid character {c} {where.get(e.msg, e.msg)}"


def _from_json(must: bool) -> Callable[[str], Any]:
    def from_json(s: str) -> Any:
        try:
            return _from_json_value(json.loads(s, parse_constant=_reject_constant))
        except json.JSONDecodeError as e:
            if must:
                raise _CallError(_json_error(s, e)) from e
            return None
        except (ValueError, RecursionError) as e:
            if must:
                raise _CallError(str(e)) from e
            return None
    return from_json


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid character {_quote_rune(ord(name[0]))} looking for beginning of value")


# --- regular expressions: RE2 via Python's re ------------------------------------------------------------------

class _ReSyntaxError(Exception):
    """A pattern Go's regexp/syntax refuses: its error code and the offending text."""

    def __init__(self, code: str, expr: str) -> None:
        super().__init__(f"{code}: `{expr}`")
        self.code, self.expr = code, expr


_POSIX_CLASSES: Final = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}


def _escape_end(pattern: str, i: int) -> int:
    """The end of the `\\p{...}` / `\\pL` escape at i."""
    if pattern[i + 2:i + 3] == "{":
        close = pattern.find("}", i)
        return len(pattern) if close < 0 else close + 1
    return i + 3


def _translate_re2(pattern: str) -> str:
    """Go RE2 syntax to Python's `re` (compiled with re.ASCII: Go's \\d \\w \\s \\b are ASCII), so a pattern matches
    the same strings: `\\z`, `(?<name>`, `$` (end of text unless (?m)), `\\Q...\\E`, octal escapes (Python would
    read `\\12` as a backreference), `[[:digit:]]`, a `{` that is not a repetition. Constructs Go refuses (nested or
    possessive repetition, backreferences, lookarounds, atomic groups) raise _ReSyntaxError with Go's message; RE2
    features Python lacks (`\\p{...}`, `(?U)`, negated POSIX classes) raise one saying capd-py does not support
    them."""
    multiline = bool(re.match(r"\(\?[a-zA-Z]*m[a-zA-Z]*\)", pattern))
    out: list[str] = []
    i, n, in_class = 0, len(pattern), False
    last_repeat = (-1, -1)  # (start, end) of the previous repetition operator, to spot "a**" and "a++"
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise _ReSyntaxError("trailing backslash at end of expression", "")
            nxt = pattern[i + 1]
            if nxt == "Q" and not in_class:
                end = pattern.find("\\E", i + 2)
                lit = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append(re.escape(lit))
                i = n if end < 0 else end + 2
                continue
            if nxt in "pP":
                raise _ReSyntaxError("capd-py does not support Unicode classes in regular expressions",
                                     pattern[i:_escape_end(pattern, i)])
            if nxt in "01234567":
                j = i + 2
                if nxt != "0" and not (j < n and pattern[j] in "01234567"):
                    raise _ReSyntaxError("invalid escape sequence", pattern[i:i + 2])
                while j < n and j < i + 4 and pattern[j] in "01234567":
                    j += 1
                out.append(f"\\x{int(pattern[i + 1:j], 8):02x}")
                i = j
                continue
            if nxt in "89":
                raise _ReSyntaxError("invalid escape sequence", pattern[i:i + 2])
            out.append("\\Z" if nxt == "z" and not in_class else c + nxt)
            i += 2
            continue
        if in_class:
            if pattern.startswith("[:", i):
                close = pattern.find(":]", i + 2)
                name = pattern[i + 2:close] if close > 0 else ""
                if close > 0 and name.startswith("^"):
                    raise _ReSyntaxError("capd-py does not support negated POSIX classes", pattern[i:close + 2])
                if close > 0 and name in _POSIX_CLASSES:
                    out.append(_POSIX_CLASSES[name])
                    i = close + 2
                    continue
                if close > 0:
                    raise _ReSyntaxError("invalid character class range", pattern[i:close + 2])
                out.append("\\[")
            else:
                in_class = c != "]"
                out.append(c)
            i += 1
            continue
        if c == "[":
            in_class = True
            out.append(c)
            if pattern[i + 1:i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1:i + 2] == "]":
                out.append("\\]")
                i += 1
        elif c in "*+?{":
            end = i + 1
            if c == "{":
                m = re.match(r"\{(\d+)(,(\d*))?\}", pattern[i:])
                if m is None:  # not a repetition: a literal brace, as in Go
                    out.append("\\{")
                    i += 1
                    continue
                end = i + m.end()
                lo, hi = int(m.group(1)), (int(m.group(3)) if m.group(3) else (-1 if m.group(2) else int(m.group(1))))
                if lo > 1000 or hi > 1000 or (hi >= 0 and lo > hi):
                    raise _ReSyntaxError("invalid repeat count", pattern[i:end])
            if i == last_repeat[1]:
                raise _ReSyntaxError("invalid nested repetition operator", pattern[last_repeat[0]:end])
            if end < n and pattern[end] == "?":  # non-greedy
                end += 1
            out.append(pattern[i:end])
            last_repeat = (i, end)
            i = end
            continue
        elif c == "$" and not multiline:
            out.append(r"(?!(?s:.))")
        elif pattern.startswith("(?", i):
            m = re.match(r"\(\?(P?<[A-Za-z_][A-Za-z0-9_]*>|[imsU-]*[:)])", pattern[i:])
            if m is None:
                raise _ReSyntaxError("invalid or unsupported Perl syntax", pattern[i:i + 3])
            if "U" in m.group(1):
                raise _ReSyntaxError("capd-py does not support the ungreedy flag", m.group(0))
            out.append("(?P" + m.group(1) if m.group(1).startswith("<") else m.group(0))
            i += m.end()
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


_RE_CACHE: dict[str, re.Pattern[str]] = {}

_RE_ERRORS: Final = (("unterminated character set", "missing closing ]"),
                     ("missing ), unterminated subpattern", "missing closing )"),
                     ("unbalanced parenthesis", "unexpected )"),
                     ("nothing to repeat", "missing argument to repetition operator"),
                     ("multiple repeat", "invalid nested repetition operator"),
                     ("bad escape", "invalid escape sequence"),
                     ("bad character range", "invalid character class range"))


def _go_regexp_error(pattern: str, e: re.error) -> str:
    """Python's complaint in Go's words: `<code>: `<offending text>``."""
    msg, pos = str(e.msg), e.pos if e.pos is not None else 0
    code = next((go for py, go in _RE_ERRORS if msg.startswith(py)), msg)
    expr = pattern
    if msg.startswith("unterminated character set"):
        expr = pattern[pos:]
    elif msg.startswith("nothing to repeat"):
        expr = pattern[pos:pos + 1]
    elif msg.startswith("bad character range"):
        expr = msg.split()[3] if len(msg.split()) > 3 else pattern
    elif msg.startswith("bad escape"):
        expr = pattern[pos:pos + 2]
    return f"{code}: `{expr}`"


def _compile_re(pattern: str, must: bool = True) -> re.Pattern[str]:
    """regexp.Compile (`must=False`: regexp.MustCompile, whose panic message sprig's non-must functions surface)."""
    rx = _RE_CACHE.get(pattern)
    if rx is not None:
        return rx
    try:
        rx = re.compile(_translate_re2(pattern), re.ASCII)
    except _ReSyntaxError as e:
        why = str(e)
    except re.error as e:
        why = _go_regexp_error(pattern, e)
    else:
        _RE_CACHE[pattern] = rx
        return rx
    msg = f"error parsing regexp: {why}"
    raise _CallError(msg if must else f"regexp: Compile({_backquote(pattern)}): {msg}")


def _backquote(s: str) -> str:
    """regexp's quote(): backquoted when strconv.CanBackquote, else strconv.Quote."""
    if "`" not in s and all(c == "\t" or (c.isprintable() and c != "\ufeff") for c in s):
        return f"`{s}`"
    return go_quote(s)


def _go_matches(rx: re.Pattern[str], s: str, n: int = -1) -> list[re.Match[str]]:
    """Go's FindAll*: like finditer, but an empty match right after the previous match is ignored."""
    out: list[re.Match[str]] = []
    last_end = -1
    for m in rx.finditer(s):
        if n >= 0 and len(out) >= n:
            break
        if m.start() == m.end() and m.start() == last_end:
            continue
        out.append(m)
        last_end = m.end()
    return out


def _go_expand(template: str, m: re.Match[str]) -> str:
    """regexp.Expand: `$1`, `${1}`, `$name`, `${name}`, `$$`; unknown groups expand to nothing."""
    out: list[str] = []
    i = 0
    while i < len(template):
        c = template[i]
        if c != "$":
            out.append(c)
            i += 1
            continue
        i += 1
        if template[i:i + 1] == "$":
            out.append("$")
            i += 1
            continue
        if template[i:i + 1] == "{":
            j = template.find("}", i)
            name = template[i + 1:j] if j > 0 else ""
            if j < 0 or not name or not all(_is_alnum(ch) for ch in name):
                out.append("$")
                continue
            i = j + 1
        else:
            j = i
            while j < len(template) and _is_alnum(template[j]):
                j += 1
            name = template[i:j]
            if not name:
                out.append("$")
                continue
            i = j
        group: str | None
        if name.isdigit():
            num = int(name)
            group = m.group(num) if num <= (m.re.groups or 0) else None
        else:
            group = m.groupdict().get(name)
        out.append(group or "")
    return "".join(out)


def _regex_replace(regex: str, s: str, repl: str, literal: bool, must: bool = True) -> str:
    rx = _compile_re(regex, must)
    out: list[str] = []
    pos = 0
    for m in _go_matches(rx, s):
        out.append(s[pos:m.start()])
        out.append(repl if literal else _go_expand(repl, m))
        pos = m.end()
    out.append(s[pos:])
    return "".join(out)


def _regex_split(regex: str, s: str, n: int, must: bool = True) -> _StrList:
    if n == 0:
        return _StrList()
    rx = _compile_re(regex, must)
    if regex and s == "":
        return _StrList([""])
    parts = _StrList()
    beg = end = 0
    for m in _go_matches(rx, s, n):
        if n > 0 and len(parts) == n - 1:
            break
        end = m.start()
        if m.end() != 0:
            parts.append(s[beg:end])
        beg = m.end()
    if end != len(s):
        parts.append(s[beg:])
    return parts


def _regex_quote_meta(s: str) -> str:
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in s)


def _semver_compare(constraint: str, version: str) -> bool:
    try:
        return _semver_check(constraint, version)
    except _SemverError as e:
        raise _CallError(str(e)) from e


def _semver(version: str) -> _SemverVersion:
    try:
        return _SemverVersion.parse(version)
    except _SemverError as e:
        raise _CallError(str(e)) from e


def _path_clean(p: str) -> str:
    if p == "":
        return "."
    rooted = p.startswith("/")
    parts: list[str] = []
    for seg in p.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if parts and parts[-1] != "..":
                parts.pop()
            elif not rooted:
                parts.append("..")
            continue
        parts.append(seg)
    out = ("/" if rooted else "") + "/".join(parts)
    return out or "."


def _path_base(p: str) -> str:
    if p == "":
        return "."
    p = p.rstrip("/")
    if p == "":
        return "/"
    return p[p.rfind("/") + 1:]


def _path_dir(p: str) -> str:
    return _path_clean(p[:p.rfind("/") + 1])


def _path_ext(p: str) -> str:
    i = len(p) - 1
    while i >= 0 and p[i] != "/":
        if p[i] == ".":
            return p[i:]
        i -= 1
    return ""


def _s_fail(msg: str) -> NoReturn:
    raise _CallError(msg)


def _s_keys(*dicts: Any) -> _StrList:
    # Go map iteration order is random; sorted is one of the orders upstream can produce, and a stable one.
    return _StrList(k for d in dicts for k in sorted(_map_or_empty(d)))


def _s_values(d: Any) -> list[Any]:
    m = _map_or_empty(d)
    return [m[k] for k in sorted(m)]


def _s_pluck(key: str, *dicts: Any) -> list[Any]:
    return [d[key] for d in dicts if isinstance(d, dict) and key in d]


def _s_chunk(size: int, lst: Any) -> list[Any]:
    items = _list_of(lst, "chunk")
    if size <= 0:  # sprig's chunk count (float division) or a chunk length comes out negative: make panics
        raise _CallError("runtime error: makeslice: len out of range")
    return [items[i:i + size] for i in range(0, len(items), size)]


def _s_untitle(s: str) -> str:
    """goutils.Uncapitalize: the first letter of every whitespace-separated word lowercased."""
    out = []
    nxt = True
    for c in s:
        if c in _GO_SPACE:
            nxt = True
        elif nxt:
            out.append(c.lower() if len(c.lower()) == 1 else c)
            nxt = False
            continue
        out.append(c)
    return "".join(out)


def _s_max(a: Any, *rest: Any) -> Int64:
    return Int64(max([_cast_int(a), *(_cast_int(x) for x in rest)]))


def _s_min(a: Any, *rest: Any) -> Int64:
    return Int64(min([_cast_int(a), *(_cast_int(x) for x in rest)]))


def _fdiv(a: float, b: float) -> float:
    """IEEE division, as Go's (Python raises on a zero divisor)."""
    if b == 0:
        return math.nan if a == 0 or math.isnan(a) else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _ceil(f: float) -> float:
    return math.copysign(float(math.ceil(f)), f) if math.isfinite(f) else f  # Go keeps the sign: Ceil(-0.5) = -0


def _floor(f: float) -> float:
    return math.copysign(float(math.floor(f)), f) if math.isfinite(f) else f


def _s_round(a: Any, p: int, *r_opt: float) -> float:
    """sprig's round, with Go's float64 arithmetic (overflow gives Inf, Modf(Inf) a NaN fraction)."""
    round_on = r_opt[0] if r_opt else 0.5
    val = _cast_float(a)
    try:
        pw = math.pow(10, p)
    except OverflowError:
        pw = math.inf
    digit = pw * val
    frac = math.modf(digit)[0] if math.isfinite(digit) else math.nan
    return _fdiv(_ceil(digit) if frac >= round_on else _floor(digit), pw)


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """A helper's ValueError as the template function's error (sprig panics; text/template reports the panic)."""
    try:
        return fn(*args)
    except ValueError as e:
        raise _CallError(str(e)) from None


def _s_deep_copy(v: Any) -> Any:
    """copystructure.Copy: a nil interface makes reflect panic (deepCopy and mustDeepCopy alike)."""
    if v is None:
        raise _CallError("reflect: call of reflect.Value.Type on zero Value")
    return copy.deepcopy(v)


def _s_to_date(layout: str, value: str, must: bool) -> gotime.GoTime:
    try:
        return gotime.parse_in_utc(layout, value)
    except gotime.ParseError as e:
        if must:
            raise _CallError(str(e)) from None
        return gotime.ZERO


def _s_url_join(d: Mapping[str, Any] | None) -> str:
    """urlJoin: each part must be a string (sprig panics naming the key and the value's kind; a nil value makes
    reflect panic), in the order Go builds the url.URL."""
    d = _map_or_empty(d)
    parts: dict[str, str] = {}
    for key in ("scheme", "host", "path", "query", "opaque", "fragment", "userinfo"):
        if key not in d:
            continue
        v = d[key]
        if v is None or v is NO_VALUE:
            raise _CallError("runtime error: invalid memory address or nil pointer dereference")
        if not isinstance(v, str):
            raise _CallError(f"unable to parse {key} key, must be of type string, but {_go_kind(v)} found")
        parts[key] = v
    return str(_call(sprig_url.url_join, parts))


_SPRIG: Final[dict[str, _Func]] = {
    # strings
    "trunc": _Func(_s_trunc, (_INT, _STR)),
    "trim": _Func(_go_trim_space, (_STR,)),
    "upper": _Func(_go_upper, (_STR,)),
    "lower": _Func(_go_lower, (_STR,)),
    "title": _Func(_go_title, (_STR,)),
    "untitle": _Func(_s_untitle, (_STR,)),
    "substr": _Func(_s_substr, (_INT, _INT, _STR)),
    "repeat": _Func(_s_repeat, (_INT, _STR)),
    "trimall": _Func(lambda a, b: b.strip(a), (_STR, _STR)),
    "trimAll": _Func(lambda a, b: b.strip(a), (_STR, _STR)),
    "trimSuffix": _Func(lambda a, b: b.removesuffix(a), (_STR, _STR)),
    "trimPrefix": _Func(lambda a, b: b.removeprefix(a), (_STR, _STR)),
    "nospace": _Func(lambda s: "".join(c for c in s if c not in _GO_SPACE), (_STR,)),
    "contains": _Func(lambda sub, s: sub in s, (_STR, _STR)),
    "hasPrefix": _Func(lambda sub, s: s.startswith(sub), (_STR, _STR)),
    "hasSuffix": _Func(lambda sub, s: s.endswith(sub), (_STR, _STR)),
    "quote": _Func(_s_quote, (), _ANY),
    "squote": _Func(_s_squote, (), _ANY),
    "cat": _Func(_s_cat, (), _ANY),
    "indent": _Func(_s_indent, (_INT, _STR)),
    "nindent": _Func(lambda n, v: "\n" + _s_indent(n, v), (_INT, _STR)),
    "replace": _Func(lambda old, new, src: src.replace(old, new), (_STR, _STR, _STR)),
    "plural": _Func(lambda one, many, count: one if count == 1 else many, (_STR, _STR, _INT)),
    "sha1sum": _Func(lambda s: hashlib.sha1(s.encode()).hexdigest(), (_STR,)),
    "sha256sum": _Func(lambda s: hashlib.sha256(s.encode()).hexdigest(), (_STR,)),
    "sha512sum": _Func(lambda s: hashlib.sha512(s.encode()).hexdigest(), (_STR,)),
    "adler32sum": _Func(lambda s: str(zlib.adler32(s.encode())), (_STR,)),
    "toString": _Func(_strval, (_ANY,)),
    "toStrings": _Func(_strslice, (_ANY,)),
    # numbers
    "atoi": _Func(_s_atoi, (_STR,)),
    "int64": _Func(lambda v: Int64(_cast_int(v)), (_ANY,)),
    "int": _Func(_cast_int, (_ANY,)),
    "float64": _Func(_cast_float, (_ANY,)),
    "add1": _Func(lambda v: Int64(_wrap64(_cast_int(v) + 1)), (_ANY,)),
    "add": _Func(lambda *v: Int64(_wrap64(sum(_cast_int(x) for x in v))), (), _ANY),
    "sub": _Func(lambda a, b: Int64(_wrap64(_cast_int(a) - _cast_int(b))), (_ANY, _ANY)),
    "div": _Func(lambda a, b: Int64(_go_div(_cast_int(a), _cast_int(b))), (_ANY, _ANY)),
    "mod": _Func(lambda a, b: Int64(_go_mod(_cast_int(a), _cast_int(b))), (_ANY, _ANY)),
    "mul": _Func(lambda a, *v: Int64(_wrap64(math.prod([_cast_int(a), *(_cast_int(x) for x in v)]))), (_ANY,), _ANY),
    "add1f": _Func(lambda v: _decimal_op(v, [1], lambda x, y: x + y), (_ANY,)),
    "addf": _Func(lambda *v: _decimal_op(0.0, v, lambda x, y: x + y), (), _ANY),
    "subf": _Func(lambda a, *v: _decimal_op(a, v, lambda x, y: x - y), (_ANY,), _ANY),
    "mulf": _Func(lambda a, *v: _decimal_op(a, v, lambda x, y: x * y), (_ANY,), _ANY),
    "divf": _Func(lambda a, *v: _decimal_op(a, v, lambda x, y: x / y), (_ANY,), _ANY),
    "biggest": _Func(_s_max, (_ANY,), _ANY),
    "max": _Func(_s_max, (_ANY,), _ANY),
    "min": _Func(_s_min, (_ANY,), _ANY),
    "maxf": _Func(lambda a, *v: max([_cast_float(a), *(_cast_float(x) for x in v)]), (_ANY,), _ANY),
    "minf": _Func(lambda a, *v: min([_cast_float(a), *(_cast_float(x) for x in v)]), (_ANY,), _ANY),
    "ceil": _Func(lambda a: _ceil(_cast_float(a)), (_ANY,)),
    "floor": _Func(lambda a: _floor(_cast_float(a)), (_ANY,)),
    "round": _Func(_s_round, (_ANY, _INT), "float64"),
    "until": _Func(lambda n: _s_until_step(0, n, -1 if n < 0 else 1), (_INT,)),
    "untilStep": _Func(_s_until_step, (_INT, _INT, _INT)),
    "seq": _Func(_s_seq, (), _INT),
    # strings <-> lists
    "split": _Func(_s_split, (_STR, _STR)),
    "splitList": _Func(lambda sep, s: _StrList(_go_split(sep, s)), (_STR, _STR)),
    "splitn": _Func(_s_splitn, (_STR, _INT, _STR)),
    "join": _Func(lambda sep, v: sep.join(_strslice(v)), (_STR, _ANY)),
    "sortAlpha": _Func(lambda v: _StrList(sorted(_strslice(v))) if isinstance(v, list) else _StrList([_strval(v)]),
                       (_ANY,)),
    # defaults and flow
    "default": _Func(lambda d, *given: d if not given or _empty(given[0]) else given[0], (_ANY,), _ANY),
    "empty": _Func(_empty, (_ANY,)),
    "coalesce": _Func(lambda *v: next((x for x in v if not _empty(x)), None), (), _ANY),
    "all": _Func(lambda *v: all(not _empty(x) for x in v), (), _ANY),
    "any": _Func(lambda *v: any(not _empty(x) for x in v), (), _ANY),
    "compact": _Func(lambda v: [x for x in _list_of(v, "compact") if not _empty(x)], (_ANY,)),
    "mustCompact": _Func(lambda v: [x for x in _list_of(v, "compact") if not _empty(x)], (_ANY,)),
    "ternary": _Func(lambda vt, vf, v: vt if v else vf, (_ANY, _ANY, _BOOL)),
    "fail": _Func(_s_fail, (_STR,)),
    # encodings
    "fromJson": _Func(_from_json(False), (_STR,)),
    "mustFromJson": _Func(_from_json(True), (_STR,)),
    "toJson": _Func(_to_json(None, True, False), (_ANY,)),
    "mustToJson": _Func(_to_json(None, True, True), (_ANY,)),
    "toPrettyJson": _Func(_to_json("  ", True, False), (_ANY,)),
    "mustToPrettyJson": _Func(_to_json("  ", True, True), (_ANY,)),
    "toRawJson": _Func(_to_json(None, False, False), (_ANY,)),
    "mustToRawJson": _Func(_to_json(None, False, True), (_ANY,)),
    "b64enc": _Func(lambda s: base64.b64encode(s.encode()).decode(), (_STR,)),
    "b64dec": _Func(_b64dec, (_STR,)),
    "b32enc": _Func(lambda s: base64.b32encode(s.encode()).decode(), (_STR,)),
    "b32dec": _Func(_b32dec, (_STR,)),
    # reflection
    "typeOf": _Func(_s_typeof, (_ANY,)),
    "typeIs": _Func(lambda t, v: t == go_type_name(v), (_STR, _ANY)),
    "typeIsLike": _Func(lambda t, v: go_type_name(v) in (t, "*" + t), (_STR, _ANY)),
    "kindOf": _Func(_go_kind, (_ANY,)),
    "kindIs": _Func(lambda t, v: t == _go_kind(v), (_STR, _ANY)),
    "deepEqual": _Func(_go_deep_equal, (_ANY, _ANY)),
    "deepCopy": _Func(_s_deep_copy, (_ANY,)),
    "mustDeepCopy": _Func(_s_deep_copy, (_ANY,)),
    # paths (Linux: os* are the same)
    "base": _Func(_path_base, (_STR,)), "osBase": _Func(_path_base, (_STR,)),
    "dir": _Func(_path_dir, (_STR,)), "osDir": _Func(_path_dir, (_STR,)),
    "clean": _Func(_path_clean, (_STR,)), "osClean": _Func(_path_clean, (_STR,)),
    "ext": _Func(_path_ext, (_STR,)), "osExt": _Func(_path_ext, (_STR,)),
    "isAbs": _Func(lambda p: p.startswith("/"), (_STR,)), "osIsAbs": _Func(lambda p: p.startswith("/"), (_STR,)),
    # dicts
    "list": _Func(lambda *v: list(v), (), _ANY),
    "tuple": _Func(lambda *v: list(v), (), _ANY),
    "dict": _Func(_s_dict, (), _ANY),
    "get": _Func(lambda d, k: _map_or_empty(d).get(k, ""), (_MAP, _STR)),
    "set": _Func(_s_set, (_MAP, _STR, _ANY)),
    "unset": _Func(_s_unset, (_MAP, _STR)),
    "hasKey": _Func(lambda d, k: k in _map_or_empty(d), (_MAP, _STR)),
    "pluck": _Func(_s_pluck, (_STR,), _MAP),
    "keys": _Func(_s_keys, (), _MAP),
    "pick": _Func(lambda d, *ks: {k: _map_or_empty(d)[k] for k in ks if k in _map_or_empty(d)}, (_MAP,), _STR),
    "omit": _Func(lambda d, *ks: {k: v for k, v in _map_or_empty(d).items() if k not in ks}, (_MAP,), _STR),
    "merge": _Func(_s_merge(False), (_MAP,), _MAP),
    "mustMerge": _Func(_s_merge(False), (_MAP,), _MAP),
    "mergeOverwrite": _Func(_s_merge(True), (_MAP,), _MAP),
    "mustMergeOverwrite": _Func(_s_merge(True), (_MAP,), _MAP),
    "values": _Func(_s_values, (_MAP,)),
    "dig": _Func(_s_dig, (), _ANY),
    # lists
    "append": _Func(lambda lst, v: [*_list_of(lst, "push"), v], (_ANY, _ANY)),
    "push": _Func(lambda lst, v: [*_list_of(lst, "push"), v], (_ANY, _ANY)),
    "mustAppend": _Func(lambda lst, v: [*_list_of(lst, "push"), v], (_ANY, _ANY)),
    "mustPush": _Func(lambda lst, v: [*_list_of(lst, "push"), v], (_ANY, _ANY)),
    "prepend": _Func(lambda lst, v: [v, *_list_of(lst, "prepend")], (_ANY, _ANY)),
    "mustPrepend": _Func(lambda lst, v: [v, *_list_of(lst, "prepend")], (_ANY, _ANY)),
    "first": _Func(_s_first, (_ANY,)), "mustFirst": _Func(_s_first, (_ANY,)),
    "last": _Func(_s_last, (_ANY,)), "mustLast": _Func(_s_last, (_ANY,)),
    "rest": _Func(_s_rest, (_ANY,)), "mustRest": _Func(_s_rest, (_ANY,)),
    "initial": _Func(_s_initial, (_ANY,)), "mustInitial": _Func(_s_initial, (_ANY,)),
    "reverse": _Func(lambda v: _list_of(v, "reverse")[::-1], (_ANY,)),
    "mustReverse": _Func(lambda v: _list_of(v, "reverse")[::-1], (_ANY,)),
    "uniq": _Func(_s_uniq, (_ANY,)), "mustUniq": _Func(_s_uniq, (_ANY,)),
    "without": _Func(lambda v, *o: [x for x in _list_of(v, "without") if not _in_list(o, x)], (_ANY,), _ANY),
    "mustWithout": _Func(lambda v, *o: [x for x in _list_of(v, "without") if not _in_list(o, x)], (_ANY,), _ANY),
    "has": _Func(_s_has, (_ANY, _ANY)), "mustHas": _Func(_s_has, (_ANY, _ANY)),
    "slice": _Func(_s_slice, (_ANY,), _ANY), "mustSlice": _Func(_s_slice, (_ANY,), _ANY),
    "concat": _Func(_s_concat, (), _ANY),
    "chunk": _Func(_s_chunk, (_INT, _ANY)), "mustChunk": _Func(_s_chunk, (_INT, _ANY)),
    # semver
    "semver": _Func(_semver, (_STR,)),
    "semverCompare": _Func(_semver_compare, (_STR, _STR)),
    # regular expressions
    "regexMatch": _Func(lambda rx, s: _safe_match(rx, s), (_STR, _STR)),
    "mustRegexMatch": _Func(lambda rx, s: _compile_re(rx).search(s) is not None, (_STR, _STR)),
    "regexFind": _Func(lambda rx, s: next((m.group(0) for m in _go_matches(_compile_re(rx, False), s, 1)), ""),
                       (_STR, _STR)),
    "mustRegexFind": _Func(lambda rx, s: next((m.group(0) for m in _go_matches(_compile_re(rx), s, 1)), ""),
                           (_STR, _STR)),
    "regexFindAll": _Func(lambda rx, s, n: _StrList(m.group(0) for m in _go_matches(_compile_re(rx, False), s, n)),
                          (_STR, _STR, _INT)),
    "mustRegexFindAll": _Func(lambda rx, s, n: _StrList(m.group(0) for m in _go_matches(_compile_re(rx), s, n)),
                              (_STR, _STR, _INT)),
    "regexReplaceAll": _Func(lambda rx, s, r: _regex_replace(rx, s, r, False, False), (_STR, _STR, _STR)),
    "mustRegexReplaceAll": _Func(lambda rx, s, r: _regex_replace(rx, s, r, False), (_STR, _STR, _STR)),
    "regexReplaceAllLiteral": _Func(lambda rx, s, r: _regex_replace(rx, s, r, True, False), (_STR, _STR, _STR)),
    "mustRegexReplaceAllLiteral": _Func(lambda rx, s, r: _regex_replace(rx, s, r, True), (_STR, _STR, _STR)),
    "regexSplit": _Func(lambda rx, s, n: _regex_split(rx, s, n, False), (_STR, _STR, _INT)),
    "mustRegexSplit": _Func(_regex_split, (_STR, _STR, _INT)),
    "regexQuoteMeta": _Func(_regex_quote_meta, (_STR,)),
    "hello": _Func(lambda: "Hello!", ()),
    # goutils / xstrings text helpers, durations (sprig_text)
    "abbrev": _Func(sprig_text.abbrev, (_INT, _STR)),
    "abbrevboth": _Func(sprig_text.abbrevboth, (_INT, _INT, _STR)),
    "initials": _Func(sprig_text.initials, (_STR,)),
    "wrap": _Func(sprig_text.wrap, (_INT, _STR)),
    "wrapWith": _Func(sprig_text.wrap_with, (_INT, _STR, _STR)),
    "swapcase": _Func(sprig_text.swapcase, (_STR,)),
    "camelcase": _Func(sprig_text.pascalcase, (_STR,)),
    "snakecase": _Func(sprig_text.snakecase, (_STR,)),
    "kebabcase": _Func(sprig_text.kebabcase, (_STR,)),
    "toDecimal": _Func(lambda v: Int64(sprig_text.to_decimal(_fmt_v(v))), (_ANY,)),
    "duration": _Func(lambda v: sprig_text.duration(v if isinstance(v, Int64) else None,
                                                    v if isinstance(v, str) else None), (_ANY,)),
    "urlParse": _Func(lambda v: _call(sprig_url.url_parse, v), (_STR,)),
    # dates: the local zone is UTC; toDate swallows the parse error (Go's zero Time), mustToDate returns it
    "toDate": _Func(lambda layout, v: _s_to_date(layout, v, False), (_STR, _STR)),
    "mustToDate": _Func(lambda layout, v: _s_to_date(layout, v, True), (_STR, _STR)),
    "unixEpoch": _Func(lambda t: str(t.unix), (_TIME,)),
    "mustDateModify": _Func(lambda d, t: t.add(_call(godur.parse_nanos, d)), (_STR, _TIME)),
    "must_date_modify": _Func(lambda d, t: t.add(_call(godur.parse_nanos, d)), (_STR, _TIME)),
    "urlJoin": _Func(_s_url_join, (_MAP,)),
    "durationRound": _Func(lambda v: sprig_text.duration_round(
        int(v) if isinstance(v, Int64) else sprig_text.parse_duration_or_zero(v) if isinstance(v, str) else 0),
        (_ANY,)),
}


def _safe_match(rx: str, s: str) -> bool:
    try:
        return _compile_re(rx).search(s) is not None
    except _CallError:
        return False  # sprig's regexMatch ignores a bad pattern


# In sprig's hermetic map but not implemented here: a parse error says so instead of "not defined".
_SPRIG_UNSUPPORTED: Final = frozenset({
    "ago", "shuffle", "randInt",
    "bcrypt", "htpasswd", "genPrivateKey", "derivePassword", "buildCustomCert", "genCA", "genCAWithKey",
    "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert", "genSignedCertWithKey", "encryptAES",
    "decryptAES",
})

_ALL_FUNCS: Final[dict[str, _Func]] = {**_BUILTINS, **_SPRIG}


# ---------------------------------------------------------------------------------------------------------------
# Executor (text/template/exec.go).
# ---------------------------------------------------------------------------------------------------------------


class _Break(Exception):
    pass


class _TooDeep(Exception):
    """Python's stack ran out inside nested {{template}} calls; carries the innermost call for the message."""

    def __init__(self, state: _State, node: _Node) -> None:
        super().__init__()
        self.state, self.node = state, node


class _Continue(Exception):
    pass


class _State:
    def __init__(self, tmpl: Template, data: Any, name: str, out: list[str], depth: int = 0) -> None:
        self.tmpl = tmpl
        self.name = name  # the (sub)template executing, for error messages
        # [name, value, iface]: iface says the Go value's static type is interface{} (a map value or a range
        # element), which only shows in "can't evaluate field X in type interface {}".
        self.vars: list[list[Any]] = [["$", data, False]]
        self.out = out
        self.node: _Node | None = None
        self.depth = depth
        self.dot_iface = False

    # -- errors and variables --

    def at(self, node: _Node) -> None:
        self.node = node

    def errorf(self, msg: str) -> NoReturn:
        name = self.name
        if self.node is None:
            raise TemplateError(f"template: {name}: {msg}")
        text = self.tmpl.text
        pos = self.node.pos
        before = text[:pos]
        nl = before.rfind("\n")
        col = len(before.encode()) if nl < 0 else len(before[nl + 1:].encode())
        line = 1 + before.count("\n")
        ctx = str(self.node)
        raise TemplateError(f"template: {self.tmpl.name}:{line}:{col}: executing {go_quote(name)} at <{ctx}>: {msg}")

    def push(self, name: str, value: Any) -> None:
        self.vars.append([name, value, False])

    def pop(self, mark: int) -> None:
        del self.vars[mark:]

    def set_var(self, name: str, value: Any, iface: bool = False) -> None:
        for v in reversed(self.vars):
            if v[0] == name:
                v[1], v[2] = value, iface
                return
        self.errorf(f"undefined variable: {name}")

    def set_top_var(self, n: int, value: Any, iface: bool = False) -> None:
        self.vars[len(self.vars) - n][1:] = [value, iface]

    def var_entry(self, name: str) -> list[Any]:
        for v in reversed(self.vars):
            if v[0] == name:
                return v
        self.errorf(f"undefined variable: {name}")

    # -- walking --

    def walk(self, dot: Any, node: _Node) -> None:
        self.at(node)
        if isinstance(node, _ActionNode):
            val = self.eval_pipeline(dot, node.pipe)
            if not node.pipe.decl:
                self.at(node)
                self.out.append("<no value>" if val is NO_VALUE else _fmt_v(val))
        elif isinstance(node, _TextNode):
            self.out.append(node.text)
        elif isinstance(node, _ListNode):
            for n in node.nodes:
                self.walk(dot, n)
        elif isinstance(node, _IfNode | _WithNode):
            self.walk_if_or_with(dot, node)
        elif isinstance(node, _RangeNode):
            self.walk_range(dot, node)
        elif isinstance(node, _BreakNode):
            raise _Break
        elif isinstance(node, _ContinueNode):
            raise _Continue
        elif isinstance(node, _TemplateNode):
            self.walk_template(dot, node)
        else:  # pragma: no cover - the parser produces nothing else
            self.errorf(f"unknown node: {node}")

    def walk_template(self, dot: Any, node: _TemplateNode) -> None:
        self.at(node)
        tree = self.tmpl.trees.get(node.name)
        if tree is None:
            self.errorf(f"template {go_quote(node.name)} not defined")
        if self.depth >= 100000:
            self.errorf("exceeded maximum template depth (100000)")
        new_dot = self.eval_pipeline(dot, node.pipe) if node.pipe is not None else NO_VALUE
        sub = _State(self.tmpl, new_dot, node.name, self.out, self.depth + 1)  # no dynamic scoping
        try:
            sub.walk(new_dot, tree)
        except RecursionError:
            raise _TooDeep(sub, node) from None

    def walk_with_dot(self, dot: Any, iface: bool, node: _Node) -> None:
        saved, self.dot_iface = self.dot_iface, iface
        try:
            self.walk(dot, node)
        finally:
            self.dot_iface = saved

    def walk_if_or_with(self, dot: Any, node: _BranchNode) -> None:
        mark = len(self.vars)
        try:
            val = self.eval_pipeline(dot, node.pipe)
            if _truth(val):
                if isinstance(node, _WithNode):
                    self.walk_with_dot(val, False, node.list)
                else:
                    self.walk(dot, node.list)
            elif node.else_list is not None:
                self.walk(dot, node.else_list)
        finally:
            self.pop(mark)

    def walk_range(self, dot: Any, r: _RangeNode) -> None:
        mark0 = len(self.vars)
        try:
            val = self.eval_pipeline(dot, r.pipe)
            mark = len(self.vars)
            decl = r.pipe.decl

            # elements of []interface{} / map[string]interface{} have the static type interface{}
            typed = isinstance(val, _StrList | _IntList | _StrMap)

            def one(index: Any, elem: Any, iface: bool = not typed) -> None:
                if decl:
                    if r.pipe.is_assign:
                        if len(decl) > 1:
                            self.set_var(decl[0].ident[0], index)
                        else:
                            self.set_var(decl[0].ident[0], elem, iface)
                    else:
                        self.set_top_var(1, elem, iface)
                if len(decl) > 1:
                    if r.pipe.is_assign:
                        self.set_var(decl[1].ident[0], elem, iface)
                    else:
                        self.set_top_var(2, index)
                try:
                    self.walk_with_dot(elem, iface, r.list)
                except _Continue:
                    pass
                finally:
                    self.pop(mark)

            try:
                if isinstance(val, list) and val:
                    for i, e in enumerate(val):
                        one(i, e)
                    return
                if isinstance(val, dict) and val:
                    for k in sorted(val):
                        one(k, val[k])
                    return
                if isinstance(val, int) and not isinstance(val, bool):
                    if len(decl) > 1:
                        self.errorf(f"can't use {_fmt_v(val)} to iterate over more than one variable")
                    if val > 0:
                        kind = type(val) if isinstance(val, Int64) else int  # range over int64 gives int64s
                        for i in range(int(val)):
                            one(i, kind(i), False)
                        return
                elif not (isinstance(val, list | dict) or _invalid(val)):
                    self.errorf(f"range can't iterate over {_fmt_v(val)}")
            except _Break:
                return
            if r.else_list is not None:
                self.walk(dot, r.else_list)
        finally:
            self.pop(mark0)

    # -- evaluation --

    def eval_pipeline(self, dot: Any, pipe: _PipeNode) -> Any:
        self.at(pipe)
        value: Any = _MISSING
        for cmd in pipe.cmds:
            value = self.eval_command(dot, cmd, value)
            if value is None:  # a nil interface{} "digs down" to an invalid value
                value = NO_VALUE
        for var in pipe.decl:
            if pipe.is_assign:
                self.set_var(var.ident[0], value)
            else:
                self.push(var.ident[0], value)
        return value

    def not_a_function(self, args: Sequence[_Node], final: Any) -> None:
        if len(args) > 1 or final is not _MISSING:
            self.errorf(f"can't give argument to non-function {args[0]}")

    def eval_command(self, dot: Any, cmd: _CommandNode, final: Any) -> Any:
        first = cmd.args[0]
        if isinstance(first, _FieldNode):
            return self.eval_field_node(dot, first, cmd.args, final)
        if isinstance(first, _ChainNode):
            return self.eval_chain_node(dot, first, cmd.args, final)
        if isinstance(first, _IdentifierNode):
            return self.eval_function(dot, first, cmd, cmd.args, final)
        if isinstance(first, _PipeNode):
            self.not_a_function(cmd.args, final)
            return self.eval_pipeline(dot, first)
        if isinstance(first, _VariableNode):
            return self.eval_variable_node(dot, first, cmd.args, final)
        self.at(first)
        self.not_a_function(cmd.args, final)
        if isinstance(first, _BoolNode):
            return first.val
        if isinstance(first, _DotNode):
            return dot
        if isinstance(first, _NilNode):
            self.errorf("nil is not a command")
        if isinstance(first, _NumberNode):
            return self.ideal_constant(first)
        if isinstance(first, _StringNode):
            return first.text
        self.errorf(f"can't evaluate command {first}")  # pragma: no cover

    def ideal_constant(self, n: _NumberNode) -> Any:
        self.at(n)
        t = n.text
        if n.is_complex:
            return n.complex_val
        is_hex_int = len(t) > 2 and t[0] == "0" and t[1] in "xX" and not any(c in t for c in "pP")
        if n.is_float and not is_hex_int and not t.startswith("'") and any(c in t for c in ".eEpP"):
            return n.float_val
        if n.is_int:
            return n.int_val
        if n.is_uint:
            self.errorf(f"{t} overflows int")
        return n.float_val

    def eval_field_node(self, dot: Any, field: _FieldNode, args: Sequence[_Node] | None, final: Any) -> Any:
        self.at(field)
        return self.eval_field_chain(dot, self.dot_iface, field.ident, args, final)

    def eval_chain_node(self, dot: Any, chain: _ChainNode, args: Sequence[_Node] | None, final: Any) -> Any:
        self.at(chain)
        if isinstance(chain.node, _NilNode):
            self.errorf(f"indirection through explicit nil in {chain}")
        pipe = self.eval_arg(dot, None, chain.node)
        return self.eval_field_chain(pipe, False, chain.fields, args, final)

    def eval_variable_node(self, dot: Any, var: _VariableNode, args: Sequence[_Node] | None, final: Any) -> Any:
        self.at(var)
        _, value, iface = self.var_entry(var.ident[0])
        if len(var.ident) == 1:
            self.not_a_function(args or [var], final)
            return value
        return self.eval_field_chain(value, iface, var.ident[1:], args, final)

    def eval_field_chain(self, receiver: Any, iface: bool, ident: Sequence[str], args: Sequence[_Node] | None,
                         final: Any) -> Any:
        for name in ident[:-1]:
            value = self.eval_field(name, None, _MISSING, receiver, iface)
            # a map[string]interface{} value's static type is interface{}; a method's result is concrete
            iface = isinstance(receiver, dict) and not isinstance(receiver, _StrMap)
            receiver = value
        return self.eval_field(ident[-1], args, final, receiver, iface)

    def eval_field(self, name: str, args: Sequence[_Node] | None, final: Any, receiver: Any, iface: bool) -> Any:
        has_args = (args is not None and len(args) > 1) or final is not _MISSING
        if receiver is NO_VALUE:
            if self.tmpl.missing_key == "error":
                self.errorf(f"nil data; no entry for key {go_quote(name)}")
            return NO_VALUE
        if receiver is None:
            self.errorf(f"nil pointer evaluating interface {{}}.{name}")
        if isinstance(receiver, _GoObject):
            method = receiver.go_method(name)
            if method is not None:
                if has_args:
                    self.errorf(f"wrong number of args for {name}: want 0 got "
                                f"{(len(args) - 1 if args else 0) + (final is not _MISSING)}")
                return method()
        elif isinstance(receiver, dict):
            if has_args:
                self.errorf(f"{name} is not a method but has arguments")
            if name in receiver:
                return receiver[name]
            if self.tmpl.missing_key == "error":
                self.errorf(f"map has no entry for key {go_quote(name)}")
            if self.tmpl.missing_key == "zero":
                return "" if isinstance(receiver, _StrMap) else None
            return NO_VALUE
        self.errorf(f"can't evaluate field {name} in type {'interface {}' if iface else go_type_name(receiver)}")

    def eval_function(self, dot: Any, node: _IdentifierNode, cmd: _Node, args: Sequence[_Node] | None,
                      final: Any) -> Any:
        self.at(node)
        fn = self.tmpl.funcs.get(node.name)
        if fn is None:  # pragma: no cover - the parser rejects undefined functions
            self.errorf(f"{go_quote(node.name)} is not a defined function")
        return self.eval_call(dot, fn, cmd, node.name, args, final)

    def eval_call(self, dot: Any, fn: _Func, node: _Node, name: str, args: Sequence[_Node] | None,
                  final: Any) -> Any:
        call_args = list(args[1:]) if args is not None else []
        num_in = len(call_args) + (0 if final is _MISSING else 1)
        if fn.variadic is not None:
            if num_in < len(fn.params):
                self.errorf(f"wrong number of args for {name}: want at least {len(fn.params)} got {len(call_args)}")
        elif num_in != len(fn.params):
            self.errorf(f"wrong number of args for {name}: want {len(fn.params)} got {num_in}")
        if name in ("and", "or") and fn.impl in (_b_and, _b_or):  # short-circuit, returning the deciding value
            v: Any = NO_VALUE
            for a in call_args:
                v = self.eval_arg(dot, _VALUE, a)
                if _truth(v) == (name == "or"):
                    return v
            if final is not _MISSING:
                v = final
            return v
        argv = []
        for i, a in enumerate(call_args):
            spec = fn.params[i] if i < len(fn.params) else fn.variadic
            v = self.eval_arg(dot, spec, a)
            if i >= 1 and fn.sees_interfaces and v is not NO_VALUE and _reads_a_field(a):
                v = _Interface(v)
            argv.append(v)
        if final is not _MISSING:
            last = num_in - 1
            spec = fn.params[last] if last < len(fn.params) else fn.variadic
            argv.append(self.validate_type(final, spec))
        try:
            return fn.impl(*argv)
        except _CallError as e:
            self.at(node)
            self.errorf(f"error calling {name}: {e}")
        except RecursionError:
            self.at(node)
            self.errorf(f"error calling {name}: value too deeply nested")
        except Exception as e:  # noqa: BLE001 - like Go's safeCall: a function that blows up is a template error
            self.at(node)
            self.errorf(f"error calling {name}: {e}")

    def validate_type(self, value: Any, spec: str | None) -> Any:
        if spec is None or spec == _VALUE:
            return value
        if value is NO_VALUE or value is _MISSING:
            if spec in _CAN_BE_NIL:
                return None
            self.errorf(f"invalid value; expected {spec}")
        if spec == _ANY:
            return value
        if value is None:
            self.errorf(f"wrong type for value; expected {spec}; got interface {{}}")
        ok = {
            _STR: isinstance(value, str),
            _INT: type(value) is int,
            _BOOL: isinstance(value, bool),
            "float64": type(value) is float,
            _MAP: type(value) is dict,
            _TIME: isinstance(value, gotime.GoTime),
        }.get(spec, False)
        if not ok:
            self.errorf(f"wrong type for value; expected {spec}; got {go_type_name(value)}")
        return value

    def eval_arg(self, dot: Any, spec: str | None, n: _Node) -> Any:
        self.at(n)
        if isinstance(n, _DotNode):
            return self.validate_type(dot, spec)
        if isinstance(n, _NilNode):
            if spec == _VALUE:  # a reflect.Value parameter gets the zero Value, Go's invalid value
                return NO_VALUE
            if spec is None or spec in _CAN_BE_NIL:
                return None
            self.errorf(f"cannot assign nil to {spec}")
        if isinstance(n, _FieldNode):
            return self.validate_type(self.eval_field_node(dot, n, [n], _MISSING), spec)
        if isinstance(n, _VariableNode):
            return self.validate_type(self.eval_variable_node(dot, n, None, _MISSING), spec)
        if isinstance(n, _PipeNode):
            return self.validate_type(self.eval_pipeline(dot, n), spec)
        if isinstance(n, _IdentifierNode):
            return self.validate_type(self.eval_function(dot, n, n, None, _MISSING), spec)
        if isinstance(n, _ChainNode):
            return self.validate_type(self.eval_chain_node(dot, n, None, _MISSING), spec)
        if spec == _BOOL:
            if isinstance(n, _BoolNode):
                return n.val
            self.errorf(f"expected bool; found {n}")
        if spec == "float64":
            if isinstance(n, _NumberNode) and n.is_float:
                return n.float_val
            self.errorf(f"expected float; found {n}")
        if spec == _INT:
            if isinstance(n, _NumberNode) and n.is_int:
                return n.int_val
            self.errorf(f"expected integer; found {n}")
        if spec == _STR:
            if isinstance(n, _StringNode):
                return n.text
            self.errorf(f"expected string; found {n}")
        if spec in (None, _ANY, _VALUE):
            if isinstance(n, _BoolNode):
                return n.val
            if isinstance(n, _NumberNode):
                return self.ideal_constant(n)
            if isinstance(n, _StringNode):
                return n.text
        self.errorf(f"can't handle {n} for arg of type {spec}")


# ---------------------------------------------------------------------------------------------------------------
# Public API.
# ---------------------------------------------------------------------------------------------------------------

_MISSING_KEY_OPTIONS: Final = ("default", "invalid", "zero", "error")


def _to_go_data(v: Any) -> Any:
    """What `json.Unmarshal` into interface{} gives for JSON-able `v`: numbers become float64."""
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, Mapping):
        return {str(k): _to_go_data(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_to_go_data(x) for x in v]
    raise TemplateError(f"template data: a {type(v).__name__} is not JSON")


class Template:
    """A parsed template: parse once (e.g. when validating a ClusterClass), execute per object."""

    def __init__(self, text: str, name: str, funcs: Mapping[str, _Func], missing_key: str) -> None:
        self.text = text
        self.name = name
        self.funcs = funcs
        self.missing_key = missing_key
        parser = _Parser(name, text, funcs, funcs is _ALL_FUNCS)
        root = parser.parse()
        self.trees: dict[str, _ListNode] = dict(parser.defines)
        if name not in self.trees or not _is_empty_tree(root):
            self.trees[name] = root
        self.root = self.trees[name]

    def execute(self, data: Mapping[str, Any]) -> str:
        """Render with `data` converted as upstream's JSON round trip does (ints become float64)."""
        state = _State(self, _to_go_data(data), self.name, [])
        try:
            state.walk(state.vars[0][1], self.root)
        except _TooDeep as e:  # Go allows 100000 nested calls; the message is Go's, at the innermost call
            e.state.at(e.node)
            e.state.errorf("exceeded maximum template depth (100000)")
        except RecursionError as e:
            raise TemplateError(f"template: {self.name}: value or template too deeply nested") from e
        return "".join(state.out)


def parse(text: str, *, name: str = "tpl", sprig: bool = True, missing_key: str = "default") -> Template:
    """Parse like `template.New(name).Funcs(sprig.HermeticTxtFuncMap()).Option("missingkey=...").Parse(text)`.

    `sprig=False` gives Go's builtins only; `missing_key` is Go's option ("default"/"invalid": `<no value>`,
    "zero", "error"). Upstream's ClusterClass patches use the defaults; its naming templates (`.cluster.name`,
    `.random`, ...) use `sprig=False, missing_key="error"`."""
    if missing_key not in _MISSING_KEY_OPTIONS:
        raise ValueError(f"missing_key must be one of {', '.join(_MISSING_KEY_OPTIONS)}")
    return Template(text, name, _ALL_FUNCS if sprig else _BUILTINS, missing_key)


def render(text: str, data: Mapping[str, Any], *, name: str = "tpl", sprig: bool = True,
           missing_key: str = "default") -> str:
    """Parse and execute `text` with `data` as upstream renders `valueFrom.template` / `enabledIf`."""
    return parse(text, name=name, sprig=sprig, missing_key=missing_key).execute(data)


def go_sprint(v: Any) -> str:
    """fmt's %v of a JSON-like value (`true`, `3`, `2.5`, `1e+06`, `[a b]`, `map[k:v]`, `<nil>`)."""
    return _fmt_v(v)


def go_json(v: Any, indent: str | None = None, escape_html: bool = True) -> str:
    """encoding/json.Marshal (or MarshalIndent with `indent`): sorted keys, Go's float format, `<>&` escaped
    unless `escape_html=False`. Raises ValueError for what Go refuses (NaN, Inf, non-JSON types)."""
    try:
        return _json_encode(v, indent, escape_html)
    except _JSONError as e:
        raise ValueError(str(e)) from e


def go_regexp(pattern: str) -> re.Pattern[str]:
    """Compile a Go (RE2) regular expression with Python's `re` (see the module docstring for the differences);
    raises ValueError with Go-like wording if it does not compile."""
    try:
        return _compile_re(pattern)
    except _CallError as e:
        raise ValueError(str(e)) from e


def function_names(sprig: bool = True) -> frozenset[str]:
    """The functions templates can call (Go's builtins, plus the implemented sprig ones)."""
    return frozenset(_ALL_FUNCS if sprig else _BUILTINS)
