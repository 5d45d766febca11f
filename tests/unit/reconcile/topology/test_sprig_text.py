"""sprig's text helpers on the samples their libraries document (goutils, xstrings); Go's own output on thousands
of templates is checked by test_gotemplate_parity.py."""

from __future__ import annotations

import pytest

from capd_py.reconcile.topology import gotemplate as G
from capd_py.reconcile.topology import sprig_text as T

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("given", "snake", "kebab"), [
    ("FirstName", "first_name", "first-name"), ("HTTPServer", "http_server", "http-server"),
    ("NoHTTPS", "no_https", "no-https"), ("GO_PATH", "go_path", "go-path"), ("GO PATH", "go_path", "go-path"),
    ("GO-PATH", "go_path", "go-path"), ("http2xx", "http_2xx", "http-2xx"), ("HTTP20xOK", "http_20x_ok", "http-20x-ok"),
    ("Duration2m3s", "duration_2m3s", "duration-2m3s"), ("Bld4Floor3rd", "bld4_floor_3rd", "bld4-floor-3rd"),
])
def test_snake_and_kebab_case(given: str, snake: str, kebab: str) -> None:
    assert (T.snakecase(given), T.kebabcase(given)) == (snake, kebab)


@pytest.mark.parametrize(("given", "want"), [
    ("some_words", "SomeWords"), ("http_server", "HttpServer"), ("no_https", "NoHttps"),
    ("_complex__case_", "_Complex_Case_"), ("some words", "SomeWords"), ("GOLANG_IS_GREAT", "GolangIsGreat"),
    ("", ""), ("x", "X"),
])
def test_camelcase_is_pascal_case(given: str, want: str) -> None:
    assert T.pascalcase(given) == want


def test_goutils_helpers_work_on_bytes() -> None:
    assert T.abbrev(5, "hello world") == "he..." and T.abbrev(3, "hello world") == "hello world"
    assert T.abbrevboth(5, 10, "1234 5678 9123") == "...5678..."
    assert T.initials("First Try") == "FT"
    # the first byte of "☃" (E2) read as the Latin-1 rune U+00E2, as goutils does
    assert T.initials("héllo ☃ wörld") == "hâw"
    assert T.wrap(5, "hello world again") == "hello\nworld\nagain"
    assert T.wrap_with(3, "|", "abcdefg") == "abc|def|g"
    assert T.swapcase("aBc dEF") == "AbC Def"


def test_numbers_and_durations() -> None:
    assert T.to_decimal("0777") == 511 and T.to_decimal("8") == 0 and T.to_decimal("1" * 30) == 0
    assert T.duration(None, "95") == "1m35s" and T.duration(95, None) == "1m35s" and T.duration(None, "x") == "0s"
    assert T.duration(None, "99999999999999999999") == T.duration((1 << 63) - 1, None)  # clamped, then wrapped
    assert [T.duration_round(T.parse_duration_or_zero(d)) for d in ("2h5m", "-2h5m", "59s", "1s", "800h")] == \
        ["2h", "2h", "59s", "0s", "1mo"]
    # through the template engine: an int literal is Go's int, not int64: sprig's duration reads it as 0
    assert G.render('{{ duration 95 }}|{{ duration "95" }}|{{ duration (int64 95) }}', {}) == "0s|1m35s|1m35s"


def test_url_parse_and_join_as_go_net_url() -> None:
    got = G.render('{{ urlParse "https://u:p%40@example.com:8080/a%20b?b=c#d%2F" | toJson }}', {})
    assert got == ('{"fragment":"d/","host":"example.com:8080","hostname":"example.com","opaque":"",'
                   '"path":"/a b","query":"b=c","scheme":"https","userinfo":"u:p%40"}')
    assert G.render('{{ urlJoin (dict "scheme" "https" "host" "x.io" "path" "/a b" "userinfo" "u:p") }}', {}) == \
        "https://u:p@x.io/a%20b"
    assert G.render('{{ urlJoin (dict "path" "a:b") }}', {}) == "./a:b"
    with pytest.raises(G.TemplateError, match=r'error calling urlParse: unable to parse url: parse "%q": '
                                              r'invalid URL escape "%q"'):
        G.render('{{ urlParse "%q" }}', {})
    with pytest.raises(G.TemplateError, match="unable to parse host key, must be of type string, but int found"):
        G.render('{{ urlJoin (dict "host" 1) }}', {})
