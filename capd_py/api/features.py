"""Feature gates, upstream Cluster API's names (feature/feature.go) and `--feature-gates` syntax
(`Name=true,Other=false`).

Defaults are upstream's, except ClusterTopology: capd-py has always served managed topologies (its quickstart
and tests use ClusterClasses), so the gate defaults to true here (upstream: false, clusterctl's CLUSTER_TOPOLOGY
variable turns it on). Gates naming features capd-py does not implement yet may only be false: a gate turned on
that changes nothing would be a silent lie, so it stops the controllers at start, naming the issue."""

from __future__ import annotations

from collections.abc import Mapping

MACHINE_POOL = "MachinePool"
CLUSTER_TOPOLOGY = "ClusterTopology"
MACHINE_SET_PREFLIGHT_CHECKS = "MachineSetPreflightChecks"
MACHINE_TAINT_PROPAGATION = "MachineTaintPropagation"
RUNTIME_SDK = "RuntimeSDK"
IN_PLACE_UPDATES = "InPlaceUpdates"
KUBEADM_BOOTSTRAP_FORMAT_IGNITION = "KubeadmBootstrapFormatIgnition"
PRIORITY_QUEUE = "PriorityQueue"
RECONCILER_RATE_LIMITING = "ReconcilerRateLimiting"
VOLUME_DETACH_ATTACHMENTS = "MachineWaitForVolumeDetachConsiderVolumeAttachments"

DEFAULTS: Mapping[str, bool] = {
    MACHINE_POOL: True,
    CLUSTER_TOPOLOGY: True,  # upstream: false (see the module docstring)
    MACHINE_SET_PREFLIGHT_CHECKS: True,
    MACHINE_TAINT_PROPAGATION: False,
    RUNTIME_SDK: False,
    IN_PLACE_UPDATES: False,
    KUBEADM_BOOTSTRAP_FORMAT_IGNITION: False,
    PRIORITY_QUEUE: True,
    RECONCILER_RATE_LIMITING: True,
    VOLUME_DETACH_ATTACHMENTS: True,
}

# gates whose feature capd-py does not have: only false is accepted (where the work is tracked)
NOT_IMPLEMENTED: Mapping[str, str] = {
    IN_PLACE_UPDATES: "in-place updates are not implemented yet (issue 29)",
    KUBEADM_BOOTSTRAP_FORMAT_IGNITION: "capd-py's node images boot cloud-init data only",
}
# gates of upstream behaviour capd-py always has (GA upstream): only true is accepted
ALWAYS_ON = frozenset({PRIORITY_QUEUE, RECONCILER_RATE_LIMITING, VOLUME_DETACH_ATTACHMENTS})

# clusterctl's variables for the gates (upstream core/config/manager/manager.yaml), read by `capd-py init`
INIT_VARIABLES: Mapping[str, str] = {
    "EXP_MACHINE_POOL": MACHINE_POOL,
    "CLUSTER_TOPOLOGY": CLUSTER_TOPOLOGY,
    "EXP_RUNTIME_SDK": RUNTIME_SDK,
    "EXP_MACHINE_SET_PREFLIGHT_CHECKS": MACHINE_SET_PREFLIGHT_CHECKS,
    "EXP_MACHINE_WAITFORVOLUMEDETACH_CONSIDER_VOLUMEATTACHMENTS": VOLUME_DETACH_ATTACHMENTS,
    "EXP_PRIORITY_QUEUE": PRIORITY_QUEUE,
    "EXP_RECONCILER_RATE_LIMITING": RECONCILER_RATE_LIMITING,
    "EXP_IN_PLACE_UPDATES": IN_PLACE_UPDATES,
    "EXP_MACHINE_TAINT_PROPAGATION": MACHINE_TAINT_PROPAGATION,
    "EXP_KUBEADM_BOOTSTRAP_FORMAT_IGNITION": KUBEADM_BOOTSTRAP_FORMAT_IGNITION,
}


def _bool(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "t"):
        return True
    if v in ("false", "0", "f"):
        return False
    raise ValueError(f"invalid value of {name}: {value!r}, must be true or false")


def parse(text: str) -> dict[str, bool]:
    """`Name=true,Other=false` over the defaults; raises ValueError naming an unknown gate, a bad value, or a
    gate capd-py cannot honour."""
    gates = dict(DEFAULTS)
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise ValueError(f"missing bool value for {name}")
        if name not in DEFAULTS:
            raise ValueError(f"unrecognized feature gate: {name} (known: {', '.join(sorted(DEFAULTS))})")
        gates[name] = _bool(name, value)
    for name, why in NOT_IMPLEMENTED.items():
        if gates[name]:
            raise ValueError(f"feature gate {name}=true is not supported by capd-py: {why}")
    for name in ALWAYS_ON:
        if not gates[name]:
            raise ValueError(f"feature gate {name} is GA upstream and cannot be turned off")
    return gates


def from_variables(env: Mapping[str, str]) -> str:
    """The `--feature-gates` value clusterctl's variables (EXP_*, CLUSTER_TOPOLOGY) in `env` ask for; "" when none
    is set. Values are checked by `parse`."""
    parts = [f"{gate}={env[var].strip()}" for var, gate in INIT_VARIABLES.items() if env.get(var, "").strip()]
    return ",".join(parts)


def render(gates: Mapping[str, bool]) -> str:
    """The gates that differ from capd-py's defaults, as a `--feature-gates` value."""
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()) if DEFAULTS.get(k) != v)
