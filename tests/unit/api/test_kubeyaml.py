"""capd_py.api.kubeyaml against sigs.k8s.io/yaml itself: every case of tests/fixtures/parity/yaml.jsonl.gz (made by
hack/parity/yaml.go with Go's YAMLToJSON: the scalars where YAML 1.1 readers differ, as a value, a key and a list
item, and whole documents) reads the same here, or fails where Go fails; and no module of capd_py reads YAML any
other way."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from capd_py.api import kubeyaml

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests" / "fixtures" / "parity" / "yaml.jsonl.gz"


def _cases() -> list[dict[str, Any]]:
    with gzip.open(CORPUS, "rt") as f:
        return [json.loads(line) for line in f]


def _ours(text: str) -> tuple[bool, Any]:
    try:
        return False, kubeyaml.load(text)
    except yaml.YAMLError:
        return True, None


def test_every_case_reads_as_sigs_k8s_io_yaml_reads_it() -> None:
    cases = _cases()
    assert len(cases) > 450
    differ = []
    for c in cases:
        failed, value = _ours(c["yaml"])
        if c.get("error"):
            if not failed:
                differ.append((c["yaml"], "Go: error", value))
            continue
        want = json.loads(c["json"])
        if failed or json.dumps(value, sort_keys=True) != json.dumps(want, sort_keys=True):
            differ.append((c["yaml"], want, "error" if failed else value))
    assert differ == [], f"{len(differ)} of {len(cases)} differ from Go:\n" + "\n".join(map(repr, differ[:40]))


@pytest.mark.parametrize(("text", "value"), [
    # the ClusterResourceSet ConfigMap of issue 42: kubectl keeps the date a string
    ("data:\n  released: 2024-01-01\n", {"data": {"released": "2024-01-01"}}),
    ("at: 12:30\n", {"at": "12:30"}),  # PyYAML: the sexagesimal 750
    ("a: y\nb: n\n", {"a": True, "b": False}),  # PyYAML: strings
    ("replicas: 1e3\n", {"replicas": 1000}),  # PyYAML: a string; Go: the float 1000, written as 1000
    ("mode: 0644\n", {"mode": 420}),
])
def test_where_pyyaml_reads_otherwise(text: str, value: Any) -> None:
    assert kubeyaml.load(text) == value
    assert yaml.safe_load(text) != value or text.startswith("mode")


def test_documents_of_a_stream() -> None:
    assert list(kubeyaml.load_all("a: 1\n---\n---\nb: 2024-01-01\n")) == [{"a": 1}, None, {"b": "2024-01-01"}]


def test_no_other_yaml_reader_in_capd_py() -> None:
    """One loader: a `yaml.safe_load` / `yaml.load` elsewhere would read a manifest otherwise than kubectl does."""
    reader = re.compile(r"\byaml\.(safe_load|load|full_load|unsafe_load)(_all)?\(")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "capd_py").rglob("*.py"))
             if p.name != "kubeyaml.py"
             for n, line in enumerate(p.read_text().splitlines(), 1) if reader.search(line)]
    assert found == []
