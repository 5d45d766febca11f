"""capd-py's four providers as upstream clusterctl installs providers (pure: documents in, documents out).

`clusterctl init` reads, for each provider, a components YAML and a `metadata.yaml` from a repository
(`{base}/{manifest label}/{version}/`), substitutes clusterctl variables (`${VAR:=default}`), applies image overrides,
moves every namespaced object into the provider's one Namespace (the single `Namespace` document of the file; more
than one is refused), labels every object `clusterctl.cluster.x-k8s.io: ""` + `cluster.x-k8s.io/provider: <manifest
label>`, and records a `Provider` in that namespace (upstream cmd/clusterctl/client/repository/components.go).

capd-py serves the four providers from one process, so one provider carries the process: the infrastructure
provider, as upstream's e2e framework expects of the Docker provider (its in-memory dialer port-forwards to the one
pod labelled `control-plane: controller-manager` in capd-system, where the in-memory clusters' API servers are):

- core `cluster-api`, capi-system: its CRDs (Cluster, Machine*, ClusterClass, ...);
- bootstrap `kubeadm`, capi-kubeadm-bootstrap-system: its CRDs (KubeadmConfig, KubeadmConfigTemplate);
- control-plane `kubeadm`, capi-kubeadm-control-plane-system: its CRDs (KubeadmControlPlane(Template));
- infrastructure `docker`, capd-system: the controllers manifest (`kube/manifests/controllers.yaml`: ServiceAccount,
  RBAC, the webhook Service, the Deployment, moved from capd-py-system into capd-system, one replica as upstream
  CAPD's), its CRDs (Docker*, Dev*), the admission webhook configurations.

Without the infrastructure provider no controller runs: `clusterctl delete --infrastructure docker` stops the other
three providers' controllers too (docs/clusterctl.md). A CRD belongs to the provider its `cluster.x-k8s.io/provider`
label names (hack/gen_crds.py writes it). clusterctl points every CRD's conversion Service at its own provider's
namespace; the controllers point them back at theirs (kube/conversion_webhook.py). The webhooks' CA is made by the
controllers at start (reconcile/servingcert.py) and written into the CRDs' and the webhook configurations'
`caBundle` by them, so the components carry none: no cert-manager `Certificate` and no
`cert-manager.io/inject-ca-from` annotation anywhere.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from capd_py.api import features
from capd_py.api.labels import PROVIDER_NAME_LABEL
from capd_py.api.versions import parse
from capd_py.reconcile import inventory

Obj = dict[str, Any]

# clusterctl's file names for a provider's components (any name works with a file:// URL; these are upstream's)
COMPONENTS_FILE: Mapping[str, str] = {
    inventory.CORE: "core-components.yaml", inventory.BOOTSTRAP: "bootstrap-components.yaml",
    inventory.CONTROL_PLANE: "control-plane-components.yaml",
    inventory.INFRASTRUCTURE: "infrastructure-components.yaml"}
METADATA_FILE = "metadata.yaml"
CONFIG_FILE = "clusterctl.yaml"
CONTRACT = "v1beta2"
# the controllers manifest's namespace (`capd-py init --in-cluster`), and where the components put it instead
CONTROLLERS_NAMESPACE = "capd-py-system"
CARRIER = inventory.INFRASTRUCTURE
# the label upstream's e2e framework finds the Docker provider's pod by (test/framework/cluster_proxy.go)
POD_LABELS: Mapping[str, str] = {"control-plane": "controller-manager"}

# The controllers manifest's placeholders, as clusterctl variables (names and defaults: capd-py's environment
# variables for the same settings; the feature gates as upstream's core components spell them).
VARIABLES: Mapping[str, str] = {
    "@PRIVILEGED_MODE@": "${CAPD_PY_PRIVILEGED_MODE:=privileged}",
    "@NETWORK@": "${CAPD_PY_NETWORK:=capd-py}",
    # upstream CAPD's variable (its manager's DOCKER_NETWORK), spelled as upstream: clusterctl counts an empty default
    # as none and would refuse `init` without the variable
    "@DOCKER_NETWORK@": '${CAPD_DOCKER_NETWORK:=""}',
}


def feature_gates_variables() -> str:
    """The controllers' feature gates from clusterctl's variables, each defaulting to capd-py's default
    (`MachinePool=${EXP_MACHINE_POOL:=true},ClusterTopology=${CLUSTER_TOPOLOGY:=true},...`): what `clusterctl init`
    with EXP_* / CLUSTER_TOPOLOGY set turns on, as for upstream's core provider."""
    return ",".join(f"{gate}=${{{var}:={'true' if features.DEFAULTS[gate] else 'false'}}}"
                    for var, gate in features.INIT_VARIABLES.items())


def network_pool_variable(default: str) -> str:
    return f"${{CAPD_PY_NETWORK_POOL:={default}}}"


@dataclass(frozen=True)
class ProviderComponents:
    provider: inventory.ProviderRecord
    namespace: str
    documents: tuple[Obj, ...]

    @property
    def file_name(self) -> str:
        return COMPONENTS_FILE[self.provider.type]

    def crds(self) -> list[Obj]:
        return [d for d in self.documents if d.get("kind") == "CustomResourceDefinition"]


def _namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def without_ca_bundle(doc: Obj) -> Obj:
    """A CRD or webhook configuration whose `caBundle`s are dropped: the controllers write the CA they make."""
    out = copy.deepcopy(doc)
    client = (((out.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig")
    for c in [client, *(h.get("clientConfig") for h in out.get("webhooks") or [])]:
        if isinstance(c, dict):
            c.pop("caBundle", None)
    return out


def in_namespace(docs: Sequence[Obj], old: str, new: str) -> list[Obj]:
    """Copies of `docs` with namespace `old` replaced by `new` wherever it names where something lives: the
    Namespace document, namespaced objects, RoleBinding / ClusterRoleBinding subjects, and the Service references
    of CRD conversion and admission webhooks (what clusterctl's target-namespace rewrite touches)."""
    out = []
    for doc in docs:
        d = copy.deepcopy(doc)
        meta = d.setdefault("metadata", {})
        if d.get("kind") == "Namespace" and meta.get("name") == old:
            meta["name"] = new
        if meta.get("namespace") == old:
            meta["namespace"] = new
        for subject in d.get("subjects") or []:
            if subject.get("namespace") == old:
                subject["namespace"] = new
        clients = [h.get("clientConfig") for h in d.get("webhooks") or []]
        clients.append((((d.get("spec") or {}).get("conversion") or {}).get("webhook") or {}).get("clientConfig"))
        for c in clients:
            service = (c or {}).get("service")
            if isinstance(service, dict) and service.get("namespace") == old:
                service["namespace"] = new
        out.append(d)
    return out


def _one_replica(docs: list[Obj]) -> list[Obj]:
    """The controllers Deployment at one replica with POD_LABELS on its pods (upstream CAPD's shape)."""
    for d in docs:
        if d.get("kind") == "Deployment":
            spec = d.setdefault("spec", {})
            spec["replicas"] = 1
            labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels.update(POD_LABELS)
    return docs


def split(crds: Iterable[Obj], controllers: Sequence[Obj], admission: Sequence[Obj]) -> list[ProviderComponents]:
    """The four providers' components, in inventory.PROVIDERS order. `controllers`: the controllers manifest's
    documents (exactly one Namespace, CONTROLLERS_NAMESPACE); `admission`: the webhook configurations; `crds`: every
    capd-py CRD (serving v1beta1 through the webhook). Everything of the controllers' moves into the carrier's
    namespace. ValueError for a CRD no provider claims."""
    by_label: dict[str, list[Obj]] = {p.manifest_label: [] for p in inventory.PROVIDERS}
    for crd in crds:
        label = ((crd.get("metadata") or {}).get("labels") or {}).get(PROVIDER_NAME_LABEL, "")
        if label not in by_label:
            raise ValueError(f"CRD {crd['metadata']['name']}: {PROVIDER_NAME_LABEL}={label!r} names no capd-py "
                             f"provider ({', '.join(by_label)})")
        by_label[label].append(without_ca_bundle(crd))
    namespaces = [d for d in controllers if d.get("kind") == "Namespace"]
    if [n["metadata"]["name"] for n in namespaces] != [CONTROLLERS_NAMESPACE]:
        raise ValueError(f"the controllers manifest must hold one Namespace, {CONTROLLERS_NAMESPACE}")
    carrier = carrier_namespace()
    out = []
    for p in inventory.PROVIDERS:
        own = in_namespace(sorted(by_label[p.manifest_label], key=lambda c: str(c["metadata"]["name"])),
                           CONTROLLERS_NAMESPACE, carrier)
        if p.type == CARRIER:
            process = _one_replica(in_namespace(controllers, CONTROLLERS_NAMESPACE, carrier))
            docs = [*process, *own, *in_namespace([without_ca_bundle(a) for a in admission], CONTROLLERS_NAMESPACE,
                                                  carrier)]
        else:
            docs = [_namespace(p.namespace), *own]
        out.append(ProviderComponents(p, p.namespace, tuple(docs)))
    return out


def carrier_namespace() -> str:
    """The namespace of the provider whose components carry the controllers (capd-system)."""
    return next(p.namespace for p in inventory.PROVIDERS if p.type == CARRIER)


def metadata(version: str) -> Obj:
    """clusterctl's metadata.yaml: the release series of `version` and the contract it implements."""
    v = parse(version)
    return {"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Metadata",
            "releaseSeries": [{"major": v.major, "minor": v.minor, "contract": CONTRACT}]}


def components_path(base: str, p: inventory.ProviderRecord, version: str) -> str:
    """Where a provider's components file lives under the repository's base directory (POSIX path)."""
    return f"{base.rstrip('/')}/{p.manifest_label}/{version}/{COMPONENTS_FILE[p.type]}"


def clusterctl_config(base: str, version: str, extra: Sequence[Obj] = ()) -> Obj:
    """The `clusterctl.yaml` naming the four providers' components under `base` (an absolute POSIX path) with
    file:// URLs; `extra`: more `providers:` entries (e.g. a third-party provider's)."""
    providers = [{"name": p.provider_name, "type": p.type,
                  "url": "file://" + quote(components_path(base, p, version))} for p in inventory.PROVIDERS]
    return {"providers": [*providers, *extra]}
