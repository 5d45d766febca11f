"""The workload's kube-proxy DaemonSet and CoreDNS Deployment after a KCP version change (upstream
UpdateKubeProxyImageInfo / UpdateCoreDNS): the merge patches, None when in step."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from capd_py.reconcile.kcp import workload_upgrade as wu

try:
    from kcp_fixtures import kcp
except ImportError:  # pragma: no cover - when run as a package
    from .kcp_fixtures import kcp  # type: ignore[no-redef]

pytestmark = pytest.mark.unit


def daemonset(image: str = "registry.k8s.io/kube-proxy:v1.34.4") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "kube-proxy", "namespace": "kube-system", "resourceVersion": "11"},
            "spec": {"template": {"spec": {"containers": [
                {"name": "kube-proxy", "image": image, "command": ["/usr/local/bin/kube-proxy"]},
                {"name": "sidecar", "image": "example.com/sidecar:1"}]}}}}


def deployment(image: str = "registry.k8s.io/coredns/coredns:v1.12.1", key: str = "Corefile") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "coredns", "namespace": "kube-system", "resourceVersion": "12"},
            "spec": {"template": {"spec": {
                "containers": [{"name": "coredns", "image": image, "args": ["-conf", "/etc/coredns/Corefile"]}],
                "volumes": [{"name": "config-volume",
                             "configMap": {"name": "coredns", "items": [{"key": key, "path": "Corefile"}]}}]}}}}


COREFILE_CM: dict[str, Any] = {"metadata": {"name": "coredns"}, "data": {"Corefile": ".:53 {\n    errors\n}\n"}}


def annotated(k: dict[str, Any], key: str) -> dict[str, Any]:
    k = copy.deepcopy(k)
    k["metadata"]["annotations"] = {key: ""}
    return k


def dns(**dns_: str) -> dict[str, Any]:
    return kcp(kubeadmConfigSpec={"clusterConfiguration": {"dns": dns_}})


def containers(patch: dict[str, Any]) -> dict[str, str]:
    return {c["name"]: c["image"] for c in patch["spec"]["template"]["spec"]["containers"]}


# --- kube-proxy ---------------------------------------------------------------------------------

def test_kube_proxy_follows_the_version() -> None:
    ds = daemonset()
    assert wu.kube_proxy_patch(kcp(version="v1.34.4"), ds) is None  # in step: nothing to write
    patch = wu.kube_proxy_patch(kcp(version="v1.35.4"), ds)
    assert patch is not None
    assert patch["metadata"] == {"resourceVersion": "11"}  # optimistic: a concurrent change is a conflict
    # a merge patch replaces the whole list: every container is in it, only kube-proxy's image changed
    assert containers(patch) == {"kube-proxy": "registry.k8s.io/kube-proxy:v1.35.4",
                                 "sidecar": "example.com/sidecar:1"}
    assert patch["spec"]["template"]["spec"]["containers"][0]["command"] == ["/usr/local/bin/kube-proxy"]
    assert ds["spec"]["template"]["spec"]["containers"][0]["image"].endswith("v1.34.4")  # input untouched


def test_kube_proxy_image_repository_and_tags() -> None:
    k = kcp(version="v1.35.4", kubeadmConfigSpec={"clusterConfiguration": {"imageRepository": "mirror.example/k8s/"}})
    patch = wu.kube_proxy_patch(k, daemonset())
    assert patch is not None and containers(patch)["kube-proxy"] == "mirror.example/k8s/kube-proxy:v1.35.4"
    # in step once moved: the repository alone does not cause another write
    assert wu.kube_proxy_patch(k, daemonset("mirror.example/k8s/kube-proxy:v1.35.4")) is None
    # `+` is not allowed in an image tag (upstream SemverToOCIImageTag)
    assert wu.kube_proxy_image("registry.k8s.io/kube-proxy:v1.34.4", "v1.35.0+capd") == \
        "registry.k8s.io/kube-proxy:v1.35.0_capd"
    # a registry with a port; a docker hub name is normalised (as upstream's reference.ParseNormalizedNamed)
    assert wu.kube_proxy_image("localhost:5000/kube-proxy:v1", "v1.35.4") == "localhost:5000/kube-proxy:v1.35.4"
    assert wu.kube_proxy_image("kube-proxy:v1", "v1.35.4") == "docker.io/library/kube-proxy:v1.35.4"
    assert wu.kube_proxy_image("kube-proxy:v1", "v1.35.4", "docker.io/library") == "kube-proxy:v1.35.4"
    with pytest.raises(wu.WorkloadUpgradeError, match="digest"):
        wu.kube_proxy_patch(kcp(version="v1.35.4"), daemonset("registry.k8s.io/kube-proxy@sha256:abc"))


def test_kube_proxy_missing_or_skipped_is_not_an_error() -> None:
    assert wu.kube_proxy_patch(kcp(version="v1.35.4"), None) is None  # no kube-proxy DaemonSet (e.g. Cilium)
    other = daemonset()
    other["spec"]["template"]["spec"]["containers"] = [{"name": "something-else", "image": "x:1"}]
    assert wu.kube_proxy_patch(kcp(version="v1.35.4"), other) is None
    skip = annotated(kcp(version="v1.35.4"), wu.SKIP_KUBE_PROXY_ANNOTATION)
    assert wu.skip_kube_proxy(skip) and wu.kube_proxy_patch(skip, daemonset()) is None


# --- CoreDNS ------------------------------------------------------------------------------------

def test_coredns_moves_only_with_the_dns_settings_as_upstream() -> None:
    # kubeadm v1.34.4 installs CoreDNS v1.12.1, v1.35.4 expects v1.13.1; upstream moves CoreDNS only when
    # clusterConfiguration.dns says so, never because spec.version changed
    assert wu.coredns_patch(kcp(version="v1.35.4"), deployment(), COREFILE_CM) is None
    assert wu.coredns_patch(kcp(version="v1.35.4", kubeadmConfigSpec={}), deployment(), COREFILE_CM) is None
    k = dns(imageTag="v1.13.1")
    patch = wu.coredns_patch(k, deployment(), COREFILE_CM)
    assert patch is not None and patch["metadata"] == {"resourceVersion": "12"}
    assert containers(patch) == {"coredns": "registry.k8s.io/coredns/coredns:v1.13.1"}
    assert "volumes" not in patch["spec"]["template"]["spec"]  # the volume already reads the Corefile
    assert wu.coredns_patch(k, deployment("registry.k8s.io/coredns/coredns:v1.13.1"), COREFILE_CM) is None


def test_coredns_image_repository() -> None:
    k = kcp(kubeadmConfigSpec={"clusterConfiguration": {"imageRepository": "mirror.example/k8s"}})
    assert wu.coredns_image(k, "registry.k8s.io/coredns/coredns:v1.12.1") == "mirror.example/k8s/coredns:v1.12.1"
    # dns.imageRepository wins over imageRepository
    k = kcp(kubeadmConfigSpec={"clusterConfiguration": {"imageRepository": "mirror.example/k8s",
                                                        "dns": {"imageRepository": "dns.example/"}}})
    assert wu.coredns_image(k, "registry.k8s.io/coredns/coredns:v1.12.1") == "dns.example/coredns:v1.12.1"
    # the old image name becomes coredns/coredns on registry.k8s.io from CoreDNS 1.8.0 on
    assert wu.coredns_image(dns(imageTag="v1.12.1"), "registry.k8s.io/coredns:1.7.0") == \
        "registry.k8s.io/coredns/coredns:v1.12.1"


def test_coredns_volume_back_on_the_corefile_key() -> None:
    patch = wu.coredns_patch(dns(imageTag="v1.13.1"), deployment(key="Corefile-backup"), COREFILE_CM)
    assert patch is not None
    [vol] = patch["spec"]["template"]["spec"]["volumes"]
    assert vol["configMap"]["items"] == [{"key": "Corefile", "path": "Corefile"}]


def test_coredns_missing_or_skipped_is_not_an_error() -> None:
    k = dns(imageTag="v1.13.1")
    assert wu.coredns_patch(k, None, COREFILE_CM) is None
    assert wu.coredns_patch(k, deployment(), None) is None
    skip = annotated(k, wu.SKIP_COREDNS_ANNOTATION)
    assert wu.skip_coredns(skip) and wu.coredns_patch(skip, deployment(), COREFILE_CM) is None


def test_coredns_moves_that_cannot_be_made() -> None:
    with pytest.raises(wu.WorkloadUpgradeError, match="greater than or equal"):
        wu.coredns_patch(dns(imageTag="v1.12.0"), deployment("registry.k8s.io/coredns/coredns:v1.13.1"), COREFILE_CM)
    # outside the versions whose Corefile needs no migration: reported, the skip annotation is the way out
    with pytest.raises(wu.WorkloadUpgradeError, match="skip-coredns"):
        wu.coredns_patch(dns(imageTag="v1.12.1"), deployment("registry.k8s.io/coredns/coredns:v1.11.3"), COREFILE_CM)
    with pytest.raises(wu.WorkloadUpgradeError, match="Corefile"):
        wu.coredns_patch(dns(imageTag="v1.13.1"), deployment(), {"metadata": {"name": "coredns"}, "data": {}})
    no_container = deployment()
    no_container["spec"]["template"]["spec"]["containers"] = []
    with pytest.raises(wu.WorkloadUpgradeError, match="no 'coredns' container"):
        wu.coredns_patch(dns(imageTag="v1.13.1"), no_container, COREFILE_CM)
    with pytest.raises(wu.WorkloadUpgradeError, match="valid image tag"):
        wu.coredns_patch(dns(imageTag="v1.13.1"), deployment("registry.k8s.io/coredns/coredns"), COREFILE_CM)
    with pytest.raises(wu.WorkloadUpgradeError, match="semver"):
        wu.coredns_patch(dns(imageTag="latest"), deployment(), COREFILE_CM)
    # same major.minor.patch (e.g. a registry move with a build suffix): no Corefile migration involved
    wu.check_coredns_move("v1.11.3", "v1.11.3_custom")
    wu.check_coredns_move("v1.12.0", "v1.13.1")


def test_image_reference_helpers() -> None:
    assert wu.split_image("localhost:5000/a/b:v1@sha256:x") == ("localhost:5000/a/b", "v1", "sha256:x")
    assert wu.split_image("localhost:5000/a/b") == ("localhost:5000/a/b", "", "")
    assert wu.normalized_name("busybox") == "docker.io/library/busybox"
    assert wu.normalized_name("org/app") == "docker.io/org/app"
    assert wu.normalized_name("registry.k8s.io/kube-proxy") == "registry.k8s.io/kube-proxy"
    assert wu.familiar_name("docker.io/library/busybox") == "busybox"
    assert wu.familiar_name("docker.io/org/app") == "org/app"
    assert wu.oci_tag("v1.35.0-rc.1+abc") == "v1.35.0-rc.1_abc"
