#!/usr/bin/env python3
"""Where capd-py's CRDs (crds/) are stricter than upstream Cluster API's for the same kind.

    python hack/compare_upstream_crds.py                      # compare against tests/fixtures/upstream/crds/
    python hack/compare_upstream_crds.py --vendor DIR [--ref release-1.13] [--only GLOB]
        # refresh the vendored upstream schemas from a cluster-api git directory (descriptions and status
        # dropped: only what admission of spec/metadata depends on); the Dev* kinds follow v1.14:
        # --vendor DIR --ref v1.14.0 --only 'infrastructure.cluster.x-k8s.io_dev*'

Stricter means something upstream-valid could be rejected: a required field upstream does not require, a
non-nullable field upstream makes nullable, a tighter minLength/maxLength/minimum/maximum/minItems/maxItems/
minProperties/maxProperties, an enum missing upstream values, a pattern or format upstream does not have, a
property upstream has and capd-py does not (strict field validation rejects it), or a CEL rule upstream's CRD
does not have (those must express an upstream webhook check; tests/integration/test_upstream_admission.py
lists every one with its reason). The status of each kind is not compared: capd-py writes it.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
OURS = ROOT / "crds"
VENDORED = ROOT / "tests" / "fixtures" / "upstream" / "crds"
UPSTREAM_DIRS = ("config/crd/bases", "bootstrap/kubeadm/config/crd/bases", "controlplane/kubeadm/config/crd/bases",
                 "test/infrastructure/docker/config/crd/bases")
BOUNDS = [("minLength", "gt"), ("minimum", "gt"), ("minItems", "gt"), ("minProperties", "gt"),
          ("maxLength", "lt"), ("maximum", "lt"), ("maxItems", "lt"), ("maxProperties", "lt")]
S = dict[str, Any]


def _strip(x: Any, props: bool = False) -> Any:
    """Drop the schemas' descriptions (not properties named "description": `props` marks a properties map)."""
    if isinstance(x, dict):
        return {k: _strip(v, k == "properties" and not props) for k, v in x.items() if props or k != "description"}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def schema_of(crd: S, version: str) -> S | None:
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            s = dict(v["schema"]["openAPIV3Schema"])
            s["properties"] = {k: p for k, p in s.get("properties", {}).items() if k != "status"}
            return _strip(s)  # type: ignore[no-any-return]
    return None


def _value_rules(a: S, b: S, ours: S, up: S, path: str) -> list[str]:
    """The bounds, enum, pattern and format by which schema `a` accepts less than `b` (one of them `ours`, the
    other `up`), as "path: what" strings."""
    out: list[str] = []
    for k, how in BOUNDS:
        if k in a and (k not in b or (how == "gt" and a[k] > b[k]) or (how == "lt" and a[k] < b[k])):
            out.append(f"{path}: {k} {ours.get(k)} (upstream {up.get(k)})")
    if "enum" in a and ("enum" not in b or set(b["enum"]) - set(a["enum"])):
        out.append(f"{path}: enum {ours.get('enum')} (upstream {up.get('enum')})")
    for k in ("pattern", "format"):
        if k in a and a[k] != b.get(k):
            out.append(f"{path}: {k} {ours.get(k)!r} (upstream {up.get(k)!r})")
    return out


def _cel_not_in(a: S, b: S) -> list[str]:
    """The CEL rules of schema `a` that `b` lacks (their messages, else the rules)."""
    b_rules = {r["rule"] for r in b.get("x-kubernetes-validations", [])}
    return [r.get("message", r["rule"]) for r in a.get("x-kubernetes-validations", []) if r["rule"] not in b_rules]


def differences(ours: S, up: S, path: str = "") -> list[str]:
    """Every way `ours` is stricter than `up` (two openAPIV3Schemas), as "path: what" strings."""
    out: list[str] = []
    if ours.get("x-kubernetes-preserve-unknown-fields"):
        return out
    both_int_or_string = ours.get("x-kubernetes-int-or-string") and up.get("x-kubernetes-int-or-string")
    if ours.get("type") != up.get("type") and not both_int_or_string:
        out.append(f"{path}: type {ours.get('type')} (upstream {up.get('type')})")
    extra = sorted(set(ours.get("required", [])) - set(up.get("required", [])))
    if extra:
        out.append(f"{path}: requires {extra}")
    if up.get("nullable") and not ours.get("nullable"):
        out.append(f"{path}: not nullable")
    out += _value_rules(ours, up, ours, up, path)
    out += [f"{path}: CEL {m!r}" for m in _cel_not_in(ours, up)]
    props = ours.get("properties")
    extra_props = ours.get("additionalProperties")
    for k, u in (up.get("properties") or {}).items():
        if props is not None and k in props:
            out += differences(props[k], u, f"{path}.{k}")
        elif isinstance(extra_props, dict):
            out += differences(extra_props, u, f"{path}.{k}")
        elif not ours.get("x-kubernetes-preserve-unknown-fields"):
            out.append(f"{path}.{k}: unknown to capd-py")
    if isinstance(up.get("additionalProperties"), dict):
        out += differences(extra_props if isinstance(extra_props, dict) else {}, up["additionalProperties"],
                           f"{path}{{*}}")
    if "items" in up:
        out += differences(ours.get("items") or {}, up["items"], f"{path}[]")
    return out


def laxer(ours: S, up: S, path: str = "") -> list[str]:
    """Every way `ours` accepts what `up` rejects (the mirror of `differences`), as "path: what" strings:
    a required field, bound, enum, pattern, format, list-map key or CEL rule upstream has and capd-py does not,
    or a field capd-py keeps without a schema (x-kubernetes-preserve-unknown-fields) where upstream has one."""
    out: list[str] = []
    if up.get("x-kubernetes-preserve-unknown-fields"):
        return out
    if ours.get("x-kubernetes-preserve-unknown-fields") and not ours.get("properties"):
        return [f"{path}: not validated (preserve-unknown-fields)"] if up.get("properties") or up.get("items") \
            else out
    missing = sorted(set(up.get("required", [])) - set(ours.get("required", [])))
    if missing:
        out.append(f"{path}: does not require {missing}")
    if ours.get("nullable") and not up.get("nullable"):
        out.append(f"{path}: nullable")
    out += _value_rules(up, ours, ours, up, path)
    if up.get("x-kubernetes-list-type") == "map" and ours.get("x-kubernetes-list-map-keys") != \
            up.get("x-kubernetes-list-map-keys"):
        out.append(f"{path}: list-map keys {ours.get('x-kubernetes-list-map-keys')} "
                   f"(upstream {up['x-kubernetes-list-map-keys']})")
    out += [f"{path}: no CEL {m!r}" for m in _cel_not_in(up, ours)]
    props = ours.get("properties") or {}
    extra_props = ours.get("additionalProperties")
    for k, u in (up.get("properties") or {}).items():
        if k in props:
            out += laxer(props[k], u, f"{path}.{k}")
        elif isinstance(extra_props, dict):
            out += laxer(extra_props, u, f"{path}.{k}")
    if isinstance(up.get("additionalProperties"), dict) and isinstance(extra_props, dict):
        out += laxer(extra_props, up["additionalProperties"], f"{path}{{*}}")
    if "items" in up and "items" in ours:
        out += laxer(ours["items"], up["items"], f"{path}[]")
    return out


def hub_version(crd: S) -> str:
    """The version compared: the storage version, v1beta2 (crds/ holds only it; the v1beta1 that `capd-py init`
    adds at install time is upstream's schema plus capd-py's rules, capd_py/kube/conversion_webhook.py)."""
    return str(next(v["name"] for v in crd["spec"]["versions"] if v.get("storage")))


def load(path: Path) -> S:
    return next(d for d in yaml.safe_load_all(path.read_text()) if d)  # type: ignore[no-any-return]


def compare(ours_dir: Path = OURS, vendored: Path = VENDORED, how: Any = None) -> dict[str, list[str]]:
    """file name -> differences (`how`, default `differences`: stricter; or `laxer`), for every capd-py CRD
    whose upstream schema is vendored."""
    how = how or differences
    out: dict[str, list[str]] = {}
    for p in sorted(ours_dir.glob("*.yaml")):
        up_path = vendored / p.name
        if not up_path.exists():
            continue
        crd = load(p)
        ours = schema_of(crd, hub_version(crd))
        assert ours is not None
        out[p.name] = how(ours, load(up_path)["openAPIV3Schema"])
    return out


def vendor(src: str, ref: str, only: str | None = None) -> None:
    """`only`: a file-name glob; those files alone are (re)vendored from `ref`, the others kept (the Dev* kinds
    follow upstream v1.14, the rest release-1.13: docs/dev-kinds.md)."""
    commit = subprocess.check_output(["git", "-C", src, "rev-parse", f"{ref}^{{commit}}"], text=True).strip()
    VENDORED.mkdir(parents=True, exist_ok=True)
    for old in VENDORED.glob(only or "*.yaml"):
        old.unlink()
    for p in sorted(OURS.glob(only or "*.yaml")):
        version = hub_version(load(p))
        for d in UPSTREAM_DIRS:
            try:
                text = subprocess.check_output(["git", "-C", src, "show", f"{commit}:{d}/{p.name}"], text=True,
                                               stderr=subprocess.DEVNULL)
            except subprocess.CalledProcessError:
                continue
            schema = schema_of(load_text(text), version)
            if schema is None:
                break
            header = (f"# Upstream Cluster API {ref} ({commit}): {d}/{p.name}, version {version}: openAPIV3Schema\n"
                      "# without descriptions and status. Generated by hack/compare_upstream_crds.py --vendor. "
                      "Do not edit.\n")
            (VENDORED / p.name).write_text(header + yaml.safe_dump({"openAPIV3Schema": schema}, sort_keys=True,
                                                                   width=120))
            break
    print(f"vendored {len(list(VENDORED.glob('*.yaml')))} upstream schemas into {VENDORED.relative_to(ROOT)}/")


def load_text(text: str) -> S:
    return next(d for d in yaml.safe_load_all(text) if d)  # type: ignore[no-any-return]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--vendor", metavar="DIR", help="a cluster-api git directory to vendor the schemas from")
    ap.add_argument("--ref", default="release-1.13")
    ap.add_argument("--only", metavar="GLOB", help="vendor only these files (e.g. 'infrastructure.cluster.x-k8s.io_dev*'"
                    " from --ref v1.14.0), keeping the others")
    args = ap.parse_args()
    if args.vendor:
        vendor(args.vendor, args.ref, args.only)
        return 0
    for name, diffs in compare().items():
        print(f"{name}: {len(diffs)}")
        for d in diffs:
            print(f"  {d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
