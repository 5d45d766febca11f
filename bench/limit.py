"""The physical limit for a 1 control plane + 1 worker cluster on this machine: the same node containers
capd-py creates (same image, flags and mounts, through the runtime Protocol), started together, with
`kubeadm init` in one and `kubeadm join` in the other run by hand, to both Nodes Ready. No controllers, no
load balancer, no cloud-init: what is left is the floor capd-py's apply -> Available is compared against.

    .venv/bin/python bench/limit.py            # prints a phase table; bench/run.py --limit prints the ratio
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import node_boot  # noqa: E402
from common import machine, table, wait_until  # noqa: E402

from capd_py.api.labels import CONTAINER_CLUSTER  # noqa: E402
from capd_py.api.versions import DEFAULT_VERSION  # noqa: E402
from capd_py.reconcile import dockermachine as dmr  # noqa: E402
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime  # noqa: E402
from capd_py.testing import kubeadm_by_hand  # noqa: E402

KUBECTL = ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]


async def measure(version: str = DEFAULT_VERSION) -> list[tuple[str, float]]:
    """Phase end times in seconds after `docker run`, the last one being both Nodes Ready."""
    rt = DockerRuntime()
    suffix = uuid.uuid4().hex[:6]
    ns, cluster = "bench-limit", f"limit-{suffix}"
    image = f"{os.environ.get('CAPD_PY_NODE_IMAGE_REPO', 'capd-py/node')}:{version}"
    network = f"capd-limit-{suffix}"
    networks.ensure_network(rt, network, {"io.x-k8s.capd-py.bench": "limit"})
    phases: list[tuple[str, float]] = []
    try:
        mode = node_boot.privilege_mode()
        t0 = time.monotonic()
        specs = [dmr.node_spec(ns, cluster, role, {"spec": {}}, image, network, role == "cp", mode)
                 for role in ("cp", "w")]
        infos = await asyncio.gather(*(asyncio.to_thread(rt.run_container, s) for s in specs))
        cp, w = (i.name for i in infos)
        phases.append(("both containers created", time.monotonic() - t0))

        # containerd answering, every preloaded image listed, systemd up: each in both containers
        for what, probe in (("containerd ready in both", node_boot.containerd_ready),
                            ("preloaded images listed in both", node_boot.images_listed),
                            ("systemd up in both", node_boot.systemd_up)):
            await asyncio.gather(*(wait_until(f"{what}: {n}", lambda n=n, p=probe: p(rt, n),  # type: ignore[misc]
                                              180, interval=0.1) for n in (cp, w)))
            phases.append((what, time.monotonic() - t0))

        ip = rt.get_container(cp).ipv4[network]  # type: ignore[union-attr]
        cfg = kubeadm_by_hand.init_config(ip, version)
        rt.exec(cp, ["sh", "-c", f"mkdir -p /run/kubeadm && cat > {kubeadm_by_hand.CONFIG_PATH}"], stdin=cfg.encode())
        res = await asyncio.to_thread(rt.exec, cp, kubeadm_by_hand.init_command(), None, 400)
        if res.exit_code != 0:
            raise RuntimeError(f"kubeadm init failed:\n{res.output[-2000:]}")
        phases.append(("kubeadm init done", time.monotonic() - t0))
        join = rt.exec(cp, ["kubeadm", "token", "create", "--print-join-command"]).output.strip().split()
        cni = rt.exec(cp, [*KUBECTL, "apply", "-f", "/kind/manifests/default-cni.yaml"])
        if cni.exit_code != 0:
            raise RuntimeError(f"CNI apply failed: {cni.output}")
        join.append(f"--ignore-preflight-errors={kubeadm_by_hand.PREFLIGHT_IGNORE}")
        res = await asyncio.to_thread(rt.exec, w, join, None, 400)
        if res.exit_code != 0:
            raise RuntimeError(f"kubeadm join failed:\n{res.output[-2000:]}")
        phases.append(("kubeadm join done", time.monotonic() - t0))

        def both_ready() -> bool:
            out = rt.exec(cp, [*KUBECTL, "get", "nodes", "-o", "json"]).output
            try:
                items = json.loads(out)["items"]
            except (ValueError, KeyError):
                return False
            ready = [n for n in items if any(c["type"] == "Ready" and c["status"] == "True"
                                             for c in n["status"].get("conditions") or [])]
            return len(ready) == 2
        await wait_until("both Nodes Ready", both_ready, 300, interval=1)
        phases.append(("both Nodes Ready", time.monotonic() - t0))
        return phases
    finally:
        for c in rt.list_containers({CONTAINER_CLUSTER: cluster}):
            rt.remove_container(c.name)
        rt.remove_network(network)


def main() -> int:
    phases = asyncio.run(measure())
    rows = [("machine", machine())] + [(p, f"{t:.1f} s") for p, t in phases]
    print(table(rows, "physical limit: 1 control plane + 1 worker by hand (kubeadm init + join)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
