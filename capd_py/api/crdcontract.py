"""The provider contract as a CRD states it (pure): which CRD serves a reference's kind, and which of its
versions the core reads under which contract, as upstream's internal/contract (version.go) decides.

A provider's CRD carries a label `cluster.x-k8s.io/<contract>` whose value is an underscore-separated list of
its API versions that implement that contract (e.g. `cluster.x-k8s.io/v1beta2: v1alpha1_v1alpha2`). The core
looks for the newest contract it is compatible with (v1beta2, then v1beta1, as upstream's
`GetCompatibleVersions`), and of the versions listed there takes the newest (kube-aware order: v2 > v1 >
v1beta2 > v1beta1 > v1alpha1) that the CRD also serves.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

CONTRACT_GROUP = "cluster.x-k8s.io"
CURRENT_CONTRACT = "v1beta2"
V1BETA1 = "v1beta1"

_KUBE_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")
_LEVEL = {"alpha": 0, "beta": 1, None: 2}


def compatible_contracts(current: str = CURRENT_CONTRACT) -> list[str]:
    """The contracts a core of contract `current` reads, newest first (v1beta2 still reads v1beta1)."""
    out = {current}
    if current == CURRENT_CONTRACT:
        out.add(V1BETA1)
    return sorted(out, key=kube_version_key, reverse=True)


def kube_version_key(v: str) -> tuple[int, int, int, int, str]:
    """Sort key of Kubernetes API versions: GA over beta over alpha, then major, then minor; strings that
    are not API versions sort below all of them, alphabetically (k8s CompareKubeAwareVersionStrings)."""
    m = _KUBE_VERSION.match(v)
    if m is None:
        return (0, 0, 0, 0, v)
    return (1, _LEVEL[m.group(2)], int(m.group(1)), int(m.group(3) or 0), "")


def plural(kind: str) -> str:
    """The resource name of a kind, as upstream's contract.CalculateCRDName (flect) makes it for usual kinds."""
    k = kind.lower()
    if k.endswith(("s", "x", "z", "ch", "sh")):
        return k + "es"
    if k.endswith("y") and len(k) > 1 and k[-2] not in "aeiou":
        return k[:-1] + "ies"
    return k + "s"


def crd_name(group: str, kind: str) -> str:
    """`<plural>.<group>`: the name the contract requires a provider's CRD to have."""
    return f"{plural(kind)}.{group}"


@dataclass(frozen=True)
class CRDInfo:
    """What the core needs of a CustomResourceDefinition (never its schemas)."""

    name: str
    group: str
    kind: str
    plural: str
    namespaced: bool
    served: tuple[str, ...]
    labels: tuple[tuple[str, str], ...]

    def label(self, key: str) -> str | None:
        return dict(self.labels).get(key)


def crd_info(crd: dict[str, Any]) -> CRDInfo:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    md = crd.get("metadata") or {}
    return CRDInfo(
        name=str(md.get("name") or ""),
        group=str(spec.get("group") or ""),
        kind=str(names.get("kind") or ""),
        plural=str(names.get("plural") or ""),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        served=tuple(str(v["name"]) for v in spec.get("versions") or [] if v.get("served", True) and v.get("name")),
        labels=tuple(sorted((str(k), str(v)) for k, v in (md.get("labels") or {}).items())),
    )


@dataclass(frozen=True)
class Choice:
    contract: str   # the contract the provider implements at `version`, e.g. "v1beta2"
    version: str    # the API version the core reads and writes, e.g. "v1alpha1"


class ContractError(ValueError):
    """The CRD names no version the core can use (no contract label, or none of its versions served)."""


def choose(info: CRDInfo, current: str = CURRENT_CONTRACT) -> Choice:
    """The newest compatible contract the CRD declares and its newest listed version the CRD serves."""
    tried = compatible_contracts(current)
    for c in tried:
        value = info.label(f"{CONTRACT_GROUP}/{c}")
        if not value:
            continue
        listed = sorted({v for v in value.split("_") if v}, key=kube_version_key, reverse=True)
        served = [v for v in listed if not info.served or v in info.served]
        if not served:
            raise ContractError(f"CustomResourceDefinition {info.name} lists {', '.join(listed)} for contract {c} "
                                f"in label {CONTRACT_GROUP}/{c} but serves none of them")
        return Choice(c, served[0])
    labels = " or ".join(f"{CONTRACT_GROUP}/{c}" for c in tried)
    raise ContractError(f"CustomResourceDefinition {info.name} has no contract version label ({labels}): see "
                        "https://cluster-api.sigs.k8s.io/developer/providers/contracts/overview.html"
                        "#api-version-labels")


def contract_of_version(info: CRDInfo, version: str) -> str | None:
    """The contract an object of `version` follows (upstream's GetContractVersionForVersion), None if the CRD's
    labels do not list that version."""
    prefix = f"{CONTRACT_GROUP}/"
    for key, value in sorted(info.labels, key=lambda kv: kube_version_key(kv[0][len(prefix):]), reverse=True):
        if key.startswith(prefix) and version in value.split("_"):
            return key[len(prefix):]
    return None
