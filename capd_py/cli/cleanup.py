"""`capd-py delete all`: every container, network and volume capd-py made on this host, found by label
(any `io.x-k8s.capd-py.*` label), plus the host controllers process. Goes through the runtime Protocol."""

from __future__ import annotations

from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_MANAGED
from capd_py.cli import management as mgmt
from capd_py.runtime.protocol import ContainerRuntime, RuntimeError_

LABEL_PREFIX = "io.x-k8s.capd-py."
LABEL_KEYS = (CONTAINER_MANAGED, CONTAINER_CLUSTER, mgmt.MANAGEMENT_LABEL)


def ours(labels: dict[str, str] | None) -> bool:
    return any(k.startswith(LABEL_PREFIX) for k in (labels or {}))


def delete_everything(runtime: ContainerRuntime | None = None) -> dict[str, int]:
    rt = runtime or mgmt.default_runtime()
    counts = {"containers": 0, "networks": 0, "volumes": 0}
    for home in sorted(mgmt.home().glob("*controllers.pid")):
        name = home.name.removesuffix("controllers.pid").removesuffix("-") or mgmt.DEFAULT_NAME
        mgmt.stop_controllers(name)
    seen: set[str] = set()
    for key in LABEL_KEYS:  # a key with any value
        for c in rt.list_containers({key: ""}):
            if c.id in seen:
                continue
            seen.add(c.id)
            if rt.get_container(c.name) is not None:
                rt.remove_container(c.name)
                counts["containers"] += 1
    for n in rt.list_networks():
        if ours(n.labels) and rt.get_network(n.name) is not None:
            rt.remove_network(n.name)
            counts["networks"] += 1
    vols: set[str] = set()
    for key in LABEL_KEYS:
        vols.update(rt.list_volumes({key: ""}))
    for v in sorted(vols):
        try:
            rt.remove_volume(v)
            counts["volumes"] += 1
        except RuntimeError_:
            pass  # still in use by a container that is not ours: leave it
    for kc in mgmt.home().glob("*.kubeconfig"):
        kc.unlink(missing_ok=True)
    return counts
