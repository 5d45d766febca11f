"""The Kubernetes CEL libraries capd-py evaluates ClusterClass variable rules with; upstream's own verdicts on
thousands of rules are checked by test_variables_parity.py."""

from __future__ import annotations

from decimal import Decimal

import pytest

from capd_py.reconcile.topology import cel, cel_k8s

pytestmark = pytest.mark.unit


def _eval(rule: str, value: str) -> object:
    return cel.evaluate(rule, cel.to_cel(value, {"type": "string"}))


@pytest.mark.parametrize(("rule", "value", "want"), [
    ("isIP(self) && ip(self).family() == 4", "10.0.0.1", True),
    ("isIP(self) && ip(self).family() == 4", "2001:db8::1", False),
    ("isIP(self)", "::ffff:10.0.0.1", False),       # IPv4-mapped IPv6 refused, as the library does
    ("isIP(self)", "010.0.0.1", False),             # a leading zero, as netip
    ("isCIDR(self) && cidr(self).prefixLength() >= 16", "10.1.0.0/16", True),
    ("isCIDR(self)", "10.1.0.0/33", False),
    ("isURL(self) && url(self).getHost() == 'x.io:8080'", "https://x.io:8080/p", True),
    ("isURL(self)", "x.io", False),                 # a request URI: absolute, or an absolute path
    ("quantity(self).isGreaterThan(quantity('1Gi'))", "1025Mi", True),
    ("quantity(self).compareTo(quantity('1G')) == 0", "1000M", True),
    ("isQuantity(self)", "1kM", False),
    ("isSemver(self)", "1.2.3-rc.1+b5", True),
    ("isSemver(self)", "v1.2.3", False),
    ("'%s has %d chars'.format([self, self.size()]) == 'ab has 2 chars'", "ab", True),
])
def test_library_functions(rule: str, value: str, want: bool) -> None:
    assert bool(_eval(rule, value)) is want


@pytest.mark.parametrize(("rule", "value", "message"), [
    ("ip(self).family() == 4", "x", 'IP Address "x" parse error during conversion from string: ParseAddr("x"): '
                                    "unable to parse IP"),
    ("ip(self).family() == 4", "1::2::3", 'ParseAddr("1::2::3"): multiple :: in address (at ":3")'),
    ("url(self).getHost() != ''", "abc", 'URL parse error during conversion from string: parse "abc": invalid URI '
                                         "for request"),
    ("quantity(self).isGreaterThan(quantity('1'))", "a-b", "quantities must match the regular expression"),
])
def test_conversion_errors_as_go_words_them(rule: str, value: str, message: str) -> None:
    with pytest.raises(cel.CELError) as e:
        _eval(rule, value)
    assert message in str(e.value)


def test_quantities_are_exact_and_rounded_up_to_nanos() -> None:
    assert cel_k8s.parse_quantity("1.5Gi").value == Decimal(1610612736)
    assert cel_k8s.parse_quantity("1e3").value == Decimal(1000)
    assert cel_k8s.parse_quantity("0.1n").value == Decimal("1e-9")
    with pytest.raises(ValueError, match="suffix"):
        cel_k8s.parse_quantity("1kM")


def test_cel_go_wording_of_conversions_and_undeclared_functions() -> None:
    assert cel.evaluate('"flag is " + string(self)', cel.to_cel(False, {"type": "boolean"})) == "flag is false"
    assert cel.evaluate("string(self)", cel.to_cel(1e6, {"type": "number"})) == "1e+06"
    with pytest.raises(cel.CELError, match="type conversion error from 'string' to 'int'"):
        _eval("int(self) > 0", "zz9")
    with pytest.raises(cel.CELCompileError) as e:
        _eval("self.quote().size() > 4", "x")
    assert str(e.value) == ("rule compile error: compilation failed: ERROR: <input>:1:11: undeclared reference to "
                            "'quote' (in container '')\n | self.quote().size() > 4\n | ..........^")


def test_class_defaults_examples_and_enums_meet_their_rules() -> None:
    """As the apiserver validates defaults (and upstream examples and enums): a failed rule shows the value, an
    evaluation error the schema's type, a list or object value is not shown."""
    from capd_py.reconcile.topology import variables as V
    schema = {"type": "string", "default": "a-b", "example": "zz9", "enum": ["1", "a-b", "zz9"],
              "x-kubernetes-validations": [{"rule": "int(self) > 0"}]}
    got = V.validate_class_variables([{"name": "v", "schema": {"openAPIV3Schema": schema}}])
    p = "spec.variables[v].schema.openAPIV3Schema"
    assert got == [f"{p}.default: Invalid value: \"string\": type conversion error from 'string' to 'int' "
                   "evaluating rule: int(self) > 0"]   # the default stage stops the later ones, as upstream
    obj = {"type": "object", "properties": {"l": {"type": "array", "items": {"type": "string"}}},
           "example": {"l": ["a"]}, "x-kubernetes-validations": [{"rule": "self.l.size() > 1"}]}
    got = V.validate_class_variables([{"name": "v", "schema": {"openAPIV3Schema": obj}}])
    assert got == [f"{p}.example: Invalid value: failed rule: self.l.size() > 1"]
    # an array at the root cannot be typed for CEL (the apiserver's resource-root typing drops its items)
    lst = {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": "self.size() > 1"}]}
    got = V.validate_class_variables([{"name": "v", "schema": {"openAPIV3Schema": lst}}])
    assert got == [f"{p}.x-kubernetes-validations: Internal error: internal error: failed to construct type "
                   "information for x-kubernetes-validations rules: unable to convert structural schema to CEL "
                   "declarations"]
