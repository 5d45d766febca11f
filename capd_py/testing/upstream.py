"""Upstream's own e2e flavors for the e2e tier: rendered by upstream clusterctl (`generate cluster --from`) with
the values of upstream's test/e2e/config/docker.yaml (release-1.13), the CNI swapped for capd-netd's manifest
(upstream's kindnet image would be pulled; capd-netd's is preloaded in the node image)."""

from __future__ import annotations

import json
from pathlib import Path

from capd_py.api import kubeyaml
from capd_py.testing.e2e import K8S_VERSION, run

REPO = Path(__file__).resolve().parents[2]
UPSTREAM = REPO / "tests" / "fixtures" / "upstream"
# test/e2e/config/docker.yaml (release-1.13)
POD_CIDR, SERVICE_CIDR = "192.168.0.0/16", "10.128.0.0/12"
POD_CIDR6, SERVICE_CIDR6 = "fd00:100:96::/48", "fd00:100:64::/108"


def capd_netd_manifest() -> str:
    """The CNI manifest capd-py's default template delivers through its ClusterResourceSet."""
    docs = kubeyaml.load_all((REPO / "templates" / "cluster-template.yaml").read_text())
    cm = next(d for d in docs if d and d.get("kind") == "ConfigMap")
    return str(cm["data"]["resources"])


def render_env(tmp: Path, namespace: str = "default") -> dict[str, str]:
    return {"CLUSTERCTL_DISABLE_VERSIONCHECK": "true", "XDG_CONFIG_HOME": str(tmp / "xdg"), "NAMESPACE": namespace,
            "DOCKER_SERVICE_DOMAIN": "cluster.local", "DOCKER_SERVICE_CIDRS": SERVICE_CIDR,
            "DOCKER_POD_CIDRS": POD_CIDR, "DOCKER_SERVICE_IPV6_CIDRS": SERVICE_CIDR6,
            "DOCKER_POD_IPV6_CIDRS": POD_CIDR6,
            # as upstream's e2e framework fills it: the ConfigMap's data, {"resources": <the manifest>}, as JSON
            "CNI_RESOURCES": json.dumps({"resources": capd_netd_manifest()})}


def render(clusterctl: str, template: str, name: str, tmp: Path, workers: int, control_planes: int = 1,
           namespace: str = "default") -> Path:
    """tests/fixtures/upstream/`template` rendered for cluster `name`; the manifest's path."""
    manifest = run([clusterctl, "generate", "cluster", name, "--from", str(UPSTREAM / template),
                    "--target-namespace", namespace, "--kubernetes-version", K8S_VERSION,
                    "--control-plane-machine-count", str(control_planes), "--worker-machine-count", str(workers)],
                   env=render_env(tmp, namespace), timeout=120).stdout
    assert "${" not in manifest, manifest
    (path := tmp / f"{name}.yaml").write_text(manifest)
    return path
