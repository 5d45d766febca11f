"""Type-checking of `x-kubernetes-validations` rules against their schema, as the apiserver compiles them.

Upstream compiles every rule and messageExpression of a ClusterClass variable schema when the class is admitted
(internal/topology/variables -> apiextensions-apiserver's cel.Compile with cel-go's checker): `self` and `oldSelf`
are typed by the schema node (apiserver's SchemaDeclType), each call must match an overload of a declared function,
a field must be declared, a rule must be a bool and a messageExpression a string. A rule that does not compile is
refused with cel-go's report (`ERROR: <input>:line:col: message`, the source line and a marker under the column).

This module is that checker for the language ClusterClass rules use: cel-python parses (its lark tree gives the
positions cel-go reports: an operator at its symbol, a call at its open parenthesis, a field at its dot), the types
and overloads are cel-go's standard library plus the Kubernetes libraries the apiserver declares. What it does not
model (a function it knows is declared but not its overloads, a macro of another shape) is typed `dyn`, which
cel-go accepts everywhere: the checker may miss an error there, never invent one. Measured against upstream on the
parity corpus (tests/unit/reconcile/topology/test_variables_parity.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from celpy.celparser import CELParseError, CELParser
from lark import Token, Tree

# cel-go names the type of `self` selfType<random number>; a fixed number here (no entropy in reconcile/)
SELF_TYPE = "selfType0"


@dataclass(frozen=True)
class CelType:
    """A cel-go checker type: a primitive by kind, list/map with their parameters, an object (a schema with
    properties) by name and fields, an opaque library type by name, a type parameter by name, dyn or error."""
    kind: str
    params: tuple[CelType, ...] = ()
    name: str = ""
    fields: tuple[tuple[str, CelType], ...] = ()

    def __str__(self) -> str:  # cel-go's FormatCELType
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind in ("object", "opaque", "param"):
            return self.name + (f"({', '.join(map(str, self.params))})" if self.params else "")
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        if self.kind == "error":
            return "*error*"
        return self.kind

    def field_type(self, name: str) -> CelType | None:
        return next((t for n, t in self.fields if n == name), None)


INT, UINT, DOUBLE = CelType("int"), CelType("uint"), CelType("double")
STRING, BOOL, BYTES, NULL = CelType("string"), CelType("bool"), CelType("bytes"), CelType("null_type")
TIMESTAMP, DURATION = CelType("timestamp"), CelType("duration")
DYN, ERROR = CelType("dyn"), CelType("error")
A, B = CelType("param", name="A"), CelType("param", name="B")
URL, IP, CIDR = CelType("opaque", name="kubernetes.URL"), CelType("opaque", name="net.IP"), \
    CelType("opaque", name="net.CIDR")
QUANTITY, SEMVER = CelType("opaque", name="kubernetes.Quantity"), CelType("opaque", name="kubernetes.Semver")


def list_of(t: CelType) -> CelType:
    return CelType("list", (t,))


def map_of(k: CelType, v: CelType) -> CelType:
    return CelType("map", (k, v))


# --- declarations -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Overload:
    member: bool                     # called as `target.fn(args)`: the target is args[0]
    args: tuple[CelType, ...]
    result: CelType


def _g(result: CelType, *args: CelType) -> Overload:
    return Overload(False, args, result)


def _m(result: CelType, *args: CelType) -> Overload:
    return Overload(True, args, result)


_NUMBERS = (INT, UINT, DOUBLE)
_ORDERED = (BOOL, INT, UINT, DOUBLE, STRING, BYTES, TIMESTAMP, DURATION)
_COMPARE = [_g(BOOL, t, t) for t in _ORDERED] + [_g(BOOL, a, b) for a in _NUMBERS for b in _NUMBERS if a != b]
_SIZED = (STRING, BYTES, list_of(A), map_of(A, B))

FUNCTIONS: dict[str, list[Overload]] = {
    "_+_": [_g(t, t, t) for t in (INT, UINT, DOUBLE, STRING, BYTES)] + [
        _g(list_of(A), list_of(A), list_of(A)), _g(TIMESTAMP, TIMESTAMP, DURATION),
        _g(TIMESTAMP, DURATION, TIMESTAMP), _g(DURATION, DURATION, DURATION)],
    "_-_": [_g(t, t, t) for t in _NUMBERS] + [
        _g(DURATION, TIMESTAMP, TIMESTAMP), _g(TIMESTAMP, TIMESTAMP, DURATION), _g(DURATION, DURATION, DURATION)],
    "_*_": [_g(t, t, t) for t in _NUMBERS],
    "_/_": [_g(t, t, t) for t in _NUMBERS],
    "_%_": [_g(t, t, t) for t in (INT, UINT)],
    "-_": [_g(INT, INT), _g(DOUBLE, DOUBLE)],
    "!_": [_g(BOOL, BOOL)],
    "_&&_": [_g(BOOL, BOOL, BOOL)],
    "_||_": [_g(BOOL, BOOL, BOOL)],
    "_?_:_": [_g(A, BOOL, A, A)],
    "_<_": _COMPARE, "_<=_": _COMPARE, "_>_": _COMPARE, "_>=_": _COMPARE,
    "_==_": [_g(BOOL, A, A)], "_!=_": [_g(BOOL, A, A)],
    "@in": [_g(BOOL, A, list_of(A)), _g(BOOL, A, map_of(A, B))],
    "_[_]": [_g(A, list_of(A), INT), _g(B, map_of(A, B), A)],
    "size": [_g(INT, t) for t in _SIZED] + [_m(INT, t) for t in _SIZED],
    "int": [_g(INT, t) for t in (INT, UINT, DOUBLE, STRING, TIMESTAMP)],
    "uint": [_g(UINT, t) for t in (INT, UINT, DOUBLE, STRING)],
    "double": [_g(DOUBLE, t) for t in (INT, UINT, DOUBLE, STRING)],
    "string": [_g(STRING, t) for t in (INT, UINT, DOUBLE, STRING, BYTES, BOOL, TIMESTAMP, DURATION, IP, CIDR)],
    "bytes": [_g(BYTES, STRING), _g(BYTES, BYTES)],
    "bool": [_g(BOOL, BOOL), _g(BOOL, STRING)],
    "dyn": [_g(DYN, A)],
    "duration": [_g(DURATION, STRING), _g(DURATION, DURATION)],
    "timestamp": [_g(TIMESTAMP, STRING), _g(TIMESTAMP, INT), _g(TIMESTAMP, TIMESTAMP)],
    "matches": [_g(BOOL, STRING, STRING), _m(BOOL, STRING, STRING)],
    "contains": [_m(BOOL, STRING, STRING)],
    "startsWith": [_m(BOOL, STRING, STRING)],
    "endsWith": [_m(BOOL, STRING, STRING)],
    **{acc: [_m(INT, TIMESTAMP), _m(INT, TIMESTAMP, STRING)]
       for acc in ("getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek")},
    **{acc: [_m(INT, TIMESTAMP), _m(INT, TIMESTAMP, STRING), _m(INT, DURATION)]
       for acc in ("getHours", "getMinutes", "getSeconds", "getMilliseconds")},
    # cel-go's strings extension
    "charAt": [_m(STRING, STRING, INT)],
    "indexOf": [_m(INT, STRING, STRING), _m(INT, STRING, STRING, INT), _m(INT, list_of(A), A)],
    "lastIndexOf": [_m(INT, STRING, STRING), _m(INT, STRING, STRING, INT), _m(INT, list_of(A), A)],
    "lowerAscii": [_m(STRING, STRING)],
    "upperAscii": [_m(STRING, STRING)],
    "trim": [_m(STRING, STRING)],
    "reverse": [_m(list_of(A), list_of(A))],   # the lists extension's; the apiserver's strings have none
    "replace": [_m(STRING, STRING, STRING, STRING), _m(STRING, STRING, STRING, STRING, INT)],
    "split": [_m(list_of(STRING), STRING, STRING), _m(list_of(STRING), STRING, STRING, INT)],
    "substring": [_m(STRING, STRING, INT), _m(STRING, STRING, INT, INT)],
    "join": [_m(STRING, list_of(STRING)), _m(STRING, list_of(STRING), STRING)],
    "format": [_m(STRING, STRING, list_of(DYN))],
    "strings.quote": [_g(STRING, STRING)],
    # the Kubernetes lists library and cel-go's lists extension
    "isSorted": [_m(BOOL, list_of(t)) for t in _ORDERED],
    "sum": [_m(t, list_of(t)) for t in (INT, UINT, DOUBLE, DURATION)],
    "min": [_m(t, list_of(t)) for t in _ORDERED],
    "max": [_m(t, list_of(t)) for t in _ORDERED],
    "distinct": [_m(list_of(A), list_of(A))],
    "sort": [_m(list_of(t), list_of(t)) for t in _ORDERED],
    "flatten": [_m(list_of(DYN), list_of(DYN)), _m(list_of(DYN), list_of(DYN), INT)],
    "slice": [_m(list_of(A), list_of(A), INT, INT)],
    "lists.range": [_g(list_of(INT), INT)],
    "sets.contains": [_g(BOOL, list_of(A), list_of(A))],
    "sets.equivalent": [_g(BOOL, list_of(A), list_of(A))],
    "sets.intersects": [_g(BOOL, list_of(A), list_of(A))],
    # the Kubernetes regex library
    "find": [_m(STRING, STRING, STRING)],
    "findAll": [_m(list_of(STRING), STRING, STRING), _m(list_of(STRING), STRING, STRING, INT)],
    # URLs
    "url": [_g(URL, STRING)],
    "isURL": [_g(BOOL, STRING)],
    **{acc: [_m(STRING, URL)] for acc in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath")},
    "getQuery": [_m(map_of(STRING, list_of(STRING)), URL)],
    # IP addresses and CIDRs
    "ip": [_g(IP, STRING), _m(IP, CIDR)],
    "isIP": [_g(BOOL, STRING)],
    "ip.isCanonical": [_g(BOOL, STRING)],
    "family": [_m(INT, IP)],
    **{acc: [_m(BOOL, IP)] for acc in ("isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
                                       "isGlobalUnicast")},
    "cidr": [_g(CIDR, STRING)],
    "isCIDR": [_g(BOOL, STRING)],
    "containsIP": [_m(BOOL, CIDR, STRING), _m(BOOL, CIDR, IP)],
    "containsCIDR": [_m(BOOL, CIDR, STRING), _m(BOOL, CIDR, CIDR)],
    "masked": [_m(CIDR, CIDR)],
    "prefixLength": [_m(INT, CIDR)],
    # quantities and semantic versions
    "quantity": [_g(QUANTITY, STRING)],
    "isQuantity": [_g(BOOL, STRING)],
    "semver": [_g(SEMVER, STRING), _g(SEMVER, STRING, BOOL)],
    "isSemver": [_g(BOOL, STRING), _g(BOOL, STRING, BOOL)],
    "isGreaterThan": [_m(BOOL, QUANTITY, QUANTITY), _m(BOOL, SEMVER, SEMVER)],
    "isLessThan": [_m(BOOL, QUANTITY, QUANTITY), _m(BOOL, SEMVER, SEMVER)],
    "compareTo": [_m(INT, QUANTITY, QUANTITY), _m(INT, SEMVER, SEMVER)],
    "add": [_m(QUANTITY, QUANTITY, QUANTITY), _m(QUANTITY, QUANTITY, INT)],
    "sub": [_m(QUANTITY, QUANTITY, QUANTITY), _m(QUANTITY, QUANTITY, INT)],
    "asInteger": [_m(INT, QUANTITY)],
    "asApproximateFloat": [_m(DOUBLE, QUANTITY)],
    "sign": [_m(INT, QUANTITY)],
    "isInteger": [_m(BOOL, QUANTITY)],
    "major": [_m(INT, SEMVER)], "minor": [_m(INT, SEMVER)], "patch": [_m(INT, SEMVER)],
}

# declared by the apiserver's environment but not modelled here (their overloads): typed dyn, never refused
_DECLARED_UNMODELLED = frozenset({
    "type", "getTimezone", "hasValue", "value", "or", "orValue", "validate", "first", "last", "isEmpty",
    "authorizer", "path", "group", "resource", "check", "allowed", "reason", "errored", "error", "serviceAccount",
    "subresource", "namespace", "name", "fieldSelector", "labelSelector", "getTimestamp",
})  # (a namespaced function, `math.greatest` or `format.named`, is dyn by its namespace: _NAMESPACES)
_NAMESPACES = frozenset({"strings", "lists", "sets", "math", "base64", "optional", "ip", "format"})
_TYPE_NAMES = frozenset({"int", "uint", "double", "string", "bool", "bytes", "list", "map", "null_type", "type",
                         "dyn", "google.protobuf.Timestamp", "google.protobuf.Duration"})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_RESERVED = frozenset({"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function",
                       "if", "import", "let", "loop", "package", "namespace", "return", "var", "void", "while"})


# --- schema -> type -----------------------------------------------------------------------------------------------

def _escape(name: str) -> str | None:
    """apiserver cel.Escape: a property name as a CEL field name, None when it cannot be one."""
    if name in _RESERVED:
        return f"__{name}__"
    out = []
    i = 0
    while i < len(name):
        c = name[i]
        if name.startswith("__", i):
            out.append("__underscores__")
            i += 2
            continue
        if c.isascii() and (c.isalnum() or c == "_"):
            out.append(c)
        elif c in ".-/":
            out.append({".": "__dot__", "-": "__dash__", "/": "__slash__"}[c])
        else:
            return None
        i += 1
    esc = "".join(out)
    return esc if esc and not esc[0].isdigit() else None


_STRING_SCHEMA: Mapping[str, Any] = {"type": "string"}


def node_type(schema: Mapping[str, Any], root: bool) -> CelType | None:
    """The type of `self` at a schema node whose rules are compiled: a resource root (the root, or an embedded
    resource) as such."""
    return decl_type(schema, root or bool(schema.get("x-kubernetes-embedded-resource")))


def decl_type(schema: Mapping[str, Any], root: bool, name: str = SELF_TYPE) -> CelType | None:
    """apiserver SchemaDeclType with the names cel.Compile gives (`<self type>`, `.field`, `.@idx`, `.@elem`);
    `root`: the node is the resource root (kind, apiVersion and metadata added, items dropped: the apiserver's
    WithTypeAndObjectMeta copy). None where the apiserver has no type."""
    if not isinstance(schema, Mapping):
        return None
    if schema.get("x-kubernetes-int-or-string"):
        return DYN
    if root:
        props = {**(schema.get("properties") or {}), "kind": _STRING_SCHEMA, "apiVersion": _STRING_SCHEMA,
                 "metadata": {"type": "object", "properties": {"name": _STRING_SCHEMA, "generateName": _STRING_SCHEMA}}}
        schema = {k: v for k, v in schema.items() if k != "items"} | {"properties": props}
    t = schema.get("type")
    if t == "array":
        items = schema.get("items")
        elem = decl_type(items, bool(items.get("x-kubernetes-embedded-resource")), f"{name}.@idx") \
            if isinstance(items, Mapping) else None
        return list_of(elem) if elem is not None else None
    if t == "object":
        ap = schema.get("additionalProperties")
        if isinstance(ap, Mapping):
            v = decl_type(ap, bool(ap.get("x-kubernetes-embedded-resource")), f"{name}.@elem")
            return map_of(STRING, v) if v is not None else None
        fields = []
        for prop, sub in sorted((schema.get("properties") or {}).items()):
            esc = _escape(prop)
            if not isinstance(sub, Mapping):
                continue
            ft = decl_type(sub, bool(sub.get("x-kubernetes-embedded-resource")), f"{name}.{esc or prop}")
            if ft is not None and esc is not None:
                fields.append((esc, ft))
        return CelType("object", name=name, fields=tuple(fields))
    if t == "string":
        return {"byte": BYTES, "duration": DURATION, "date": TIMESTAMP, "date-time": TIMESTAMP}.get(
            str(schema.get("format") or ""), STRING)
    return {"boolean": BOOL, "number": DOUBLE, "integer": INT}.get(str(t))


# --- the checker --------------------------------------------------------------------------------------------------

@dataclass
class Checked:
    """One expression's outcome: its type (None when it did not compile), cel-go's report of its errors, and
    whether it reads oldSelf."""
    type: CelType | None
    errors: str = ""
    uses_old_self: bool = False


@functools.lru_cache(maxsize=1)
def _parser() -> CELParser:
    return CELParser()


def check(expr: str, self_type: CelType) -> Checked | None:
    """Type-check `expr` with `self` and `oldSelf` of `self_type`; None when cel-python cannot parse it (the
    evaluator reports that)."""
    try:
        tree = _parser().parse(expr)
    except CELParseError:
        return None
    c = _Checker(expr, {"self": self_type, "oldSelf": self_type})
    t = c.expr(tree)
    if c.errors:
        return Checked(None, c.report(), c.old_self)
    return Checked(t, "", c.old_self)


def _assign(m: dict[str, CelType], formal: CelType, actual: CelType) -> bool:
    """cel-go's isAssignable with type-parameter bindings in `m`."""
    if formal.kind == "param":
        bound = m.get(formal.name)
        if bound is None:
            m[formal.name] = actual
            return True
        return _assign(m, bound, actual)
    if formal.kind in ("dyn", "error") or actual.kind in ("dyn", "error"):
        return True
    if actual.kind == "param":
        return True
    if formal.kind != actual.kind:
        return False
    if formal.kind in ("object", "opaque") and formal.name != actual.name:
        return False
    return len(formal.params) == len(actual.params) and all(
        _assign(m, f, a) for f, a in zip(formal.params, actual.params, strict=True))


def _subst(m: Mapping[str, CelType], t: CelType) -> CelType:
    if t.kind == "param":
        bound = m.get(t.name)
        return _subst(m, bound) if bound is not None and bound != t else DYN
    if t.params:
        return CelType(t.kind, tuple(_subst(m, p) for p in t.params), t.name, t.fields)
    return t


class _Checker:
    def __init__(self, source: str, variables: Mapping[str, CelType]):
        self.source = source
        self.scopes: list[dict[str, CelType]] = [dict(variables)]
        self.errors: list[tuple[int, str]] = []
        self.old_self = False

    # reporting
    def error(self, offset: int, message: str) -> CelType:
        self.errors.append((offset, message))
        return ERROR

    def report(self) -> str:
        lines = self.source.split("\n")
        out = []
        for offset, message in sorted(self.errors, key=lambda e: self._line_col(e[0])):
            line, col = self._line_col(offset)
            snippet = lines[line - 1].replace("\t", " ") if line - 1 < len(lines) else ""
            out.append(f"ERROR: <input>:{line}:{col + 1}: {message}\n | {snippet}\n | {'.' * col}^")
        return "\n".join(out)

    def _line_col(self, offset: int) -> tuple[int, int]:
        before = self.source[:offset]
        return before.count("\n") + 1, offset - (before.rfind("\n") + 1)

    def _find(self, text: str, start: int, end: int | None = None) -> int:
        i = self.source.find(text, start, end if end is not None else len(self.source))
        return i if i >= 0 else start

    # overload resolution
    def call(self, name: str, offset: int, args: Sequence[CelType], member: bool) -> CelType:
        overloads = FUNCTIONS.get(name)
        if overloads is None:
            # a library's namespaced function not modelled here (format.dns1123Label(), math.greatest(), ...)
            if name in _DECLARED_UNMODELLED or name in _MACROS or name.split(".", 1)[0] in _NAMESPACES:
                return DYN
            return self.error(offset, f"undeclared reference to '{name}' (in container '')")
        result: CelType | None = None
        for o in overloads:
            if o.member != member or len(o.args) != len(args):
                continue
            m: dict[str, CelType] = {}
            if all(_assign(m, f, a) for f, a in zip(o.args, args, strict=True)):
                r = _subst(m, o.result)
                if result is None:
                    result = r
                elif result.kind != "dyn" and r != result:
                    result = DYN
        if result is None:
            shown = [str(a) for a in args]
            sig = f"{shown[0]}.({', '.join(shown[1:])})" if member else f"({', '.join(shown)})"
            return self.error(offset, f"found no matching overload for '{name}' applied to '{sig}'")
        return result

    # the tree
    def expr(self, t: Any) -> CelType:
        method = getattr(self, f"_{t.data}", None) if isinstance(t, Tree) else None
        if method is None:
            return DYN
        result: CelType = method(t)
        return result

    def _op_between(self, left: Tree, right: Tree, op: str) -> int:
        return self._find(op, left.meta.end_pos, right.meta.start_pos)

    def _expr(self, t: Tree) -> CelType:
        if len(t.children) == 1:
            return self.expr(t.children[0])
        cond, then, other = t.children
        types = [self.expr(cond), self.expr(then), self.expr(other)]
        return self.call("_?_:_", self._op_between(cond, then, "?"), types, False)

    def _logical(self, t: Tree, op: str, name: str) -> CelType:
        if len(t.children) == 1:
            return self.expr(t.children[0])
        left, right = t.children
        types = [self.expr(left), self.expr(right)]
        return self.call(name, self._op_between(left, right, op), types, False)

    def _conditionalor(self, t: Tree) -> CelType:
        return self._logical(t, "||", "_||_")

    def _conditionaland(self, t: Tree) -> CelType:
        return self._logical(t, "&&", "_&&_")

    _BINARY = {"relation_lt": ("<", "_<_"), "relation_le": ("<=", "_<=_"), "relation_gt": (">", "_>_"),
               "relation_ge": (">=", "_>=_"), "relation_eq": ("==", "_==_"), "relation_ne": ("!=", "_!=_"),
               "relation_in": ("in", "@in"), "addition_add": ("+", "_+_"), "addition_sub": ("-", "_-_"),
               "multiplication_mul": ("*", "_*_"), "multiplication_div": ("/", "_/_"),
               "multiplication_mod": ("%", "_%_")}

    def _binary(self, t: Tree) -> CelType:
        if len(t.children) == 1:
            return self.expr(t.children[0])
        op_tree, right = t.children
        op, name = self._BINARY[op_tree.data]
        left_t = self.expr(op_tree.children[0])
        right_t = self.expr(right)
        return self.call(name, op_tree.meta.end_pos - len(op), [left_t, right_t], False)

    _relation = _addition = _multiplication = _binary

    def _unary(self, t: Tree) -> CelType:
        if len(t.children) == 1:
            return self.expr(t.children[0])
        op, operand = t.children
        typ = self.expr(operand)
        return self.call("!_" if op.data == "unary_not" else "-_", op.meta.start_pos, [typ], False)

    def _member(self, t: Tree) -> CelType:
        return self.expr(t.children[0])

    def _primary(self, t: Tree) -> CelType:
        return self.expr(t.children[0])

    def _paren_expr(self, t: Tree) -> CelType:
        return self.expr(t.children[0])

    def _literal(self, t: Tree) -> CelType:
        tok: Any = t.children[0]
        return {"INT_LIT": INT, "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "STRING_LIT": STRING, "MLSTRING_LIT": STRING,
                "BYTES_LIT": BYTES, "BOOL_LIT": BOOL, "NULL_LIT": NULL}.get(tok.type, DYN)

    def _lookup(self, name: str) -> CelType | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _ident(self, t: Tree) -> CelType:
        tok: Any = t.children[0]
        name = str(tok)
        typ = self._lookup(name)
        if typ is not None:
            if name == "oldSelf" and all("oldSelf" not in s for s in self.scopes[1:]):
                self.old_self = True
            return typ
        if name in _TYPE_NAMES:
            return DYN
        return self.error(tok.start_pos, f"undeclared reference to '{name}' (in container '')")

    def _list_lit(self, t: Tree) -> CelType:
        elems = self._args(t.children[0] if t.children else None)
        if not elems:
            return list_of(DYN)
        types = [self.expr(e) for e in elems]
        # the apiserver's environment does not ask for homogeneous literals: mixed elements make a list(dyn)
        return list_of(types[0] if all(t == types[0] for t in types[1:]) else DYN)

    def _map_lit(self, t: Tree) -> CelType:
        inits = t.children[0].children if t.children and t.children[0] is not None else []
        if not inits:
            return map_of(DYN, DYN)
        keys = [self.expr(k) for k in inits[0::2]]
        vals = [self.expr(v) for v in inits[1::2]]
        return map_of(keys[0] if all(k == keys[0] for k in keys[1:]) else DYN,
                      vals[0] if all(v == vals[0] for v in vals[1:]) else DYN)

    @staticmethod
    def _args(exprlist: Any) -> list[Tree]:
        return [c for c in exprlist.children if isinstance(c, Tree)] if isinstance(exprlist, Tree) else []

    def _paren_after(self, tok: Token) -> int:
        end = tok.end_pos if tok.end_pos is not None else tok.start_pos
        return self._find("(", int(end or 0))

    def _ident_arg(self, t: Tree) -> CelType:
        tok: Any = t.children[0]
        args = self._args(t.children[1] if len(t.children) > 1 else None)
        at = self._paren_after(tok)
        if str(tok) == "has" and len(args) == 1:
            return self._has(args[0], at)
        return self.call(str(tok), at, [self.expr(a) for a in args], False)

    def _has(self, arg: Tree, at: int) -> CelType:
        sel = self._unwrap(arg)
        if isinstance(sel, Tree) and sel.data == "member_dot":
            self._select(sel)
            return BOOL
        self.expr(arg)
        return self.error(at, "invalid argument to has() macro")

    def _unwrap(self, t: Tree) -> Any:
        """The member node an expression consists of (has()'s argument), through the grammar's single-child
        layers."""
        while isinstance(t, Tree) and t.data in ("expr", "conditionalor", "conditionaland", "relation", "addition",
                                                 "multiplication", "unary", "member", "primary") \
                and len(t.children) == 1:
            t = t.children[0]
        return t

    def _select(self, t: Tree) -> CelType:
        target: Any
        tok: Any
        target, tok = t.children
        qualified = self._qualified(target)
        if qualified is not None:
            return DYN
        typ = self.expr(target)
        name = str(tok)
        dot = self._find(".", target.meta.end_pos, tok.start_pos)
        if typ.kind == "object":
            ft = typ.field_type(name)
            return ft if ft is not None else self.error(dot, f"undefined field '{name}'")
        if typ.kind == "map":
            return typ.params[1]
        if typ.kind in ("dyn", "error"):
            return typ
        return self.error(dot, f"type '{typ}' does not support field selection")

    _member_dot = _select

    def _qualified(self, target: Tree) -> str | None:
        """`ns` when `target` is a bare identifier naming a function namespace (not a variable)."""
        inner = self._unwrap(target)
        if isinstance(inner, Tree) and inner.data == "ident":
            name = str(inner.children[0])
            if name in _NAMESPACES and self._lookup(name) is None:
                return name
        return None

    def _member_dot_arg(self, t: Tree) -> CelType:
        target: Any = t.children[0]
        tok: Any = t.children[1]
        args = self._args(t.children[2] if len(t.children) > 2 else None)
        name = str(tok)
        at = self._paren_after(tok)
        ns = self._qualified(target)
        if ns is not None:
            return self.call(f"{ns}.{name}", at, [self.expr(a) for a in args], False)
        if name in _MACROS and args and isinstance(self._unwrap(args[0]), Tree) \
                and self._unwrap(args[0]).data == "ident" and len(args) in ((2, 3) if name == "map" else (2,)):
            return self._macro(name, target, args, at)
        recv = self.expr(target)
        return self.call(name, at, [recv, *(self.expr(a) for a in args)], True)

    def _macro(self, name: str, target: Tree, args: list[Tree], at: int) -> CelType:
        range_t = self.expr(target)
        if range_t.kind in ("list", "map"):  # a list's elements, a map's keys
            var_t = range_t.params[0]
        elif range_t.kind in ("dyn", "error"):
            var_t = DYN
        else:
            var_t = self.error(target.meta.start_pos, f"expression of type '{range_t}' cannot be range of a "
                                                      "comprehension (must be list, map, or dynamic)")
        var = str(self._unwrap(args[0]).children[0])
        self.scopes.append({var: var_t})
        try:
            body = [self.expr(a) for a in args[1:]]
        finally:
            self.scopes.pop()
        if name == "all":
            self.call("_&&_", at, [BOOL, body[0]], False)
            return BOOL
        if name == "exists":
            self.call("_||_", at, [BOOL, body[0]], False)
            return BOOL
        if name == "exists_one":
            self.call("_?_:_", at, [body[0], INT, INT], False)
            return BOOL
        if name == "filter":
            self.call("_?_:_", at, [body[0], list_of(var_t), list_of(var_t)], False)
            return list_of(var_t)
        if len(body) == 2:  # map(x, filter, transform)
            self.call("_?_:_", at, [body[0], list_of(body[1]), list_of(body[1])], False)
        return list_of(body[-1])

    def _member_index(self, t: Tree) -> CelType:
        target, index = t.children
        types = [self.expr(target), self.expr(index)]
        return self.call("_[_]", self._find("[", target.meta.end_pos, index.meta.start_pos), types, False)

    def _member_object(self, t: Tree) -> CelType:
        return DYN

    def _dot_ident(self, t: Tree) -> CelType:
        return DYN

    def _dot_ident_arg(self, t: Tree) -> CelType:
        return DYN


# --- what cel.Compile reports for one x-kubernetes-validations rule ------------------------------------------------

@dataclass(frozen=True)
class RuleCompilation:
    """apiextensions cel.CompilationResult's errors: `error` the rule's (cel.Error detail), `message_error` its
    messageExpression's; `uses_old_self` as the checked references say (False when the rule did not compile)."""
    error: str | None = None
    message_error: str | None = None
    uses_old_self: bool = False


def compile_rule(rule: Mapping[str, Any], self_type: CelType) -> RuleCompilation:
    return _compile(str(rule.get("rule") or ""), str(rule.get("messageExpression") or ""),
                    rule.get("optionalOldSelf") is True, self_type)


@functools.lru_cache(maxsize=4096)
def _compile(text: str, expr: str, optional_old_self: bool, self_type: CelType) -> RuleCompilation:
    if not text.strip():
        return RuleCompilation()
    checked = check(text, self_type)
    if checked is None:  # cel-python cannot parse it: the evaluator reports it
        return RuleCompilation(uses_old_self=bool(re.search(r"\boldSelf\b", text)))
    if checked.type is None:
        return RuleCompilation(error="compilation failed: " + checked.errors)
    if checked.type != BOOL:
        return RuleCompilation(error="cel expression must evaluate to a bool")
    if not checked.uses_old_self and optional_old_self:
        return RuleCompilation(error='"optionalOldSelf" may not be set if oldSelf is not used in rule')
    if expr:
        msg = check(expr, self_type)
        if msg is not None and msg.type is None:
            return RuleCompilation(message_error="messageExpression compilation failed: " + msg.errors,
                                   uses_old_self=checked.uses_old_self)
        if msg is not None and msg.type != STRING:
            return RuleCompilation(message_error="messageExpression must evaluate to a string",
                                   uses_old_self=checked.uses_old_self)
    return RuleCompilation(uses_old_self=checked.uses_old_self)
