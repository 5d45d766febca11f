"""`capd-py delete all`: every container, network and volume capd-py made on this host, found by label
(any `io.x-k8s.capd-py.*` label), plus the host controllers process."""

from __future__ import annotations

from typing import Any

from capd_py.api.labels import CONTAINER_CLUSTER, CONTAINER_MANAGED
from capd_py.cli import management as mgmt

LABEL_PREFIX = "io.x-k8s.capd-py."
LABEL_KEYS = (CONTAINER_MANAGED, CONTAINER_CLUSTER, mgmt.MANAGEMENT_LABEL)


def ours(labels: dict[str, str] | None) -> bool:
    return any(k.startswith(LABEL_PREFIX) for k in (labels or {}))


def delete_everything(client: Any = None) -> dict[str, int]:
    import docker
    import docker.errors

    own = client is None
    client = client or docker.from_env(timeout=120)
    counts = {"containers": 0, "networks": 0, "volumes": 0}
    try:
        for home in sorted(mgmt.home().glob("*controllers.pid")):
            name = home.name.removesuffix("controllers.pid").removesuffix("-") or mgmt.DEFAULT_NAME
            mgmt.stop_controllers(name)
        seen: set[str] = set()
        for key in LABEL_KEYS:
            for c in client.api.containers(all=True, filters={"label": key}):
                if c["Id"] in seen:
                    continue
                seen.add(c["Id"])
                try:
                    client.api.remove_container(c["Id"], v=True, force=True)
                    counts["containers"] += 1
                except docker.errors.NotFound:
                    pass
        for n in client.api.networks():
            if ours(n.get("Labels")):
                try:
                    client.api.remove_network(n["Id"])
                    counts["networks"] += 1
                except docker.errors.NotFound:
                    pass
        for v in (client.api.volumes() or {}).get("Volumes") or []:
            if ours(v.get("Labels")):
                try:
                    client.api.remove_volume(v["Name"], force=True)
                    counts["volumes"] += 1
                except docker.errors.NotFound:
                    pass
        for kc in mgmt.home().glob("*.kubeconfig"):
            kc.unlink(missing_ok=True)
    finally:
        if own:
            client.close()
    return counts
