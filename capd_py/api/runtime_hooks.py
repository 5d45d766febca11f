"""The Runtime SDK's hook catalog (upstream api/runtime/hooks/v1alpha1): which hooks exist, what they are called over
HTTPS, which answer with `retryAfterSeconds` (blocking), and the annotations the core keeps on a Cluster. The one
place both sides of the wire read: the core's runtime client and capd-py's extension kit.

Paths are upstream's `catalog.GVHToPath`: `/<group>/<version>/<lower(hook)>[/<lower(handler name)>]`. A request and
its response are JSON objects with `apiVersion: hooks.runtime.cluster.x-k8s.io/v1alpha1` and `kind: <Hook>Request` /
`<Hook>Response`; every response carries `status` (Success | Failure) and `message`; a blocking hook's also
`retryAfterSeconds` (0: proceed)."""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "hooks.runtime.cluster.x-k8s.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# ExtensionConfig (runtime.cluster.x-k8s.io): the kind registering an extension server
EXTENSION_CONFIG_GROUP = "runtime.cluster.x-k8s.io"
# on a Cluster: the lifecycle hooks (comma-separated names) that must still be called: an After* hook is recorded
# when its trigger happens and removed once an extension answered it successfully (upstream PendingHooksAnnotation)
PENDING_HOOKS_ANNOTATION = "runtime.cluster.x-k8s.io/pending-hooks"
# on a Cluster: BeforeClusterDelete answered non-blocking; deletion may go on (upstream OkToDeleteAnnotation)
OK_TO_DELETE_ANNOTATION = "runtime.cluster.x-k8s.io/ok-to-delete"
# on an ExtensionConfig: "<namespace>/<name>" of a Secret whose ca.crt becomes spec.clientConfig.caBundle
INJECT_CA_FROM_SECRET_ANNOTATION = "runtime.cluster.x-k8s.io/inject-ca-from-secret"

SUCCESS = "Success"
FAILURE = "Failure"
FAIL = "Fail"  # failurePolicy
IGNORE = "Ignore"
DEFAULT_TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Hook:
    name: str
    family: str  # discovery | lifecycle | topologyMutation | upgradePlan | inPlaceUpdate
    blocking: bool = False  # the response has retryAfterSeconds; > 0 means "not yet"

    @property
    def request_kind(self) -> str:
        return f"{self.name}Request"

    @property
    def response_kind(self) -> str:
        return f"{self.name}Response"


DISCOVERY = Hook("Discovery", "discovery")
BEFORE_CLUSTER_CREATE = Hook("BeforeClusterCreate", "lifecycle", blocking=True)
AFTER_CONTROL_PLANE_INITIALIZED = Hook("AfterControlPlaneInitialized", "lifecycle")
BEFORE_CLUSTER_UPGRADE = Hook("BeforeClusterUpgrade", "lifecycle", blocking=True)
BEFORE_CONTROL_PLANE_UPGRADE = Hook("BeforeControlPlaneUpgrade", "lifecycle", blocking=True)
AFTER_CONTROL_PLANE_UPGRADE = Hook("AfterControlPlaneUpgrade", "lifecycle", blocking=True)
BEFORE_WORKERS_UPGRADE = Hook("BeforeWorkersUpgrade", "lifecycle", blocking=True)
AFTER_WORKERS_UPGRADE = Hook("AfterWorkersUpgrade", "lifecycle", blocking=True)
AFTER_CLUSTER_UPGRADE = Hook("AfterClusterUpgrade", "lifecycle", blocking=True)
BEFORE_CLUSTER_DELETE = Hook("BeforeClusterDelete", "lifecycle", blocking=True)
GENERATE_PATCHES = Hook("GeneratePatches", "topologyMutation")
VALIDATE_TOPOLOGY = Hook("ValidateTopology", "topologyMutation")
DISCOVER_VARIABLES = Hook("DiscoverVariables", "topologyMutation")
GENERATE_UPGRADE_PLAN = Hook("GenerateUpgradePlan", "upgradePlan")
CAN_UPDATE_MACHINE = Hook("CanUpdateMachine", "inPlaceUpdate")
CAN_UPDATE_MACHINE_SET = Hook("CanUpdateMachineSet", "inPlaceUpdate")
UPDATE_MACHINE = Hook("UpdateMachine", "inPlaceUpdate", blocking=True)

HOOKS: dict[str, Hook] = {h.name: h for h in (
    DISCOVERY, BEFORE_CLUSTER_CREATE, AFTER_CONTROL_PLANE_INITIALIZED, BEFORE_CLUSTER_UPGRADE,
    BEFORE_CONTROL_PLANE_UPGRADE, AFTER_CONTROL_PLANE_UPGRADE, BEFORE_WORKERS_UPGRADE, AFTER_WORKERS_UPGRADE,
    AFTER_CLUSTER_UPGRADE, BEFORE_CLUSTER_DELETE, GENERATE_PATCHES, VALIDATE_TOPOLOGY, DISCOVER_VARIABLES,
    GENERATE_UPGRADE_PLAN, CAN_UPDATE_MACHINE, CAN_UPDATE_MACHINE_SET, UPDATE_MACHINE)}


def path(hook: str, handler: str = "") -> str:
    """The HTTP path of `hook` on an extension server (`handler`: the name the extension gave in discovery)."""
    base = f"/{GROUP}/{VERSION}/{hook.lower()}"
    return f"{base}/{handler.lower()}" if handler else base


def registered_name(handler: str, extension_config: str) -> str:
    """How the core names a discovered handler (ExtensionConfig status and ClusterClass `external` patch fields):
    `<handler>.<ExtensionConfig name>` (upstream's registry)."""
    return f"{handler}.{extension_config}"


def split_registered_name(name: str) -> tuple[str, str]:
    """(handler, ExtensionConfig name) of a registered name; ValueError unless it is exactly two dot-separated parts
    (upstream's ExtensionNameFromHandlerName)."""
    parts = name.split(".")
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"registered handler name {name!r} was not in the expected format "
                         "(HANDLER_NAME.EXTENSION_NAME)")
    return parts[0], parts[1]


def request(hook: Hook, body: dict[str, object] | None = None) -> dict[str, object]:
    """A request object of `hook` with its type meta."""
    return {"apiVersion": API_VERSION, "kind": hook.request_kind, **(body or {})}


def response(hook: Hook, status: str = SUCCESS, message: str = "", **fields: object) -> dict[str, object]:
    """A response object of `hook` with its type meta (`retryAfterSeconds` 0 by default on blocking hooks)."""
    out: dict[str, object] = {"apiVersion": API_VERSION, "kind": hook.response_kind, "status": status}
    if message:
        out["message"] = message
    if hook.blocking:
        out.setdefault("retryAfterSeconds", 0)
    out.update(fields)
    return out
