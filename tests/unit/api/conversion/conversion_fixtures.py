"""Objects for the conversion tests: upstream's templates (both versions), capd-py's own, and a fully
populated object of every kind (status included) as the controllers write them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from capd_py.api.conversion import CONVERTIBLE_KINDS
from capd_py.testing import envsubst

ROOT = Path(__file__).resolve().parents[4]
UPSTREAM = ROOT / "tests" / "fixtures" / "upstream"
Obj = dict[str, Any]

# Values for clusterctl-style variables (upstream's test/e2e/config/docker.yaml where it has one).
VARIABLES = {
    "CLUSTER_NAME": "conv", "NAMESPACE": "default", "KUBERNETES_VERSION": "v1.34.4",
    "CONTROL_PLANE_MACHINE_COUNT": "3", "WORKER_MACHINE_COUNT": "2", "DOCKER_SERVICE_DOMAIN": "cluster.local",
    "IP_FAMILY": "dual", "DOCKER_SERVICE_CIDRS": "10.128.0.0/12", "DOCKER_POD_CIDRS": "192.168.0.0/16",
    "DOCKER_SERVICE_IPV6_CIDRS": "fd00:100:64::/108", "DOCKER_POD_IPV6_CIDRS": "fd00:100:96::/48",
    "DOCKER_PRELOAD_IMAGES": "[kindest/kindnetd:v20250214-acbabc1a]",
    "CNI_RESOURCES": '{"resources": "apiVersion: v1\\nkind: List\\nitems: []\\n"}',
    "SERVER": "https://127.0.0.1:6443", "TOKEN": "abcdef.0123456789abcdef", "CLUSTER_CLASS_NAMESPACE": "default",
}
def load(path: Path) -> list[Obj]:
    """clusterctl-style substitution; unknown variables without a default become empty."""
    return envsubst.documents(path, VARIABLES, strict=False)


def upstream_v1beta1_files() -> list[Path]:
    """v1beta1 manifests: upstream v1.10.10's CAPD templates (vendored under upstream/v1beta1/), release-1.13's
    runtime-SDK v1beta1 e2e flavors, and Dev* objects of the docker backend written from upstream's v1beta1 types."""
    return (sorted((UPSTREAM / "v1beta1").glob("*.yaml")) + sorted(UPSTREAM.glob("*runtimesdk-v1beta1.yaml"))
            + [ROOT / "tests" / "fixtures" / "conversion" / "dev-v1beta1.yaml"])


def v1beta2_files() -> list[Path]:
    """v1beta2 manifests: upstream release-1.13's and v1.14.0's templates, capd-py's test fixtures and its own
    templates."""
    return (sorted(UPSTREAM.glob("*.yaml")) + sorted((ROOT / "tests" / "fixtures" / "upstream-v1.14").glob("*.yaml"))
            + sorted((ROOT / "tests" / "fixtures").glob("*.yaml"))
            + sorted((ROOT / "templates").glob("cluster-template*.yaml")))


def objects(files: list[Path], version: str) -> list[tuple[str, Obj]]:
    """(test id, object) for every object of `version` of a kind capd-py converts (upstream v1.14 serves
    DevMachinePool(Template) at v1beta2 only)."""
    out = []
    for path in files:
        for i, obj in enumerate(load(path)):
            group, _, obj_version = obj["apiVersion"].rpartition("/")
            if obj_version == version and (group, obj["kind"]) in CONVERTIBLE_KINDS:
                out.append((f"{path.stem}#{i}-{obj['kind']}", obj))
    return out
