"""MachineSet preflight checks (pure), as upstream v1.13's MachineSetPreflightChecks (on by default): before a
MachineSet creates Machines (scale up) or deletes unhealthy ones (remediation), the control plane must be stable
and the versions within the skew policies, else the operation waits (requeued every 15 s) and a condition says
which check failed. Messages are upstream's, word for word, so users and tools matching on them see the same.

Skipped per MachineSet with the `machineset.cluster.x-k8s.io/skip-preflight-checks` annotation (comma-separated
check names or `All`), read from the MachineSet, else from its bootstrap config template; the set of checks run
at all is the controllers' `--machineset-preflight-checks` (default All)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capd_py.api import conditions as cond
from capd_py.api import contract
from capd_py.api import versions as versions_mod
from capd_py.reconcile.machine import owner_remediated_status

SKIP_ANNOTATION = "machineset.cluster.x-k8s.io/skip-preflight-checks"
TOPOLOGY_UPGRADE_STEP_ANNOTATION = "topology.internal.cluster.x-k8s.io/upgrade-step"

ALL = "All"
CONTROL_PLANE_IS_STABLE = "ControlPlaneIsStable"
KUBERNETES_VERSION_SKEW = "KubernetesVersionSkew"
KUBEADM_VERSION_SKEW = "KubeadmVersionSkew"
CONTROL_PLANE_VERSION_SKEW = "ControlPlaneVersionSkew"
CHECKS = (CONTROL_PLANE_IS_STABLE, KUBERNETES_VERSION_SKEW, KUBEADM_VERSION_SKEW, CONTROL_PLANE_VERSION_SKEW)

REQUEUE_SECONDS = 15.0  # upstream preflightFailedRequeueAfter
KUBELET_MINOR_SKEW = 3  # https://kubernetes.io/releases/version-skew-policy/#kubelet
KUBEADM_BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"

SCALE_UP = "Scale up"
REMEDIATION = "Machine remediation"
REMEDIATION_DEFERRED = "RemediationDeferred"


def parse_checks(text: str) -> frozenset[str]:
    """A comma-separated list of check names (the flag's and the annotation's form); raises ValueError naming an
    unknown one."""
    names = frozenset(n.strip() for n in (text or "").split(",") if n.strip())
    unknown = sorted(names - {ALL, *CHECKS})
    if unknown:
        raise ValueError(f"unknown MachineSet preflight check(s) {', '.join(unknown)}: valid are "
                         f"{', '.join((ALL, *CHECKS))}")
    return names


def skipped(ms: dict[str, Any], bootstrap_template: dict[str, Any] | None) -> frozenset[str]:
    """The checks the MachineSet opts out of: its annotation, else its bootstrap config template's. Unknown names
    are kept (and match nothing), as upstream does."""
    def ann(obj: dict[str, Any] | None) -> str:
        return str(((obj or {}).get("metadata") or {}).get("annotations", {}).get(SKIP_ANNOTATION) or "")
    text = ann(ms) or ann(bootstrap_template)
    return frozenset(n.strip() for n in text.split(",") if n.strip())


def needs_bootstrap_template(ms: dict[str, Any]) -> bool:
    """Whether `skipped` would read the bootstrap template (the MachineSet has no annotation and a config ref)."""
    has_ann = bool((ms.get("metadata") or {}).get("annotations", {}).get(SKIP_ANNOTATION))
    return not has_ann and contract.ref(ms, "spec", "template", "spec", "bootstrap", "configRef") is not None


def _should_run(enabled: frozenset[str], skip: frozenset[str], check: str) -> bool:
    return (ALL in enabled or check in enabled) and ALL not in skip and check not in skip


def _semver(text: str) -> versions_mod.Version:
    """semver.ParseTolerant as upstream uses it: a leading v optional."""
    return versions_mod.parse(text if text.startswith("v") else f"v{text}")


def _plain(v: versions_mod.Version) -> str:
    """How Go's semver prints a version (no leading v): upstream's messages show it so."""
    return str(v)[1:]


@dataclass(frozen=True)
class Outcome:
    """What the checks say: `failures` are upstream's messages (the operation waits); `error` a field that could
    not be read (the operation waits too, and the message says so)."""
    failures: tuple[str, ...] = ()
    error: str = ""

    @property
    def blocked(self) -> bool:
        return bool(self.failures or self.error)

    def messages(self) -> list[str]:
        return [*self.failures, *([self.error] if self.error else [])]


def _control_plane_status_version(cp: dict[str, Any]) -> str | None:
    """status.versions[0].version (providers list them oldest first), else status.version."""
    vs = contract.dig(cp, "status", "versions")
    if isinstance(vs, list) and vs:
        first = vs[0] if isinstance(vs[0], dict) else {}
        return str(first.get("version") or "")
    v = contract.dig(cp, "status", "version")
    return None if v is None else str(v)


def _is_upgrading(cp: dict[str, Any], spec_v: versions_mod.Version) -> bool:
    vs = contract.dig(cp, "status", "versions")
    if isinstance(vs, list) and vs:
        return any(spec_v > _semver(str((e or {}).get("version") or "")) for e in vs if isinstance(e, dict))
    status = contract.dig(cp, "status", "version")
    if not status:
        return False
    return spec_v > _semver(str(status))


def _ref_str(cp: dict[str, Any]) -> str:
    md = cp.get("metadata") or {}
    return f"{md.get('namespace')}/{md.get('name')}"


def _control_plane_stable(cluster: dict[str, Any], cp: dict[str, Any], cp_version: str) -> str | None:
    kind, ref = cp.get("kind", "ControlPlane"), _ref_str(cp)
    topology = contract.dig(cluster, "spec", "topology")
    if isinstance(topology, dict) and topology:
        step = ((cluster.get("metadata") or {}).get("annotations") or {}).get(TOPOLOGY_UPGRADE_STEP_ANNOTATION) or ""
        same_as_step = bool(step) and step == cp_version
        if topology.get("version") != cp_version and not same_as_step:
            return (f"{kind} {ref} has a pending version upgrade to {step or topology.get('version')} "
                    f'("{CONTROL_PLANE_IS_STABLE}" preflight check failed)')
    if not _control_plane_status_version(cp):
        return f'{kind} {ref} is provisioning ("{CONTROL_PLANE_IS_STABLE}" preflight check failed)'
    if _is_upgrading(cp, _semver(cp_version)):
        return f'{kind} {ref} is upgrading ("{CONTROL_PLANE_IS_STABLE}" preflight check failed)'
    return None


def _kubernetes_skew(cp_v: versions_mod.Version, ms_v: versions_mod.Version) -> str | None:
    head = (f"MachineSet version ({_plain(ms_v)}) and ControlPlane version ({_plain(cp_v)}) do not conform to the "
            "kubernetes version skew policy as MachineSet version is")
    if ms_v.minor > cp_v.minor:
        return f'{head} higher than ControlPlane version ("{KUBERNETES_VERSION_SKEW}" preflight check failed)'
    if ms_v.minor < cp_v.minor - KUBELET_MINOR_SKEW:
        return (f"{head} more than {KUBELET_MINOR_SKEW} minor versions older than the ControlPlane version "
                f'("{KUBERNETES_VERSION_SKEW}" preflight check failed)')
    return None


def _kubeadm_skew(cp_v: versions_mod.Version, ms_v: versions_mod.Version, ms: dict[str, Any]) -> str | None:
    ref = contract.ref(ms, "spec", "template", "spec", "bootstrap", "configRef")
    if not ref or ref["kind"] != "KubeadmConfigTemplate" or ref["apiGroup"] != KUBEADM_BOOTSTRAP_GROUP:
        return None
    if cp_v.minor != ms_v.minor:
        return (f"MachineSet version ({_plain(ms_v)}) and ControlPlane version ({_plain(cp_v)}) do not conform to "
                "kubeadm version skew policy as kubeadm only supports joining with the same major+minor version as "
                f'the control plane ("{KUBEADM_VERSION_SKEW}" preflight check failed)')
    return None


def _control_plane_version_skew(cluster: dict[str, Any], cp_version: str, ms_version: str) -> str | None:
    topology = contract.dig(cluster, "spec", "topology")
    if isinstance(topology, dict) and topology and cp_version != ms_version:
        return (f"MachineSet version ({ms_version}) is not yet the same as the ControlPlane version ({cp_version}), "
                "waiting for version to be propagated to the MachineSet "
                f'("{CONTROL_PLANE_VERSION_SKEW}" preflight check failed)')
    return None


def run(cluster: dict[str, Any], control_plane: dict[str, Any] | None, ms: dict[str, Any],
        skip: frozenset[str], enabled: frozenset[str] = frozenset({ALL}), action: str = SCALE_UP) -> Outcome:
    """The checks upstream's runPreflightChecks makes for `action`. Nothing is checked without a control plane
    reference or without a control plane version (upstream: not enough information)."""
    if not enabled or ALL in skip:
        return Outcome()
    if contract.ref(cluster, "spec", "controlPlaneRef") is None or control_plane is None:
        return Outcome()
    cp_version = contract.dig(control_plane, "spec", "version")
    if not cp_version:
        return Outcome()
    cp_version = str(cp_version)
    try:
        cp_v = _semver(cp_version)
    except ValueError:
        return Outcome(error=(f'failed to perform "{action}": failed to perform preflight checks: failed to parse '
                              f"version {cp_version!r} of ControlPlane {_ref_str(control_plane)}"))
    failures: list[str] = []
    if _should_run(enabled, skip, CONTROL_PLANE_IS_STABLE):
        try:
            msg = _control_plane_stable(cluster, control_plane, cp_version)
        except ValueError as e:
            return Outcome(error=(f'failed to perform "{action}": failed to perform preflight checks: '
                                  f"{control_plane.get('kind')} {_ref_str(control_plane)}: {e}"))
        if msg:
            failures.append(msg)
    ms_version = contract.dig(ms, "spec", "template", "spec", "version")
    if ms_version:
        try:
            ms_v = _semver(str(ms_version))
        except ValueError:
            return Outcome(error=(f'failed to perform "{action}": failed to perform preflight checks: failed to '
                                  f"parse version {ms_version!r} of MachineSet {_ref_str(ms)}"))
        checks = {KUBERNETES_VERSION_SKEW: _kubernetes_skew(cp_v, ms_v),
                  KUBEADM_VERSION_SKEW: _kubeadm_skew(cp_v, ms_v, ms),
                  CONTROL_PLANE_VERSION_SKEW: _control_plane_version_skew(cluster, cp_version, str(ms_version))}
        failures += [m for check, m in checks.items() if m and _should_run(enabled, skip, check)]
    return Outcome(tuple(failures))


def scaling_up_message(current: int, desired: int, messages: list[str]) -> str:
    """The ScalingUp condition's message while the checks hold a scale up (upstream's form)."""
    listed = "\n".join(f"* {m}" for m in messages)
    return f"Scaling up from {current} to {desired} replicas is blocked because:\n{listed}"


def held(ms: dict[str, Any]) -> bool:
    """Whether the MachineSet's scale up waits on the preflight checks (its ScalingUp condition says so)."""
    c = cond.get(ms, "ScalingUp") or {}
    return c.get("status") == cond.TRUE and "preflight check failed" in str(c.get("message") or "")


def remediation_deferred_message(messages: list[str]) -> str:
    """MachineOwnerRemediated=False (reason RemediationDeferred) on the unhealthy Machines meanwhile."""
    return "\n".join(f"* {m}" for m in messages)


def deferred_machine_status(machine: dict[str, Any], message: str) -> dict[str, Any]:
    """The unhealthy Machine's status while the checks hold its remediation: OwnerRemediated=False, reason
    RemediationDeferred, the failed checks as message (unchanged when already so: no write)."""
    return owner_remediated_status(machine, REMEDIATION_DEFERRED, message)
