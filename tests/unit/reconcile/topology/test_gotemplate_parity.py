"""Every template of the conformance corpus (tests/fixtures/parity/templates.jsonl.gz, made by `make parity-corpus`
from upstream's own text/template + sprig: hack/parity/README.md) renders here exactly as in Go: the same output,
or the same error message, byte for byte, with no allowance.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from capd_py.reconcile.topology import gotemplate as G

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[3] / "fixtures" / "parity" / "templates.jsonl.gz"
GENERATOR = Path(__file__).resolve().parents[4] / "hack" / "parity" / "templates.go"


def _data(name: str) -> dict[str, Any]:
    """The data sets are the generator's own (hack/parity/templates.go `templateData`)."""
    src = GENERATOR.read_text()
    start = src.index(f'"{name}": `') + len(name) + 5
    return json.loads(src[start:src.index("`", start)])


def test_templates_match_go_byte_for_byte() -> None:
    data = {"values": _data("values"), "naming": _data("naming")}
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        cases = [json.loads(line) for line in f]
    assert len(cases) > 5000
    mismatches: list[str] = []
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
            mismatches.append(f"{case['template']!r}: want {case.get('output')!r} / {case.get('error')!r}, "
                              f"got {got!r} / {err!r}")
    # every case as Go renders it, no allowance (was 1 149 mismatches by class until 2026-12-07)
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:20])
