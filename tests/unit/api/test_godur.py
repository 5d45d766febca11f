"""capd_py.api.godur against Go's time.ParseDuration and time.Duration.String() (tests/fixtures/parity/
durations.jsonl.gz, made by hack/parity/durations.go): the same nanoseconds or an error, the same text."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from capd_py.api import godur

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "parity" / "durations.jsonl.gz"


def _cases(kind: str) -> list[dict[str, Any]]:
    with gzip.open(CORPUS, "rt") as f:
        return [c for c in map(json.loads, f) if c["kind"] == kind]


def _parsed(text: str) -> int | str:
    try:
        return godur.parse_nanos(text)
    except ValueError:
        return "error"


def test_parse_as_go() -> None:
    cases = _cases("parse")
    assert len(cases) > 40
    differ = [(c["text"], c.get("nanos", "error"), got) for c in cases
              if (got := _parsed(c["text"])) != c.get("nanos", "error")]
    assert differ == []


def test_string_as_go() -> None:
    cases = _cases("string")
    assert len(cases) > 20
    differ = [(c["nanos"], c["text"], got) for c in cases if (got := godur.format_nanos(c["nanos"])) != c["text"]]
    assert differ == []


def test_seconds_at_the_edges() -> None:
    assert godur.format_seconds(5400) == "1h30m0s"  # one of capd-py's former formatters printed "90m0s"
    assert godur.format_seconds(0.3) == "300ms"
    assert godur.parse("1m30s") == 90.0
