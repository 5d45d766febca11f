"""The workload cluster's add-ons after a KubeadmControlPlane upgrade (upstream: internal/workload_cluster.go
`UpdateKubeProxyImageInfo` and internal/workload_cluster_coredns.go `UpdateCoreDNS`, both called at the end of
a reconcile with nothing else left to do, i.e. once the control plane is rolled out and at its replica count).

Pure: the KCP and the workload's current kube-system/kube-proxy DaemonSet, kube-system/coredns Deployment and
ConfigMap (unstructured dicts, None when missing) in; the JSON merge patch to make out, None when in step.

- kube-proxy: the image tag follows `spec.version` (as an OCI tag: `+` becomes `_`), the repository
  `clusterConfiguration.imageRepository` when set; so kubeadm's `registry.k8s.io/kube-proxy:v1.34.4` becomes
  `registry.k8s.io/kube-proxy:v1.35.4`. A missing DaemonSet / container means kube-proxy is not used: nothing.
- CoreDNS: as upstream, the image changes only through `clusterConfiguration.dns.imageRepository` /
  `dns.imageTag` (or `imageRepository`); `spec.version` alone does not move it. Upstream migrates the Corefile
  with coredns/corefile-migration when the CoreDNS version changes. capd-py does not carry that library: it
  allows the moves for which the migration leaves the Corefile unchanged (same major.minor.patch, or both
  within CoreDNS 1.12.0-1.13.1: kubeadm v1.33-v1.35's defaults, one plugin table in corefile-migration
  v1.0.29 with no rewriting) and reports any other move as an error (annotate the KCP
  `controlplane.cluster.x-k8s.io/skip-coredns` and upgrade CoreDNS by hand then).
- `controlplane.cluster.x-k8s.io/skip-kube-proxy` / `skip-coredns` on the KCP turn either update off.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from capd_py.api import contract

KUBE_SYSTEM = "kube-system"
KUBE_PROXY = "kube-proxy"          # DaemonSet and container name
COREDNS = "coredns"                # Deployment, ConfigMap and container name
COREFILE_KEY = "Corefile"
COREFILE_BACKUP_KEY = "Corefile-backup"
COREDNS_VOLUME = "config-volume"
SKIP_KUBE_PROXY_ANNOTATION = "controlplane.cluster.x-k8s.io/skip-kube-proxy"
SKIP_COREDNS_ANNOTATION = "controlplane.cluster.x-k8s.io/skip-coredns"

# CoreDNS releases between which coredns/corefile-migration (v1.0.29) rewrites nothing: 1.12.0-1.12.4 use
# `plugins_1_12_0`, 1.13.0-1.13.1 `plugins_1_13_0`, the same table, and none has pre/post processing.
# kubeadm v1.33.x uses 1.12.0, v1.34.x 1.12.1, v1.35.x 1.13.1.
COREFILE_UNCHANGED = frozenset({(1, 12, 0), (1, 12, 1), (1, 12, 2), (1, 12, 3), (1, 12, 4), (1, 13, 0), (1, 13, 1)})

_OCI_TAG_DISALLOWED = re.compile(r"[^-a-zA-Z0-9_.]")
_DEFAULT_DOMAIN = "docker.io"
_OLD_COREDNS_NAME = "coredns"
_COREDNS_NAME = "coredns/coredns"


class WorkloadUpgradeError(ValueError):
    """An add-on cannot be brought in step (upstream returns these as reconcile errors)."""


# --- image references (upstream util/container, over github.com/distribution/reference) ------------

def split_image(image: str) -> tuple[str, str, str]:
    """(name, tag, digest) of `name[:tag][@digest]`; a `:` in the registry part (a port) is not a tag."""
    name, _, digest = image.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    tag = ""
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
    return name, tag, digest


def normalized_name(name: str) -> str:
    """Docker's normalised form: a name without a registry is on docker.io, a single path under library/."""
    first, sep, rest = name.partition("/")
    if not sep or ("." not in first and ":" not in first and first != "localhost"):
        domain, rest = _DEFAULT_DOMAIN, name
    else:
        domain = "docker.io" if first == "index.docker.io" else first
    if domain == _DEFAULT_DOMAIN and "/" not in rest:
        rest = f"library/{rest}"
    return f"{domain}/{rest}"


def familiar_name(name: str) -> str:
    """The short form docker prints (`kube-proxy` for docker.io/library/kube-proxy)."""
    if name.startswith(_DEFAULT_DOMAIN + "/"):
        rest = name[len(_DEFAULT_DOMAIN) + 1:]
        if rest.startswith("library/") and rest.count("/") == 1:
            rest = rest[len("library/"):]
        return rest
    return name


def oci_tag(version: str) -> str:
    """A Kubernetes version as an image tag (upstream SemverToOCIImageTag: `+` and the like become `_`)."""
    return _OCI_TAG_DISALLOWED.sub("_", version)


def with_tag(image: str, tag: str) -> str:
    """upstream ModifyImageTag: the normalised name with a new tag; a digest-pinned image cannot be retagged."""
    name, _, digest = split_image(image)
    if digest:
        raise WorkloadUpgradeError(f"image {image} uses a digest as version, cannot update its tag")
    if not name:
        raise WorkloadUpgradeError(f"cannot parse image name {image!r}")
    return f"{normalized_name(name)}:{oci_tag(tag)}"


def with_repository(image: str, repository: str) -> str:
    """upstream ModifyImageRepository: the image's last path element under `repository`, same tag."""
    name, tag, _ = split_image(image)
    if not tag:
        raise WorkloadUpgradeError(f"image {image} must be tagged")
    last = name.rpartition("/")[2]
    return f"{familiar_name(repository.strip('/') + '/' + last)}:{tag}"


def _parse_tag(tag: str) -> tuple[int, int, int]:
    """major.minor.patch of an image tag (upstream ParseTolerantImageTag: `_` read as `+`, `v` optional,
    missing minor / patch are 0)."""
    s = tag.replace("_", "+").strip()
    s = s[1:] if s[:1] in ("v", "V") else s
    core = re.split(r"[-+]", s, maxsplit=1)[0]
    parts = core.split(".")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise WorkloadUpgradeError(f"error parsing semver from {tag!r}")
    nums = [int(p) for p in parts] + [0] * (3 - len(parts))
    return nums[0], nums[1], nums[2]


# --- the KCP ------------------------------------------------------------------------------------

def _annotated(kcp: dict[str, Any], key: str) -> bool:
    return key in (contract.dig(kcp, "metadata", "annotations") or {})


def skip_kube_proxy(kcp: dict[str, Any]) -> bool:
    return _annotated(kcp, SKIP_KUBE_PROXY_ANNOTATION)


def skip_coredns(kcp: dict[str, Any]) -> bool:
    return _annotated(kcp, SKIP_COREDNS_ANNOTATION)


def _cluster_configuration(kcp: dict[str, Any]) -> dict[str, Any]:
    return contract.dig(kcp, "spec", "kubeadmConfigSpec", "clusterConfiguration", default={}) or {}


def image_repository(kcp: dict[str, Any]) -> str:
    """upstream ImageRepositoryFromClusterConfig: the explicit imageRepository, else "" (keep the current one)."""
    return str(_cluster_configuration(kcp).get("imageRepository") or "")


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(contract.dig(obj, "spec", "template", "spec", "containers", default=[]) or [])


def _find(containers: list[dict[str, Any]], name: str) -> dict[str, Any] | None:
    return next((c for c in containers if c.get("name") == name), None)


def _containers_patch(obj: dict[str, Any], container: str, image: str,
                      pod_spec_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A merge patch setting `image` on every container named `container` (a merge patch replaces the
    whole list, so it carries all of them), optimistic on resourceVersion."""
    containers = []
    for c in _containers(obj):
        c = copy.deepcopy(c)
        if c.get("name") == container:
            c["image"] = image
        containers.append(c)
    pod_spec: dict[str, Any] = {"containers": containers, **(pod_spec_extra or {})}
    return {"metadata": {"resourceVersion": obj["metadata"]["resourceVersion"]},
            "spec": {"template": {"spec": pod_spec}}}


# --- kube-proxy ---------------------------------------------------------------------------------

def kube_proxy_image(current: str, version: str, repository: str = "") -> str:
    """The kube-proxy image for `version`: the current image retagged, moved to `repository` when set."""
    image = with_tag(current, version)
    if repository:
        image = with_repository(image, repository)
    return image


def kube_proxy_patch(kcp: dict[str, Any], daemonset: dict[str, Any] | None) -> dict[str, Any] | None:
    """The merge patch for kube-system/kube-proxy bringing its image to `spec.version`, None when it is in
    step, the DaemonSet (or its kube-proxy container) does not exist, or the KCP says skip-kube-proxy."""
    version = str(contract.dig(kcp, "spec", "version") or "")
    if skip_kube_proxy(kcp) or daemonset is None or not version:
        return None
    container = _find(_containers(daemonset), KUBE_PROXY)
    if container is None:
        return None
    current = str(container.get("image") or "")
    want = kube_proxy_image(current, version, image_repository(kcp))
    if want == current:
        return None
    return _containers_patch(daemonset, KUBE_PROXY, want)


# --- CoreDNS ------------------------------------------------------------------------------------

def coredns_image(kcp: dict[str, Any], current: str) -> str:
    """The CoreDNS image the KCP asks for (upstream getCoreDNSInfo): the current one with the repository of
    `dns.imageRepository` / `imageRepository` and the tag of `dns.imageTag` when set; the old
    `<registry>/coredns` name becomes `coredns/coredns` from CoreDNS 1.8.0 on (k8s.gcr.io, registry.k8s.io)."""
    cc = _cluster_configuration(kcp)
    dns = cc.get("dns") or {}
    name, tag, _ = split_image(current)
    repository, _, short = name.rpartition("/")
    if not tag:
        raise WorkloadUpgradeError(f"failed to update coredns deployment: does not have a valid image tag: "
                                   f"{current!r}")
    _parse_tag(tag)
    if cc.get("imageRepository"):
        repository = str(cc["imageRepository"]).rstrip("/")
    if dns.get("imageRepository"):
        repository = str(dns["imageRepository"]).rstrip("/")
    to_tag = str(dns.get("imageTag") or tag)
    target = _parse_tag(to_tag)
    if repository in ("k8s.gcr.io", "registry.k8s.io") and short == _OLD_COREDNS_NAME and target >= (1, 8, 0):
        short = _COREDNS_NAME
    return f"{repository}/{short}:{to_tag}"


def check_coredns_move(from_tag: str, to_tag: str) -> None:
    """upstream validateCoreDNSImageTag (no downgrade), plus capd-py's limit: only moves for which the
    Corefile migration changes nothing (see `COREFILE_UNCHANGED`)."""
    cur, want = _parse_tag(from_tag), _parse_tag(to_tag)
    if cur > want:
        raise WorkloadUpgradeError(f"toVersion {to_tag!r} must be greater than or equal to fromVersion {from_tag!r}")
    if cur != want and not (cur in COREFILE_UNCHANGED and want in COREFILE_UNCHANGED):
        raise WorkloadUpgradeError(
            f"capd-py cannot migrate the CoreDNS Corefile from {from_tag} to {to_tag} (it only moves between "
            "versions that keep the Corefile as it is: CoreDNS 1.12.0 to 1.13.1); annotate the "
            f"KubeadmControlPlane {SKIP_COREDNS_ANNOTATION} and upgrade CoreDNS yourself")


def coredns_patch(kcp: dict[str, Any], deployment: dict[str, Any] | None,
                  config_map: dict[str, Any] | None) -> dict[str, Any] | None:
    """The merge patch for the kube-system/coredns Deployment (image, and its config volume back on the
    `Corefile` key), None when the image is what the KCP asks for, CoreDNS is not there (no Deployment or
    no ConfigMap), the KCP has no clusterConfiguration, or it says skip-coredns.
    Raises WorkloadUpgradeError when the move is not possible (as upstream's reconcile errors)."""
    if skip_coredns(kcp) or not _cluster_configuration(kcp) or deployment is None or config_map is None:
        return None
    if COREFILE_KEY not in (config_map.get("data") or {}):
        raise WorkloadUpgradeError("unable to find the CoreDNS Corefile data")
    container = _find(_containers(deployment), COREDNS)
    if container is None:
        raise WorkloadUpgradeError(f"failed to update coredns deployment: deployment spec has no {COREDNS!r} "
                                   "container")
    current = str(container.get("image") or "")
    want = coredns_image(kcp, current)
    if want == current:
        return None
    check_coredns_move(split_image(current)[1], split_image(want)[1])
    extra: dict[str, Any] = {}
    volumes = copy.deepcopy(contract.dig(deployment, "spec", "template", "spec", "volumes", default=[]) or [])
    flipped = False
    for v in volumes:
        cm = v.get("configMap") or {}
        if v.get("name") == COREDNS_VOLUME and cm.get("name") == COREDNS:
            for item in cm.get("items") or []:
                if item.get("key") == COREFILE_BACKUP_KEY:
                    item["key"] = COREFILE_KEY
                    flipped = True
    if flipped:
        extra["volumes"] = volumes
    return _containers_patch(deployment, COREDNS, want, extra)
