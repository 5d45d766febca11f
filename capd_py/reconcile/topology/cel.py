"""CEL `x-kubernetes-validations` of ClusterClass variable schemas, evaluated as upstream's variable validation does.

Upstream (internal/topology/variables, ValidateClusterVariable) runs k8s.io/apiextensions-apiserver's CEL
validator over the value wrapped as `variableValue` and rewrites the paths: every schema node with rules
evaluates them with `self` (the value at that node, typed by the schema) and, for transition rules, `oldSelf`
(the old value, when there is one: a rule using `oldSelf` is skipped without it). Nodes are visited as the
apiserver does: the node's rules, then properties, additionalProperties (by key) and items (by index); null
values are not validated.

The evaluator is cel-python (`celpy`, pure Python, in-process: reconcile/ stays free of I/O), with the
Kubernetes CEL library functions ClusterClass rules use added here (strings: lowerAscii, upperAscii, split,
join, replace, substring, trim, indexOf, lastIndexOf, charAt, reverse; lists: isSorted, sum, min, max,
indexOf, lastIndexOf, distinct, sort; regex: find, findAll). Failures read as upstream's: `failed rule: <rule>`,
the rule's message, or its messageExpression's result; the rule's reason picks the error type; fieldPath
moves the error; an evaluation error reads `<error> evaluating rule: <rule>`. What differs from upstream is
listed in tests/unit/reconcile/topology/test_variables_parity.py (the corpus made by upstream's own code).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import Any

import celpy
from celpy import celtypes

from capd_py.reconcile.topology import cel_k8s
from capd_py.reconcile.topology.gotemplate import go_sprint

_OLD_SELF = re.compile(r"\boldSelf\b")
_ENV = celpy.Environment()


class CELError(Exception):
    """An evaluation error, worded as cel-go's (`no such key: x`, `division by zero`, ...)."""


class CELCompileError(CELError):
    """A rule cel-go would not compile (a function it does not declare), worded as the apiserver reports it: the
    whole text is the message, no "evaluating rule" after it. cel-python finds it when evaluating."""


_UNDECLARED = re.compile(r"undeclared reference to '([^']*)'")


def _compile_error(rule: str, name: str) -> CELCompileError:
    """cel-go's error for a call of an undeclared function: at the call's open parenthesis, with the source line
    and a marker under it."""
    m = re.search(rf"(?<![\w.]){re.escape(name)}\s*\(|\.{re.escape(name)}\s*\(", rule)
    at = rule.index("(", m.start()) if m else 0
    line_no = rule.count("\n", 0, at) + 1
    start = rule.rfind("\n", 0, at) + 1
    line = rule[start:].split("\n", 1)[0]
    col = at - start + 1
    return CELCompileError(f"rule compile error: compilation failed: ERROR: <input>:{line_no}:{col}: undeclared "
                           f"reference to '{name}' (in container '')\n | {line}\n | {'.' * (col - 1)}^")


def _s(v: Any) -> celtypes.StringType:
    return celtypes.StringType(v)


def _lower_ascii(s: str) -> Any:
    return _s("".join(c.lower() if c.isascii() else c for c in s))


def _upper_ascii(s: str) -> Any:
    return _s("".join(c.upper() if c.isascii() else c for c in s))


def _split(s: str, sep: str, n: int | None = None) -> Any:
    if n is None or n < 0:
        parts = s.split(sep) if sep else list(s)
    elif n == 0:
        parts = []
    else:
        parts = s.split(sep, n - 1) if sep else [*list(s)[:n - 1], s[n - 1:]] if len(s) >= n else list(s)
    return celtypes.ListType([_s(p) for p in parts])


def _join(lst: list[Any], sep: str = "") -> Any:
    return _s(sep.join(str(x) for x in lst))


def _replace(s: str, old: str, new: str, n: int | None = None) -> Any:
    return _s(s.replace(old, new) if n is None or n < 0 else s.replace(old, new, n))


def _substring(s: str, start: int, end: int | None = None) -> Any:
    end = len(s) if end is None else end
    if start < 0 or start > len(s):
        raise CELError(f"index out of range: {start}")
    if end < start or end > len(s):
        raise CELError(f"index out of range: {end}")
    return _s(s[start:end])


def _char_at(s: str, i: int) -> Any:
    if i < 0 or i > len(s):
        raise CELError(f"index out of range: {i}")
    return _s(s[i:i + 1])


def _index_of(target: Any, x: Any, start: int = 0) -> Any:
    if isinstance(target, str):
        return celtypes.IntType(target.find(x, start))
    for i, e in enumerate(target):
        if e == x:
            return celtypes.IntType(i)
    return celtypes.IntType(-1)


def _last_index_of(target: Any, x: Any) -> Any:
    if isinstance(target, str):
        return celtypes.IntType(target.rfind(x))
    for i in range(len(target) - 1, -1, -1):
        if target[i] == x:
            return celtypes.IntType(i)
    return celtypes.IntType(-1)


def _trim(s: str) -> Any:
    return _s(s.strip())


def _reverse(s: Any) -> Any:
    return _s(s[::-1]) if isinstance(s, str) else celtypes.ListType(list(s)[::-1])


def _is_sorted(lst: list[Any]) -> Any:
    return celtypes.BoolType(all(lst[i] <= lst[i + 1] for i in range(len(lst) - 1)))


def _sum(lst: list[Any]) -> Any:
    total: Any = celtypes.IntType(0)
    for x in lst:
        total = total + x
    return total


def _min(lst: list[Any]) -> Any:
    if not lst:
        raise CELError("min(list) argument must not be empty")
    return min(lst)


def _max(lst: list[Any]) -> Any:
    if not lst:
        raise CELError("max(list) argument must not be empty")
    return max(lst)


def _distinct(lst: list[Any]) -> Any:
    out: list[Any] = []
    for x in lst:
        if x not in out:
            out.append(x)
    return celtypes.ListType(out)


def _sort(lst: list[Any]) -> Any:
    return celtypes.ListType(sorted(lst))


def _find(s: str, pattern: str) -> Any:
    m = re.search(pattern, s)
    return _s(m.group(0) if m else "")


def _find_all(s: str, pattern: str, n: int = -1) -> Any:
    found = [m.group(0) for m in re.finditer(pattern, s)]
    return celtypes.ListType([_s(x) for x in (found if n < 0 else found[:n])])


def _library(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A Kubernetes library function: its conversion errors and type mismatches as cel-go reports them, returned
    as CEL error values (not raised), so that `false && ip(x)...` is false as in cel-go, whose logical operators
    absorb an error when the other side decides."""
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        for a in args:
            if isinstance(a, celpy.CELEvalError):
                return a
        try:
            return fn(*args)
        except cel_k8s.LibraryError as e:
            return celpy.CELEvalError(str(e))
        except cel_k8s.NoOverload:
            return celpy.CELEvalError("no such overload")
    return call


def _string(v: Any) -> Any:
    """CEL's string() as cel-go converts: booleans lower case, doubles as Go's %g."""
    if isinstance(v, bool | celtypes.BoolType):
        return _s("true" if v else "false")
    if isinstance(v, float | celtypes.DoubleType):
        return _s(go_sprint(float(v)))
    return celtypes.StringType(v)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "string": _string,
    **{name: _library(fn) for name, fn in cel_k8s.FUNCTIONS.items()},
    "lowerAscii": _lower_ascii, "upperAscii": _upper_ascii, "split": _split, "join": _join, "replace": _replace,
    "substring": _substring, "charAt": _char_at, "indexOf": _index_of, "lastIndexOf": _last_index_of,
    "trim": _trim, "reverse": _reverse, "isSorted": _is_sorted, "sum": _sum, "min": _min, "max": _max,
    "distinct": _distinct, "sort": _sort, "find": _find, "findAll": _find_all,
}


@functools.lru_cache(maxsize=1024)
def _program(expr: str) -> Any:
    return _ENV.program(_ENV.compile(expr), functions=_FUNCTIONS)


def _go_type(value: Any) -> str:
    """%T of a decoded JSON value, as the apiserver holds it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "[]interface {}" if isinstance(value, list) else "map[string]interface {}"


def _mismatch(value: Any, typ: Any) -> str | None:
    """The apiserver's UnstructuredToVal error for a value of another type than its schema's (an old value
    written before the schema changed), None when it fits."""
    if typ == "object" and not isinstance(value, Mapping):
        return "invalid data, expected a map for the provided schema with type=object"
    if typ == "array" and not isinstance(value, list):
        return "invalid data, expected an array for the provided schema with type=array"
    scalar = {"string": (str,), "boolean": (bool,), "integer": (int,), "number": (int, float)}.get(str(typ))
    if scalar is None or (isinstance(value, scalar) and not (typ != "boolean" and isinstance(value, bool))):
        return None
    want = {"string": "string", "boolean": "bool", "integer": "int", "number": "float"}[str(typ)]
    return f"invalid data, expected {want}, got {_go_type(value)}"


def to_cel(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """A JSON value as CEL sees it under `schema`: integers are int, numbers double, objects maps; a value of another
    type than the schema's is a CEL error value, which fails a rule that reads it (as the apiserver's)."""
    typ = schema.get("type") if isinstance(schema, Mapping) else None
    if value is None:
        return None
    bad = _mismatch(value, typ) if typ else None
    if bad:
        return celpy.CELEvalError(bad)
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int | float) and typ == "number":
        return celtypes.DoubleType(float(value))
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, float):
        return celtypes.IntType(int(value)) if typ == "integer" and value.is_integer() else celtypes.DoubleType(value)
    if isinstance(value, str):
        return celtypes.StringType(value)
    if isinstance(value, list):
        items = schema.get("items") if isinstance(schema, Mapping) else None
        return celtypes.ListType([to_cel(v, items) for v in value])
    if isinstance(value, Mapping):
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        extra = schema.get("additionalProperties") if isinstance(schema, Mapping) else None
        return celtypes.MapType({celtypes.StringType(k): to_cel(v, (props or {}).get(k) if props else extra)
                                 for k, v in value.items()})
    return value


_ERRORS: tuple[tuple[str, str], ...] = (
    ("ZeroDivisionError", "division by zero"),
    ("overflow", "integer overflow"),
    ("list index out of range", "index out of bounds"),
)


def _cel_error_text(e: BaseException) -> str:
    """cel-go's wording for a celpy evaluation error, as near as cel-python tells."""
    if isinstance(e, CELError):
        return str(e)
    args = getattr(e, "args", ())
    text = str(args[0]) if args else str(e)
    detail = " ".join(str(a) for a in args)
    m = re.search(r"invalid literal for (int|float)\(\)|could not convert string to (float)", detail)
    if m:
        return f"type conversion error from 'string' to '{'int' if m.group(1) == 'int' else 'double'}'"
    m = re.match(r"no such member in mapping: '(.*)'", text)
    if m:
        return f"no such key: {m.group(1)}"
    if "no matching overload" in text or "no such overload" in text:
        return "no such overload"
    detail = " ".join(str(a) for a in args)
    for needle, go in _ERRORS:
        if needle in detail:
            return go
    return text


def evaluate(rule: str, self_value: Any, old_value: Any = None, has_old: bool = False) -> Any:
    """Evaluate one rule; raises CELError (cel-go's wording) when evaluation fails."""
    activation: dict[str, Any] = {"self": self_value}
    if has_old:
        activation["oldSelf"] = old_value
    try:
        result = _program(rule).evaluate(activation)
    except CELError:
        raise
    except (celpy.CELEvalError, celpy.CELParseError, TypeError, ValueError, KeyError, IndexError,
            ZeroDivisionError) as e:
        raise _error_of(rule, e) from e
    if isinstance(result, celpy.CELEvalError):
        raise _error_of(rule, result)
    return result


def _error_of(rule: str, e: BaseException) -> CELError:
    text = _cel_error_text(e)
    m = _UNDECLARED.match(text)
    return _compile_error(rule, m.group(1)) if m else CELError(text)


def uses_old_self(rule: str) -> bool:
    return bool(_OLD_SELF.search(rule))
