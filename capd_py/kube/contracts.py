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
        # what `resolve` answered per (group, kind) for the CRD as it is now (dropped when the CRD changes)
        self._answers: dict[tuple[str, str], Resolved | Unresolved] = {}
        self.watched = False  # True once a CRD watch feeds this (a miss is then a real miss)
        self.lookups = 0      # CRD GETs made (tests: a watched Contracts makes none)

    # -- feeding (the CRD watch) -------------------------------------------------------------------
    def replace(self, crds: Iterable[dict[str, Any]]) -> None:
        self._by_gk.clear()
        self._by_name.clear()
        self._answers.clear()
        for c in crds:
            self.observe(c)
        self.watched = True

    def observe(self, crd: dict[str, Any], deleted: bool = False) -> bool:
        """One CRD event; whether what the core reads of it changed."""
        info = crdcontract.crd_info(crd)
        old = self._by_name.pop(info.name, None)
        if old is not None:
            self._by_gk.pop((old.group, old.kind), None)
            self._answers.pop((old.group, old.kind), None)
        self._answers.pop((info.group, info.kind), None)
        if deleted:
            return old is not None
        self._by_name[info.name] = info
        self._by_gk[(info.group, info.kind)] = info
        return old != info

    # -- reading -----------------------------------------------------------------------------------
    def info(self, group: str, kind: str) -> CRDInfo | None:
        """What is known of the kind's CRD (no lookup)."""
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
        key = (group, kind)
        answer = self._answers.get(key)
        if answer is None:
            answer = self._answer(group, kind, await self._info(group, kind))
            if not (isinstance(answer, Unresolved) and answer.reason == CRD_NOT_FOUND and not self.watched):
                self._answers[key] = answer  # unwatched, a missing CRD is asked for again next time
        if isinstance(answer, Unresolved):
            raise Unresolved(answer.reason, answer.message)
        return answer

    @staticmethod
    def _answer(group: str, kind: str, info: CRDInfo | None) -> Resolved | Unresolved:
        if info is None:
            return Unresolved(CRD_NOT_FOUND, f"CustomResourceDefinition {crdcontract.crd_name(group, kind)} "
                                             "does not exist")
        try:
            choice = crdcontract.choose(info)
        except ContractError as e:
            return Unresolved(NO_CONTRACT, str(e))
        return Resolved(GVK(group, choice.version, kind, info.plural, info.namespaced), choice.contract)
