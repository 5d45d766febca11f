"""How fast a node container is ready to bootstrap: `docker run` -> containerd answering -> every preloaded
image listed in containerd's k8s.io namespace -> systemd up (-> the node-wide images unpacked: by a background
unit in node images before 2026-12-07, at image build time since, when this step is immediate). One node
container made exactly as capd-py makes it (same image, flags and mounts, through the runtime Protocol), measured
`--runs` times, removed.

    .venv/bin/python bench/node_boot.py [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine, table, wait_until  # noqa: E402

from capd_py.api.labels import CONTAINER_CLUSTER  # noqa: E402
from capd_py.api.versions import DEFAULT_VERSION  # noqa: E402
from capd_py.reconcile import dockermachine as dmr  # noqa: E402
from capd_py.runtime import networks
from capd_py.runtime.docker_runtime import DockerRuntime  # noqa: E402
from capd_py.runtime.protocol import ContainerRuntime  # noqa: E402

# The images kubeadm, the CNI and the demos expect, written into the node image at build time.
IMAGE_LIST = "/kind/images/list"


def privilege_mode() -> str:
    mode = os.environ.get("CAPD_PY_PRIVILEGED_MODE")
    if mode:
        return mode
    here = Path(__file__).resolve().parents[1]
    return subprocess.run(["bash", str(here / "hack" / "privilege-mode.sh")], capture_output=True, text=True,
                          check=False).stdout.strip() or "privileged"


def containerd_ready(rt: ContainerRuntime, name: str) -> bool:
    return rt.exec(name, ["ctr", "version"]).exit_code == 0


def _normalise(ref: str) -> str:
    """containerd names `capd-py/echo:latest` as docker does: `docker.io/capd-py/echo:latest`."""
    first = ref.split("/", 1)[0]
    if "/" not in ref or not ("." in first or ":" in first or first == "localhost"):
        ref = "docker.io/" + (ref if "/" in ref else "library/" + ref)
    return ref


def images_listed(rt: ContainerRuntime, name: str) -> bool:
    want = rt.read_file(name, IMAGE_LIST)
    res = rt.exec(name, ["ctr", "-n", "k8s.io", "images", "ls", "-q"])
    if want is None or res.exit_code != 0:
        return False
    have = {_normalise(r) for r in res.output.split()}
    return all(_normalise(r) in have for r in want.decode().split())


def systemd_up(rt: ContainerRuntime, name: str) -> bool:
    return rt.exec(name, ["systemctl", "is-system-running"]).output.strip() in ("running", "degraded")


def node_images_unpacked(rt: ContainerRuntime, name: str) -> bool:
    """capd-unpack-images (pause, kube-proxy, CNI unpacked in the background) has finished, or the image has no
    such unit (its images unpacked at build time, or imported before systemd was up in the oldest ones)."""
    res = rt.exec(name, ["systemctl", "show", "-p", "LoadState", "-p", "ExecMainExitTimestampMonotonic",
                         "capd-unpack-images"])
    props = dict(line.split("=", 1) for line in res.output.splitlines() if "=" in line)
    return props.get("LoadState") == "not-found" or props.get("ExecMainExitTimestampMonotonic", "0") not in ("", "0")


async def boot_phases(rt: ContainerRuntime, name: str, t0: float, timeout: float = 180) -> list[tuple[str, float]]:
    """Seconds after t0 (taken before `docker run`) at which containerd answers, every preloaded image is
    listed, systemd is up, and the background unpack of the node-wide images is done, in that order."""
    out = []
    for what, probe in (("containerd ready", containerd_ready), ("preloaded images listed", images_listed),
                        ("systemd up", systemd_up), ("node-wide images unpacked (background)", node_images_unpacked)):
        await wait_until(f"{what} in {name}", lambda p=probe: p(rt, name), timeout, interval=0.1)  # type: ignore[misc]
        out.append((what, time.monotonic() - t0))
    return out


async def measure_once(version: str = DEFAULT_VERSION) -> list[tuple[str, float]]:
    rt = DockerRuntime()
    suffix = uuid.uuid4().hex[:6]
    cluster = f"boot-{suffix}"
    image = f"{os.environ.get('CAPD_PY_NODE_IMAGE_REPO', 'capd-py/node')}:{version}"
    network = f"capd-boot-{suffix}"
    networks.ensure_network(rt, network, {"io.x-k8s.capd-py.bench": "node-boot"})
    try:
        spec = dmr.node_spec("bench-boot", cluster, "n", {"spec": {}}, image, network, False, privilege_mode())
        t0 = time.monotonic()
        info = await asyncio.to_thread(rt.run_container, spec)
        phases = [("docker run returned", time.monotonic() - t0)]
        return phases + await boot_phases(rt, info.name, t0)
    finally:
        for c in rt.list_containers({CONTAINER_CLUSTER: cluster}):
            rt.remove_container(c.name)
        rt.remove_network(network)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    runs = [asyncio.run(measure_once()) for _ in range(args.runs)]
    rows = [("machine", machine())]
    for i, (phase, _) in enumerate(runs[0]):
        ts = [r[i][1] for r in runs]
        rows.append((phase, f"median {statistics.median(ts):.1f} s  (" + ", ".join(f"{t:.1f}" for t in ts) + ")"))
    print(table(rows, f"node container boot, {args.runs} runs, seconds after `docker run`"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
