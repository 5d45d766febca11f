"""Contract discovery: a reference {apiGroup, kind, name} -> the GVK to read it at and the contract it follows,
from the provider's CustomResourceDefinition (upstream's internal/contract GetGKMetadata + version labels).

One `Contracts` per management cluster connection. It keeps only what it needs of each CRD (`CRDInfo`, never
the schemas). Fed by the controllers' CustomResourceDefinition watch (`replace` / `observe`: the Manager
primes and feeds it), it answers from memory and a CRD created, relabelled or deleted is seen at once. Without
a watch (the CLI, tests calling reconciles directly) a kind not known yet is looked up by its CRD name
`<plural>.<group>` and remembered; a CRD not found is asked for again next time (invalidate on miss).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from capd_py.api import crdcontract
from capd_py.api.crdcontract import ContractError, CRDInfo
from capd_py.api.gvk import CRD, GVK
from capd_py.kube.client import Kube

log = logging.getLogger("capd_py.contracts")

# why a reference does not resolve
CRD_NOT_FOUND = "CRDNotFound"
NO_CONTRACT = "ContractVersionNotFound"


@dataclass(frozen=True)
class Resolved:
    gvk: GVK
    contract: str  # "v1beta2" or "v1beta1"


class Unresolved(Exception):
    """A reference whose kind the API server does not serve as a provider: `reason` is CRD_NOT_FOUND or
    NO_CONTRACT, the message names the CustomResourceDefinition."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason
        self.message = message


class Contracts:
    def __init__(self, kube: Kube):
        self.kube = getattr(kube, "live", kube)  # lookups bypass any cache: CRDs are not stored there
        self._by_gk: dict[tuple[str, str], CRDInfo] = {}
        self._by_name: dict[str, CRDInfo] = {}
        self.watched = False  # True once a CRD watch feeds this (a miss is then a real miss)
        self.lookups = 0      # CRD GETs made (tests: a watched Contracts makes none)

    # -- feeding (the CRD watch) -------------------------------------------------------------------
    def replace(self, crds: Iterable[dict[str, Any]]) -> None:
        self._by_gk.clear()
        self._by_name.clear()
        for c in crds:
            self.observe(c)
        self.watched = True

    def observe(self, crd: dict[str, Any], deleted: bool = False) -> bool:
        """One CRD event; whether what the core reads of it changed."""
        info = crdcontract.crd_info(crd)
        old = self._by_name.pop(info.name, None)
        if old is not None:
            self._by_gk.pop((old.group, old.kind), None)
        if deleted:
            return old is not None
        self._by_name[info.name] = info
        self._by_gk[(info.group, info.kind)] = info
        return old != info

    # -- reading -----------------------------------------------------------------------------------
    def known(self, group: str, kind: str) -> CRDInfo | None:
        return self._by_gk.get((group, kind))

    async def _info(self, group: str, kind: str) -> CRDInfo | None:
        info = self._by_gk.get((group, kind))
        if info is not None or self.watched:
            return info
        self.lookups += 1
        crd = await self.kube.get(CRD, None, crdcontract.crd_name(group, kind))
        if crd is None:
            return None
        info = crdcontract.crd_info(crd)
        if (info.group, info.kind) != (group, kind):
            return None
        self.observe(crd)
        return info

    async def resolve(self, group: str, kind: str) -> Resolved:
        """The GVK to read `kind` of `group` at and its contract; raises Unresolved saying why not."""
        info = await self._info(group, kind)
        if info is None:
            raise Unresolved(CRD_NOT_FOUND, f"CustomResourceDefinition {crdcontract.crd_name(group, kind)} "
                                            "does not exist")
        try:
            choice = crdcontract.choose(info)
        except ContractError as e:
            raise Unresolved(NO_CONTRACT, str(e)) from None
        return Resolved(GVK(group, choice.version, kind, info.plural, info.namespaced), choice.contract)

    async def resolve_api_version(self, api_version: str, kind: str) -> Resolved:
        """As `resolve`, for an object already read (its apiVersion names the version)."""
        r = await self.resolve(api_version.rpartition("/")[0], kind)
        return r

    def contract_of(self, obj: dict[str, Any] | None) -> str:
        """The contract `obj` (read at its apiVersion) follows; the current one when its CRD does not say."""
        if not obj:
            return crdcontract.CURRENT_CONTRACT
        group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
        info = self._by_gk.get((group, str(obj.get("kind") or "")))
        if info is None:
            return crdcontract.CURRENT_CONTRACT
        return crdcontract.contract_of_version(info, version) or crdcontract.CURRENT_CONTRACT
