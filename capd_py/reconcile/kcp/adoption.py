"""Adopting existing control-plane Machines (upstream: KubeadmControlPlaneReconciler.adoptMachines,
adoptOwnedSecrets, adoptKubeconfigSecret and ensureCertificatesOwnerRef).

A KCP created for a Cluster whose control plane already runs as standalone Machines takes them over without
replacing them: every Machine of the cluster carrying the control-plane label and no controller owner is
adoptable. Adoption is refused as a whole when one of them has no KubeadmConfig bootstrap reference (an
error, retried) or a version more than one minor away from the KCP's (a Warning event `AdoptionFailed`, not
retried until something changes). Adopting makes the KCP the controller owner of each Machine and of the
Secrets its KubeadmConfig owns except the bootstrap data secret (the cluster certificates the KubeadmConfig
controller generated for a cluster without a control plane provider); the KubeadmConfigs themselves stay the
Machines'. Once the KCP runs, the certificate and kubeconfig Secrets of type `cluster.x-k8s.io/secret` are
controlled by the KCP whoever created them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from capd_py.api import contract, versions
from capd_py.api.labels import CLUSTER_NAME, CONTROL_PLANE
from capd_py.reconcile.certs import SECRET_TYPE

ADOPTION_FAILED = "AdoptionFailed"
MIXED_MANAGEMENT = ("not all control plane machines are owned by this KubeadmControlPlane, refusing to operate in "
                    "mixed management mode")


def control_plane_machines(cluster_name: str, machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cluster's control-plane Machines, whoever owns them (upstream collections.ControlPlaneMachines)."""
    return [m for m in machines
            if (m["metadata"].get("labels") or {}).get(CLUSTER_NAME) == cluster_name
            and CONTROL_PLANE in (m["metadata"].get("labels") or {})]


def adoptable(cluster_name: str, machines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Control-plane Machines of the cluster without a controller owner (upstream AdoptableControlPlaneMachines)."""
    return [m for m in control_plane_machines(cluster_name, machines) if contract.controller_owner(m) is None]


def not_owned(kcp: dict[str, Any], cluster_name: str, machines: list[dict[str, Any]]) -> list[str]:
    """Control-plane Machines of the cluster this KCP does not own: the KCP refuses to work beside them."""
    return sorted(m["metadata"]["name"] for m in control_plane_machines(cluster_name, machines)
                  if not contract.has_owner(m, kcp))


def supported_skew(a: versions.Version, b: versions.Version) -> bool:
    """At most one minor version apart (upstream util.IsSupportedVersionSkew)."""
    return a.major == b.major and abs(a.minor - b.minor) <= 1


def _ref_text(ref: dict[str, Any] | None) -> str:
    if not ref:
        return "{}"
    return "{" + " ".join(f"{k}:{v}" for k, v in ref.items()) + "}"


@dataclass(frozen=True)
class Adoption:
    """`adopt`: the Machines to take over (names, in order), when nothing refuses it. `error`: adoption is
    impossible until the Machine changes (retried with backoff); `event`: a Warning event's message, nothing
    adopted and nothing retried (upstream does not spin until the operator clarifies their intent)."""
    adopt: list[str] = field(default_factory=list)
    error: str = ""
    event: str = ""


def decide(kcp: dict[str, Any], candidates: list[dict[str, Any]]) -> Adoption:
    """Whether the adoptable Machines `candidates` can be adopted by `kcp` (upstream adoptMachines' checks)."""
    want = str(contract.dig(kcp, "spec", "version") or "")
    try:
        kv = versions.parse(want)
    except ValueError:
        return Adoption(error=f'failed to parse kubernetes version "{want}"')
    for m in candidates:
        md = m["metadata"]
        ref = contract.dig(m, "spec", "bootstrap", "configRef")
        if not ref or not ref.get("name") or ref.get("kind") != "KubeadmConfig":
            return Adoption(error=f"unable to adopt Machine {md.get('namespace')}/{md['name']}: expected a ConfigRef "
                                  f"of kind KubeadmConfig but instead found {_ref_text(ref)}")
        have = str(contract.dig(m, "spec", "version") or "")
        if not have:
            continue  # the Machine's version is not apparent: the operator knows what they are doing
        try:
            mv = versions.parse(have)
        except ValueError:
            return Adoption(error=f'failed to parse kubernetes version "{have}"')
        if not supported_skew(kv, mv):
            return Adoption(event=f"Could not adopt Machine {md.get('namespace')}/{md['name']}: its version "
                                  f'("{have}") is outside supported +/- one minor version skew from KCP\'s ("{want}")')
    return Adoption(adopt=[m["metadata"]["name"] for m in candidates])


def _is(ref: dict[str, Any], obj: dict[str, Any]) -> bool:
    md = obj["metadata"]
    if ref.get("uid") and md.get("uid"):
        return bool(ref["uid"] == md["uid"])
    return ref.get("kind") == obj.get("kind") and ref.get("name") == md["name"]


def _same_ref(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Upstream HasExactOwnerRef: the same owner, as controller, with the same apiVersion."""
    return all(a.get(k) == b.get(k) for k in ("apiVersion", "kind", "name", "uid")) and bool(a.get("controller"))


def machine_owner_refs(machine: dict[str, Any], kcp_ref: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The Machine's owner references with the KCP as controller (upstream EnsureOwnerRef); None: already so."""
    refs = list(machine["metadata"].get("ownerReferences") or [])
    if any(_same_ref(r, kcp_ref) for r in refs):
        return None
    return [r for r in refs if r.get("uid") != kcp_ref["uid"]] + [kcp_ref]


def config_secret_owner_refs(secret: dict[str, Any], config: dict[str, Any],
                             kcp_ref: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A Secret the KubeadmConfig `config` owns, except its bootstrap data secret, passes to the KCP: the
    KubeadmConfig's reference is replaced by the KCP's (upstream adoptOwnedSecrets). None: nothing to change."""
    refs = list(secret["metadata"].get("ownerReferences") or [])
    if not any(_is(r, config) and r.get("kind") == "KubeadmConfig" for r in refs):
        return None
    if secret["metadata"]["name"] == contract.dig(config, "status", "dataSecretName"):
        return None
    if any(_same_ref(r, kcp_ref) for r in refs):
        return None
    out: list[dict[str, Any]] = []
    for r in refs:
        if r.get("kind") == "KubeadmConfig" and _is(r, config):
            out.append(kcp_ref)
        elif r.get("uid") != kcp_ref["uid"]:
            out.append(r)
    return out if kcp_ref in out else out + [kcp_ref]


def cluster_secret_owner_refs(secret: dict[str, Any], kcp_ref: dict[str, Any]) -> list[dict[str, Any]] | None:
    """A cluster certificate or kubeconfig Secret the control plane manages (type `cluster.x-k8s.io/secret`) has
    the KCP as its controller: another controller's reference is dropped, other owners stay (upstream
    ensureCertificatesOwnerRef / adoptKubeconfigSecret). A user-provided Secret (other type) is left alone.
    None: nothing to change."""
    if secret.get("type") != SECRET_TYPE:
        return None
    refs = list(secret["metadata"].get("ownerReferences") or [])
    if any(_same_ref(r, kcp_ref) for r in refs):
        return None
    out = [r for r in refs if not r.get("controller") and r.get("uid") != kcp_ref["uid"]] + [kcp_ref]
    return out
