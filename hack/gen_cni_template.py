#!/usr/bin/env python3
"""Embed the default CNI manifest (capd-netd) in templates/cluster-template.yaml.

The template delivers the CNI as upstream's e2e templates do: a ConfigMap `cni-${CLUSTER_NAME}-crs-0` whose
`resources` key holds the manifest, applied by the ClusterResourceSet `${CLUSTER_NAME}-crs-0`. The manifest is
the one images/build.sh writes into the node image as /kind/manifests/default-cni.yaml: images/netd/
default-cni.yaml.in with @NETD_IMAGE@ = capd-py/netd:<first 12 hex of sha256(images/netd/capd-netd)>.

Run `python hack/gen_cni_template.py` after changing images/netd/*; commit the template.
`--check` exits 1 if the template is stale (a unit test checks the same).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "templates" / "cluster-template.yaml"
NETD = ROOT / "images" / "netd"
# the block scalar under the ConfigMap's `resources: |`, up to the next document
BLOCK = re.compile(r"(?ms)^(  resources: \|\n)(.*?)(?=^---$)")


def netd_image() -> str:
    return "capd-py/netd:" + hashlib.sha256((NETD / "capd-netd").read_bytes()).hexdigest()[:12]


def manifest() -> str:
    return (NETD / "default-cni.yaml.in").read_text().replace("@NETD_IMAGE@", netd_image())


def render(template: str) -> str:
    body = "".join(f"    {line}\n" if line else "\n" for line in manifest().splitlines())
    out, n = BLOCK.subn(lambda m: m.group(1) + body, template, count=1)
    if n != 1:
        raise SystemExit(f"{TEMPLATE}: no ConfigMap with `  resources: |` followed by a `---` document")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the template is stale")
    args = ap.parse_args()
    old = TEMPLATE.read_text()
    new = render(old)
    if args.check:
        if new != old:
            print(f"{TEMPLATE} is stale: run python hack/gen_cni_template.py", file=sys.stderr)
            return 1
        return 0
    if new != old:
        TEMPLATE.write_text(new)
        print(f"updated {TEMPLATE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
