"""Go's time.Parse layouts and Time.String as sprig's date helpers use them (UTC the local zone); Go's own output on
the parity corpus is checked by test_gotemplate_parity.py."""

from __future__ import annotations

import pytest

from capd_py.reconcile.topology import gotemplate as G
from capd_py.reconcile.topology import gotime as T

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("layout", "value", "want"), [
    ("2006-01-02", "2024-05-06", "2024-05-06 00:00:00 +0000 UTC"),
    ("2006-01-02T15:04:05Z07:00", "2024-05-06T10:20:30.25+05:30", "2024-05-06 10:20:30.25 +0530 +0530"),
    ("2006-01-02T15:04:05Z07:00", "2024-05-06T10:20:30Z", "2024-05-06 10:20:30 +0000 UTC"),
    ("Jan _2 15:04:05 MST 2006", "Feb  3 04:05:06 PST 2021", "2021-02-03 04:05:06 +0000 PST"),
    ("3:04PM", "12:30AM", "0000-01-01 00:30:00 +0000 UTC"), ("3:04pm", "1:05pm", "0000-01-01 13:05:00 +0000 UTC"),
    ("2006-002", "2024-060", "2024-02-29 00:00:00 +0000 UTC"),
    ("02 Jan 06 15:04 -0700", "31 Dec 99 23:59 -0100", "1999-12-31 23:59:00 -0100 -0100"),
])
def test_layouts(layout: str, value: str, want: str) -> None:
    assert T.parse_in_utc(layout, value).string() == want


@pytest.mark.parametrize(("layout", "value", "message"), [
    ("2006-01-02", "x", 'parsing time "x" as "2006-01-02": cannot parse "x" as "2006"'),
    ("2006-01-02", "2024-13-01", 'parsing time "2024-13-01": month out of range'),
    ("2006-01-02", "2024-02-30", 'parsing time "2024-02-30": day out of range'),
    ("2006-01-02", "2024-01-02x", 'parsing time "2024-01-02x": extra text: "x"'),
    ("-", "é", 'parsing time "\\xc3\\xa9" as "-": cannot parse "\\xc3\\xa9" as "-"'),
])
def test_errors_as_go_words_them(layout: str, value: str, message: str) -> None:
    with pytest.raises(T.ParseError) as e:
        T.parse_in_utc(layout, value)
    assert str(e.value) == message


def test_sprig_date_helpers() -> None:
    assert G.render('{{ toDate "2006-01-02" "x" }}', {}) == "0001-01-01 00:00:00 +0000 UTC"
    assert G.render('{{ unixEpoch (toDate "2006-01-02" "2024-05-06") }}', {}) == "1714953600"
    assert G.render('{{ toDate "2006-01-02" "2024-05-06" | mustDateModify "-1.5h" }}', {}) == \
        "2024-05-05 22:30:00 +0000 UTC"
    assert G.render('{{ toDate "2006-01-02" "2024-05-06" | toJson }}|{{ typeOf (toDate "" "") }}', {}) == \
        '"2024-05-06T00:00:00Z"|time.Time'
    with pytest.raises(G.TemplateError, match='error calling mustToDate: parsing time "x" as "2006-01-02"'):
        G.render('{{ mustToDate "2006-01-02" "x" }}', {})
    with pytest.raises(G.TemplateError, match="wrong type for value; expected time.Time; got string"):
        G.render('{{ "x" | unixEpoch }}', {})
