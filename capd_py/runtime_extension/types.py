"""The Runtime SDK v1alpha1 request and response bodies as TypedDicts: thin names over the JSON upstream's
api/runtime/hooks/v1alpha1 puts on the wire (same keys, same nesting), so a handler reads `request["cluster"]` and
returns `{"retryAfterSeconds": 5}`. Objects inside (Cluster, templates, Machines) stay plain dicts: the kit never
decodes them. Every key is optional (`total=False`): upstream omits empty fields and a handler returns only what it
sets; the kit fills `apiVersion`, `kind` and `status` (docs/runtime-sdk.md "Writing extensions in Python")."""

from __future__ import annotations

from typing import Any, TypedDict

Obj = dict[str, Any]


class Request(TypedDict, total=False):
    apiVersion: str
    kind: str
    # the ExtensionConfig's spec.settings, added by the core to every request
    settings: dict[str, str]


class Response(TypedDict, total=False):
    apiVersion: str
    kind: str
    status: str  # Success | Failure
    message: str


class RetryResponse(Response, total=False):
    # blocking hooks: > 0 asks the core to call again after that many seconds (and not to proceed yet)
    retryAfterSeconds: int


# -- discovery -----------------------------------------------------------------------------------------------

class GroupVersionHook(TypedDict):
    apiVersion: str
    hook: str


class ExtensionHandler(TypedDict, total=False):
    name: str
    requestHook: GroupVersionHook
    timeoutSeconds: int
    failurePolicy: str  # Fail | Ignore


class DiscoveryRequest(Request, total=False):
    pass


class DiscoveryResponse(Response, total=False):
    handlers: list[ExtensionHandler]


# -- lifecycle hooks -----------------------------------------------------------------------------------------

class UpgradeStepInfo(TypedDict, total=False):
    version: str


class ClusterRequest(Request, total=False):
    cluster: Obj


class BeforeClusterCreateRequest(ClusterRequest, total=False):
    pass


class AfterControlPlaneInitializedRequest(ClusterRequest, total=False):
    pass


class BeforeClusterDeleteRequest(ClusterRequest, total=False):
    pass


class _UpgradeFromTo(ClusterRequest, total=False):
    fromKubernetesVersion: str
    toKubernetesVersion: str
    controlPlaneUpgrades: list[UpgradeStepInfo]
    workersUpgrades: list[UpgradeStepInfo]


class BeforeClusterUpgradeRequest(_UpgradeFromTo, total=False):
    pass


class BeforeControlPlaneUpgradeRequest(_UpgradeFromTo, total=False):
    pass


class BeforeWorkersUpgradeRequest(_UpgradeFromTo, total=False):
    pass


class _UpgradedTo(ClusterRequest, total=False):
    kubernetesVersion: str
    controlPlaneUpgrades: list[UpgradeStepInfo]
    workersUpgrades: list[UpgradeStepInfo]


class AfterControlPlaneUpgradeRequest(_UpgradedTo, total=False):
    pass


class AfterWorkersUpgradeRequest(_UpgradedTo, total=False):
    pass


class AfterClusterUpgradeRequest(ClusterRequest, total=False):
    kubernetesVersion: str


# every lifecycle response is a RetryResponse but AfterControlPlaneInitialized's (upstream CommonResponse)
BeforeClusterCreateResponse = RetryResponse
AfterControlPlaneInitializedResponse = Response
BeforeClusterUpgradeResponse = RetryResponse
BeforeControlPlaneUpgradeResponse = RetryResponse
AfterControlPlaneUpgradeResponse = RetryResponse
BeforeWorkersUpgradeResponse = RetryResponse
AfterWorkersUpgradeResponse = RetryResponse
AfterClusterUpgradeResponse = RetryResponse
BeforeClusterDeleteResponse = RetryResponse


# -- topology mutation ---------------------------------------------------------------------------------------

class Variable(TypedDict):
    name: str
    value: Any


class HolderReference(TypedDict, total=False):
    apiVersion: str
    kind: str
    namespace: str
    name: str
    fieldPath: str


class GeneratePatchesRequestItem(TypedDict, total=False):
    uid: str
    holderReference: HolderReference
    object: Obj
    variables: list[Variable]


class GeneratePatchesRequest(Request, total=False):
    variables: list[Variable]
    items: list[GeneratePatchesRequestItem]


class GeneratePatchesResponseItem(TypedDict, total=False):
    uid: str
    patchType: str  # JSONPatch | JSONMergePatch
    patch: str  # base64 of the patch's JSON (upstream []byte); runtime_extension.patches builds it


class GeneratePatchesResponse(Response, total=False):
    items: list[GeneratePatchesResponseItem]


class ValidateTopologyRequestItem(TypedDict, total=False):
    holderReference: HolderReference
    object: Obj
    variables: list[Variable]


class ValidateTopologyRequest(Request, total=False):
    variables: list[Variable]
    items: list[ValidateTopologyRequestItem]


ValidateTopologyResponse = Response


class DiscoverVariablesRequest(Request, total=False):
    pass


class DiscoverVariablesResponse(Response, total=False):
    variables: list[Obj]  # ClusterClassVariable (v1beta2): name, required, schema.openAPIV3Schema, ...


# -- upgrade plan and in-place updates -----------------------------------------------------------------------

class UpgradeStep(TypedDict, total=False):
    version: str


class GenerateUpgradePlanRequest(ClusterRequest, total=False):
    fromControlPlaneKubernetesVersion: str
    fromWorkersKubernetesVersion: str
    toKubernetesVersion: str


class GenerateUpgradePlanResponse(Response, total=False):
    controlPlaneUpgrades: list[UpgradeStep]
    workersUpgrades: list[UpgradeStep]


class Patch(TypedDict, total=False):
    patchType: str
    patch: str  # base64


class CanUpdateMachineRequest(Request, total=False):
    current: Obj  # machine, infrastructureMachine, bootstrapConfig
    desired: Obj


class CanUpdateMachineResponse(Response, total=False):
    machinePatch: Patch
    infrastructureMachinePatch: Patch
    bootstrapConfigPatch: Patch


class CanUpdateMachineSetRequest(Request, total=False):
    current: Obj  # machineSet, infrastructureMachineTemplate, bootstrapConfigTemplate
    desired: Obj


class CanUpdateMachineSetResponse(Response, total=False):
    machineSetPatch: Patch
    infrastructureMachineTemplatePatch: Patch
    bootstrapConfigTemplatePatch: Patch


class UpdateMachineRequest(Request, total=False):
    desired: Obj


UpdateMachineResponse = RetryResponse
