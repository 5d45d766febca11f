"""The suite's own layout: pytest imports test files by basename (rootdir-less, no packages), so two test files of
one name in different tiers make `make test` stop at collection ("import file mismatch"); every test is in a tier
folder and marked with its tier, and the Makefile's tier targets select no test `make test` leaves out."""

from __future__ import annotations

import ast
import itertools
import re
import shlex
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _pytest.mark.expression import Expression

from capd_py.testing.tiers import TIERS, tier_of

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent


def test_test_file_basenames_are_unique_across_tiers() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [n for n, k in names.items() if k > 1], {
        n: sorted(str(p.relative_to(TESTS)) for p in TESTS.rglob(n)) for n, k in names.items() if k > 1}


def test_folders_importing_siblings_by_bare_name_are_mypy_bases() -> None:
    """`from core_fixtures import ...` works under pytest (and the bench scripts put bench/ on sys.path), but mypy
    finds the sibling only when its folder is in `mypy_path`; otherwise ignore_missing_imports makes it Any."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    bases = {ROOT / p.replace("$MYPY_CONFIG_FILE_DIR", ".") for p in conf["mypy_path"]}
    needing = set()
    for f in [*TESTS.rglob("*.py"), *(ROOT / "bench").rglob("*.py")]:
        for name in re.findall(r"^\s*(?:from|import) (\w+)\b", f.read_text(), re.M):
            if name != f.stem and (f.parent / f"{name}.py").exists():
                needing.add(f.parent.resolve())
    assert needing, "the scan found no sibling import at all: it is broken"
    assert not sorted(str(d.relative_to(ROOT)) for d in needing if d not in {b.resolve() for b in bases})


# --- the tiers (issue 40 item 5): every test file is in a tier folder and marked with that tier, tests/conftest.py
# marks every collected item by its folder anyway, and no `make test-*` target selects what `make test` leaves out


def _tier_marks(tree: ast.Module) -> tuple[set[str], set[str]]:
    """(tiers named in the module-level `pytestmark`, tiers named by any `pytest.mark.<tier>` in the file)."""
    def named(node: ast.AST) -> set[str]:
        return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr in TIERS
                and isinstance(n.value, ast.Attribute) and n.value.attr == "mark"}
    module = set()
    for stmt in tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in targets):
            module |= named(stmt)
    return module, named(tree)


def test_every_test_file_is_in_a_tier_folder_and_carries_its_marker() -> None:
    files = sorted(TESTS.rglob("test_*.py")) + sorted(TESTS.rglob("*_test.py"))
    assert len(files) > 200, "the scan found almost no test file: it is broken"
    problems = []
    for f in files:
        rel, tier = f.relative_to(ROOT), tier_of(f, TESTS)
        if tier is None:
            problems.append(f"{rel}: not under tests/unit, tests/integration or tests/e2e")
            continue
        module, anywhere = _tier_marks(ast.parse(f.read_text(), str(f)))
        if tier not in module:
            problems.append(f"{rel}: no `pytestmark = pytest.mark.{tier}`")
        if anywhere - {tier}:
            problems.append(f"{rel}: in tests/{tier} but marked {', '.join(sorted(anywhere - {tier}))}")
    assert not problems, "\n".join(problems)


@dataclass
class _Item:
    """As much of a pytest.Item as the tier rule uses."""
    path: Path
    marks: list[str] = field(default_factory=list)

    @property
    def nodeid(self) -> str:
        return str(self.path.relative_to(ROOT))

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.marks else None

    def add_marker(self, name: str) -> None:
        self.marks.append(name)


def test_conftest_gives_every_item_its_folders_tier_before_deselection(request: pytest.FixtureRequest) -> None:
    """tests/conftest.py's `pytest_collection_modifyitems` runs before pytest's own (which applies `-m`), adds the
    folder's tier to an unmarked item, keeps an explicit one, leaves items outside tests/ alone and stops the run
    for a test outside the tier folders or marked with another tier."""
    impls = [i for i in request.config.hook.pytest_collection_modifyitems.get_hookimpls()
             if Path(getattr(i.plugin, "__file__", "")).resolve() == TESTS / "conftest.py"]
    assert len(impls) == 1 and impls[0].tryfirst, impls
    hook = impls[0].function
    unmarked, explicit = _Item(TESTS / "unit" / "x" / "test_a.py"), _Item(TESTS / "e2e" / "test_b.py", ["e2e"])
    integration, elsewhere = _Item(TESTS / "integration" / "test_c.py"), _Item(ROOT / "examples" / "test_d.py")
    hook(items=[unmarked, explicit, integration, elsewhere])
    assert (unmarked.marks, explicit.marks, integration.marks, elsewhere.marks) == (
        ["unit"], ["e2e"], ["integration"], [])
    with pytest.raises(pytest.UsageError, match="test_e.py: in tests/unit but marked integration"):
        hook(items=[_Item(TESTS / "unit" / "test_e.py", ["integration"])])
    with pytest.raises(pytest.UsageError, match="test_f.py: a test outside tests/unit"):
        hook(items=[_Item(TESTS / "fixtures" / "test_f.py")])


def _recipes() -> dict[str, list[str]]:
    """Makefile target -> its recipe lines (a simple reading: `name: ...` then the tab-indented lines; `$(PYTEST)`
    replaced by its definition)."""
    out: dict[str, list[str]] = {}
    current = None
    text = (ROOT / "Makefile").read_text()
    pytest_cmd = re.search(r"^PYTEST :?= (.+)$", text, re.M)
    for line in text.splitlines():
        if line.startswith("\t") and current is not None:
            out[current].append(line.strip().replace("$(PYTEST)", pytest_cmd.group(1) if pytest_cmd else "$(PYTEST)"))
        elif m := re.match(r"^([A-Za-z0-9_.-]+):(?!=)", line):
            current = m.group(1)
            out[current] = []
        elif line.strip() and not line.startswith("#"):
            current = None
    return out


def _mark_expression(args: list[str]) -> str:
    """The `-m` pytest applies: the last one given (addopts first, then the command line)."""
    expr = ""
    for i, a in enumerate(args):
        if a in ("-m", "--markexpr") and i + 1 < len(args):
            expr = args[i + 1]
        elif a.startswith("--markexpr="):
            expr = a.split("=", 1)[1]
        elif a.startswith("-m") and len(a) > 2 and not a.startswith("--"):
            expr = a[2:]
    return expr


def _selects(expr: str, marks: set[str]) -> bool:
    def has(name: str, /, **kwargs: str | int | bool | None) -> bool:
        return name in marks
    return not expr or Expression.compile(expr).evaluate(has)


def test_tier_targets_select_their_tier_and_nothing_make_test_leaves_out() -> None:
    """`-m` on the command line replaces pyproject's addopts `-m 'not autoscaler'`, so `pytest -m integration`
    selected the autoscaler tests `make test` leaves out. For every combination of the registered markers, what a
    tier target selects `make test` selects too; each tier target selects its tier's plain tests and no other's."""
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    addopts = shlex.split(conf["addopts"])
    markers = [m.split(":")[0].strip() for m in conf["markers"]]
    assert set(TIERS) <= set(markers)
    recipes = _recipes()

    def expressions(target: str) -> list[str]:
        runs = [shlex.split(line) for line in recipes[target] if "bin/pytest " in line]
        assert runs, f"`make {target}` runs no pytest"
        return [_mark_expression(addopts + run[1:]) for run in runs]

    (everything,) = expressions("test")
    assert "--tier-report" in " ".join(recipes["test"]), "`make test` prints the tiers' times and the slowest tests"
    combos = [set(c) for n in range(len(markers) + 1) for c in itertools.combinations(markers, n)]
    for tier in TIERS:
        for expr in expressions(f"test-{tier}"):
            beyond = [sorted(c) for c in combos if _selects(expr, c) and not _selects(everything, c)]
            assert not beyond, f"`make test-{tier}` (-m {expr!r}) selects tests `make test` does not: {beyond[:4]}"
            assert _selects(expr, {tier}), f"`make test-{tier}` (-m {expr!r}) leaves plain {tier} tests out"
            assert not [t for t in TIERS if t != tier and _selects(expr, {t})], expr


def test_the_shared_quick_cluster_is_upgraded_then_deleted_by_its_last_users() -> None:
    """The users of `e2e-quick` run in one worker in their files' order (tests/worker_units.py): the readers, and the
    tests that leave it as they found it, first; test_upgrade.py moves it to the next Kubernetes version; the quick
    test of test_workload_cluster.py checks it and deletes it, last. A new user must sort before the last two."""
    users = sorted(p.name for p in (TESTS / "e2e").glob("test_*.py")
                   if re.search(r"\bquick_cluster: WorkloadCluster\b", p.read_text()))
    assert users[-2:] == ["test_upgrade.py", "test_workload_cluster.py"], users
