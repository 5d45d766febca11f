from pathlib import Path

import pytest

from capd_py.testing.envsubst import documents, substitute

pytestmark = pytest.mark.unit


def test_substitution_follows_clusterctl() -> None:
    v = {"A": "a", "E": ""}
    assert substitute("${A} ${B:-x} ${E:-y} ${E-z} ${B:=[1]} ${C:-${A}} ${ A }", v) == "a x y  [1] a a"
    with pytest.raises(KeyError, match="MISSING"):
        substitute("${MISSING}", v)


def test_lenient_substitution_leaves_unknown_variables_empty() -> None:
    assert substitute("x${MISSING}y ${A:-d}", {}, strict=False) == "xy d"


def test_documents_are_put_in_the_namespace(tmp_path: Path) -> None:
    p = tmp_path / "t.yaml"
    p.write_text("kind: A\nmetadata: {name: ${N}}\n---\n# only a comment\n---\nkind: B\n")
    docs = documents(p, {"N": "n1"}, "ns")
    assert docs == [{"kind": "A", "metadata": {"name": "n1", "namespace": "ns"}},
                    {"kind": "B", "metadata": {"namespace": "ns"}}]
    assert documents(p, {"N": "n1"})[1] == {"kind": "B"}
