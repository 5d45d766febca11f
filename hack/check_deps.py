#!/usr/bin/env python3
"""Every third-party module capd_py imports must come from a distribution pyproject.toml declares (directly), so
a fresh install cannot break when a dependency's own dependencies change (aiohttp used to arrive only through
kopf). Tests and bench may also use the `dev` extra. Exit 1 naming each undeclared import. Run by `make lint`."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(extra: str | None) -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(project.get("dependencies") or [])
    if extra:
        reqs += project.get("optional-dependencies", {}).get(extra, [])
    return {_norm(re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0]) for r in reqs}


def _imports(paths: list[Path]) -> dict[str, list[str]]:
    """top-level module -> where it is imported (absolute imports only)."""
    out: dict[str, list[str]] = {}
    for p in paths:
        tree = ast.parse(p.read_text(), str(p))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                out.setdefault(n.split(".")[0], []).append(f"{p.relative_to(ROOT)}:{node.lineno}")
    return out


def check(folders: list[str], extra: str | None) -> list[str]:
    declared = _declared(extra)
    dists = md.packages_distributions()
    stdlib = set(sys.stdlib_module_names)
    problems = []
    files = [f for d in folders for f in sorted((ROOT / d).rglob("*.py"))]
    # the repo's own modules, also those tests and benchmarks import by file name (sibling fixtures, bench scripts)
    local = {"capd_py", "tests", "bench", "hack"} | {f.stem for f in files} | {f.parent.name for f in files}
    for mod, where in sorted(_imports(files).items()):
        if mod in stdlib or mod in local or mod == "__future__":
            continue
        owners = {_norm(d) for d in dists.get(mod, [])}
        if not owners:
            problems.append(f"{mod}: no installed distribution provides it ({where[0]})")
        elif not owners & declared:
            problems.append(f"{mod} (from {', '.join(sorted(owners))}) is imported but not declared in "
                            f"pyproject.toml{' (dev extra)' if extra else ''}: {where[0]}")
    return problems


def main() -> int:
    problems = check(["capd_py"], None) + check(["tests", "bench"], "dev")
    for p in problems:
        print(f"undeclared dependency: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
