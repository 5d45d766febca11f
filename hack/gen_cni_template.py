#!/usr/bin/env python3
"""Embed the default CNI manifest (capd-netd) in templates/cluster-template.yaml and its flavors.

Every template (templates/cluster-template.yaml and each flavor's cluster-template-<flavor>.yaml) delivers the
CNI as upstream's e2e templates do: a ConfigMap `cni-${CLUSTER_NAME}-crs-0` whose `resources` key holds the
manifest, applied by the ClusterResourceSet `${CLUSTER_NAME}-crs-0`. The manifest is the one images/build.sh
writes into the node image as /kind/manifests/default-cni.yaml: images/netd/default-cni.yaml.in with
@NETD_IMAGE@ = capd-py/netd:<first 12 hex of sha256(images/netd/capd-netd)>.

Run `python hack/gen_cni_template.py` after changing images/netd/*; commit the templates.
`--check` exits 1 if a template is stale (a unit test checks the same).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATES = ROOT / "templates"
TEMPLATE = TEMPLATES / "cluster-template.yaml"
NETD = ROOT / "images" / "netd"
# the block scalar under the ConfigMap's `resources: |`, up to the next document
BLOCK = re.compile(r"(?ms)^(  resources: \|\n)(.*?)(?=^---$)")


def netd_image() -> str:
    return "capd-py/netd:" + hashlib.sha256((NETD / "capd-netd").read_bytes()).hexdigest()[:12]


def manifest() -> str:
    return (NETD / "default-cni.yaml.in").read_text().replace("@NETD_IMAGE@", netd_image())


def templates() -> list[Path]:
    """The default template first, then every flavor (cluster-template-<flavor>.yaml)."""
    return [TEMPLATE, *sorted(TEMPLATES.glob("cluster-template-*.yaml"))]


def render(template: str, path: Path = TEMPLATE) -> str:
    body = "".join(f"    {line}\n" if line else "\n" for line in manifest().splitlines())
    out, n = BLOCK.subn(lambda m: m.group(1) + body, template, count=1)
    if n != 1:
        raise SystemExit(f"{path}: no ConfigMap with `  resources: |` followed by a `---` document")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a template is stale")
    args = ap.parse_args()
    stale = 0
    for path in templates():
        old = path.read_text()
        new = render(old, path)
        if new == old:
            continue
        if args.check:
            print(f"{path} is stale: run python hack/gen_cni_template.py", file=sys.stderr)
            stale = 1
        else:
            path.write_text(new)
            print(f"updated {path}", file=sys.stderr)
    return stale


if __name__ == "__main__":
    sys.exit(main())
