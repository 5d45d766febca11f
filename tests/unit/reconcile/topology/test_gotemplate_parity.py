"""Every template of the conformance corpus (tests/fixtures/parity/templates.jsonl.gz, made by `make parity-corpus`
from upstream's own text/template + sprig: hack/parity/README.md) renders here exactly as in Go: the same output,
or the same error message, byte for byte.

Known differences are an explicit allowlist: each class with its exact count in the committed corpus. A class
that grows (or a mismatch outside every class) fails the test; one that shrinks fails too, so the allowlist is
tightened when capd-py improves.
"""

from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from capd_py.reconcile.topology import gotemplate as G

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "parity" / "templates.jsonl.gz"
GENERATOR = Path(__file__).resolve().parents[4] / "hack" / "parity" / "templates.go"

# class -> (count in the committed corpus, why it is not fixed)
ALLOWED: dict[str, tuple[int, str]] = {
    "slice-index-interface": (4, "Go's builtin slice does not unwrap interface{} indexes: a data value as an index "
                                 "fails with 'type interface {}' where capd-py names the value's type"),
    "lexer-error-order": (5, "Go's parser reports an earlier semantic error before the lexer's error item; "
                             "capd-py's lexer fails first"),
    "reflect-zero-value": (3, "an untyped nil literal passed to len/deepCopy makes reflect panic in Go"),
}


def _data(name: str) -> dict[str, Any]:
    """The data sets are the generator's own (hack/parity/templates.go `templateData`)."""
    src = GENERATOR.read_text()
    start = src.index(f'"{name}": `') + len(name) + 5
    return json.loads(src[start:src.index("`", start)])


def _classify(case: dict[str, Any], got: str | None, err: str | None) -> str:
    want_err = case.get("error") or ""
    if err and "capd-py does not implement" in err:
        return "unimplemented-sprig"
    if "cannot index slice/array with type interface {}" in want_err:
        return "slice-index-interface"
    if (err or "") in (f"template: {case.get('mode') == 'naming' and 'template name generator' or 'tpl'}:{n}: {m}"
               for n in range(1, 5) for m in ("expected :=", "unexpected right paren")):
        return "lexer-error-order"
    if "reflect: call of reflect.Value.Type on zero Value" in want_err:
        return "reflect-zero-value"
    return "unexplained"


def test_templates_match_go_byte_for_byte() -> None:
    data = {"values": _data("values"), "naming": _data("naming")}
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    assert len(cases) > 5000
    mismatches: dict[str, list[str]] = collections.defaultdict(list)
    for case in cases:
        naming = case.get("mode") == "naming"
        got: str | None = None
        err: str | None = None
        try:
            got = G.render(case["template"], data[case["data"]], name="template name generator" if naming else "tpl",
                           sprig=not naming, missing_key="error" if naming else "default")
        except G.TemplateError as e:
            err = str(e)
        if got != case.get("output") or err != case.get("error"):
            cls = _classify(case, got, err)
            mismatches[cls].append(f"{case['template']!r}: want {case.get('output')!r} / {case.get('error')!r}, "
                                   f"got {got!r} / {err!r}")
    assert not mismatches.get("unexplained"), "\n".join(mismatches["unexplained"][:20])
    counts = {cls: len(v) for cls, v in mismatches.items()}
    assert counts == {cls: n for cls, (n, _) in ALLOWED.items() if n}, counts
