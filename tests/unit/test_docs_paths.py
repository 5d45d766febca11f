"""The docs name files that exist: every repository path in docs/, README.md and bench/README.md (a file, a folder, a
glob, or `path/module.attribute`) resolves, and every module docs/ARCHITECTURE.md's layer table lists is in its
package (issue 45: docs that drift). A path written after "was" is history and is not checked."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([*ROOT.glob("docs/**/*.md"), ROOT / "README.md", ROOT / "bench" / "README.md"])
TOP = ("capd_py", "hack", "tests", "images", "crds", "templates", "bench", "docs", "examples")
PATH = re.compile(rf"(?<![\w/.$-])((?:{'|'.join(TOP)})/[\w./*-]*[\w/*])")
# placeholders in prose about naming rules, not files
PLACEHOLDER = re.compile(r"(^|/)test_(x|y)?(\.py)?$|/test_$|_$")
HISTORY = re.compile(r"\b(was|were|formerly|renamed from)\s+`?$")


def module_defines(path: Path, name: str) -> bool:
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def resolves(ref: str) -> bool:
    ref = ref.rstrip("./")
    if "*" in ref:
        return any(ROOT.glob(ref))
    if (ROOT / ref).exists():
        return True
    # `capd_py/runtime/networks.ensure_network`: a module and a name it defines at top level
    stem, _, attr = ref.rpartition(".")
    module = ROOT / f"{stem}.py"
    return bool(attr) and module.is_file() and module_defines(module, attr)


def named_paths() -> list[tuple[str, int, str]]:
    found = []
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for m in PATH.finditer(line):
                ref = m.group(1)
                if PLACEHOLDER.search(ref.rstrip(".")) or "<" in ref or HISTORY.search(line[:m.start()]):
                    continue
                found.append((str(doc.relative_to(ROOT)), number, ref))
    return found


def test_the_docs_name_paths_that_exist() -> None:
    refs = named_paths()
    assert len(refs) > 300  # the pattern still finds the docs' paths
    assert [r for r in refs if not resolves(r[2])] == []


def architecture_table() -> dict[str, list[str]]:
    """layer package -> the modules its row of docs/ARCHITECTURE.md's table names (`name.py`)."""
    rows: dict[str, list[str]] = {}
    for line in (ROOT / "docs" / "ARCHITECTURE.md").read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 4 or not re.fullmatch(r"`\w+`", cells[1]):
            continue
        rows[cells[1].strip("`")] = re.findall(r"`([\w/]+\.py)`", cells[2])
    return rows


def test_the_architecture_table_names_modules_of_its_layers() -> None:
    table = architecture_table()
    assert {"api", "reconcile", "kube", "runtime", "controllers"} <= set(table)
    missing = [f"{layer}/{m}" for layer, modules in table.items() for m in modules
               if not any((ROOT / "capd_py" / layer).glob(f"**/{m}"))]
    assert missing == []
