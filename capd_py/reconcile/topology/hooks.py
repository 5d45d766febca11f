"""Lifecycle hooks of a managed topology (pure): which Runtime SDK hook is due, with which request, and what its
answers mean for this pass: whether the control plane may take the next version, whether workers may, which hooks
stay pending on the Cluster, what the TopologyReconciled condition says.

Upstream splits this over exp/topology/desiredstate/lifecycle_hooks.go (the upgrade hooks, called while the control
plane version is computed), internal/controllers/topology/cluster/{cluster_controller,reconcile_state}.go
(BeforeClusterCreate, BeforeClusterDelete, AfterControlPlaneInitialized, AfterClusterUpgrade) and
internal/hooks/tracking.go (the `runtime.cluster.x-k8s.io/pending-hooks` annotation). The order of one pass is
upstream's: BeforeClusterCreate (nothing else while it blocks); then, with the control plane neither provisioning nor
upgrading, AfterControlPlaneUpgrade, BeforeWorkersUpgrade, (workers done) AfterWorkersUpgrade, (a new version)
BeforeClusterUpgrade and BeforeControlPlaneUpgrade; then AfterControlPlaneInitialized and AfterClusterUpgrade.

The caller drives it: `decide(view, answers)` returns the next `Call` to make (its answer goes into `answers`, then
`decide` again) or, once every due hook is answered, the `Decision`. A hook without handlers counts as answered
"proceed" without a call (upstream returns early the same way); a hook that blocked less than retryAfterSeconds ago
is not asked again (`HookCache`, upstream's hookCache) but still blocks with its last message.

capd-py's topology upgrade is one step (the control plane goes straight to spec.topology.version, then the
workers): the upgrade plans sent in requests are `[{version: <topology version>}]` while a part still has to move
there (upstream's one-minor plan), and every per-step hook is called once per upgrade.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract, versions
from capd_py.api import runtime_hooks as RH
from capd_py.api.runtime_sdk import HookResult

PENDING_HOOKS = RH.PENDING_HOOKS_ANNOTATION
OK_TO_DELETE = RH.OK_TO_DELETE_ANNOTATION
# upstream clusterv1.BeforeClusterUpgradeHookAnnotationPrefix: any annotation with it blocks an upgrade's start
BEFORE_UPGRADE_ANNOTATION_PREFIX = "before-upgrade.hook.cluster.cluster.x-k8s.io"
# what upstream pretends such an annotation answered: twice the default sync period (its removal is an event anyway)
ANNOTATION_RETRY_SECONDS = 20 * 60
CONTROL_PLANE_INITIALIZED = "ControlPlaneInitialized"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CONVERSION_DATA = "cluster.x-k8s.io/conversion-data"

# TopologyReconciled reasons (upstream v1.13's conditions.go)
R_CLUSTER_CREATING = "ClusterCreating"
R_CLUSTER_UPGRADING = "ClusterUpgrading"
R_DELETING = "Deleting"


# --- the pending-hooks annotation (upstream internal/hooks/tracking.go) -------------------------------------------

def _names(value: str | None) -> set[str]:
    return {n for n in (value or "").split(",") if n}


def pending(cluster: Mapping[str, Any]) -> frozenset[str]:
    """The hooks the Cluster's pending-hooks annotation lists."""
    return frozenset(_names(((cluster.get("metadata") or {}).get("annotations") or {}).get(PENDING_HOOKS)))


def annotation_value(hooks: Iterable[str]) -> str:
    """The annotation's value for `hooks`: sorted, comma-separated, as upstream's sets.List."""
    return ",".join(sorted(set(hooks)))


def pending_patch(cluster: Mapping[str, Any], hooks: Iterable[str]) -> dict[str, Any] | None:
    """The metadata merge patch making the annotation list exactly `hooks` (removed when empty); None: no change."""
    want = annotation_value(hooks)
    have = ((cluster.get("metadata") or {}).get("annotations") or {}).get(PENDING_HOOKS)
    if (have == want) if want else (have is None):
        return None
    return {"metadata": {"annotations": {PENDING_HOOKS: want or None}}}


def is_ok_to_delete(cluster: Mapping[str, Any]) -> bool:
    return OK_TO_DELETE in (((cluster.get("metadata") or {}).get("annotations")) or {})


OK_TO_DELETE_PATCH: dict[str, Any] = {"metadata": {"annotations": {OK_TO_DELETE: ""}}}


# --- requests --------------------------------------------------------------------------------------------------------

def request_cluster(cluster: Mapping[str, Any]) -> dict[str, Any]:
    """The Cluster as a request carries it (upstream cleanupCluster): no status, no managedFields, without the
    last-applied and conversion-data annotations (size: a request holds the whole object)."""
    out = copy.deepcopy(dict(cluster))
    out["apiVersion"], out["kind"] = "cluster.x-k8s.io/v1beta2", "Cluster"
    md = out.setdefault("metadata", {})
    md.pop("managedFields", None)
    if md.get("annotations"):
        md["annotations"] = {k: v for k, v in md["annotations"].items() if k not in (LAST_APPLIED, CONVERSION_DATA)}
    out.pop("status", None)
    return out


def _plans(control_plane: list[str], workers: list[str]) -> dict[str, Any]:
    """controlPlaneUpgrades / workersUpgrades of a request (upstream toUpgradeStep; omitted when empty)."""
    out: dict[str, Any] = {}
    for key, plan in (("controlPlaneUpgrades", control_plane), ("workersUpgrades", workers)):
        if plan:
            out[key] = [{"version": v} for v in plan]
    return out


# --- the walk --------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Call:
    hook: RH.Hook
    request: dict[str, Any]


@dataclass(frozen=True)
class Blocked:
    hook: str
    retry_after_seconds: int
    message: str


@dataclass
class View:
    """What decide() reads: the Cluster (its annotations and conditions as read), spec.topology.version, the current
    control plane, the versions of the current MachineDeployments and MachinePools, and what the caller knows of
    the handlers."""

    cluster: dict[str, Any]
    version: str
    control_plane: dict[str, Any] | None = None
    worker_versions: list[str] = field(default_factory=list)  # spec.template.spec.version of each MD / MP
    workers_upgrading: bool = False  # an MD / MP is rolling its Machines to a new version
    # AfterClusterUpgrade may be called: the control plane and every worker run `version`, nothing rolls or waits
    settled: bool = False
    registered: frozenset[str] = frozenset()  # hooks with at least one handler
    cached: Mapping[str, tuple[int, str]] = field(default_factory=dict)  # hook -> (seconds left, message)


@dataclass
class Decision:
    create: bool = True  # BeforeClusterCreate allows creating the topology
    hold_control_plane: bool = False  # the control plane keeps its spec.version
    hold_workers: bool = False  # workers neither take a new version nor get created
    pending: frozenset[str] = frozenset()  # the pending-hooks annotation after this pass
    blocking: list[Blocked] = field(default_factory=list)  # in call order
    # the hook whose call failed: the walk stopped there; what was answered before it still counts (upstream writes
    # each pending-hooks change as it happens), the pass fails with the call's error
    failed: str = ""

    @property
    def retry_after_seconds(self) -> int:
        """Upstream's AggregateRetryAfter: the lowest non-zero retryAfterSeconds (0: nothing blocks)."""
        return min((b.retry_after_seconds for b in self.blocking), default=0)

    def message(self, action: str) -> str:
        """Upstream's HookResponseTracker.AggregateMessage(action)."""
        if not self.blocking:
            return ""
        parts = [f"{b.hook}: {b.message}" if b.message else b.hook for b in self.blocking]
        return f"Following hooks are blocking {action}: {'; '.join(parts)}"


class _Need(Exception):
    def __init__(self, call: Call) -> None:
        self.call = call


class _Failed(Exception):
    pass


class _Walk:
    def __init__(self, view: View, answers: Mapping[str, HookResult], failed: str | None) -> None:
        self.view, self.answers = view, answers
        self.d = Decision(pending=pending(view.cluster), failed=failed or "")

    def ask(self, hook: RH.Hook, body: dict[str, Any]) -> bool:
        """True when `hook` lets things proceed; False when it blocks (recorded). Raises _Need for a call to make,
        _Failed at the hook whose call failed."""
        if hook.name == self.d.failed:
            raise _Failed
        if hook.name in self.answers:
            r = self.answers[hook.name]
        elif hook.name in self.view.cached:
            left, msg = self.view.cached[hook.name]
            r = HookResult(message=msg, retry_after_seconds=left)
        elif hook.name not in self.view.registered:
            return True
        else:
            raise _Need(Call(hook, RH.request(hook, {"cluster": request_cluster(self.view.cluster), **body})))
        if hook.blocking and r.blocking:
            self.d.blocking.append(Blocked(hook.name, r.retry_after_seconds, r.message))
            return False
        return True

    def add(self, *hooks: RH.Hook) -> None:
        self.d.pending = self.d.pending | {h.name for h in hooks}

    def done(self, hook: RH.Hook) -> None:
        self.d.pending = self.d.pending - {hook.name}

    def is_pending(self, hook: RH.Hook) -> bool:
        return hook.name in self.d.pending


def _refs_set(cluster: dict[str, Any]) -> bool:
    return bool(contract.dig(cluster, "spec", "infrastructureRef") or contract.dig(cluster, "spec", "controlPlaneRef"))


def _min_version(vs: list[str]) -> str:
    def key(v: str) -> tuple[int, Any]:
        try:
            return (0, versions.parse(v))
        except ValueError:
            return (1, v)
    return min(vs, key=key) if vs else ""


def _upgrade_hooks(w: _Walk) -> None:
    """Upstream's computeControlPlaneVersion with the RuntimeSDK gate on: the hooks around one version step."""
    v = w.view
    cp = v.control_plane
    if cp is None:
        return
    cp_version = str(contract.dig(cp, "spec", "version") or "")
    status_version = contract.dig(cp, "status", "version")
    if not status_version or status_version != cp_version:
        return  # provisioning, or still upgrading: nothing to call before it settles
    workers = [x for x in v.worker_versions if x]
    min_workers = _min_version(workers)
    workers_plan = [v.version] if workers and any(x != v.version for x in workers) else []
    cp_plan = [v.version] if cp_version != v.version else []
    plans = _plans(cp_plan, workers_plan)

    if w.is_pending(RH.AFTER_CONTROL_PLANE_UPGRADE):
        if not w.ask(RH.AFTER_CONTROL_PLANE_UPGRADE, {"kubernetesVersion": cp_version, **plans}):
            w.d.hold_control_plane = w.d.hold_workers = True
            return
        w.done(RH.AFTER_CONTROL_PLANE_UPGRADE)
    if w.is_pending(RH.BEFORE_WORKERS_UPGRADE):
        if not w.ask(RH.BEFORE_WORKERS_UPGRADE, {"fromKubernetesVersion": min_workers,
                                                  "toKubernetesVersion": cp_version, **plans}):
            w.d.hold_control_plane = w.d.hold_workers = True
            return
        w.done(RH.BEFORE_WORKERS_UPGRADE)
    if workers_plan and workers_plan[0] == cp_version or v.workers_upgrading:
        return  # the workers move to the control plane's version first
    if w.is_pending(RH.AFTER_WORKERS_UPGRADE):
        if not w.ask(RH.AFTER_WORKERS_UPGRADE, {"kubernetesVersion": cp_version, **plans}):
            w.d.hold_control_plane = True
            return
        w.done(RH.AFTER_WORKERS_UPGRADE)
    if not cp_plan:
        return
    if not w.is_pending(RH.AFTER_CLUSTER_UPGRADE):  # the start of an upgrade, not a step within one
        by_annotation = sorted(k for k in (v.cluster["metadata"].get("annotations") or {})
                               if k.startswith(BEFORE_UPGRADE_ANNOTATION_PREFIX))
        if by_annotation:
            what = "annotation" if len(by_annotation) == 1 else "annotations"
            verb = "is" if len(by_annotation) == 1 else "are"
            w.d.blocking.append(Blocked(RH.BEFORE_CLUSTER_UPGRADE.name, ANNOTATION_RETRY_SECONDS,
                                        f"{what} {', '.join(by_annotation)} {verb} set"))
            w.d.hold_control_plane = True
            return
        if not w.ask(RH.BEFORE_CLUSTER_UPGRADE, {"fromKubernetesVersion": cp_version,
                                                  "toKubernetesVersion": v.version, **plans}):
            w.d.hold_control_plane = True
            return
        w.add(RH.AFTER_CLUSTER_UPGRADE)
    if not w.ask(RH.BEFORE_CONTROL_PLANE_UPGRADE, {"fromKubernetesVersion": cp_version,
                                                    "toKubernetesVersion": v.version, **plans}):
        w.d.hold_control_plane = True
        return
    w.add(RH.AFTER_CONTROL_PLANE_UPGRADE)
    if workers_plan and workers_plan[0] == v.version:
        w.add(RH.BEFORE_WORKERS_UPGRADE, RH.AFTER_WORKERS_UPGRADE)


def decide(view: View, answers: Mapping[str, HookResult] | None = None, failed: str | None = None
           ) -> Call | Decision:
    """The next hook call to make, or (all due hooks answered) what this pass may do. See the module docstring.
    `failed`: the hook whose call just failed (the Decision then stops there, `failed` set)."""
    w = _Walk(view, answers or {}, failed)
    try:
        creating = not _refs_set(view.cluster)
        if creating:
            if not w.ask(RH.BEFORE_CLUSTER_CREATE, {}):
                w.d.create = False
                return w.d
            w.add(RH.AFTER_CONTROL_PLANE_INITIALIZED)
        _upgrade_hooks(w)
        if w.is_pending(RH.AFTER_CONTROL_PLANE_INITIALIZED) and cond.is_true(view.cluster, CONTROL_PLANE_INITIALIZED):
            w.ask(RH.AFTER_CONTROL_PLANE_INITIALIZED, {})
            w.done(RH.AFTER_CONTROL_PLANE_INITIALIZED)
        # the last step of an upgrade: everything runs the new version and the other After* hooks were answered
        if (w.is_pending(RH.AFTER_CLUSTER_UPGRADE) and not w.is_pending(RH.AFTER_CONTROL_PLANE_UPGRADE)
                and not w.is_pending(RH.AFTER_WORKERS_UPGRADE) and view.settled and not w.d.hold_control_plane
                and w.ask(RH.AFTER_CLUSTER_UPGRADE, {"kubernetesVersion": view.version})):
            w.done(RH.AFTER_CLUSTER_UPGRADE)
    except _Need as need:
        return need.call
    except _Failed:
        pass
    return w.d


def before_delete(cluster: dict[str, Any], registered: frozenset[str], cached: Mapping[str, tuple[int, str]],
                  answers: Mapping[str, HookResult] | None = None, failed: str | None = None) -> Call | Decision:
    """Upstream's topology reconcileDelete: BeforeClusterDelete until it lets go, then the ok-to-delete annotation
    (the Cluster controller waits for it). `Decision.create` False: still blocked (or its call failed)."""
    w = _Walk(View(cluster=cluster, version="", registered=registered, cached=cached), answers or {}, failed)
    if is_ok_to_delete(cluster):
        return w.d
    try:
        w.d.create = w.ask(RH.BEFORE_CLUSTER_DELETE, {})
    except _Need as need:
        return need.call
    except _Failed:
        w.d.create = False
    return w.d


def deleting_message(d: Decision | None) -> str:
    """TopologyReconciled's message while the Cluster is deleting (upstream's)."""
    msg = "Cluster is deleting"
    if d is not None and d.retry_after_seconds:
        msg += ". " + d.message("delete")
    return msg


# --- the condition while a hook blocks an upgrade -----------------------------------------------------------------

def name_list(kind: str, plural: str, names: list[str]) -> str:
    """Upstream's nameList: one name, up to three, or three and how many more."""
    names = sorted(names)
    if len(names) == 1:
        return f"{kind} {names[0]}"
    if len(names) <= 3:
        return f"{plural} {', '.join(names)}"
    return f"{plural} {', '.join(names[:3])}, ... ({len(names) - 3} more)"


def upgrade_message(d: Decision, version: str, cp_kind: str, cp_spec_version: str, cp_status_version: str | None,
                    pending_mds: list[str], upgrading_mds: list[str], pending_mps: list[str]) -> str:
    """TopologyReconciled's message (reason ClusterUpgrading) while a hook blocks an upgrade: upstream v1.13's
    multi-line form, the hooks first."""
    lines = [f"Cluster is upgrading to {version}"]
    if d.blocking:
        lines.append(f"  * {d.message('upgrade')}")
    if cp_status_version and cp_status_version != cp_spec_version:
        lines.append(f"  * {cp_kind} upgrading to version {cp_spec_version}")
    elif cp_spec_version != version:
        lines.append(f"  * {cp_kind} pending upgrade to version {version}")
    if upgrading_mds:
        lines.append(f"  * {name_list('MachineDeployment', 'MachineDeployments', upgrading_mds)} upgrading to "
                     f"version {cp_spec_version}")
    if pending_mds:
        lines.append(f"  * {name_list('MachineDeployment', 'MachineDeployments', pending_mds)} pending upgrade to "
                     f"version {version}")
    if pending_mps:
        lines.append(f"  * {name_list('MachinePool', 'MachinePools', pending_mps)} pending upgrade to "
                     f"version {version}")
    return "\n".join(lines)


# --- the blocking-answer cache (upstream util/cache HookEntry) ------------------------------------------------------

@dataclass
class HookCache:
    """Blocking answers by (namespace, cluster, hook): until `retryAfterSeconds` have passed the hook is not asked
    again (upstream's hookCache). Time is the caller's (monotonic seconds)."""

    entries: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=dict)

    def add(self, namespace: str, name: str, hook: str, retry_after_seconds: int, message: str, now: float) -> None:
        self.entries = {k: e for k, e in self.entries.items() if e[0] > now}  # forget what expired
        self.entries[(namespace, name, hook)] = (now + retry_after_seconds, message)

    def blocking(self, namespace: str, name: str, now: float) -> dict[str, tuple[int, str]]:
        """hook -> (whole seconds left, rounded up, message) for this Cluster's hooks still within their wait."""
        out: dict[str, tuple[int, str]] = {}
        for (ns, n, hook), (until, msg) in self.entries.items():
            if ns == namespace and n == name and until > now:
                out[hook] = (max(1, int(-(-(until - now) // 1))), msg)
        return out
