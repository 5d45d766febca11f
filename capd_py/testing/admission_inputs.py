"""Inputs for the admission differential (capd_py.testing.admission_oracle): seeded, reproducible mutations of
upstream's own templates (tests/fixtures/upstream, release-1.13's e2e flavors and CAPD's templates, rendered with
upstream's e2e variables).

Each input is one object of a kind capd-py admits with one change: a field removed, a value of another type, a
boundary number, an odd string (empty, too long, upper case, a path, a percentage, a version), an unknown field, an
odd name, or the unchanged object (what defaulting makes of it). About one in five is an update: the unchanged
object is created first and the changed one sent as its update (immutable fields, allowed transitions).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from capd_py.api import versions
from capd_py.testing import envsubst
from capd_py.testing.conversion import KINDS
from capd_py.testing.envsubst import E2E_VARIABLES

Obj = dict[str, Any]
Path_ = tuple[str | int, ...]

UPSTREAM = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "upstream"


@dataclass(frozen=True)
class Case:
    name: str                 # where it came from and what was changed
    obj: Obj                  # what is sent
    base: Obj | None = None   # created first; `obj` is then sent as its update


# CAPD's own templates (docker-*) and the e2e flavors (e2e-*) each define a ClusterClass "quick-start" with other
# variables: CAPD's is renamed so that every Cluster meets the class it was written for
CAPD_TEMPLATES, CAPD_CLASS_PREFIX = "docker-", "capd-"


def _as_written_for(src: str, d: Obj) -> Obj:
    if not src.startswith(CAPD_TEMPLATES):
        return d
    if d["kind"] == "ClusterClass":
        d["metadata"]["name"] = CAPD_CLASS_PREFIX + d["metadata"]["name"]
    ref = ((d.get("spec") or {}).get("topology") or {}).get("classRef")
    if d["kind"] == "Cluster" and isinstance(ref, dict) and ref.get("name"):
        ref["name"] = CAPD_CLASS_PREFIX + ref["name"]
    return d


def _external(cc: Obj) -> bool:
    return any(isinstance(p, dict) and p.get("external") for p in (cc.get("spec") or {}).get("patches") or [])


def pool(namespace: str) -> list[tuple[str, Obj]]:
    """(source file, object) for every v1beta2 object of a kind capd-py serves in upstream's templates, each
    (kind, name) once (the first file's). Clusters of a ClusterClass with external patches are left out: no
    Runtime Extension answers here, so neither side can reconcile that class."""
    out: list[tuple[str, Obj]] = []
    seen: set[tuple[str, str]] = set()
    for p in sorted(UPSTREAM.glob("*.yaml")):
        values = {**E2E_VARIABLES, "NAMESPACE": namespace, "CLUSTER_NAME": "up-" + p.stem[-20:],
                  "KUBERNETES_VERSION": versions.DEFAULT_VERSION}
        for d in envsubst.documents(p, values, namespace):
            group, _, version = str(d.get("apiVersion", "")).rpartition("/")
            if version != "v1beta2" or (group, d.get("kind")) not in KINDS:
                continue
            d = _as_written_for(p.stem, d)
            key = (d["kind"], d["metadata"]["name"])
            if key not in seen:
                seen.add(key)
                out.append((p.stem, d))
    unreconciled = {o["metadata"]["name"] for _, o in out if o["kind"] == "ClusterClass" and _external(o)}
    return [(src, o) for src, o in out if o["kind"] != "Cluster"
            or (((o.get("spec") or {}).get("topology") or {}).get("classRef") or {}).get("name") not in unreconciled]


def fixtures(namespace: str) -> list[Obj]:
    """What the cases refer to and both planes hold for real: the ClusterClasses (those both sides can
    reconcile) and every template."""
    return [copy.deepcopy(o) for _, o in pool(namespace)
            if (o["kind"] == "ClusterClass" and not _external(o)) or o["kind"].endswith("Template")]


def paths(node: Any, at: Path_ = ()) -> Iterator[tuple[Path_, Any]]:
    """Every (path, value) below `node`, parents before children."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield (*at, k), v
            yield from paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield (*at, i), v
            yield from paths(v, (*at, i))


def dotted(p: Path_) -> str:
    return "".join(f"[{x}]" if isinstance(x, int) else f".{x}" for x in p).lstrip(".")


def _parent(obj: Obj, p: Path_) -> Any:
    node: Any = obj
    for x in p[:-1]:
        node = node[x]
    return node


def drop(obj: Obj, p: Path_) -> None:
    parent = _parent(obj, p)
    del parent[p[-1]]


def put(obj: Obj, p: Path_, value: Any) -> None:
    _parent(obj, p)[p[-1]] = value


VERSIONS = ["v1.33.0", "1.33.0", "v1.33", "v1.40.0", "v1.20.0", "latest", "", "v1.35.0+build.1", "v1.35.0-rc.1"]
STRINGS = ["", "x", "Upper", "a" * 64, "a" * 254, "a/b", "a.b", "a_b", "-a", "10%", "110%", "-10%", "0", "1s",
           "https://x", "1.1.1.1", "10.0.0.0/8", "true"]
NUMBERS = [-1, 0, 1, 3, 30, 65535, 65536, 2 ** 31, "1", 1.5]
NAMES = ["a" * 64, "a" * 253, "Upper", "a.b", "a_b", "-a", "a-", "1a", "x"]


def values_for(p: Path_, value: Any) -> list[Any]:
    """Replacement values for the node at `p` that now holds `value`."""
    key = p[-1]
    if isinstance(key, str) and key.lower().endswith("version") and isinstance(value, str):
        return VERSIONS + [1, None]
    if isinstance(value, bool):
        return [not value, "true", 1, None]
    if isinstance(value, int | float):
        return NUMBERS + [None, True]
    if isinstance(value, str):
        return STRINGS + [1, None, [value], {"k": value}]
    if isinstance(value, list):
        return [[], [{}], [value[0], value[0]] if value else ["x"], {}, "x", None]
    if isinstance(value, dict):
        return [{}, {**value, "unknownField": "x"}, [], "x", None]
    return ["x", 1]


def _renamed(obj: Obj, suffix: str) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"]["name"] = f"{obj['metadata']['name'][:48]}-{suffix}"
    return out


def mutate(rng: random.Random, obj: Obj) -> tuple[str, Obj]:
    """One change to a copy of `obj`, and what it was."""
    out = copy.deepcopy(obj)
    op = rng.random()
    if op < 0.05:
        return "unchanged", out
    if op < 0.12:
        name = rng.choice(NAMES)
        out["metadata"]["name"] = name
        return f"name={name[:12]}", out
    if op < 0.18:
        md = out["metadata"]
        which = rng.choice(["labels", "annotations"])
        k, v = rng.choice([("a/b/c", "x"), ("x", "a" * 64), ("cluster.x-k8s.io/cluster-name", "other"),
                           ("cluster.x-k8s.io/paused", ""), ("x", "a b"), ("-x", "y")])
        md.setdefault(which, {})[k] = v
        return f"metadata.{which}[{k}]={v[:12]}", out
    spec_paths = [(("spec", *p), v) for p, v in paths(out.get("spec") or {}, ())]
    if not spec_paths:
        return "unchanged", out
    p, value = rng.choice(spec_paths)
    if op < 0.38:
        drop(out, p)
        return f"drop {dotted(p)}", out
    if op < 0.45 and isinstance(value, dict):
        value["unknownField"] = "x"
        return f"add {dotted(p)}.unknownField", out
    new = rng.choice(values_for(p, value))
    put(out, p, new)
    return f"set {dotted(p)}={json.dumps(new)[:24]}", out


def cases(seed: int, n: int, namespace: str) -> list[Case]:
    """`n` cases drawn with `seed` (the same seed and n give the same cases)."""
    rng = random.Random(seed)
    by_kind: dict[str, list[tuple[str, Obj]]] = {}
    for src, o in pool(namespace):
        by_kind.setdefault(o["kind"], []).append((src, o))
    kinds = sorted(by_kind)  # every kind as likely as any other, whatever its count in the templates
    out: list[Case] = []
    for i in range(n):
        src, obj = rng.choice(by_kind[rng.choice(kinds)])
        what, changed = mutate(rng, obj)
        where = f"{src}:{obj['kind']}/{obj['metadata']['name']}"
        if rng.random() < 0.2 and not what.startswith("name="):
            base = _renamed(obj, f"u{i}")
            changed["metadata"]["name"] = base["metadata"]["name"]
            out.append(Case(f"#{i} {where} update: {what}", changed, base))
        else:
            if not what.startswith("name="):
                changed = _renamed(changed, f"c{i}")
            out.append(Case(f"#{i} {where} create: {what}", changed))
    return out
