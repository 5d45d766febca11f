"""Upstream clusterctl's provider inventory for a capd-py management cluster (pure: desired objects only).

`clusterctl init` records every provider it installs as a `clusterctl.cluster.x-k8s.io/v1alpha3` Provider object
in the provider's namespace, named by the provider's "manifest label" (`cluster-api`, `bootstrap-kubeadm`,
`control-plane-kubeadm`, `infrastructure-docker`), and labels every component it installs
`clusterctl.cluster.x-k8s.io` + `cluster.x-k8s.io/provider: <manifest label>`. clusterctl's other verbs read
that record: `move` requires the target to hold every provider of the source at the same version or newer and
finds the kinds to move by the CRD label, `upgrade plan` compares the recorded versions with the providers'
repositories. capd-py serves all four providers from one process; `capd-py init` writes the same record so
those verbs work (docs/clusterctl.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capd_py.api import labels
from capd_py.api.gvk import CRD, NAMESPACE, PROVIDER
from capd_py.api.versions import CLUSTER_API_VERSION

CRD_NAME = f"{PROVIDER.plural}.{PROVIDER.group}"

CORE = "CoreProvider"
BOOTSTRAP = "BootstrapProvider"
CONTROL_PLANE = "ControlPlaneProvider"
INFRASTRUCTURE = "InfrastructureProvider"
_TYPE_PREFIX = {CORE: "", BOOTSTRAP: "bootstrap-", CONTROL_PLANE: "control-plane-", INFRASTRUCTURE: "infrastructure-"}


@dataclass(frozen=True)
class ProviderRecord:
    provider_name: str  # clusterctl's provider name: `cluster-api`, `kubeadm`, `docker`
    type: str           # CoreProvider, BootstrapProvider, ...
    namespace: str      # where upstream's components for this provider live by default

    @property
    def manifest_label(self) -> str:
        """The `cluster.x-k8s.io/provider` value and the Provider object's name (upstream's ManifestLabel)."""
        return _TYPE_PREFIX[self.type] + self.provider_name


# The providers capd-py implements, in upstream's default namespaces (clusterctl's config for them).
PROVIDERS: tuple[ProviderRecord, ...] = (
    ProviderRecord("cluster-api", CORE, "capi-system"),
    ProviderRecord("kubeadm", BOOTSTRAP, "capi-kubeadm-bootstrap-system"),
    ProviderRecord("kubeadm", CONTROL_PLANE, "capi-kubeadm-control-plane-system"),
    ProviderRecord("docker", INFRASTRUCTURE, "capd-system"),
)


def inventory_labels(p: ProviderRecord) -> dict[str, str]:
    return {labels.CLUSTERCTL_LABEL: "", labels.PROVIDER_NAME_LABEL: p.manifest_label,
            labels.CLUSTERCTL_CORE_LABEL: labels.CLUSTERCTL_CORE_INVENTORY}


def provider_object(p: ProviderRecord, version: str = CLUSTER_API_VERSION) -> dict[str, Any]:
    return {"apiVersion": PROVIDER.api_version, "kind": PROVIDER.kind,
            "metadata": {"name": p.manifest_label, "namespace": p.namespace, "labels": inventory_labels(p)},
            "providerName": p.provider_name, "type": p.type, "version": version}


def desired_providers(version: str = CLUSTER_API_VERSION) -> list[dict[str, Any]]:
    return [provider_object(p, version) for p in PROVIDERS]


def namespaces() -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": NAMESPACE.kind,
             "metadata": {"name": ns, "labels": {labels.CLUSTERCTL_LABEL: "",
                                                 labels.PROVIDER_NAME_LABEL: p.manifest_label}}}
            for ns, p in {p.namespace: p for p in PROVIDERS}.items()]


def _str(desc: str) -> dict[str, Any]:
    return {"type": "string", "description": desc}


def provider_crd() -> dict[str, Any]:
    """The inventory's CRD with the shape upstream clusterctl reads and writes (Provider, v1alpha3: top-level
    providerName, type, version, watchedNamespace; no spec, no status). clusterctl itself installs it when
    missing; capd-py installs it first so the record exists before any clusterctl runs."""
    schema = {"type": "object", "description": "An entry in upstream clusterctl's provider inventory.",
              "properties": {
                  "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
                  "providerName": _str("The provider's name (e.g. cluster-api, kubeadm, docker)."),
                  "type": _str("CoreProvider, BootstrapProvider, ControlPlaneProvider, InfrastructureProvider, "
                               "IPAMProvider, RuntimeExtensionProvider or AddonProvider."),
                  "version": _str("The provider's components version, e.g. v1.13.6."),
                  "watchedNamespace": _str("Deprecated by upstream: the namespace the provider watches; empty "
                                           "is every namespace.")}}
    columns = [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
               {"name": "Type", "type": "string", "jsonPath": ".type"},
               {"name": "Provider", "type": "string", "jsonPath": ".providerName"},
               {"name": "Version", "type": "string", "jsonPath": ".version"}]
    return {
        "apiVersion": CRD.api_version, "kind": CRD.kind,
        "metadata": {"name": CRD_NAME, "labels": {labels.CLUSTERCTL_CORE_LABEL: labels.CLUSTERCTL_CORE_INVENTORY,
                                                  "app.kubernetes.io/part-of": "capd-py"}},
        "spec": {"group": PROVIDER.group, "scope": "Namespaced",
                 "names": {"kind": PROVIDER.kind, "listKind": f"{PROVIDER.kind}List", "plural": PROVIDER.plural,
                           "singular": PROVIDER.kind.lower(), "categories": ["cluster-api"]},
                 "versions": [{"name": PROVIDER.version, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": schema}, "additionalPrinterColumns": columns}]},
    }

