"""Which of capd-py's controllers a process runs (`capd-py controllers --controllers`, CAPD_PY_CONTROLLERS).

Upstream ships one manager per provider (core, kubeadm bootstrap, kubeadm control plane, CAPD); capd-py runs them
all in one process by default. Naming a subset lets one part run beside upstream's managers, e.g. only the Docker
provider under upstream's core: the groups are upstream's managers, and single controllers are named by their
queue keys (kinds; `ClusterTopology` for the topology controller of Clusters).
"""

from __future__ import annotations

from collections.abc import Iterable

ALL = "all"
# upstream's managers, by the controllers each one runs
GROUPS: dict[str, frozenset[str]] = {
    "core": frozenset({"Cluster", "ClusterTopology", "MachineDeploymentTopology", "MachineSetTopology",
                       "ClusterClass", "Machine", "MachineSet", "MachineDeployment",
                       "MachineHealthCheck", "MachinePool", "ClusterResourceSet", "ClusterResourceSetBinding",
                       "ExtensionConfig"}),
    "bootstrap": frozenset({"KubeadmConfig"}),
    "controlplane": frozenset({"KubeadmControlPlane"}),
    "infrastructure": frozenset({"DockerCluster", "DockerMachine", "DockerMachinePool", "DockerMachineTemplate",
                                 "DevCluster", "DevMachine", "DevMachinePool", "DevMachineTemplate"}),
}
KNOWN: frozenset[str] = frozenset().union(*GROUPS.values())


def parse(text: str | None) -> frozenset[str] | None:
    """The controllers' queue keys a comma-separated list names (groups and single controllers); None: all of them.
    An unknown name is a ValueError naming what is known."""
    names = [p.strip() for p in (text or "").split(",") if p.strip()]
    if not names or ALL in names:
        return None
    out: set[str] = set()
    for n in names:
        if n in GROUPS:
            out |= GROUPS[n]
        elif n in KNOWN:
            out.add(n)
        else:
            raise ValueError(f"unknown controller {n!r} in CAPD_PY_CONTROLLERS/--controllers: known are "
                             f"{', '.join([ALL, *GROUPS])} and {', '.join(sorted(KNOWN))}")
    return frozenset(out)


def selected(keys: Iterable[str], only: frozenset[str] | None) -> list[str]:
    """`keys` that run under the selection `only` (None: every one)."""
    return [k for k in keys if only is None or k in only]
