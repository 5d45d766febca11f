from __future__ import annotations

import pytest

from capd_py.api.admission import checks

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("value", "ok"), [("", True), ("a", True), ("a.b_c-d", True), ("a" * 63, True),
                                           ("a" * 64, False), ("-a", False), ("a b", False), ("a/b", False)])
def test_label_values(value: str, ok: bool) -> None:
    assert (not checks.label_value_errors(value)) is ok


def test_label_value_messages_are_apimachinerys() -> None:
    assert checks.label_value_errors("a" * 64)[0] == "must be no more than 63 characters"
    assert checks.label_value_errors("-a")[0].startswith("a valid label must be an empty string or consist of")
    assert "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?'" in \
        checks.label_value_errors("-a")[0]


@pytest.mark.parametrize(("key", "ok"), [("app", True), ("cluster.x-k8s.io/cluster-name", True), ("a/b/c", False),
                                         ("/a", False), ("Example.com/a", False), ("bad key", False), ("", False)])
def test_qualified_names(key: str, ok: bool) -> None:
    assert (not checks.qualified_name_errors(key)) is ok


def test_selectors() -> None:
    assert checks.selector_error({"matchLabels": {"a": "b"}}) is None
    assert checks.selector_error({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    assert checks.selector_error({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})
    assert checks.selector_error({"matchLabels": {"a": "-"}})
    assert checks.selector_string({"matchLabels": {"z": "1", "a": "2"},
                                   "matchExpressions": [{"key": "m", "operator": "In", "values": ["y", "x"]}]}) == \
        "a=2,m in (x,y),z=1"


@pytest.mark.parametrize(("value", "ok"), [(1, True), (0, True), ("25%", True), ("abc", False), ("1", False),
                                           (None, True)])
def test_int_or_percent(value: object, ok: bool) -> None:
    assert (checks.int_or_percent_error(value) is None) is ok


@pytest.mark.parametrize(("cidr", "ok"), [("10.0.0.0/8", True), ("fd00::/48", True), ("10.0.0.1/8", True),
                                          ("10.0.0.0/33", False), ("10.0.0.0", False), ("x", False)])
def test_cidrs(cidr: str, ok: bool) -> None:
    assert (checks.cidr_error(cidr) is None) is ok


def test_kube_semver_is_upstreams_format() -> None:
    assert checks.KUBE_SEMVER.match("v1.34.4") and checks.KUBE_SEMVER.match("v1.34.4+build.1")
    assert not checks.KUBE_SEMVER.match("1.34.4") and not checks.KUBE_SEMVER.match("v1.34")


def test_template_metadata() -> None:
    errs = checks.object_meta_errors({"labels": {"bad key": "x", "ok": "-bad"}, "annotations": {"a/b/c": "x"}},
                                     "spec.template.metadata")
    assert [e.field for e in errs] == ["spec.template.metadata.labels", "spec.template.metadata.labels",
                                       "spec.template.metadata.annotations"]


_QN = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
       "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
       "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")


@pytest.mark.parametrize(("key", "errors"), [
    # apimachinery's IsQualifiedName, message for message (validation.go): an empty prefix does not stop the name
    # check, an empty name is both empty and not matching, RegexError joins its examples with "',  or '"
    ("/", ["prefix part must be non-empty", "name part must be non-empty", f"name part {_QN}"]),
    ("example.com/", ["name part must be non-empty", f"name part {_QN}"]),
    ("/name", ["prefix part must be non-empty"]),
    ("a/b/c", [f"a qualified name {_QN} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]),
    ("Bad_/x", ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
                "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"]),
])
def test_qualified_name_messages_as_apimachinery(key: str, errors: list[str]) -> None:
    assert checks.qualified_name_errors(key) == errors
