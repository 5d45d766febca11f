"""celcheck: rules type-checked as cel-go checks them against the apiserver's schema types. The expected reports are
upstream's, copied from the parity corpus (tests/fixtures/parity/variables.jsonl.gz, made by upstream's code); the
corpus test (test_variables_parity.py) runs every case."""

from __future__ import annotations

import pytest

from capd_py.reconcile.topology import celcheck as C

pytestmark = pytest.mark.unit

OBJ = {"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "object", "properties": {
    "x": {"type": "integer"}}}}}


def errors(rule: str, schema: dict, root: bool = True) -> str:
    t = C.decl_type(schema, root)
    assert t is not None
    checked = C.check(rule, t)
    assert checked is not None
    return checked.errors


def test_schema_types_as_the_apiserver_declares_them() -> None:
    t = C.decl_type(OBJ, root=True)
    assert t is not None and str(t) == "selfType0"
    # a resource root gets kind, apiVersion and metadata; nested objects are named after their path
    assert {n for n, _ in t.fields} == {"a", "n", "kind", "apiVersion", "metadata"}
    assert str(t.field_type("n")) == "selfType0.n"
    assert str(C.decl_type({"type": "array", "items": {"type": "integer"}}, root=False)) == "list(int)"
    assert C.decl_type({"type": "array", "items": {"type": "integer"}}, root=True) is None  # items dropped
    assert str(C.decl_type({"type": "object", "additionalProperties": {"type": "number"}}, root=True)) == \
        "map(string, double)"
    assert C.decl_type({"type": "string", "format": "date-time"}, root=False) == C.TIMESTAMP
    assert C.decl_type({"x-kubernetes-int-or-string": True}, root=False) == C.DYN
    escaped = C.decl_type({"type": "object", "properties": {"a-b": {"type": "string"}}}, root=False)
    assert escaped is not None and escaped.fields[0][0] == "a__dash__b"


@pytest.mark.parametrize(("rule", "schema", "want"), [
    ("size(self) < 3", OBJ,
     "ERROR: <input>:1:5: found no matching overload for 'size' applied to '(selfType0)'\n | size(self) < 3\n"
     " | ....^"),
    ("self.nope()", {"type": "string"},
     "ERROR: <input>:1:10: undeclared reference to 'nope' (in container '')\n | self.nope()\n | .........^"),
    ("self > 1", {"type": "string"},
     "ERROR: <input>:1:6: found no matching overload for '_>_' applied to '(string, int)'\n | self > 1\n | .....^"),
    ("self.b == 1", {"type": "object", "properties": {"a": {"type": "string"}}},
     "ERROR: <input>:1:5: undefined field 'b'\n | self.b == 1\n | ....^"),
    ("self.reverse() != self", {"type": "string"},
     "ERROR: <input>:1:13: found no matching overload for 'reverse' applied to 'string.()'\n"
     " | self.reverse() != self\n | ............^"),
    ("self.join(\",\") == self", {"type": "string"},
     "ERROR: <input>:1:10: found no matching overload for 'join' applied to 'string.(string)'\n"
     " | self.join(\",\") == self\n | .........^"),
    ("self != \"x\"", {"type": "string", "format": "date-time"},
     "ERROR: <input>:1:6: found no matching overload for '_!=_' applied to '(timestamp, string)'\n"
     " | self != \"x\"\n | .....^"),
])
def test_compile_errors_read_as_cel_gos(rule: str, schema: dict, want: str) -> None:
    assert errors(rule, schema) == want


@pytest.mark.parametrize(("rule", "schema"), [
    ("self.all(k, k.startsWith('x-'))", {"type": "object", "additionalProperties": {"type": "string"}}),
    ("'%s has %d chars'.format([self, self.size()]) != ''", {"type": "string"}),
    ("self > 0.5", {"type": "integer"}),                      # cross-type numeric comparison
    ("self.kind == '' || self.metadata.name == ''", OBJ),     # the resource root's own fields
    ("self.n.x > 1 && has(self.a)", OBJ),
    ("type(self) == string || self.matches('^a')", {"x-kubernetes-int-or-string": True}),  # dyn: never refused
    ("isIP(self) && ip(self).family() == 4 && quantity('1Gi').isGreaterThan(quantity('1'))", {"type": "string"}),
    ("!format.dns1123Label().validate(self).hasValue() && math.greatest(1, 2) == 2", {"type": "string"}),
    ("self.map(x, x * 2).sum() < 20 && self.filter(x, x > 1).size() > 0", {"type": "array",
                                                                            "items": {"type": "integer"}}),
])
def test_valid_rules_compile(rule: str, schema: dict) -> None:
    assert errors(rule, schema, root=schema.get("type") != "array") == ""


def test_what_cel_compile_says_of_a_rule() -> None:
    s = C.decl_type({"type": "integer"}, root=True)
    assert s is not None
    assert C.compile_rule({"rule": "self + 1"}, s).error == "cel expression must evaluate to a bool"
    assert C.compile_rule({"rule": "true", "messageExpression": "1"}, s).message_error == \
        "messageExpression must evaluate to a string"
    assert C.compile_rule({"rule": "self == oldSelf"}, s).uses_old_self
    # an iteration variable of that name is not oldSelf
    lists = C.decl_type({"type": "array", "items": {"type": "integer"}}, root=False)
    assert lists is not None
    assert not C.compile_rule({"rule": "self.all(oldSelf, oldSelf > 0)"}, lists).uses_old_self
    assert C.compile_rule({"rule": "self > 1", "optionalOldSelf": True}, s).error == \
        '"optionalOldSelf" may not be set if oldSelf is not used in rule'
